// SPDX-License-Identifier: GPL-2.0-only
// ImageDir and AtomicFile: files appear complete or not at all, mode 0600.
#include <criterion/criterion.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "../common/assert_ok.h"
#include "image/image_dir.h"
#include "image_test_util.h"

using namespace amdcr;
using amdcr::test::TempDir;

Test(image_dir, committed_file_is_visible_with_mode_0600)
{
	TempDir tmp;
	cr_assert(tmp.ok());
	::umask(0);
	auto dir = ImageDir::open(tmp.path());
	cr_assert_ok(dir);
	auto f = dir->create("a.img");
	cr_assert(f.ok());
	const char text[] = "hello";
	cr_assert(f->write(text, 5).ok());
	cr_assert_eq(f->bytes_written(), 5u);
	// Before commit: only the hidden temporary exists.
	auto names = tmp.names();
	cr_assert_eq(names.size(), 1u);
	cr_assert(names[0].starts_with(".a.img.tmp-"), "%s", names[0].c_str());
	cr_assert_eq(test::file_mode(tmp.file(names[0])), 0600);
	cr_assert(f->commit().ok());
	names = tmp.names();
	cr_assert_eq(names.size(), 1u);
	cr_assert_str_eq(names[0].c_str(), "a.img");
	cr_assert_eq(test::file_mode(tmp.file("a.img")), 0600);
	auto bytes = test::read_raw(tmp.file("a.img"));
	cr_assert_eq(bytes.size(), 5u);
	cr_assert(std::equal(bytes.begin(), bytes.end(), text));
}

Test(image_dir, destroyed_writer_leaves_nothing)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	{
		auto f = dir->create("b.img");
		cr_assert(f.ok());
		cr_assert(f->write("xyz", 3).ok());
	}
	cr_assert(tmp.names().empty());
}

Test(image_dir, aborted_writer_leaves_nothing_and_refuses_more)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	auto f = dir->create("c.img");
	cr_assert(f.ok());
	cr_assert(f->write("xyz", 3).ok());
	f->abort();
	cr_assert(tmp.names().empty());
	cr_assert_not(f->write("x", 1).ok());
	cr_assert_not(f->commit().ok());
	cr_assert(tmp.names().empty());
}

Test(image_dir, moved_writer_keeps_one_owner)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	auto f = dir->create("d.img");
	cr_assert(f.ok());
	AtomicFile g = std::move(*f);
	cr_assert(g.write("12", 2).ok());
	cr_assert(g.commit().ok());
	// The moved-from object must not remove anything.
	{
		AtomicFile h = std::move(g);
	}
	auto names = tmp.names();
	cr_assert_eq(names.size(), 1u);
	cr_assert_str_eq(names[0].c_str(), "d.img");
}

Test(image_dir, commit_replaces_an_older_file)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path(), ImageDir::Sync::Full);
	cr_assert(dir.ok());
	cr_assert(test::write_raw(tmp.file("e.img"), {1, 2, 3, 4, 5, 6}));
	auto f = dir->create("e.img");
	cr_assert(f.ok());
	cr_assert(f->write("\x09", 1).ok());
	cr_assert(f->commit().ok());
	auto bytes = test::read_raw(tmp.file("e.img"));
	cr_assert_eq(bytes.size(), 1u);
	cr_assert_eq(bytes[0], 9);
}

