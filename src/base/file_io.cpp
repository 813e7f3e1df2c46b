// SPDX-License-Identifier: GPL-2.0-only
#include "base/file_io.h"

#include <fcntl.h>
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
