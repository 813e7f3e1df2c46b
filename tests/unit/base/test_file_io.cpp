// SPDX-License-Identifier: GPL-2.0-only
// open_in_dir (src/base/file_io.h): a file of a directory others write to
// is opened only if it is a regular file; a planted symbolic link (to a
// file elsewhere, or dangling), FIFO, socket or directory is refused at
// once, naming it, and nothing outside the directory is read, created or
// appended to.
#include <criterion/criterion.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "../common/assert_ok.h"
#include "base/file_io.h"

using namespace amdcr;

namespace {

// Two fresh directories: `dir` (the hostile one) and `away` (elsewhere).
struct Dirs {
	std::string dir, away;
	UniqueFd fd;
	Dirs()
	{
		dir = make();
		away = make();
		fd = UniqueFd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
		cr_assert(fd.valid());
	}
	~Dirs()
	{
		(void)std::system(("rm -rf '" + dir + "' '" + away + "'").c_str());
	}
	static std::string make()
	{
		char tmpl[] = "/tmp/amdcr-fileio-XXXXXX";
		cr_assert_not_null(::mkdtemp(tmpl));
		return tmpl;
	}
	std::string in(const char *n) const { return dir + "/" + n; }
	std::string out(const char *n) const { return away + "/" + n; }
};

void write_file(const std::string &path, const char *text, mode_t mode = 0600)
{
	const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	cr_assert_geq(fd, 0, "%s", path.c_str());
	cr_assert_eq(::write(fd, text, std::strlen(text)), static_cast<ssize_t>(std::strlen(text)));
	::close(fd);
}

std::string read_file(const std::string &path)
{
	auto s = read_text_file(AT_FDCWD, path);
	cr_assert_ok(s);
	return *s;
}

void assert_refused(const Result<UniqueFd> &r, int code, const char *name, const char *what)
{
	cr_assert(!r.ok(), "%s was opened", name);
	cr_assert_eq(r.error().code(), code, "%s: %s", name, r.error().message().c_str());
	cr_assert(r.error().message().find(name) != std::string::npos, "%s", r.error().message().c_str());
	cr_assert(r.error().message().find(what) != std::string::npos, "%s", r.error().message().c_str());
}

} // namespace

Test(file_io, regular_files_are_read_created_and_appended_with_mode_0600)
{
	Dirs d;
	::umask(0);
	write_file(d.in("a.img"), "abc", 0644);
	auto r = open_in_dir(d.fd.get(), "a.img", InDir::Read);
	cr_assert_ok(r);
	char buf[4] = {};
	cr_assert_eq(::read(r->get(), buf, 3), 3);
	cr_assert_str_eq(buf, "abc");
	cr_assert_eq(::fcntl(r->get(), F_GETFL) & O_NONBLOCK, 0, "O_NONBLOCK is cleared");

	auto n = open_in_dir(d.fd.get(), "new.img", InDir::CreateNew);
	cr_assert_ok(n);
	struct stat st = {};
	cr_assert_eq(::fstat(n->get(), &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0600u);
	assert_refused(open_in_dir(d.fd.get(), "new.img", InDir::CreateNew), EEXIST, "new.img", "exists");

	for (const char *line : {"one\n", "two\n"}) {
		auto a = open_in_dir(d.fd.get(), "log", InDir::Append);
		cr_assert_ok(a);
		cr_assert_eq(::write(a->get(), line, 4), 4);
	}
	const std::string log = read_file(d.in("log"));
	cr_assert_str_eq(log.c_str(), "one\ntwo\n");
	cr_assert_eq(::stat(d.in("log").c_str(), &st), 0);
	cr_assert_eq(st.st_mode & 07777, 0600u);
}

Test(file_io, a_symbolic_link_is_never_followed)
{
	Dirs d;
	write_file(d.out("secret"), "root's\n");
	cr_assert_eq(::symlink(d.out("secret").c_str(), d.in("to-file").c_str()), 0);
	cr_assert_eq(::symlink(d.out("made-by-us").c_str(), d.in("dangling").c_str()), 0);
	for (const char *name : {"to-file", "dangling"}) {
		assert_refused(open_in_dir(d.fd.get(), name, InDir::Append), ELOOP, name, "symbolic link");
		assert_refused(open_in_dir(d.fd.get(), name, InDir::CreateNew), EEXIST, name, "exists");
	}
	assert_refused(open_in_dir(d.fd.get(), "to-file", InDir::Read), ELOOP, "to-file", "symbolic link");
	const std::string secret = read_file(d.out("secret"));
	cr_assert_str_eq(secret.c_str(), "root's\n", "the file elsewhere is untouched");
	cr_assert_neq(::access(d.out("made-by-us").c_str(), F_OK), 0, "nothing was created elsewhere");
}

Test(file_io, a_fifo_socket_or_directory_is_refused_without_blocking)
{
	Dirs d;
	cr_assert_eq(::mkfifo(d.in("fifo").c_str(), 0600), 0);
	cr_assert_eq(::mkdir(d.in("dir").c_str(), 0700), 0);
	const int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	sockaddr_un sa{};
	sa.sun_family = AF_UNIX;
	std::strncpy(sa.sun_path, d.in("sock").c_str(), sizeof(sa.sun_path) - 1);
	cr_assert_eq(::bind(s, reinterpret_cast<sockaddr *>(&sa), sizeof(sa)), 0);
	// With no writer, a blocking open of the FIFO would never return
	// (criterion's timeout would end the test).
	for (InDir how : {InDir::Read, InDir::Append}) {
		assert_refused(open_in_dir(d.fd.get(), "fifo", how), EINVAL, "fifo", "a FIFO");
		assert_refused(open_in_dir(d.fd.get(), "dir", how), EINVAL, "dir", "a directory");
		assert_refused(open_in_dir(d.fd.get(), "sock", how), EINVAL, "sock", "a socket");
	}
	::close(s);
}

Test(file_io, a_hard_link_is_not_appended_to)
{
	Dirs d;
	write_file(d.out("secret"), "root's\n");
	if (::link(d.out("secret").c_str(), d.in("log").c_str()) != 0)
		cr_skip_test("link: %s", std::strerror(errno)); // another file system
	assert_refused(open_in_dir(d.fd.get(), "log", InDir::Append), EMLINK, "log", "links");
	const std::string secret = read_file(d.out("secret"));
	cr_assert_str_eq(secret.c_str(), "root's\n");
}

Test(file_io, only_plain_names)
{
	Dirs d;
	for (const char *name : {"", ".", "..", "../x", "a/b"})
		assert_refused(open_in_dir(d.fd.get(), name, InDir::Read), EINVAL, name, "not a plain file name");
}
