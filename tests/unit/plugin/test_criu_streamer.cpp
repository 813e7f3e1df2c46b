// SPDX-License-Identifier: GPL-2.0-only
// Stream mode detection (criu_api image_streamer): CRIU's exported
// img_streamer_open, the streamer's socket in the image directory, and a
// connection to it held by this process, as CRIU holds it among its
// service fds near the top of the fd limit. This program exports its own
// img_streamer_open (ENABLE_EXPORTS) for the plugin's dlsym lookup.
#include <criterion/criterion.h>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "../image/image_test_util.h"
#include "plugin/criu_api.h"

using namespace amdcr;
using amdcr::test::TempDir;

namespace {
int last_flags = -1;
std::string last_name;
} // namespace

extern "C" __attribute__((visibility("default"))) int img_streamer_open(char *filename, int flags)
{
	last_flags = flags;
	last_name = filename;
	return ::dup(0);
}

namespace {

int listen_at(const std::string &path)
{
	const int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(s, 0);
	sockaddr_un a{};
	a.sun_family = AF_UNIX;
	std::strncpy(a.sun_path, path.c_str(), sizeof(a.sun_path) - 1);
	cr_assert_eq(::bind(s, reinterpret_cast<sockaddr *>(&a), sizeof(a)), 0);
	cr_assert_eq(::listen(s, 4), 0);
	return s;
}

// Connects to `path` and moves the connection near the top of the fd
// limit, where CRIU keeps its service fds.
int connect_high(const std::string &path)
{
	const int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	sockaddr_un a{};
	a.sun_family = AF_UNIX;
	std::strncpy(a.sun_path, path.c_str(), sizeof(a.sun_path) - 1);
	cr_assert_eq(::connect(s, reinterpret_cast<sockaddr *>(&a), sizeof(a)), 0);
	struct rlimit rl {};
	cr_assert_eq(::getrlimit(RLIMIT_NOFILE, &rl), 0);
	const int high = ::fcntl(s, F_DUPFD_CLOEXEC, static_cast<int>(rl.rlim_cur) - 8);
	cr_assert_geq(high, 0);
	::close(s);
	return high;
}

int dir_fd(const TempDir &tmp) { return ::open(tmp.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); }

} // namespace

Test(criu_streamer, no_socket_in_the_image_directory_means_files)
{
	TempDir tmp;
	cr_assert_not(criu::image_streamer(dir_fd(tmp)).has_value());
}

Test(criu_streamer, a_socket_nobody_of_ours_is_connected_to_is_not_streaming)
{
	TempDir tmp;
	const int l = listen_at(tmp.file("streamer-capture.sock"));
	cr_assert_not(criu::image_streamer(dir_fd(tmp)).has_value(),
		      "a streamer socket alone (e.g. left behind) must not switch to stream mode");
	::close(l);
}

Test(criu_streamer, a_connection_to_the_capture_socket_is_a_streamed_dump)
{
	TempDir tmp;
	const int l = listen_at(tmp.file("streamer-capture.sock"));
	const int c = connect_high(tmp.file("streamer-capture.sock"));
	auto s = criu::image_streamer(dir_fd(tmp));
	cr_assert(s.has_value());
	cr_assert(s->mode() == ImageStreamer::Mode::Capture);
	auto fd = s->open("amdgpu-kfd-3.img");
	cr_assert(fd.ok());
	cr_assert_eq(last_name, "amdgpu-kfd-3.img");
	cr_assert_eq(last_flags, O_WRONLY | O_CREAT | O_TRUNC);
	cr_assert_eq(::fcntl(fd->get(), F_GETFD) & FD_CLOEXEC, FD_CLOEXEC, "the pipe must not leak into a task");
	::close(c);
	::close(l);
}

Test(criu_streamer, a_connection_to_the_serve_socket_is_a_streamed_restore)
{
	TempDir tmp;
	// Both sockets (a dump and a restore into one directory): the
	// connection decides.
	const int l1 = listen_at(tmp.file("streamer-capture.sock"));
	const int l2 = listen_at(tmp.file("streamer-serve.sock"));
	const int c = connect_high(tmp.file("streamer-serve.sock"));
	auto s = criu::image_streamer(dir_fd(tmp));
	cr_assert(s.has_value());
	cr_assert(s->mode() == ImageStreamer::Mode::Serve);
	cr_assert(s->open("renderD-9.img").ok());
	cr_assert_eq(last_flags, O_RDONLY);
	::close(c);
	::close(l1);
	::close(l2);
}

Test(criu_streamer, a_connection_to_another_socket_is_not_streaming)
{
	TempDir tmp;
	const int l = listen_at(tmp.file("streamer-capture.sock"));
	const int other = listen_at(tmp.file("other.sock"));
	const int c = connect_high(tmp.file("other.sock"));
	cr_assert_not(criu::image_streamer(dir_fd(tmp)).has_value());
	::close(c);
	::close(other);
	::close(l);
}
