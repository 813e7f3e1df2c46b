// SPDX-License-Identifier: GPL-2.0-only
//
// libkfdemu_shim.so: path parsing and redirection into the private root,
// and the calls that take paths or open files: open, fopen, close, dup,
// read, readlink/realpath, access, directories, extended attributes (the
// stat family is in stat.cpp). See shim.h.
#include "shim.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace kfdemu::shim {

// ---------------------------------------------------------------------------
// Paths.
// ---------------------------------------------------------------------------

std::string normalize(const char *path)
{
	std::string s;
	for (const char *p = path; *p; p++) {
		if (*p == '/' && !s.empty() && s.back() == '/')
			continue;
		// "/./" is "/" (a dumper's fstatat(root_fd, "./dev/kfd")).
		if (*p == '.' && (p[1] == '/' || !p[1]) && !s.empty() && s.back() == '/')
			continue;
		s += *p;
	}
	while (s.size() > 1 && s.back() == '/')
		s.pop_back();
	return s;
}

bool parse_uint(std::string_view s, unsigned *out)
{
	if (s.empty() || s.size() > 6)
		return false;
	unsigned v = 0;
	for (char c : s) {
		if (c < '0' || c > '9')
			return false;
		v = v * 10 + unsigned(c - '0');
	}
	*out = v;
	return true;
}

DevPath device_path(const std::string &p)
{
	DevPath d;
	if (p == "/dev/kfd")
		d.kind = Dev::Kfd;
	else if (p.starts_with("/dev/dri/renderD") && parse_uint(std::string_view(p).substr(16), &d.minor))
		d.kind = Dev::Render;
	else if (p.starts_with("/dev/dri/card") && parse_uint(std::string_view(p).substr(13), &d.minor))
		d.kind = Dev::Card;
	return d;
}

ProcPath proc_path(const std::string &p)
{
	ProcPath r;
	if (!p.starts_with("/proc/"))
		return r;
	const size_t slash = p.find('/', 6);
	if (slash == std::string::npos)
		return r;
	const std::string_view who = std::string_view(p).substr(6, slash - 6);
	unsigned pid = 0;
	if (who == "self")
		pid = unsigned(::getpid());
	else if (!parse_uint(who, &pid) || pid == 0)
		return r;
	const std::string_view rest = std::string_view(p).substr(slash + 1);
	r.pid = pid_t(pid);
	if (rest == "maps")
		r.kind = ProcPath::Maps;
	else if (rest == "smaps")
		r.kind = ProcPath::Smaps;
	else if (rest.starts_with("map_files/")) {
		unsigned long long s = 0, e = 0;
		char tail = 0;
		const std::string range(rest.substr(10));
		if (std::sscanf(range.c_str(), "%llx-%llx%c", &s, &e, &tail) == 2 && s < e) {
			r.kind = ProcPath::MapFile;
			r.start = s;
			r.end = e;
		}
	}
	return r;
}

// The root-relative path for a redirected absolute path, or nullopt.
std::optional<std::string> redirect(const char *path)
{
	const Config &c = config();
	if (!c.active || !path || path[0] != '/')
		return std::nullopt;
	const std::string p = normalize(path);
	for (const auto &pre : c.redirects) {
		if (p.size() < pre.size() || p.compare(0, pre.size(), pre) != 0)
			continue;
		if (p.size() == pre.size() || pre.back() == ':' || p[pre.size()] == '/')
			return c.root + p;
	}
	return std::nullopt;
}

