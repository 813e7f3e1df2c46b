// SPDX-License-Identifier: GPL-2.0-only
//
// In-process test harness for the device model: a FakeCaller and a
// FakeProcessMemory that act on this test process's own memory (through
// process_vm_readv/writev, so bad addresses give EFAULT instead of a crash),
// fds installed by dup, and small helpers to issue ioctls.
#pragma once

#include "model/abi.h"
#include "model/interface.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace kfdemu::testing {

inline int self_read(uint64_t addr, void *dst, size_t len)
{
	if (!len)
		return 0;
	iovec l{dst, len}, r{reinterpret_cast<void *>(addr), len};
	ssize_t n = process_vm_readv(getpid(), &l, 1, &r, 1, 0);
	return n == static_cast<ssize_t>(len) ? 0 : -EFAULT;
}

inline int self_write(uint64_t addr, const void *src, size_t len)
{
	if (!len)
		return 0;
	iovec l{const_cast<void *>(src), len}, r{reinterpret_cast<void *>(addr), len};
	ssize_t n = process_vm_writev(getpid(), &l, 1, &r, 1, 0);
	return n == static_cast<ssize_t>(len) ? 0 : -EFAULT;
}

// All fake processes share this address space; a tgid in `dead` is gone.
class FakeProcessMemory : public ProcessMemory {
public:
	std::set<pid_t> dead;
	int read(pid_t tgid, uint64_t addr, void *dst, size_t len) override
	{
		if (dead.count(tgid))
			return -ESRCH;
		return self_read(addr, dst, len);
	}
	int write(pid_t tgid, uint64_t addr, const void *src, size_t len) override
	{
		if (dead.count(tgid))
			return -ESRCH;
		return self_write(addr, src, len);
	}
};

class FakeCaller : public Caller {
public:
	explicit FakeCaller(pid_t tgid, bool cap = false) { id_.tgid = tgid; id_.tid = tgid; id_.cap_checkpoint_restore = cap; }
	~FakeCaller() override
	{
		for (int fd : owned)
			::close(fd);
	}
	const CallerIdentity &identity() const override { return id_; }
	int read(uint64_t addr, void *dst, size_t len) override { return self_read(addr, dst, len); }
	int write(uint64_t addr, const void *src, size_t len) override { return self_write(addr, src, len); }
	void install_fd(int model_fd, bool cloexec, uint64_t patch_addr, bool as_result) override
	{
		(void)cloexec;
		pending_.push_back(Pending{::fcntl(model_fd, F_DUPFD_CLOEXEC, 3), patch_addr, as_result});
	}
	std::optional<FileKey> resolve_fd(int caller_fd) override
	{
		struct stat st {};
		if (caller_fd < 0 || ::fstat(caller_fd, &st) != 0)
			return std::nullopt;
		return FileKey{st.st_dev, st.st_ino};
	}
	bool is_tracer_of(pid_t pid) override { return traced.count(pid) != 0; }
	// Processes in a pid namespace of their own: their pid there.
	pid_t own_ns_pid(pid_t pid) override { return ns_pids.count(pid) ? ns_pids.at(pid) : pid; }
	bool process_exists(pid_t pid) override { return alive.count(pid) != 0; }

	// Delivers (r >= 0) or drops the fds installed during the last call.
	// Returns the fd to report as the call's result when one was asked for.
	int commit(long r)
	{
		int result = -1;
		for (auto &p : pending_) {
			if (r < 0) {
				::close(p.fd);
				continue;
			}
			owned.push_back(p.fd);
			last_fds.push_back(p.fd);
			if (p.patch) {
				uint32_t v = static_cast<uint32_t>(p.fd);
				self_write(p.patch, &v, 4);
			}
			if (p.as_result)
				result = p.fd;
		}
		pending_.clear();
		return result;
	}

	CallerIdentity id_;
	std::set<pid_t> traced, alive;
	std::map<pid_t, pid_t> ns_pids;
	std::vector<int> owned, last_fds;

private:
	struct Pending {
		int fd;
		uint64_t patch;
		bool as_result;
	};
	std::vector<Pending> pending_;
};

