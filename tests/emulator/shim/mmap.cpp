// SPDX-License-Identifier: GPL-2.0-only
//
// libkfdemu_shim.so: ioctl, mmap and munmap of emulated fds, and the
// process's device mappings. See shim.h.
#include "shim.h"

#include <fcntl.h>
#include <sys/mman.h>

#include <cstdarg>
#include <mutex>

namespace kfdemu::shim {

namespace {

// ---------------------------------------------------------------------------
// Device mappings of this process (so munmap knows when to tell the daemon).
// ---------------------------------------------------------------------------

std::mutex g_vma_mu;
std::map<uint64_t, uint64_t> g_vmas;	// start -> end

void note_vma(uint64_t start, uint64_t len)
{
	std::lock_guard lock(g_vma_mu);
	g_vmas[start] = start + len;
}

bool drop_vma(uint64_t start, uint64_t len)
{
	std::lock_guard lock(g_vma_mu);
	const uint64_t end = start + len;
	bool hit = false;
	std::vector<std::pair<uint64_t, uint64_t>> keep;
	for (auto it = g_vmas.begin(); it != g_vmas.end();) {
		if (it->second <= start || it->first >= end) {
			++it;
			continue;
		}
		hit = true;
		if (it->first < start)
			keep.push_back({it->first, start});
		if (it->second > end)
			keep.push_back({end, it->second});
		it = g_vmas.erase(it);
	}
	for (auto &[s, e] : keep)
		g_vmas[s] = e;
	return hit;
}

void *do_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	REAL(mmap, void *(*)(void *, size_t, int, int, int, off_t));
	Key k;
	if ((flags & MAP_ANONYMOUS) || fd < 0 || !fd_key(fd, &k))
		return real_mmap(addr, len, prot, flags, fd, off);
	// The kernel's rule for the device fd itself (we map another file).
	const int acc = ::fcntl(fd, F_GETFL) & O_ACCMODE;
	if ((acc == O_WRONLY) || ((flags & MAP_TYPE) == MAP_SHARED && (prot & PROT_WRITE) && acc == O_RDONLY))
		return errno = EACCES, MAP_FAILED;
	wire::Request rq{};
	rq.op = wire::Op::Mmap;
	rq.dev = k.dev;
	rq.ino = k.ino;
	rq.a[0] = uint64_t(off);
	rq.a[1] = len;
	rq.a[2] = uint64_t(prot);
	Response r;
	if (int e = call(rq, {}, &r))
		return errno = -e, MAP_FAILED;
	if (r.rp.result == wire::kNotEmulated)
		return real_mmap(addr, len, prot, flags, fd, off);
	REAL(close, int (*)(int));
	if (r.rp.result < 0 || r.fds.empty()) {
		for (int f : r.fds)
			real_close(f);
		return errno = r.rp.result < 0 ? int(-r.rp.result) : EIO, MAP_FAILED;
	}
	void *p = real_mmap(addr, len, prot, flags, r.fds[0], off_t(r.rp.aux[0]));
	const int saved = errno;
	for (int f : r.fds)
		real_close(f);
	if (p == MAP_FAILED)
		return errno = saved, MAP_FAILED;
	// KFD's doorbell, MMIO and event pages are VM_DONTCOPY: a fork's child
	// has none of them.
	if ((r.rp.aux[2] & wire::kMmapDontCopy) && ::madvise(p, len, MADV_DONTFORK) != 0) {
		const int e = errno;
		REAL(munmap, int (*)(void *, size_t));
		real_munmap(p, len);
		return errno = e, MAP_FAILED;
	}
	note_vma(uint64_t(uintptr_t(p)), len);
	wire::Request va{};
	va.op = wire::Op::VmaAdd;
	va.dev = k.dev;
	va.ino = k.ino;
	va.a[0] = uint64_t(uintptr_t(p));
	va.a[1] = len;
	va.a[2] = uint64_t(off);
	va.a[3] = uint64_t(prot);
	va.a[4] = r.rp.aux[1];
	Response ignored;
	call(va, {}, &ignored);
	return p;
}

} // namespace

} // namespace kfdemu::shim

using namespace kfdemu;
using namespace kfdemu::shim;

// ===========================================================================
// Interposed entry points.
// ===========================================================================

SHIM_EXPORT int ioctl(int fd, unsigned long request, ...) noexcept
{
	va_list ap;
	va_start(ap, request);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	REAL(ioctl, int (*)(int, unsigned long, ...));
	Key k;
	if (!fd_key(fd, &k))
		return real_ioctl(fd, request, arg);
	wire::Request rq{};
	rq.op = wire::Op::Ioctl;
	rq.dev = k.dev;
	rq.ino = k.ino;
	rq.a[0] = request;
	rq.a[1] = uint64_t(uintptr_t(arg));
	Response r;
	if (int e = call(rq, {}, &r))
		return fail(-e);
	if (r.rp.result == wire::kNotEmulated)
		return real_ioctl(fd, request, arg);
	int64_t res = deliver(r);
	if (res < 0)
		return fail(int(-res));
	return int(res);
}

SHIM_EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) noexcept
{
	return do_mmap(addr, len, prot, flags, fd, off);
}
SHIM_EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off) noexcept
{
	return do_mmap(addr, len, prot, flags, fd, off);
}
SHIM_EXPORT int munmap(void *addr, size_t len) noexcept
{
	REAL(munmap, int (*)(void *, size_t));
	int r = real_munmap(addr, len);
	if (r == 0 && config().active && drop_vma(uint64_t(uintptr_t(addr)), len)) {
		const int saved = errno;
		wire::Request rq{};
		rq.op = wire::Op::VmaRemove;
		rq.a[0] = uint64_t(uintptr_t(addr));
		rq.a[1] = len;
		Response ignored;
		call(rq, {}, &ignored);
		errno = saved;
	}
	return r;
}