// A path relative to a directory fd inside the private root (an opendir
// of /dev/dri, a topology node directory): the absolute path the program
// means, so device and redirect rules apply to it as well. Relative to a
// directory elsewhere, only when the result is a device node or one of the
// /proc files the shim presents (CRIU reaches them relative to its /proc
// and root directory fds).
std::optional<std::string> logical_at(int dirfd, const char *path)
{
	if (!path || path[0] == '/' || !*path || dirfd < 0)
		return std::nullopt;
	const Config &c = config();
	if (!c.active)
		return std::nullopt;
	REAL(readlink, ssize_t (*)(const char *, char *, size_t));
	char dir[PATH_MAX];
	ssize_t n = real_readlink(("/proc/self/fd/" + std::to_string(dirfd)).c_str(), dir, sizeof dir - 1);
	if (n <= 0)
		return std::nullopt;
	std::string d(dir, size_t(n));
	if (d.size() <= c.root.size() || d.compare(0, c.root.size(), c.root) != 0 || d[c.root.size()] != '/') {
		if (d.empty() || d[0] != '/')
			return std::nullopt;	// not a directory path (socket:, anon_inode:)
		std::string abs = normalize((d + "/" + path).c_str());
		if (device_path(abs).kind == Dev::None && proc_path(abs).kind == ProcPath::None)
			return std::nullopt;
		// A directory of another mount namespace (a dumper's fd of a
		// container's root) whose path names another directory here:
		// its /dev is the container's own (real nodes), not ours.
		REAL(fstat, int (*)(int, struct stat *));
		REAL(stat, int (*)(const char *, struct stat *));
		struct stat theirs, here;
		if (real_fstat(dirfd, &theirs) == 0 && real_stat(d.c_str(), &here) == 0 &&
		    (theirs.st_dev != here.st_dev || theirs.st_ino != here.st_ino))
			return std::nullopt;
		return abs;
	}
	return d.substr(c.root.size()) + "/" + path;
}

bool root_has(const std::string &p)
{
	REAL(access, int (*)(const char *, int));
	return real_access((config().root + p).c_str(), F_OK) == 0;
}

bool container_view()
{
	const Config &c = config();
	if (!c.active || c.host_mntns == 0)
		return false;
	REAL(stat, int (*)(const char *, struct stat *));
	struct stat st;
	return real_stat("/proc/self/ns/mnt", &st) == 0 && st.st_ino != c.host_mntns;
}

bool device_present(const std::string &p)
{
	const DevPath d = device_path(p);
	if (d.kind == Dev::None || !root_has(p))
		return false;
	if (!container_view())
		return true;
	// The node the runtime made in the container's /dev, with the numbers
	// the emulator shows for this path (a node named after one minor but
	// made with another's numbers is not emulated: see README.md).
	REAL(stat, int (*)(const char *, struct stat *));
	struct stat st;
	if (real_stat(p.c_str(), &st) != 0 || !S_ISCHR(st.st_mode))
		return false;
	const unsigned want_major = d.kind == Dev::Kfd ? kKfdMajor : kDrmMajor;
	return major(st.st_rdev) == want_major && minor(st.st_rdev) == (d.kind == Dev::Kfd ? 0u : d.minor);
}

