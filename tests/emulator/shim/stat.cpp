// SPDX-License-Identifier: GPL-2.0-only
//
// libkfdemu_shim.so: emulated files (what the daemon says an fd is), the
// stat family and statfs. See shim.h.
#include "shim.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>

#include <cstring>
#include <mutex>

namespace kfdemu::shim {

namespace {

constexpr uint32_t kDmaBufMagic = 0x444d4142;

} // namespace

// ---------------------------------------------------------------------------
// Emulated files.
// ---------------------------------------------------------------------------

bool key_of(const struct stat &st, Key *k)
{
	const Config &c = config();
	if (!c.active || !S_ISREG(st.st_mode) || st.st_dev != c.memfd_dev)
		return false;
	*k = Key{uint64_t(st.st_dev), uint64_t(st.st_ino)};
	return true;
}

bool fd_key(int fd, Key *k, struct stat *out)
{
	REAL(fstat, int (*)(int, struct stat *));
	struct stat st;
	if (fd < 0 || !config().active || real_fstat(fd, &st))
		return false;
	if (out)
		*out = st;
	return key_of(st, k);
}

namespace {

std::mutex g_info_mu;
std::map<Key, Info> g_info;

} // namespace

std::optional<Info> describe(const Key &k)
{
	{
		std::lock_guard lock(g_info_mu);
		if (auto it = g_info.find(k); it != g_info.end())
			return it->second;
	}
	wire::Request rq{};
	rq.op = wire::Op::Describe;
	rq.dev = k.dev;
	rq.ino = k.ino;
	Response r;
	if (call(rq, {}, &r) || r.rp.result == wire::kNotEmulated || r.rp.result < 0)
		return std::nullopt;
	Info i{int(r.rp.result), unsigned(r.rp.aux[0]), r.rp.aux[1]};
	if (i.kind != kDmaBuf) {	// a dma-buf's size may still change
		std::lock_guard lock(g_info_mu);
		g_info[k] = i;
	}
	return i;
}

namespace {

void fake_chr(struct stat *st, unsigned major, unsigned minor, mode_t perm)
{
	const struct stat keep = *st;
	std::memset(st, 0, sizeof *st);
	st->st_dev = makedev(0, 5);
	st->st_ino = keep.st_ino;
	st->st_mode = S_IFCHR | perm;
	st->st_nlink = 1;
	st->st_rdev = makedev(major, minor);
	st->st_blksize = 4096;
	st->st_atim = keep.st_atim;
	st->st_mtim = keep.st_mtim;
	st->st_ctim = keep.st_ctim;
	// In a container the node is the container's own (its runtime made
	// it): its mode, owner, dev and inode are what the kernel shows for
	// the device's files there.
	if (container_view()) {
		const std::string path = major == kKfdMajor ? std::string("/dev/kfd")
							    : "/dev/dri/renderD" + std::to_string(minor);
		REAL(stat, int (*)(const char *, struct stat *));
		struct stat real;
		if (real_stat(path.c_str(), &real) == 0 && S_ISCHR(real.st_mode) && real.st_rdev == st->st_rdev)
			*st = real;
	}
}

DevPath node_of(const struct stat &st)
{
	const Config &c = config();
	if (!c.active || c.nodes.empty() || !S_ISREG(st.st_mode) || st.st_dev != c.node_dev)
		return {};
	auto it = c.nodes.find(st.st_ino);
	return it == c.nodes.end() ? DevPath{} : device_path(it->second);
}

// fstat answers for an emulated file; false when `st` is not one.
bool fake_fstat_of(struct stat *st)
{
	// A device node of the root seen through an fd (see Config::nodes):
	// what stat() of the device path answers.
	if (const DevPath d = node_of(*st); d.kind != Dev::None) {
		fake_chr(st, d.kind == Dev::Kfd ? kKfdMajor : kDrmMajor, d.minor, 0666);
		return true;
	}
	Key k;
	if (!key_of(*st, &k))
		return false;
	auto info = describe(k);
	if (!info)
		return false;
	switch (info->kind) {
	case kKfd:
		fake_chr(st, kKfdMajor, 0, 0666);
		return true;
	case kRender:
		fake_chr(st, kDrmMajor, info->minor, 0666);
		return true;
	case kDmaBuf:
		// An anonymous dma-buf inode (dma_buf_getfile): no file type
		// bits, owner rw, one link (a memfd has none), and the size
		// counted in blocks as well (inode_set_bytes), not the memfd's
		// allocated pages.
		st->st_mode = S_IRUSR | S_IWUSR;
		st->st_nlink = 1;
		st->st_size = off_t(info->size);
		st->st_blocks = blkcnt_t((info->size + 511) / 512);
		return true;
	default:
		return false;
	}
}

// stat() of a device path: 0, -ENOENT, or 1 when not a device path.
int stat_device(const char *path, struct stat *st)
{
	if (!config().active || !path)
		return 1;
	const std::string p = normalize(path);
	const DevPath d = device_path(p);
	if (d.kind == Dev::None)
		return 1;
	REAL(stat, int (*)(const char *, struct stat *));
	if (!device_present(p) || real_stat((config().root + p).c_str(), st))
		return -ENOENT;
	switch (d.kind) {
	case Dev::Kfd: fake_chr(st, kKfdMajor, 0, 0666); break;
	case Dev::Render: fake_chr(st, kDrmMajor, d.minor, 0666); break;
	case Dev::Card: fake_chr(st, kDrmMajor, d.minor, 0660); break;
	case Dev::None: break;
	}
	return 0;
}
// ---------------------------------------------------------------------------
// stat helpers.
// ---------------------------------------------------------------------------

int do_stat(const char *path, struct stat *st, bool follow)
{
	REAL(stat, int (*)(const char *, struct stat *));
	REAL(lstat, int (*)(const char *, struct stat *));
	int r = stat_device(path, st);
	if (r <= 0)
		return r ? fail(-r) : 0;
	if (auto rp = redirect(path))
		return follow ? real_stat(rp->c_str(), st) : real_lstat(rp->c_str(), st);
	if (follow) {
		if (real_stat(path, st))
			return -1;
		// /proc/<pid>/fd/N of an emulated file follows to the memfd.
		fake_fstat_of(st);
		return 0;
	}
	return real_lstat(path, st);
}

int do_fstat(int fd, struct stat *st)
{
	REAL(fstat, int (*)(int, struct stat *));
	if (real_fstat(fd, st))
		return -1;
	fake_fstat_of(st);
	return 0;
}

int do_fstatat(int dirfd, const char *path, struct stat *st, int flags)
{
	REAL(fstatat, int (*)(int, const char *, struct stat *, int));
	if (path && !*path && (flags & AT_EMPTY_PATH))
		return do_fstat(dirfd, st);
	if (path && path[0] == '/')
		return do_stat(path, st, !(flags & AT_SYMLINK_NOFOLLOW));
	if (auto l = logical_at(dirfd, path))
		return do_stat(l->c_str(), st, !(flags & AT_SYMLINK_NOFOLLOW));
	if (real_fstatat(dirfd, path, st, flags))
		return -1;
	if (!(flags & AT_SYMLINK_NOFOLLOW))
		fake_fstat_of(st);
	return 0;
}

void stat_to_statx(const struct stat &st, struct statx *sx)
{
	sx->stx_mode = uint16_t(st.st_mode);
	sx->stx_ino = st.st_ino;
	sx->stx_size = uint64_t(st.st_size);
	sx->stx_nlink = uint32_t(st.st_nlink);
	sx->stx_uid = st.st_uid;
	sx->stx_gid = st.st_gid;
	sx->stx_blocks = uint64_t(st.st_blocks);
	sx->stx_blksize = uint32_t(st.st_blksize);
	sx->stx_rdev_major = major(st.st_rdev);
	sx->stx_rdev_minor = minor(st.st_rdev);
	sx->stx_dev_major = major(st.st_dev);
	sx->stx_dev_minor = minor(st.st_dev);
	sx->stx_atime = {st.st_atim.tv_sec, uint32_t(st.st_atim.tv_nsec), 0};
	sx->stx_mtime = {st.st_mtim.tv_sec, uint32_t(st.st_mtim.tv_nsec), 0};
	sx->stx_ctime = {st.st_ctim.tv_sec, uint32_t(st.st_ctim.tv_nsec), 0};
}

} // namespace

} // namespace kfdemu::shim

