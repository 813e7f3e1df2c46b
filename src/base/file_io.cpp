// SPDX-License-Identifier: GPL-2.0-only
#include "base/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

namespace amdcr {

size_t page_size()
{
	const long p = ::sysconf(_SC_PAGESIZE);
	return p > 0 ? static_cast<size_t>(p) : 4096;
}

Result<size_t> read_full(int fd, void *buf, size_t len)
{
	auto *p = static_cast<char *>(buf);
	size_t done = 0;
	while (done < len) {
		const ssize_t n = ::read(fd, p + done, len - done);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno_error(errno, "read");
		}
		if (n == 0)
			break;
		done += static_cast<size_t>(n);
	}
	return done;
}

Status write_full(int fd, const void *buf, size_t len)
{
	const auto *p = static_cast<const char *>(buf);
	size_t done = 0;
	while (done < len) {
		const ssize_t n = ::write(fd, p + done, len - done);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno_error(errno, "write");
		}
		if (n == 0)
			return Error(ENOSPC, "write: no progress (device full?)");
		done += static_cast<size_t>(n);
	}
	return ok_status();
}

Result<size_t> pread_full(int fd, void *buf, size_t len, uint64_t off)
{
	auto *p = static_cast<char *>(buf);
	size_t done = 0;
	while (done < len) {
		const ssize_t n = ::pread(fd, p + done, len - done, static_cast<off_t>(off + done));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno_error(errno, "pread");
		}
		if (n == 0)
			break;
		done += static_cast<size_t>(n);
	}
	return done;
}

Status pwrite_full(int fd, const void *buf, size_t len, uint64_t off)
{
	const auto *p = static_cast<const char *>(buf);
	size_t done = 0;
	while (done < len) {
		const ssize_t n = ::pwrite(fd, p + done, len - done, static_cast<off_t>(off + done));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno_error(errno, "pwrite");
		}
		if (n == 0)
			return Error(ENOSPC, "pwrite: no progress (device full?)");
		done += static_cast<size_t>(n);
	}
	return ok_status();
}

Result<UniqueFd> open_at(int dirfd, const std::string &path, int flags, mode_t mode)
{
	int fd;
	do {
		fd = ::openat(dirfd, path.c_str(), flags | O_CLOEXEC, mode);
	} while (fd < 0 && errno == EINTR);
	if (fd < 0)
		return errno_error(errno, "open " + path);
	return UniqueFd(fd);
}

namespace {

const char *file_type_name(mode_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG:
		return "a regular file";
	case S_IFDIR:
		return "a directory";
	case S_IFLNK:
		return "a symbolic link";
	case S_IFIFO:
		return "a FIFO";
	case S_IFSOCK:
		return "a socket";
	case S_IFCHR:
		return "a character device";
	case S_IFBLK:
		return "a block device";
	default:
		return "not a regular file";
	}
}

Error not_regular(const std::string &name, mode_t mode)
{
	if (S_ISLNK(mode))
		return make_error(ELOOP, "%s: a symbolic link, not followed (files of an image directory must be "
				  "regular files)",
				  name.c_str());
	return make_error(EINVAL, "%s: %s, not a regular file (files of an image directory must be regular files)",
			  name.c_str(), file_type_name(mode));
}

// The file `fd` is the regular file `name` (seen as `before`, when known)
// with, for Append, one link; then blocking again.
Status check_opened(int fd, const std::string &name, const struct stat *before, InDir how)
{
	struct stat st = {};
	if (::fstat(fd, &st) != 0)
		return errno_error(errno, "fstat " + name);
	if (!S_ISREG(st.st_mode))
		return not_regular(name, st.st_mode);
	if (before && (before->st_dev != st.st_dev || before->st_ino != st.st_ino))
		return make_error(ESTALE, "%s: replaced by another file while it was opened", name.c_str());
	if (how == InDir::Append && st.st_nlink != 1)
		return make_error(EMLINK, "%s: has %ju links (a hard link to a file elsewhere?): not appended to",
				  name.c_str(), static_cast<uintmax_t>(st.st_nlink));
	const int fl = ::fcntl(fd, F_GETFL);
	if (fl < 0 || ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0)
		return errno_error(errno, "fcntl " + name);
	return ok_status();
}

} // namespace

Result<UniqueFd> open_in_dir(int dirfd, const std::string &name, InDir how)
{
	if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos)
		return make_error(EINVAL, "%s: not a plain file name", name.c_str());
	constexpr int kAlways = O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
	if (how != InDir::Read) {
		auto fd = open_at(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | kAlways |
						       (how == InDir::Append ? O_APPEND : 0),
				  0600);
		if (fd || how == InDir::CreateNew || fd.error().code() != EEXIST) {
			if (fd)
				if (auto st = check_opened(fd->get(), name, nullptr, how); !st)
					return std::move(st).error();
			return fd;
		}
	}
	struct stat before = {};
	if (::fstatat(dirfd, name.c_str(), &before, AT_SYMLINK_NOFOLLOW) != 0)
		return errno_error(errno, "stat " + name);
	if (!S_ISREG(before.st_mode))
		return not_regular(name, before.st_mode);
	const int flags = how == InDir::Read ? O_RDONLY : O_WRONLY | O_APPEND;
	auto fd = open_at(dirfd, name, flags | kAlways);
	if (!fd) {
		if (fd.error().code() == ELOOP)
			return not_regular(name, S_IFLNK);
		return fd;
	}
	if (auto st = check_opened(fd->get(), name, &before, how); !st)
		return std::move(st).error();
	return fd;
}

Result<std::string> read_text_file(int dirfd, const std::string &path, size_t max_bytes)
{
	auto fd = open_at(dirfd, path, O_RDONLY);
	if (!fd)
		return std::move(fd).error();
	std::string out;
	char buf[4096];
	for (;;) {
		const ssize_t n = ::read(fd->get(), buf, sizeof(buf));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno_error(errno, "read " + path);
		}
		if (n == 0)
			break;
		out.append(buf, static_cast<size_t>(n));
		if (out.size() > max_bytes)
			return make_error(EFBIG, "read %s: larger than %zu bytes", path.c_str(), max_bytes);
	}
	return out;
}

} // namespace amdcr
