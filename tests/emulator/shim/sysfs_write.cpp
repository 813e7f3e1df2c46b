// SPDX-License-Identifier: GPL-2.0-only
//
// libkfdemu_shim.so: opening the emulated /sys for writing (see shim.h and
// README.md, "Hermeticity"). Whatever a program writes to the emulated
// machine's sysfs stays in the private root, with sysfs's answers:
//
//   * the path is resolved beneath the root (openat2 RESOLVE_BENEATH): no
//     ".." and no link leads out of it. A path whose ".." climb out of the
//     root means, lexically, a path elsewhere, and is opened as that one;
//   * a file that is not there cannot be created: EACCES (sysfs
//     directories take no new files), ENOENT when its directory is missing;
//   * a file the kernel lets nobody write (no write bit) and a write-only
//     one (an action the emulator does not perform: a PCI device's
//     `remove`, `rescan`, `reset`, the bus's `rescan`, a driver's `bind`):
//     EACCES, as kernfs refuses a file it may not write;
//   * a file writable and readable (power_dpm_force_performance_level,
//     power1_cap): opened, so the value written is what a read returns.
//     Each write(2) to it is the whole new value, as kernfs hands every
//     write to the attribute's store: the file is replaced, whatever the
//     offset and O_APPEND, and ends with a newline (sysfs_store). The fds
//     are tracked (attr_fd), and one the process did not open here
//     (inherited across exec, dup'd) is recognised at its first write by
//     the file it names (libstdc++'s ofstream calls write(2): seen).
//     Writes the shim does not see (glibc's stdio flushes through its
//     own write: fopen's streams, bash's builtin echo) are whole values
//     because opening for writing empties the file and drops O_APPEND:
//     unlike kernfs, an attribute opened for writing and not written
//     reads back empty, and two such writes on one fd read back joined
//     (and without the newline a store adds).
//
// A relative path through a directory fd or the working directory counts
// by the directory's path, so a program in the host's /sys (chdir) or
// holding an fd of it cannot step around the redirection.
#include "shim.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <string_view>