namespace {

// In a container, a GPU's topology node reads EPERM when the container
// lacks its render node, as the kernel's device-cgroup check makes it
// (kfd_topology.c): `p` is a resolved path inside the root.
bool denied_topology_node(const std::string &p)
{
	const std::string nodes = config().root + "/sys/devices/virtual/kfd/kfd/topology/nodes/";
	if (p.compare(0, nodes.size(), nodes) != 0)
		return false;
	const size_t end = p.find('/', nodes.size());
	const std::string dir = p.substr(0, end);
	REAL(open, OpenFn);
	REAL(read, ssize_t (*)(int, void *, size_t));
	REAL(close, int (*)(int));
	int fd = real_open((dir + "/properties").c_str(), O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	std::string props;
	char buf[4096];
	ssize_t n;
	while ((n = real_read(fd, buf, sizeof buf)) > 0)
		props.append(buf, size_t(n));
	real_close(fd);
	const size_t at = props.find("\ndrm_render_minor ");
	if (at == std::string::npos)
		return false;
	const unsigned minor = unsigned(std::strtoul(props.c_str() + at + 18, nullptr, 10));
	return minor != 0 && !device_present("/dev/dri/renderD" + std::to_string(minor));
}

} // namespace

// Unreadable entries are compared as resolved paths inside the root, so
// /sys/class/kfd/... and /sys/devices/virtual/kfd/... name the same file.
bool is_unreadable(const char *path)
{
	const Config &c = config();
	if (!path || path[0] != '/')
		return false;
	const bool in_container = container_view();
	if (c.unreadable.empty() && !in_container)
		return false;
	auto rp = redirect(path);
	if (!rp)
		return false;
	REAL(realpath, char *(*)(const char *, char *));
	char res[PATH_MAX];
	if (!real_realpath(rp->c_str(), res))
		return false;
	const std::string p = res;
	if (in_container && denied_topology_node(p))
		return true;
	for (const auto &entry : c.unreadable) {
		auto ru = redirect(entry.c_str());
		char ures[PATH_MAX];
		if (!ru || !real_realpath(ru->c_str(), ures))
			continue;
		const std::string u = ures;
		if (p == u || (p.size() > u.size() && p.compare(0, u.size(), u) == 0 && p[u.size()] == '/'))
			return true;
	}
	return false;
}

// A set of fd numbers, lock-free (read on every read()/close()).
namespace {

// ---------------------------------------------------------------------------
// open.
// ---------------------------------------------------------------------------


// Device open through the daemon: the new fd, -1 (errno), or nullopt when
// `path` is not a device path. nullopt and not a reserved number: the new
// fd is the lowest free one, which may be 0 or 1 (a task CRIU restores
// opens its devices before its stdio is back).
std::optional<int> open_device(const char *path, int flags)
{
	const std::string p = normalize(path);
	const DevPath d = device_path(p);
	if (d.kind == Dev::None)
		return std::nullopt;
	if (!device_present(p))
		return fail(ENOENT);
	if (d.kind == Dev::Card)
		return fail(EACCES);	// primary nodes are not emulated
	wire::Request rq{};
	rq.op = d.kind == Dev::Kfd ? wire::Op::OpenKfd : wire::Op::OpenRender;
	if (d.kind == Dev::Kfd) {
		rq.a[0] = (flags & O_CLOEXEC) != 0;
	} else {
		rq.a[0] = d.minor;
		rq.a[1] = (flags & O_CLOEXEC) != 0;
	}
	rq.a[2] = uint64_t(flags & O_ACCMODE);
	Response r;
	if (int e = call(rq, {}, &r))
		return fail(-e);
	int64_t res = deliver(r);
	if (res < 0)
		return fail(int(-res));
	return int(res);
}

int do_open(int dirfd, const char *path, int flags, mode_t mode, bool at)
{
	REAL(open, OpenFn);
	REAL(openat, OpenAtFn);
	const Config &c = config();
	if (at) {
		if (auto l = logical_at(dirfd, path))
			return do_open(AT_FDCWD, l->c_str(), flags, mode, false);
	}
	// A write to the emulated /sys named relative to a directory outside
	// the root (the host's /sys as a dirfd or the working directory).
	if (write_intent(flags))
		if (auto s = sys_path_at(at ? dirfd : AT_FDCWD, path))
			return do_open(AT_FDCWD, s->c_str(), flags, mode, false);
	if (c.active && path && path[0] == '/') {
		if (std::optional<int> r = open_device(path, flags))
			return *r;
		if (std::optional<int> r = open_proc(proc_path(normalize(path)), flags))
			return *r;
		if (std::optional<int> r = open_sysfs_write(path, flags, mode))
			return *r;
		if (auto rp = redirect(path)) {
			int fd = real_open(rp->c_str(), flags, mode);
			if (fd >= 0 && is_unreadable(path)) {
				struct stat st;
				REAL(fstat, int (*)(int, struct stat *));
				if (real_fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode))
					mark_unreadable(fd, true);
			}
			return fd;
		}
	}
	int fd = at ? real_openat(dirfd, path, flags, mode) : real_open(path, flags, mode);
	if (fd >= 0)
		mark_unreadable(fd, false);
	return fd;
}

mode_t va_mode(int flags, va_list ap)
{
	if ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE)
		return mode_t(va_arg(ap, int));
	return 0;
}

// ---------------------------------------------------------------------------
// readlink / realpath.
// ---------------------------------------------------------------------------

// "/proc/self/fd/N" and "/proc/<pid>/fd/N" (also thread-self and task/T).
bool is_proc_fd_path(const std::string &p)
{
	if (!p.starts_with("/proc/"))
		return false;
	size_t fd = p.find("/fd/");
	if (fd == std::string::npos)
		return false;
	unsigned n;
	return parse_uint(std::string_view(p).substr(fd + 4), &n);
}

