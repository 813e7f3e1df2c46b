// SPDX-License-Identifier: GPL-2.0-only
//
// libkfdemu_shim.so: the calls that change a path rather than a file's
// contents (see shim.h and README.md, "Hermeticity"): unlink, unlinkat,
// rmdir, remove, rename, renameat, renameat2, mkdir, mkdirat, mknod,
// mknodat, symlink, symlinkat, link, linkat, chmod, fchmodat, chown,
// lchown, fchownat, truncate, truncate64, utime, utimes, utimensat,
// setxattr, lsetxattr, removexattr, lremovexattr, and the mkstemp family and
// mkdtemp (glibc creates through its own open and mkdir). On a
// redirected path (absolute, through a directory fd or the working
// directory, or one whose ".." lexically lead there) they act on the
// private root and never on the host:
//
//   * under /sys, and the redirected /proc files: the answers of sysfs
//     (kernfs) and procfs, whose directories have no create, unlink, link,
//     symlink or mknod operation (EPERM from the VFS) and whose mkdir,
//     rmdir and rename refuse (EPERM), after the VFS's own checks: a
//     missing entry ENOENT, an existing one EEXIST (mkdir, mknod, symlink,
//     link's new name), unlink of a directory EISDIR, rmdir of a file
//     ENOTDIR. chmod, chown and the times are kept (kernfs stores them:
//     here in the root's file); truncate succeeds and changes nothing
//     (kernfs ignores a size); xattrs: trusted.* and security.* kept,
//     others EOPNOTSUPP; a temporary file EACCES (open's rule), a
//     temporary directory EPERM;
//   * under /dev (/dev/kfd, /dev/dri): done in the root's /dev, as
//     devtmpfs does them for root, except truncate of a device node
//     (EINVAL: not a regular file);
//   * rename and link between two mounts (sysfs, procfs, /dev, the host's
//     files): EXDEV. Both names under the same pseudo filesystem, only one
//     of them the emulated machine's: the emulated side's answer, without
//     a look at the host's.
//
// The errnos are root's (the emulator's tests run as root): permission
// checks a non-root caller would fail first (EACCES) are not made.
#include "shim.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <utime.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace kfdemu::shim {