namespace kfdemu::shim {

int openat2_beneath(int root, const std::string &rel, int flags, mode_t mode)
{
	open_how how{};
	how.flags = static_cast<uint64_t>(flags);
	how.mode = (flags & O_CREAT) ? mode : 0;
	how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
	// A walk through ".." under RESOLVE_BENEATH fails with EAGAIN when any
	// rename or mount change on the host happened meanwhile (the kernel's
	// global rename and mount sequence counts; the emulated sysfs's links
	// are full of ".."). Opening a real sysfs file never fails so:
	// rocm-smi took that EAGAIN for "an unknown error". Tried again, a
	// bounded number of times.
	constexpr int kTries = 100;
	int fd = -1;
	for (int i = 0; i < kTries; i++) {
		fd = static_cast<int>(::syscall(SYS_openat2, root, rel.c_str(), &how, sizeof how));
		if (fd >= 0 || errno != EAGAIN)
			break;
	}
	return fd;
}

std::string collapse(const std::string &p)
{
	std::vector<std::string> parts;
	size_t i = 0;
	while (i < p.size()) {
		size_t j = p.find('/', i);
		if (j == std::string::npos)
			j = p.size();
		const std::string part = p.substr(i, j - i);
		if (part == "..") {
			if (!parts.empty())
				parts.pop_back();
		} else if (!part.empty() && part != ".") {
			parts.push_back(part);
		}
		i = j + 1;
	}
	std::string out;
	for (const auto &part : parts)
		out += "/" + part;
	return out.empty() ? "/" : out;
}

Closer::~Closer() { reset(-1); }

void Closer::reset(int nfd)
{
	if (fd >= 0) {
		const int saved = errno;
		REAL(close, int (*)(int));
		real_close(fd);
		errno = saved;
	}
	fd = nfd;
}

namespace {

// The sysfs rules for `rel` (root-relative, no leading '/') that exists
// or not beneath `root`: the fd, or -1 with errno.
int open_beneath(int root, const std::string &rel, int flags, mode_t mode)
{
	Closer probe{openat2_beneath(root, rel, O_PATH | O_CLOEXEC, 0)};
	if (probe.fd < 0) {
		const int err = errno;
		if (err != ENOENT || !(flags & O_CREAT))
			return fail(err);
		const size_t slash = rel.rfind('/');
		Closer dir{openat2_beneath(root, slash == std::string::npos ? "." : rel.substr(0, slash),
					   O_PATH | O_DIRECTORY | O_CLOEXEC, 0)};
		return fail(dir.fd >= 0 ? EACCES : ENOENT);
	}
	REAL(fstat, int (*)(int, struct stat *));
	struct stat st;
	if (real_fstat(probe.fd, &st) != 0)
		return -1;
	if ((flags & O_CREAT) && (flags & O_EXCL))
		return fail(EEXIST);
	if (S_ISDIR(st.st_mode))
		return fail(EISDIR);
	if ((st.st_mode & 0600) != 0600)
		return fail(EACCES);
	// A write the shim cannot see (glibc's stdio writes through its own
	// write, e.g. bash's builtin echo) lands at the fd's offset: with the
	// file emptied and no O_APPEND it is the whole value too.
	if ((flags & O_ACCMODE) != O_RDONLY)
		flags = (flags | O_TRUNC) & ~O_APPEND;
	return openat2_beneath(root, rel, flags & ~(O_CREAT | O_EXCL), mode);
}

// A regular file of the root's /sys open for writing.
bool names_attr(int fd)
{
	REAL(fstat, int (*)(int, struct stat *));
	struct stat st;
	if (real_fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
		return false;
	const int acc = ::fcntl(fd, F_GETFL) & O_ACCMODE;
	if (acc != O_WRONLY && acc != O_RDWR)
		return false;
	REAL(readlink, ssize_t (*)(const char *, char *, size_t));
	char d[PATH_MAX];
	const ssize_t n = real_readlink(("/proc/self/fd/" + std::to_string(fd)).c_str(), d, sizeof d - 1);
	return n > 0 && std::string_view(d, size_t(n)).starts_with(config().root + "/sys/");
}

// kernfs gives a sysfs attribute's store at most one page per write.
constexpr size_t kStoreMax = 4096;

ssize_t store(int fd, const void *buf, size_t len)
{
	if (len > kStoreMax)
		return fail(E2BIG);
	if (len == 0)
		return 0;
	std::string v(static_cast<const char *>(buf), len);
	if (v.back() != '\n')
		v += '\n';
	REAL(pwrite, ssize_t (*)(int, const void *, size_t, off_t));
	// With O_APPEND pwrite appends, which after the truncate is offset 0.
	if (::ftruncate(fd, 0) != 0 || real_pwrite(fd, v.data(), v.size(), 0) != ssize_t(v.size()))
		return fail(EIO);
	return ssize_t(len);
}

} // namespace

bool write_intent(int flags)
{
	return (flags & O_ACCMODE) != O_RDONLY || (flags & (O_CREAT | O_TRUNC)) != 0;
}

std::optional<std::string> directory_of(int dirfd)
{
	if (dirfd == AT_FDCWD) {
		char cwd[PATH_MAX];
		if (!::getcwd(cwd, sizeof cwd))
			return std::nullopt;
		return std::string(cwd);
	}
	REAL(readlink, ssize_t (*)(const char *, char *, size_t));
	char d[PATH_MAX];
	const ssize_t n = real_readlink(("/proc/self/fd/" + std::to_string(dirfd)).c_str(), d, sizeof d - 1);
	if (n <= 0 || d[0] != '/')
		return std::nullopt;
	return std::string(d, size_t(n));
}

std::optional<std::string> sys_path_at(int dirfd, const char *path)
{
	if (!config().active || !path || !*path || path[0] == '/')
		return std::nullopt;
	const auto dir = directory_of(dirfd);
	if (!dir)
		return std::nullopt;
	const std::string abs = normalize((*dir + "/" + path).c_str());
	if (!abs.starts_with("/sys/") || !redirect(abs.c_str()))
		return std::nullopt;
	return abs;
}

std::optional<int> open_sysfs_write(const char *path, int flags, mode_t mode)
{
	if (!config().active || !path || path[0] != '/' || !write_intent(flags))
		return std::nullopt;
	const std::string p = normalize(path);
	if (!p.starts_with("/sys/") || !redirect(p.c_str()))
		return std::nullopt;
	REAL(open, OpenFn);
	Closer root{real_open(config().root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC)};
	if (root.fd < 0)
		return -1;
	const int fd = open_beneath(root.fd, p.substr(1), flags, mode);
	if (fd < 0 && errno == EXDEV) {
		// Out of the root: the path the ".." lexically name.
		const std::string there = collapse(p);
		if (there == p)
			return fail(EACCES); // an absolute link: not one the emulator writes
		if (auto r = open_sysfs_write(there.c_str(), flags, mode))
			return r;
		return real_open(there.c_str(), flags, mode);
	}
	if (fd >= 0 && is_unreadable(path))
		mark_unreadable(fd, true);
	if (fd >= 0)
		mark_attr_fd(fd, (flags & O_ACCMODE) != O_RDONLY);
	return fd;
}

std::optional<ssize_t> sysfs_store(int fd, const void *buf, size_t len)
{
	AttrFd a = attr_fd(fd);
	if (a.known && !a.attr)
		return std::nullopt;
	if (!config().active)
		return std::nullopt;
	const bool attr = names_attr(fd);
	mark_attr_fd(fd, attr);
	if (!attr)
		return std::nullopt;
	return store(fd, buf, len);
}

} // namespace kfdemu::shim