std::optional<std::string> emulated_link(const char *path)
{
	if (!config().active || !path)
		return std::nullopt;
	const std::string p = normalize(path);
	if (!is_proc_fd_path(p))
		return std::nullopt;
	REAL(stat, int (*)(const char *, struct stat *));
	struct stat st;
	Key k;
	if (real_stat(path, &st) || !key_of(st, &k))
		return std::nullopt;
	auto info = describe(k);
	if (!info)
		return std::nullopt;
	switch (info->kind) {
	case kKfd: return std::string("/dev/kfd");
	case kRender: return "/dev/dri/renderD" + std::to_string(info->minor);
	case kDmaBuf: return std::string("/dmabuf:");
	default: return std::nullopt;
	}
}

ssize_t copy_link(const std::string &s, char *buf, size_t len)
{
	const size_t n = std::min(len, s.size());
	std::memcpy(buf, s.data(), n);
	return ssize_t(n);
}

ssize_t do_readlink(const char *path, char *buf, size_t len)
{
	REAL(readlink, ssize_t (*)(const char *, char *, size_t));
	if (auto l = emulated_link(path))
		return copy_link(*l, buf, len);
	if (config().active && path)
		if (auto l = map_file_link(normalize(path)))
			return copy_link(*l, buf, len);
	if (auto rp = redirect(path))
		return real_readlink(rp->c_str(), buf, len);
	if (config().active && path && is_proc_fd_path(normalize(path))) {
		// An fd of a redirected file names the file as the program
		// opened it, not its place in the private root.
		char tmp[PATH_MAX];
		ssize_t n = real_readlink(path, tmp, sizeof tmp);
		if (n < 0)
			return n;
		std::string t(tmp, size_t(n));
		const std::string &root = config().root;
		if (t.size() > root.size() && t.compare(0, root.size(), root) == 0 && t[root.size()] == '/')
			t.erase(0, root.size());
		return copy_link(t, buf, len);
	}
	return real_readlink(path, buf, len);
}

char *do_realpath(const char *path, char *resolved)
{
	REAL(realpath, char *(*)(const char *, char *));
	auto rp = redirect(path);
	if (!rp)
		return real_realpath(path, resolved);
	char tmp[PATH_MAX];
	if (!real_realpath(rp->c_str(), tmp))
		return nullptr;
	std::string out = tmp;
	const std::string &root = config().root;
	if (out.starts_with(root) && (out.size() == root.size() || out[root.size()] == '/'))
		out = out.size() == root.size() ? "/" : out.substr(root.size());
	if (out.size() >= PATH_MAX)
		return errno = ENAMETOOLONG, nullptr;
	if (!resolved) {
		resolved = static_cast<char *>(std::malloc(PATH_MAX));
		if (!resolved)
			return errno = ENOMEM, nullptr;
	}
	std::memcpy(resolved, out.c_str(), out.size() + 1);
	return resolved;
}

int do_access(const char *path, int mode)
{
	REAL(access, int (*)(const char *, int));
	if (config().active && path && device_path(normalize(path)).kind != Dev::None)
		return device_present(normalize(path)) ? 0 : fail(ENOENT);
	if (auto rp = redirect(path))
		return real_access(rp->c_str(), mode);
	return real_access(path, mode);
}

// A FILE whose reads fail with EPERM (fopen of an "unreadable" sysfs file).
FILE *unreadable_file()
{
	cookie_io_functions_t io{};
	io.read = [](void *, char *, size_t) -> ssize_t {
		errno = EPERM;
		return -1;
	};
	io.close = [](void *) { return 0; };
	return ::fopencookie(nullptr, "r", io);
}

