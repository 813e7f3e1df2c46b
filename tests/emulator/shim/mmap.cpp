// SPDX-License-Identifier: GPL-2.0-only
//
// libkfdemu_shim.so: ioctl, mmap and munmap of emulated fds, and the
// process's device mappings. See shim.h.
#include "shim.h"

#include <fcntl.h>
#include <sys/mman.h>

#include <sys/ioctl.h>

#include <algorithm>
#include <cstdarg>
#include <cstring>
#include <mutex>

namespace kfdemu::shim {

namespace {

// ---------------------------------------------------------------------------
// Address ranges munmap must tell the daemon about: the process's device
// mappings, and the spans it has set SVM attributes on (an unmap there
// takes the pages out of its SVM ranges, as the kernel's MMU notifier).
// ---------------------------------------------------------------------------

class Spans {
public:
	void add(uint64_t start, uint64_t len)
	{
		std::lock_guard lock(mu_);
		m_[start] = std::max(m_[start], start + len);
	}
	// Takes [start, start + len) out; whether any of it was there.
	bool drop(uint64_t start, uint64_t len)
	{
		std::lock_guard lock(mu_);
		const uint64_t end = start + len;
		bool hit = false;
		std::vector<std::pair<uint64_t, uint64_t>> keep;
		for (auto it = m_.begin(); it != m_.end();) {
			if (it->second <= start || it->first >= end) {
				++it;
				continue;
			}
			hit = true;
			if (it->first < start)
				keep.push_back({it->first, start});
			if (it->second > end)
				keep.push_back({end, it->second});
			it = m_.erase(it);
		}
		for (auto &[s, e] : keep)
			m_[s] = e;
		return hit;
	}

private:
	std::mutex mu_;
	std::map<uint64_t, uint64_t> m_; // start -> end
};

Spans g_vmas, g_svm;
// XNACK is on: a GPU fault may have made a range anywhere, so every munmap
// goes to the daemon.
std::atomic<bool> g_xnack{false};

void note_vma(uint64_t start, uint64_t len) { g_vmas.add(start, len); }

// A KFD ioctl that succeeded: an SVM SET_ATTR's span is SVM memory now; a
// SET_XNACK_MODE sets the mode (a negative value only queries it).
void note_svm(unsigned long request, const void *arg)
{
	constexpr unsigned kSvmNr = 0x20, kXnackNr = 0x21, kKfdType = 'K';
	if (_IOC_TYPE(request) != kKfdType || !arg)
		return;
	if (_IOC_NR(request) == kXnackNr) {
		int32_t on;
		std::memcpy(&on, arg, sizeof on);
		if (on >= 0)
			g_xnack = on > 0;
		return;
	}
	if (_IOC_NR(request) != kSvmNr)
		return;
	uint64_t a[3]; // start_addr, size, op | nattr << 32
	std::memcpy(a, arg, sizeof a);
	if (uint32_t(a[2]) == 0) // KFD_IOCTL_SVM_OP_SET_ATTR
		g_svm.add(a[0], a[1]);
}

// munmap of [addr, addr + len): the daemon told what it needs to know.
void note_unmap(uint64_t addr, uint64_t len)
{
	const int saved = errno;
	for (auto [spans, op] : {std::pair{&g_vmas, wire::Op::VmaRemove}, std::pair{&g_svm, wire::Op::SvmUnmap}}) {
		if (!spans->drop(addr, len) && !(op == wire::Op::SvmUnmap && g_xnack))
			continue;
		wire::Request rq{};
		rq.op = op;
		rq.a[0] = addr;
		rq.a[1] = len;
		Response ignored;
		call(rq, {}, &ignored);
	}
	errno = saved;
}

// call() of an Ioctl or Mmap of `fd`, whose key fd_key read into *k. The
// key names the file the fd had when it was read: a thread frozen between
// that fstat and the request's send (a CRIU dump lands anywhere) runs on,
// after the restore, with the key of the dumped file, which the daemon no
// longer knows (the restored fd is another file). The kernel resolves the
// fd as the syscall enters (a restarted one again as it is made again), so
// a call the daemon does not know the file of (kNotEmulated) is made
// again, stamped anew, if the fd now names another file (*k updated):
// otherwise the shim would make the real ioctl on the restored memfd
// (ENOTTY: libhsakmt's hsaKmtFreeMemory failed so after a restore,
// rocm_realcriu_*_hsa_stream_* flake (b)). A restarted call (wire::kRestart)
// that call() re-sends after the restore comes back here the same way.
int call_on_fd(int fd, Key *k, wire::Request rq, Response *out)
{
	for (;;) {
		rq.dev = k->dev;
		rq.ino = k->ino;
		if (int e = call(rq, {}, out))
			return e;
		Key now;
		if (out->rp.result != wire::kNotEmulated || !fd_key(fd, &now) || now == *k)
			return 0;
		*k = now;
		rq.made_ns = now_ns();
	}
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
	rq.a[0] = uint64_t(off);
	rq.a[1] = len;
	rq.a[2] = uint64_t(prot);
	Response r;
	if (int e = call_on_fd(fd, &k, rq, &r))
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
	// The call is made now (before fd_key's fstat, a point where the
	// thread can be preempted): the daemon orders the process's calls by
	// this time.
	const uint64_t made = now_ns();
	REAL(ioctl, int (*)(int, unsigned long, ...));
	Key k;
	if (!fd_key(fd, &k))
		return real_ioctl(fd, request, arg);
	wire::Request rq{};
	rq.made_ns = made;
	rq.op = wire::Op::Ioctl;
	rq.a[0] = request;
	rq.a[1] = uint64_t(uintptr_t(arg));
	Response r;
	if (int e = call_on_fd(fd, &k, rq, &r))
		return fail(-e);
	if (r.rp.result == wire::kNotEmulated)
		return real_ioctl(fd, request, arg);
	int64_t res = deliver(r);
	if (res < 0)
		return fail(int(-res));
	note_svm(request, arg);
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
	if (r == 0 && config().active)
		note_unmap(uint64_t(uintptr_t(addr)), len);
	return r;
}