using namespace kfdemu::shim;

// ===========================================================================
// Interposed entry points.
// ===========================================================================

// --- stat family (GLIBC_2.33 names and the older __xstat ones) -------------

SHIM_EXPORT int stat(const char *p, struct stat *st) noexcept { return do_stat(p, st, true); }
SHIM_EXPORT int stat64(const char *p, struct stat64 *st) noexcept
{
	return do_stat(p, reinterpret_cast<struct stat *>(st), true);
}
SHIM_EXPORT int lstat(const char *p, struct stat *st) noexcept { return do_stat(p, st, false); }
SHIM_EXPORT int lstat64(const char *p, struct stat64 *st) noexcept
{
	return do_stat(p, reinterpret_cast<struct stat *>(st), false);
}
SHIM_EXPORT int fstat(int fd, struct stat *st) noexcept { return do_fstat(fd, st); }
SHIM_EXPORT int fstat64(int fd, struct stat64 *st) noexcept
{
	return do_fstat(fd, reinterpret_cast<struct stat *>(st));
}
SHIM_EXPORT int fstatat(int d, const char *p, struct stat *st, int fl) noexcept
{
	return do_fstatat(d, p, st, fl);
}
SHIM_EXPORT int fstatat64(int d, const char *p, struct stat64 *st, int fl) noexcept
{
	return do_fstatat(d, p, reinterpret_cast<struct stat *>(st), fl);
}
SHIM_EXPORT int __xstat(int, const char *p, struct stat *st) { return do_stat(p, st, true); }
SHIM_EXPORT int __xstat64(int, const char *p, struct stat64 *st)
{
	return do_stat(p, reinterpret_cast<struct stat *>(st), true);
}
SHIM_EXPORT int __lxstat(int, const char *p, struct stat *st) { return do_stat(p, st, false); }
SHIM_EXPORT int __lxstat64(int, const char *p, struct stat64 *st)
{
	return do_stat(p, reinterpret_cast<struct stat *>(st), false);
}
SHIM_EXPORT int __fxstat(int, int fd, struct stat *st) { return do_fstat(fd, st); }
SHIM_EXPORT int __fxstat64(int, int fd, struct stat64 *st)
{
	return do_fstat(fd, reinterpret_cast<struct stat *>(st));
}
SHIM_EXPORT int __fxstatat(int, int d, const char *p, struct stat *st, int fl)
{
	return do_fstatat(d, p, st, fl);
}
SHIM_EXPORT int __fxstatat64(int, int d, const char *p, struct stat64 *st, int fl)
{
	return do_fstatat(d, p, reinterpret_cast<struct stat *>(st), fl);
}