// The open(2) flags of an fopen mode ("r", "w+", "ae", ...).
int fopen_flags(const char *mode)
{
	int flags = 0;
	switch (mode ? mode[0] : 'r') {
	case 'w': flags = O_WRONLY | O_CREAT | O_TRUNC; break;
	case 'a': flags = O_WRONLY | O_CREAT | O_APPEND; break;
	default: flags = O_RDONLY; break;
	}
	for (const char *m = mode ? mode + 1 : ""; *m && *m != ','; ++m) {
		if (*m == '+')
			flags = (flags & ~O_ACCMODE) | O_RDWR;
		else if (*m == 'e')
			flags |= O_CLOEXEC;
		else if (*m == 'x')
			flags |= O_EXCL;
	}
	return flags;
}

FILE *do_fopen(const char *path, const char *mode, bool is64)
{
	using FopenFn = FILE *(*)(const char *, const char *);
	REAL(fopen, FopenFn);
	REAL(fopen64, FopenFn);
	auto &fn = is64 ? real_fopen64 : real_fopen;
	// Writes to the emulated /sys follow open()'s rules (sysfs_write.cpp).
	const int flags = fopen_flags(mode);
	std::optional<std::string> rel =
		write_intent(flags) && path && path[0] != '/' ? sys_path_at(AT_FDCWD, path) : std::nullopt;
	if (std::optional<int> fd = open_sysfs_write(rel ? rel->c_str() : path, flags, 0666)) {
		if (*fd < 0)
			return nullptr;
		FILE *f = ::fdopen(*fd, mode);
		if (!f) {
			const int err = errno;
			::close(*fd);
			errno = err;
		}
		return f;
	}
	if (auto rp = redirect(path)) {
		FILE *f = fn(rp->c_str(), mode);
		if (f && is_unreadable(path)) {
			struct stat st;
			REAL(fstat, int (*)(int, struct stat *));
			if (real_fstat(fileno(f), &st) == 0 && !S_ISDIR(st.st_mode)) {
				std::fclose(f);
				return unreadable_file();
			}
		}
		return f;
	}
	return fn(path, mode);
}


} // namespace

int open_path(const char *path, int flags, mode_t mode) { return do_open(AT_FDCWD, path, flags, mode, false); }

} // namespace kfdemu::shim

using namespace kfdemu::shim;

// ===========================================================================
// Interposed entry points.
// ===========================================================================

SHIM_EXPORT int open(const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t m = va_mode(flags, ap);
	va_end(ap);
	return do_open(AT_FDCWD, path, flags, m, false);
}
SHIM_EXPORT int open64(const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t m = va_mode(flags, ap);
	va_end(ap);
	return do_open(AT_FDCWD, path, flags, m, false);
}
SHIM_EXPORT int openat(int dirfd, const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t m = va_mode(flags, ap);
	va_end(ap);
	return do_open(dirfd, path, flags, m, true);
}
SHIM_EXPORT int openat64(int dirfd, const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t m = va_mode(flags, ap);
	va_end(ap);
	return do_open(dirfd, path, flags, m, true);
}
SHIM_EXPORT int __open_2(const char *path, int flags) { return do_open(AT_FDCWD, path, flags, 0, false); }
SHIM_EXPORT int __open64_2(const char *path, int flags) { return do_open(AT_FDCWD, path, flags, 0, false); }
SHIM_EXPORT int __openat_2(int d, const char *path, int flags) { return do_open(d, path, flags, 0, true); }
SHIM_EXPORT int __openat64_2(int d, const char *path, int flags) { return do_open(d, path, flags, 0, true); }

// glibc's creat() opens through its own open, which no interposer sees.
SHIM_EXPORT int creat(const char *path, mode_t m) { return do_open(AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, m, false); }
SHIM_EXPORT int creat64(const char *path, mode_t m) { return do_open(AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, m, false); }

SHIM_EXPORT FILE *fopen(const char *path, const char *mode) { return do_fopen(path, mode, false); }
SHIM_EXPORT FILE *fopen64(const char *path, const char *mode) { return do_fopen(path, mode, true); }

SHIM_EXPORT int close(int fd)
{
	REAL(close, int (*)(int));
	forget_fd(fd);
	return real_close(fd);
}