inline FileKey key_of(int fd)
{
	struct stat st {};
	::fstat(fd, &st);
	return FileKey{st.st_dev, st.st_ino};
}

// A machine: one CPU node, then GPUs with the given ids (minors 128...).
inline MachineDesc make_machine(std::vector<uint32_t> gpu_ids, uint32_t family = 141,
				uint64_t vram = 1ull << 30, double gbps = 0)
{
	MachineDesc m;
	m.name = "test";
	NodeDesc cpu;
	cpu.properties = {{"cpu_cores_count", 8}};
	m.nodes.push_back(cpu);
	uint32_t i = 0;
	for (uint32_t id : gpu_ids) {
		NodeDesc g;
		g.is_gpu = true;
		g.gpu_id = id;
		g.name = "arcturus";
		g.drm_render_minor = 128 + i;
		g.card_index = i;
		g.family = family;
		g.pci_device_id = 0x738c;
		g.sdma_gbps = gbps;
		g.mem_banks.push_back(MemBankDesc{1, vram, 4096, 1200});
		g.properties = {{"simd_count", 480}, {"array_count", 8}, {"simd_arrays_per_engine", 1},
				{"cu_per_simd_array", 16}, {"simd_per_cu", 4}, {"device_id", 0x738c},
				{"num_gws", 64}, {"gfx_target_version", 90008}};
		m.nodes.push_back(g);
		++i;
	}
	return m;
}

// The model plus helpers to issue calls as a FakeCaller.
struct Rig {
	explicit Rig(MachineDesc m) : machine(std::move(m))
	{
		pm = std::make_shared<FakeProcessMemory>();
		model = make_model(machine, pm);
	}
	MachineDesc machine;
	std::shared_ptr<FakeProcessMemory> pm;
	std::unique_ptr<Model> model;

	int open_kfd(FakeCaller &c)
	{
		int r = model->open_kfd(c, true);
		int fd = c.commit(r);
		return r < 0 ? r : fd;
	}
	int open_render(FakeCaller &c, uint32_t minor)
	{
		int r = model->open_render(c, minor, true);
		int fd = c.commit(r);
		return r < 0 ? r : fd;
	}
	template <typename T> long kfd(FakeCaller &c, int fd, unsigned nr, T *arg, unsigned dir = 3)
	{
		unsigned long cmd = abi::ioc(dir, 'K', nr, sizeof(T));
		long r = model->ioctl(c, key_of(fd), cmd, reinterpret_cast<uint64_t>(arg));
		c.commit(r);
		return r;
	}
	template <typename T> long drm(FakeCaller &c, int fd, unsigned nr, T *arg, unsigned dir = 3)
	{
		unsigned long cmd = abi::ioc(dir, 'd', nr, sizeof(T));
		long r = model->ioctl(c, key_of(fd), cmd, reinterpret_cast<uint64_t>(arg));
		c.commit(r);
		return r;
	}
	template <typename T> long amdgpu(FakeCaller &c, int fd, unsigned nr, T *arg, unsigned dir = 3)
	{
		return drm(c, fd, abi::drm::kCommandBase + nr, arg, dir);
	}

	// The 64-bit doorbell of a queue CREATE_QUEUE made on `kfd`, its
	// 8 KiB doorbell page mapped into this process (as libhsakmt does);
	// nullptr when the page cannot be mapped.
	volatile uint64_t *map_doorbell(FakeCaller &c, int kfd, uint64_t doorbell_offset)
	{
		auto *page = static_cast<uint8_t *>(map(c, kfd, doorbell_offset & ~uint64_t{8191}, 8192));
		return page ? reinterpret_cast<volatile uint64_t *>(page + (doorbell_offset & 8191)) : nullptr;
	}