SHIM_EXPORT int statx(int d, const char *p, int fl, unsigned mask, struct statx *sx) noexcept
{
	REAL(statx, int (*)(int, const char *, int, unsigned, struct statx *));
	const bool by_fd = p && !*p && (fl & AT_EMPTY_PATH);
	const bool follow = !(fl & AT_SYMLINK_NOFOLLOW);
	if (auto l = logical_at(d, p))
		return statx(AT_FDCWD, l->c_str(), fl, mask, sx);
	if (!config().active || !p || (!by_fd && p[0] != '/'))
		return real_statx(d, p, fl, mask, sx);
	if (!by_fd && device_path(normalize(p)).kind == Dev::None) {
		if (auto rp = redirect(p))
			return real_statx(AT_FDCWD, rp->c_str(), fl, mask, sx);
	}
	struct stat st;
	if (by_fd ? do_fstat(d, &st) : do_stat(p, &st, follow))
		return -1;
	// Start from the real answer where there is one, then overlay.
	if (by_fd || device_path(normalize(p)).kind == Dev::None) {
		if (real_statx(d, p, fl, mask, sx))
			return -1;
	} else {
		std::memset(sx, 0, sizeof *sx);
	}
	sx->stx_mask |= STATX_BASIC_STATS;
	stat_to_statx(st, sx);
	return 0;
}

SHIM_EXPORT int fstatfs(int fd, struct statfs *sf) noexcept
{
	REAL(fstatfs, int (*)(int, struct statfs *));
	if (real_fstatfs(fd, sf))
		return -1;
	Key k;
	if (fd_key(fd, &k))
		if (auto i = describe(k); i && i->kind == kDmaBuf)
			sf->f_type = kDmaBufMagic;
	return 0;
}
SHIM_EXPORT int fstatfs64(int fd, struct statfs64 *sf) noexcept
{
	return fstatfs(fd, reinterpret_cast<struct statfs *>(sf));
}