// dup2/dup3 onto one of our fds replaces the file behind it (a restorer
// putting fds back at their old numbers): forget it as for close.
SHIM_EXPORT int dup(int oldfd) noexcept
{
	REAL(dup, int (*)(int));
	const int fd = real_dup(oldfd);
	if (fd >= 0)
		forget_fd(fd); // a number a stream's fclose freed unseen
	return fd;
}
SHIM_EXPORT int dup2(int oldfd, int newfd) noexcept
{
	REAL(dup2, int (*)(int, int));
	if (oldfd != newfd)
		forget_fd(newfd);
	return real_dup2(oldfd, newfd);
}
SHIM_EXPORT int dup3(int oldfd, int newfd, int flags) noexcept
{
	REAL(dup3, int (*)(int, int, int));
	if (oldfd != newfd)
		forget_fd(newfd);
	return real_dup3(oldfd, newfd, flags);
}

SHIM_EXPORT int close_range(unsigned first, unsigned last, int flags) noexcept
{
	REAL(close_range, int (*)(unsigned, unsigned, int));
	if (!(flags & CLOSE_RANGE_CLOEXEC))
		for (unsigned fd = first; fd <= last && fd < unsigned(kMaxTrackedFd); fd++)
			forget_fd(int(fd));
	return real_close_range(first, last, flags);
}

SHIM_EXPORT ssize_t read(int fd, void *buf, size_t len)
{
	REAL(read, ssize_t (*)(int, void *, size_t));
	if (fd_unreadable(fd))
		return fail(EPERM);
	return real_read(fd, buf, len);
}
SHIM_EXPORT ssize_t pread(int fd, void *buf, size_t len, off_t off)
{
	REAL(pread, ssize_t (*)(int, void *, size_t, off_t));
	if (fd_unreadable(fd))
		return fail(EPERM);
	return real_pread(fd, buf, len, off);
}
SHIM_EXPORT ssize_t pread64(int fd, void *buf, size_t len, off64_t off)
{
	REAL(pread64, ssize_t (*)(int, void *, size_t, off64_t));
	if (fd_unreadable(fd))
		return fail(EPERM);
	return real_pread64(fd, buf, len, off);
}

// Writes to an emulated sysfs attribute are kernfs stores (sysfs_write.cpp).
SHIM_EXPORT ssize_t write(int fd, const void *buf, size_t len)
{
	REAL(write, ssize_t (*)(int, const void *, size_t));
	if (auto r = sysfs_store(fd, buf, len))
		return *r;
	return real_write(fd, buf, len);
}
SHIM_EXPORT ssize_t pwrite(int fd, const void *buf, size_t len, off_t off)
{
	REAL(pwrite, ssize_t (*)(int, const void *, size_t, off_t));
	if (auto r = sysfs_store(fd, buf, len))
		return *r;
	return real_pwrite(fd, buf, len, off);
}
SHIM_EXPORT ssize_t pwrite64(int fd, const void *buf, size_t len, off64_t off)
{
	REAL(pwrite64, ssize_t (*)(int, const void *, size_t, off64_t));
	if (auto r = sysfs_store(fd, buf, len))
		return *r;
	return real_pwrite64(fd, buf, len, off);
}
// kernfs takes a writev as one write of its iovecs joined.
SHIM_EXPORT ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
	REAL(writev, ssize_t (*)(int, const struct iovec *, int));
	const AttrFd a = attr_fd(fd);
	if (!(a.known && !a.attr) && cnt > 0) {
		std::string joined;
		for (int i = 0; i < cnt; i++)
			joined.append(static_cast<const char *>(iov[i].iov_base), iov[i].iov_len);
		if (auto r = sysfs_store(fd, joined.data(), joined.size()))
			return *r;
	}
	return real_writev(fd, iov, cnt);
}

// --- links, paths, directories ---------------------------------------------