	// Maps `len` bytes of an emulated fd at `offset` into this process.
	void *map(FakeCaller &c, int fd, uint64_t offset, uint64_t len, int *err = nullptr)
	{
		MmapTarget t;
		int r = model->mmap(c, key_of(fd), offset, len, PROT_READ | PROT_WRITE, &t);
		if (err)
			*err = r;
		if (r)
			return nullptr;
		void *p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, t.fd, static_cast<off_t>(t.offset));
		return p == MAP_FAILED ? nullptr : p;
	}

	// ---- render helpers ----
	uint32_t gem_create(FakeCaller &c, int fd, uint64_t size, uint64_t domain = abi::drm::DOMAIN_VRAM,
			    long *r = nullptr)
	{
		abi::drm::GemCreate a{size, 4096, domain, 0};
		long rr = amdgpu(c, fd, abi::drm::GEM_CREATE, &a);
		if (r)
			*r = rr;
		uint32_t h;
		std::memcpy(&h, &a, 4);
		return rr ? 0 : h;
	}
	uint64_t gem_mmap_offset(FakeCaller &c, int fd, uint32_t handle)
	{
		abi::drm::GemMmap a{handle};
		if (amdgpu(c, fd, abi::drm::GEM_MMAP, &a))
			return 0;
		return a.handle_or_addr;
	}
	long gem_va(FakeCaller &c, int fd, uint32_t handle, uint32_t op, uint64_t va, uint64_t size,
		    uint64_t off = 0, uint32_t flags = 0xe)
	{
		abi::drm::GemVa a{handle, 0, op, flags, va, off, size};
		return amdgpu(c, fd, abi::drm::GEM_VA, &a, abi::kIocWrite);
	}
	uint32_t ctx_alloc(FakeCaller &c, int fd)
	{
		abi::drm::Ctx a{abi::drm::CTX_OP_ALLOC, 0, 0, 0};
		if (amdgpu(c, fd, abi::drm::CTX, &a))
			return 0;
		return a.op;
	}
	// Submits one IB on SDMA ring `ring`; returns the sequence (0 on error, *r set).
	uint64_t submit(FakeCaller &c, int fd, uint32_t ctx, uint64_t ib_va, uint32_t ib_bytes, long *r,
			uint32_t ring = 0)
	{
		abi::drm::CsChunkIb ib{0, 0, ib_va, ib_bytes, abi::drm::HW_IP_DMA, 0, ring};
		abi::drm::CsChunk ch{abi::drm::CHUNK_IB, 8, reinterpret_cast<uint64_t>(&ib)};
		uint64_t chp = reinterpret_cast<uint64_t>(&ch);
		abi::drm::Cs cs{ctx, 0, 1, 0, reinterpret_cast<uint64_t>(&chp)};
		*r = amdgpu(c, fd, abi::drm::CS, &cs);
		uint64_t seq;
		std::memcpy(&seq, &cs, 8);
		return *r ? 0 : seq;
	}
	// WAIT_CS with a relative timeout (ns; ~0 = forever). Returns the ioctl
	// result; *status = 0 done, 1 busy.
	long wait_cs(FakeCaller &c, int fd, uint32_t ctx, uint64_t seq, uint64_t rel_ns, uint64_t *status,
		     uint32_t ring = 0)
	{
		uint64_t t = ~0ull;
		if (rel_ns != ~0ull) {
			timespec ts{};
			clock_gettime(CLOCK_MONOTONIC, &ts);
			t = static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec) + rel_ns;
		}
		abi::drm::WaitCs a{seq, t, abi::drm::HW_IP_DMA, 0, ring, ctx};
		long r = amdgpu(c, fd, abi::drm::WAIT_CS, &a);
		std::memcpy(status, &a, 8);
		return r;
	}
};

// SDMA packet builders (hardware encoding for AI+: count = bytes - 1).
inline void pkt_copy(std::vector<uint32_t> &ib, uint64_t src, uint64_t dst, uint64_t bytes, bool ai = true)
{
	ib.push_back(abi::sdma::OP_COPY);
	ib.push_back(static_cast<uint32_t>(ai ? bytes - 1 : bytes));
	ib.push_back(0);
	ib.push_back(static_cast<uint32_t>(src));
	ib.push_back(static_cast<uint32_t>(src >> 32));
	ib.push_back(static_cast<uint32_t>(dst));
	ib.push_back(static_cast<uint32_t>(dst >> 32));
}

inline void pad_ib(std::vector<uint32_t> &ib)
{
	while (ib.size() % 8)
		ib.push_back(0);
}

} // namespace kfdemu::testing