namespace {

enum class Mount { Host, Sys, Proc, Dev };

Mount mount_of(const std::string &p)
{
	if (p.starts_with("/sys/"))
		return Mount::Sys;
	if (p.starts_with("/proc/"))
		return Mount::Proc;
	if (p.starts_with("/dev/"))
		return Mount::Dev;
	return Mount::Host;
}

// A redirected path in the root: the root, the path (root-relative) and
// its parent directory (O_PATH fds) and last component.
struct Place {
	Mount mount = Mount::Host;
	Closer root{-1}, dir{-1};
	std::string rel, name;
	int err = 0;	// the parent's lookup failed: its errno
};

// The absolute path `path` names through `dirfd` (AT_FDCWD: the working
// directory), a directory inside the root counting by its logical path.
std::optional<std::string> absolute_at(int dirfd, const char *path)
{
	if (path[0] == '/')
		return normalize(path);
	auto found = directory_of(dirfd);
	if (!found)
		return std::nullopt;
	std::string dir = std::move(*found);
	const std::string &root = config().root;
	if (dir.starts_with(root) && (dir.size() == root.size() || dir[root.size()] == '/'))
		dir = dir.size() == root.size() ? "/" : dir.substr(root.size());
	return normalize((dir + "/" + path).c_str());
}

// Opens `p`'s parent beneath the root into `pl`: 0 or an errno.
int locate(const std::string &p, Place *pl)
{
	REAL(open, OpenFn);
	pl->root.reset(real_open(config().root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
	if (pl->root.fd < 0)
		return errno;
	pl->rel = p.substr(1);
	const size_t slash = pl->rel.rfind('/');
	pl->name = slash == std::string::npos ? pl->rel : pl->rel.substr(slash + 1);
	pl->dir.reset(openat2_beneath(pl->root.fd, slash == std::string::npos ? "." : pl->rel.substr(0, slash),
				      O_PATH | O_DIRECTORY | O_CLOEXEC, 0));
	return pl->dir.fd < 0 ? errno : 0;
}

// Whether `path` (through `dirfd`) is a redirected path; if so `pl` holds
// where it is in the root. Its mount is set either way.
bool place_of(int dirfd, const char *path, Place *pl)
{
	if (!config().active || !path || !*path)
		return false;
	auto abs = absolute_at(dirfd, path);
	if (!abs)
		return false;
	std::string p = *abs;
	if (!redirect(p.c_str()))
		p = collapse(p);
	pl->mount = mount_of(p);
	if (!redirect(p.c_str()))
		return false;
	pl->err = locate(p, pl);
	if (pl->err != EXDEV)
		return true;
	// ".." out of the root: the path they name lexically, which may be
	// the host's. No ".." left: an absolute link, not one to follow.
	const std::string there = collapse(p);
	if (there == p) {
		pl->err = EACCES;
		return true;
	}
	pl->mount = mount_of(there);
	if (!redirect(there.c_str()))
		return false;
	pl->err = locate(there, pl);
	return true;
}

// The entry's lstat: 0, or -1 (errno).
int entry(const Place &pl, struct stat *st)
{
	REAL(fstatat, int (*)(int, const char *, struct stat *, int));
	return real_fstatat(pl.dir.fd, pl.name.c_str(), st, AT_SYMLINK_NOFOLLOW);
}

// A new name in a pseudo filesystem (mkdir, mknod, symlink, link): the
// VFS finds it taken, else the directory has no such operation.
int pseudo_create(const Place &pl)
{
	struct stat st;
	if (pl.err)
		return fail(pl.err);
	if (entry(pl, &st) == 0)
		return fail(EEXIST);
	return errno == ENOENT ? fail(EPERM) : -1;
}

int do_unlinkat(int dirfd, const char *path, int flags)
{
	REAL(unlinkat, int (*)(int, const char *, int));
	Place pl;
	if (!place_of(dirfd, path, &pl))
		return real_unlinkat(dirfd, path, flags);
	if (pl.err)
		return fail(pl.err);
	if (pl.mount == Mount::Dev)
		return real_unlinkat(pl.dir.fd, pl.name.c_str(), flags);
	struct stat st;
	if (entry(pl, &st) != 0)
		return -1;
	if (flags & AT_REMOVEDIR)
		return fail(S_ISDIR(st.st_mode) ? EPERM : ENOTDIR);
	return fail(S_ISDIR(st.st_mode) ? EISDIR : EPERM);
}

int do_mkdirat(int dirfd, const char *path, mode_t mode)
{
	REAL(mkdirat, int (*)(int, const char *, mode_t));
	Place pl;
	if (!place_of(dirfd, path, &pl))
		return real_mkdirat(dirfd, path, mode);
	if (pl.mount == Mount::Dev)
		return pl.err ? fail(pl.err) : real_mkdirat(pl.dir.fd, pl.name.c_str(), mode);
	return pseudo_create(pl);
}

int do_mknodat(int dirfd, const char *path, mode_t mode, dev_t dev)
{
	REAL(mknodat, int (*)(int, const char *, mode_t, dev_t));
	Place pl;
	if (!place_of(dirfd, path, &pl))
		return real_mknodat(dirfd, path, mode, dev);
	if (pl.mount == Mount::Dev)
		return pl.err ? fail(pl.err) : real_mknodat(pl.dir.fd, pl.name.c_str(), mode, dev);
	return pseudo_create(pl);
}

int do_symlinkat(const char *target, int dirfd, const char *path)
{
	REAL(symlinkat, int (*)(const char *, int, const char *));
	Place pl;
	if (!place_of(dirfd, path, &pl))
		return real_symlinkat(target, dirfd, path);
	if (pl.mount == Mount::Dev)
		return pl.err ? fail(pl.err) : real_symlinkat(target, pl.dir.fd, pl.name.c_str());
	return pseudo_create(pl);
}

// rename and link: what to do with two names.
enum class Two { Host, SameDev, Answered };

// Host: neither name is the emulated machine's; SameDev: both are in the
// root's /dev; Answered: `*ret` is the call's answer, in the VFS's order
// (a missing parent; link: a missing old name, an existing new one; the
// mounts: EXDEV; rename: a missing old name; the pseudo filesystem's EPERM).
Two two_places(int od, const char *op, int nd, const char *np, bool link, Place *o, Place *n, int *ret)
{
	const bool oe = place_of(od, op, o), ne = place_of(nd, np, n);
	if (!oe && !ne)
		return Two::Host;
	struct stat st;
	*ret = -1;
	if (oe && o->err)
		errno = o->err;
	else if (ne && n->err)
		errno = n->err;
	else if (link && oe && entry(*o, &st) != 0)
		;	// errno set (ENOENT)
	else if (link && ne && entry(*n, &st) == 0)
		errno = EEXIST;
	else if (o->mount != n->mount || (o->mount == Mount::Dev && oe != ne))
		errno = EXDEV;
	else if (o->mount == Mount::Dev)
		return Two::SameDev;
	else if (!link && oe && entry(*o, &st) != 0)
		;	// errno set (ENOENT)
	else
		errno = EPERM;
	return Two::Answered;
}

int do_renameat2(int od, const char *op, int nd, const char *np, unsigned flags)
{
	REAL(renameat2, int (*)(int, const char *, int, const char *, unsigned));
	Place o, n;
	int ret = -1;
	switch (two_places(od, op, nd, np, false, &o, &n, &ret)) {
	case Two::Host: return real_renameat2(od, op, nd, np, flags);
	case Two::SameDev: return real_renameat2(o.dir.fd, o.name.c_str(), n.dir.fd, n.name.c_str(), flags);
	case Two::Answered: break;
	}
	return ret;
}

int do_linkat(int od, const char *op, int nd, const char *np, int flags)
{
	REAL(linkat, int (*)(int, const char *, int, const char *, int));
	Place o, n;
	int ret = -1;
	switch (two_places(od, op, nd, np, true, &o, &n, &ret)) {
	case Two::Host: return real_linkat(od, op, nd, np, flags);
	case Two::SameDev: {
		if (!(flags & AT_SYMLINK_FOLLOW))
			return real_linkat(o.dir.fd, o.name.c_str(), n.dir.fd, n.name.c_str(), 0);
		// Followed beneath the root, then linked by fd.
		Closer src{openat2_beneath(o.root.fd, o.rel, O_PATH | O_CLOEXEC, 0)};
		return src.fd < 0 ? -1 : real_linkat(src.fd, "", n.dir.fd, n.name.c_str(), AT_EMPTY_PATH);
	}
	case Two::Answered: break;
	}
	return ret;
}

// The entry itself (O_PATH, beneath the root, its last link followed
// unless `nofollow`), for the calls that change its attributes.
int open_entry(const Place &pl, bool nofollow)
{
	return openat2_beneath(pl.root.fd, pl.rel, O_PATH | O_CLOEXEC | (nofollow ? O_NOFOLLOW : 0), 0);
}

std::string fd_path(int fd) { return "/proc/self/fd/" + std::to_string(fd); }

int do_fchmodat(int dirfd, const char *path, mode_t mode, int flags)
{
	REAL(fchmodat, int (*)(int, const char *, mode_t, int));
	Place pl;
	if (!place_of(dirfd, path, &pl))
		return real_fchmodat(dirfd, path, mode, flags);
	if (pl.err)
		return fail(pl.err);
	Closer e{open_entry(pl, flags & AT_SYMLINK_NOFOLLOW)};
	if (e.fd < 0)
		return errno == ELOOP && (flags & AT_SYMLINK_NOFOLLOW) ? fail(EOPNOTSUPP) : -1;
	struct stat st;
	REAL(fstat, int (*)(int, struct stat *));
	if (real_fstat(e.fd, &st) == 0 && S_ISLNK(st.st_mode))
		return fail(EOPNOTSUPP); // a link's mode cannot be changed
	return real_fchmodat(AT_FDCWD, fd_path(e.fd).c_str(), mode, 0);
}

int do_fchownat(int dirfd, const char *path, uid_t uid, gid_t gid, int flags)
{
	REAL(fchownat, int (*)(int, const char *, uid_t, gid_t, int));
	Place pl;
	if (!place_of(dirfd, path, &pl))
		return real_fchownat(dirfd, path, uid, gid, flags);
	if (pl.err)
		return fail(pl.err);
	Closer e{open_entry(pl, flags & AT_SYMLINK_NOFOLLOW)};
	return e.fd < 0 ? -1 : real_fchownat(e.fd, "", uid, gid, AT_EMPTY_PATH);
}

int do_utimensat(int dirfd, const char *path, const struct timespec times[2], int flags)
{
	REAL(utimensat, int (*)(int, const char *, const struct timespec *, int));
	Place pl;
	if (!path || !place_of(dirfd, path, &pl))
		return real_utimensat(dirfd, path, times, flags);
	if (pl.err)
		return fail(pl.err);
	Closer e{open_entry(pl, flags & AT_SYMLINK_NOFOLLOW)};
	return e.fd < 0 ? -1 : real_utimensat(AT_FDCWD, fd_path(e.fd).c_str(), times, flags & AT_SYMLINK_NOFOLLOW);
}

int do_truncate(const char *path, off64_t len)
{
	REAL(truncate64, int (*)(const char *, off64_t));
	Place pl;
	if (!place_of(AT_FDCWD, path, &pl))
		return real_truncate64(path, len);
	if (len < 0)
		return fail(EINVAL);
	if (pl.err)
		return fail(pl.err);
	Closer e{open_entry(pl, false)};
	struct stat st;
	REAL(fstat, int (*)(int, struct stat *));
	if (e.fd < 0 || real_fstat(e.fd, &st) != 0)
		return -1;
	if (S_ISDIR(st.st_mode))
		return fail(EISDIR);
	if (pl.mount != Mount::Dev)
		return 0; // kernfs's setattr keeps no size
	if (device_path("/" + pl.rel).kind != Dev::None)
		return fail(EINVAL); // a character device
	Closer w{openat2_beneath(pl.root.fd, pl.rel, O_WRONLY | O_CLOEXEC, 0)};
	return w.fd < 0 ? -1 : ::ftruncate64(w.fd, len);
}

struct timespec to_ts(const struct timeval &tv) { return {tv.tv_sec, tv.tv_usec * 1000}; }

// kernfs's xattr handlers keep trusted.* and security.* (in memory: here on
// the root's file); sysfs has no user.* (KERNFS_ROOT_SUPPORT_USER_XATTR is
// cgroup's) nor ACLs: EOPNOTSUPP. /dev (tmpfs) keeps them all.
bool xattr_kept(Mount m, const char *name)
{
	if (m == Mount::Dev)
		return true;
	const std::string_view n = name ? name : "";
	return n.starts_with("trusted.") || n.starts_with("security.");
}

int do_setxattr(const char *path, const char *name, const void *v, size_t size, int flags, bool follow)
{
	REAL(setxattr, int (*)(const char *, const char *, const void *, size_t, int));
	REAL(lsetxattr, int (*)(const char *, const char *, const void *, size_t, int));
	Place pl;
	if (!place_of(AT_FDCWD, path, &pl))
		return (follow ? real_setxattr : real_lsetxattr)(path, name, v, size, flags);
	if (pl.err)
		return fail(pl.err);
	Closer e{open_entry(pl, !follow)};
	if (e.fd < 0)
		return -1;
	if (!xattr_kept(pl.mount, name))
		return fail(EOPNOTSUPP);
	return real_setxattr(fd_path(e.fd).c_str(), name, v, size, flags);
}

int do_removexattr(const char *path, const char *name, bool follow)
{
	REAL(removexattr, int (*)(const char *, const char *));
	REAL(lremovexattr, int (*)(const char *, const char *));
	Place pl;
	if (!place_of(AT_FDCWD, path, &pl))
		return (follow ? real_removexattr : real_lremovexattr)(path, name);
	if (pl.err)
		return fail(pl.err);
	Closer e{open_entry(pl, !follow)};
	if (e.fd < 0)
		return -1;
	if (!xattr_kept(pl.mount, name))
		return fail(EOPNOTSUPP);
	return real_removexattr(fd_path(e.fd).c_str(), name);
}

// mkstemp and mkdtemp on a redirected directory (glibc creates through its
// own open and mkdir, which no interposer sees): the template's last six
// characters before `suffix` ones are "XXXXXX" (else EINVAL), replaced
// until `make` (open with O_EXCL, or mkdir) does not find the name taken.
// nullopt: not a redirected template (the caller runs glibc's).
template <typename Make>
std::optional<int> make_temp(char *tmpl, size_t suffix, Make make)
{
	Place pl;
	if (!tmpl || !place_of(AT_FDCWD, tmpl, &pl))
		return std::nullopt;
	const size_t len = std::strlen(tmpl);
	if (len < 6 + suffix || std::string_view(tmpl + len - suffix - 6, 6) != "XXXXXX")
		return fail(EINVAL);
	static constexpr char kChars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
	for (int attempt = 0; attempt < 100; ++attempt) {
		unsigned char r[6];
		if (::getrandom(r, sizeof r, 0) != sizeof r)
			return -1;
		for (size_t i = 0; i < 6; ++i)
			tmpl[len - suffix - 6 + i] = kChars[r[i] % (sizeof kChars - 1)];
		const int res = make(tmpl);
		if (res >= 0 || errno != EEXIST)
			return res;
	}
	return fail(EEXIST);
}

int temp_file(char *tmpl, size_t suffix, int flags)
{
	REAL(mkostemps, int (*)(char *, int, int));
	auto r = make_temp(tmpl, suffix, [flags](const char *p) {
		return open_path(p, O_RDWR | O_CREAT | O_EXCL | (flags & ~O_ACCMODE), 0600);
	});
	return r ? *r : real_mkostemps(tmpl, int(suffix), flags);
}

} // namespace

} // namespace kfdemu::shim

using namespace kfdemu::shim;

SHIM_EXPORT int unlink(const char *p) noexcept { return do_unlinkat(AT_FDCWD, p, 0); }
SHIM_EXPORT int unlinkat(int d, const char *p, int flags) noexcept { return do_unlinkat(d, p, flags); }
SHIM_EXPORT int rmdir(const char *p) noexcept { return do_unlinkat(AT_FDCWD, p, AT_REMOVEDIR); }
// glibc's remove() calls its own unlink and rmdir, which no interposer sees.
SHIM_EXPORT int remove(const char *p) noexcept
{
	const int r = do_unlinkat(AT_FDCWD, p, 0);
	if (r == 0 || errno != EISDIR)
		return r;
	return do_unlinkat(AT_FDCWD, p, AT_REMOVEDIR);
}
SHIM_EXPORT int mkdir(const char *p, mode_t m) noexcept { return do_mkdirat(AT_FDCWD, p, m); }
SHIM_EXPORT int mkdirat(int d, const char *p, mode_t m) noexcept { return do_mkdirat(d, p, m); }
SHIM_EXPORT int mknod(const char *p, mode_t m, dev_t dev) noexcept { return do_mknodat(AT_FDCWD, p, m, dev); }
SHIM_EXPORT int mknodat(int d, const char *p, mode_t m, dev_t dev) noexcept { return do_mknodat(d, p, m, dev); }
SHIM_EXPORT int symlink(const char *t, const char *p) noexcept { return do_symlinkat(t, AT_FDCWD, p); }
SHIM_EXPORT int symlinkat(const char *t, int d, const char *p) noexcept { return do_symlinkat(t, d, p); }
SHIM_EXPORT int link(const char *o, const char *n) noexcept { return do_linkat(AT_FDCWD, o, AT_FDCWD, n, 0); }
SHIM_EXPORT int linkat(int od, const char *o, int nd, const char *n, int flags) noexcept
{
	return do_linkat(od, o, nd, n, flags);
}
SHIM_EXPORT int rename(const char *o, const char *n) noexcept { return do_renameat2(AT_FDCWD, o, AT_FDCWD, n, 0); }
SHIM_EXPORT int renameat(int od, const char *o, int nd, const char *n) noexcept
{
	return do_renameat2(od, o, nd, n, 0);
}
SHIM_EXPORT int renameat2(int od, const char *o, int nd, const char *n, unsigned flags) noexcept
{
	return do_renameat2(od, o, nd, n, flags);
}
SHIM_EXPORT int chmod(const char *p, mode_t m) noexcept { return do_fchmodat(AT_FDCWD, p, m, 0); }
SHIM_EXPORT int fchmodat(int d, const char *p, mode_t m, int flags) noexcept { return do_fchmodat(d, p, m, flags); }
SHIM_EXPORT int chown(const char *p, uid_t u, gid_t g) noexcept { return do_fchownat(AT_FDCWD, p, u, g, 0); }
SHIM_EXPORT int lchown(const char *p, uid_t u, gid_t g) noexcept
{
	return do_fchownat(AT_FDCWD, p, u, g, AT_SYMLINK_NOFOLLOW);
}
SHIM_EXPORT int fchownat(int d, const char *p, uid_t u, gid_t g, int flags) noexcept
{
	return do_fchownat(d, p, u, g, flags);
}
SHIM_EXPORT int truncate(const char *p, off_t len) noexcept { return do_truncate(p, len); }
SHIM_EXPORT int truncate64(const char *p, off64_t len) noexcept { return do_truncate(p, len); }
SHIM_EXPORT int utimensat(int d, const char *p, const struct timespec t[2], int flags) noexcept
{
	return do_utimensat(d, p, t, flags);
}
SHIM_EXPORT int utimes(const char *p, const struct timeval tv[2]) noexcept
{
	if (!tv)
		return do_utimensat(AT_FDCWD, p, nullptr, 0);
	const struct timespec ts[2] = {to_ts(tv[0]), to_ts(tv[1])};
	return do_utimensat(AT_FDCWD, p, ts, 0);
}
SHIM_EXPORT int setxattr(const char *p, const char *n, const void *v, size_t s, int f) noexcept
{
	return do_setxattr(p, n, v, s, f, true);
}
SHIM_EXPORT int lsetxattr(const char *p, const char *n, const void *v, size_t s, int f) noexcept
{
	return do_setxattr(p, n, v, s, f, false);
}
SHIM_EXPORT int removexattr(const char *p, const char *n) noexcept { return do_removexattr(p, n, true); }
SHIM_EXPORT int lremovexattr(const char *p, const char *n) noexcept { return do_removexattr(p, n, false); }
SHIM_EXPORT int mkstemp(char *t) { return temp_file(t, 0, 0); }
SHIM_EXPORT int mkstemp64(char *t) { return temp_file(t, 0, 0); }
SHIM_EXPORT int mkostemp(char *t, int flags) { return temp_file(t, 0, flags); }
SHIM_EXPORT int mkostemp64(char *t, int flags) { return temp_file(t, 0, flags); }
SHIM_EXPORT int mkstemps(char *t, int suffix) { return suffix < 0 ? fail(EINVAL) : temp_file(t, size_t(suffix), 0); }
SHIM_EXPORT int mkostemps(char *t, int suffix, int flags)
{
	return suffix < 0 ? fail(EINVAL) : temp_file(t, size_t(suffix), flags);
}
SHIM_EXPORT char *mkdtemp(char *t) noexcept
{
	REAL(mkdtemp, char *(*)(char *));
	auto r = make_temp(t, 0, [](const char *p) { return do_mkdirat(AT_FDCWD, p, 0700); });
	if (!r)
		return real_mkdtemp(t);
	return *r == 0 ? t : nullptr;
}
SHIM_EXPORT int utime(const char *p, const struct utimbuf *b) noexcept
{
	if (!b)
		return do_utimensat(AT_FDCWD, p, nullptr, 0);
	const struct timespec ts[2] = {{b->actime, 0}, {b->modtime, 0}};
	return do_utimensat(AT_FDCWD, p, ts, 0);
}