SHIM_EXPORT ssize_t readlink(const char *p, char *buf, size_t len) noexcept
{
	return do_readlink(p, buf, len);
}
SHIM_EXPORT ssize_t __readlink_chk(const char *p, char *buf, size_t len, size_t)
{
	return do_readlink(p, buf, len);
}
SHIM_EXPORT ssize_t readlinkat(int d, const char *p, char *buf, size_t len) noexcept
{
	REAL(readlinkat, ssize_t (*)(int, const char *, char *, size_t));
	if (p && p[0] == '/')
		return do_readlink(p, buf, len);
	if (auto l = logical_at(d, p))
		return do_readlink(l->c_str(), buf, len);
	return real_readlinkat(d, p, buf, len);
}
SHIM_EXPORT char *realpath(const char *p, char *resolved) noexcept { return do_realpath(p, resolved); }
SHIM_EXPORT char *__realpath_chk(const char *p, char *resolved, size_t) { return do_realpath(p, resolved); }

SHIM_EXPORT int access(const char *p, int mode) noexcept { return do_access(p, mode); }
SHIM_EXPORT int faccessat(int d, const char *p, int mode, int fl) noexcept
{
	REAL(faccessat, int (*)(int, const char *, int, int));
	if (p && p[0] == '/')
		return do_access(p, mode);
	if (auto l = logical_at(d, p))
		return do_access(l->c_str(), mode);
	return real_faccessat(d, p, mode, fl);
}

SHIM_EXPORT DIR *opendir(const char *p)
{
	REAL(opendir, DIR *(*)(const char *));
	if (auto rp = redirect(p))
		return real_opendir(rp->c_str());
	return real_opendir(p);
}

using DirentFilter = int (*)(const struct dirent *);
using DirentCmp = int (*)(const struct dirent **, const struct dirent **);
using Dirent64Filter = int (*)(const struct dirent64 *);
using Dirent64Cmp = int (*)(const struct dirent64 **, const struct dirent64 **);

SHIM_EXPORT int scandir(const char *p, struct dirent ***list, DirentFilter f, DirentCmp c)
{
	REAL(scandir, int (*)(const char *, struct dirent ***, DirentFilter, DirentCmp));
	if (auto rp = redirect(p))
		return real_scandir(rp->c_str(), list, f, c);
	return real_scandir(p, list, f, c);
}
SHIM_EXPORT int scandir64(const char *p, struct dirent64 ***list, Dirent64Filter f, Dirent64Cmp c)
{
	REAL(scandir64, int (*)(const char *, struct dirent64 ***, Dirent64Filter, Dirent64Cmp));
	if (auto rp = redirect(p))
		return real_scandir64(rp->c_str(), list, f, c);
	return real_scandir64(p, list, f, c);
}

// Extended attributes (ls -l asks for ACLs): device nodes have none,
// redirected paths answer from the root.
namespace {
template <typename F, typename... A>
ssize_t xattr_call(F real, const char *p, A... a)
{
	if (config().active && p && device_path(normalize(p)).kind != Dev::None)
		return device_present(normalize(p)) ? fail(ENODATA) : fail(ENOENT);
	if (auto rp = redirect(p))
		return real(rp->c_str(), a...);
	return real(p, a...);
}
} // namespace

SHIM_EXPORT ssize_t getxattr(const char *p, const char *n, void *v, size_t s) noexcept
{
	REAL(getxattr, ssize_t (*)(const char *, const char *, void *, size_t));
	return xattr_call(real_getxattr, p, n, v, s);
}
SHIM_EXPORT ssize_t lgetxattr(const char *p, const char *n, void *v, size_t s) noexcept
{
	REAL(lgetxattr, ssize_t (*)(const char *, const char *, void *, size_t));
	return xattr_call(real_lgetxattr, p, n, v, s);
}
SHIM_EXPORT ssize_t listxattr(const char *p, char *l, size_t s) noexcept
{
	REAL(listxattr, ssize_t (*)(const char *, char *, size_t));
	if (config().active && p && device_path(normalize(p)).kind != Dev::None)
		return device_present(normalize(p)) ? 0 : fail(ENOENT);
	return xattr_call(real_listxattr, p, l, s);
}
SHIM_EXPORT ssize_t llistxattr(const char *p, char *l, size_t s) noexcept
{
	REAL(llistxattr, ssize_t (*)(const char *, char *, size_t));
	if (config().active && p && device_path(normalize(p)).kind != Dev::None)
		return device_present(normalize(p)) ? 0 : fail(ENOENT);
	return xattr_call(real_llistxattr, p, l, s);
}