Test(image_dir, borrowed_fd_is_not_closed)
{
	TempDir tmp;
	const int fd = ::open(tmp.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert(fd >= 0);
	{
		ImageDir dir = ImageDir::borrow(fd);
		cr_assert_eq(dir.fd(), fd);
	}
	cr_assert_eq(::fcntl(fd, F_GETFD), FD_CLOEXEC);
	::close(fd);
}

Test(image_dir, exists_size_remove_and_errors_name_the_file)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	cr_assert(test::write_raw(tmp.file("f.img"), {1, 2, 3}));
	auto e = dir->exists("f.img");
	cr_assert(e.ok() && *e);
	auto sz = dir->file_size("f.img");
	cr_assert(sz.ok() && *sz == 3);
	cr_assert(dir->remove("f.img").ok());
	cr_assert(dir->remove("f.img").ok());
	e = dir->exists("f.img");
	cr_assert(e.ok() && !*e);
	auto r = dir->open_read("g.img");
	cr_assert_not(r.ok());
	cr_assert_eq(r.error().code(), ENOENT);
	cr_assert(r.error().message().find("g.img") != std::string::npos, "%s",
		  r.error().message().c_str());
	auto bad = dir->create("sub/x.img");
	cr_assert_not(bad.ok());
}

Test(image_dir, open_missing_directory_fails)
{
	auto dir = ImageDir::open("/nonexistent/amdcr-image-dir");
	cr_assert_not(dir.ok());
	cr_assert_eq(dir.error().code(), ENOENT);
}

// Images are opened as regular files only (ImageDir::open_read through
// open_in_dir): a FIFO under an image's name would block a plain open for
// ever, a symbolic link would read a file from elsewhere.
Test(image_dir, open_read_refuses_a_fifo_or_a_link_naming_it)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert_ok(dir);
	cr_assert_eq(::mkfifo(tmp.file("amdgpu-kfd-1.img").c_str(), 0600), 0);
	cr_assert_eq(::symlink("/etc/hostname", tmp.file("amdgpu-kfd-2.img").c_str()), 0);
	auto fifo = dir->open_read("amdgpu-kfd-1.img");
	cr_assert(!fifo.ok());
	cr_assert(fifo.error().message().find("amdgpu-kfd-1.img: a FIFO, not a regular file") != std::string::npos,
		  "%s", fifo.error().message().c_str());
	auto link = dir->open_read("amdgpu-kfd-2.img");
	cr_assert(!link.ok());
	cr_assert(link.error().message().find("amdgpu-kfd-2.img: a symbolic link, not followed") != std::string::npos,
		  "%s", link.error().message().c_str());
	auto size = dir->file_size("amdgpu-kfd-2.img");
	cr_assert(!size.ok(), "the size of a link is not its target's");
}

// The commit observer learns each committed file's inode, the one now
// under its final name (what a failed dump removes, and nothing else).
Test(image_dir, commit_observer_gets_the_committed_inode)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert_ok(dir);
	std::vector<std::pair<std::string, ino_t>> seen;
	std::vector<std::string> kept;
	dir->set_commit_observer([&](const std::string &name, dev_t, ino_t ino, const std::string &k) {
		seen.emplace_back(name, ino);
		kept.push_back(k);
	});
	auto f = dir->create("c.img");
	cr_assert_ok(f);
	cr_assert_ok(f->write("abc", 3));
	cr_assert(seen.empty(), "nothing before the commit");
	cr_assert_ok(f->commit());
	struct stat st = {};
	cr_assert_eq(::stat(tmp.file("c.img").c_str(), &st), 0);
	cr_assert_eq(seen.size(), 1u);
	cr_assert_str_eq(seen[0].first.c_str(), "c.img");
	cr_assert_eq(seen[0].second, st.st_ino);
	cr_assert_str_eq(kept[0].c_str(), "", "nothing replaced");
	// Replacing it keeps the replaced file under a hidden name, told.
	auto g = dir->create("c.img");
	cr_assert_ok(g);
	cr_assert_ok(g->write("de", 2));
	cr_assert_ok(g->commit());
	cr_assert_eq(kept.size(), 2u);
	cr_assert(kept[1].starts_with(".c.img.old-"), "%s", kept[1].c_str());
	struct stat old = {};
	cr_assert_eq(::stat(tmp.file(kept[1]).c_str(), &old), 0);
	cr_assert_eq(old.st_ino, st.st_ino, "the kept file is the replaced one");
}
