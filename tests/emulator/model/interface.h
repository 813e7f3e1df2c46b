// SPDX-License-Identifier: GPL-2.0-only
//
// The contract between the emulated GPU's device model (tests/emulator/model)
// and its transport (tests/emulator/transport, shim, launcher).
//
// The model is pure state and kernel semantics: it never touches sockets or
// /proc. The transport carries a client process's device calls to it and
// gives it a Caller: the window through which the model reads and writes the
// calling process's memory and installs fds in it, as the kernel would with
// copy_from_user/copy_to_user/fd_install.
//
// Errors follow the kernel: 0 or a negative errno.
#pragma once

#include <sys/sysinfo.h>
#include <sys/types.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kfdemu {

// ---------------------------------------------------------------------------
// Machine description (profiles). Filled by the transport's profile loader
// (named profiles and custom machine files), consumed by the model (device
// behaviour) and by the transport's sysfs writer (topology tree).
// ---------------------------------------------------------------------------

struct IoLinkDesc {
	uint32_t type = 2;	// 2 = PCIe, 11 = XGMI
	uint32_t node_to = 0;	// topology node index
	uint32_t weight = 20;
	uint32_t min_bandwidth = 0, max_bandwidth = 0;
};

struct MemBankDesc {
	uint32_t heap_type = 0;	// 0 system, 1 FB public, 2 FB private
	uint64_t size_in_bytes = 0;
	uint32_t width = 0, mem_clk_max = 0;
};

struct CacheDesc {
	uint32_t level = 1, size_kb = 16, cache_line_size = 64, type = 1;
};

// One KFD topology node: a CPU (NUMA node) or a GPU.
struct NodeDesc {
	bool is_gpu = false;
	uint32_t gpu_id = 0;		// 0 for CPUs
	std::string name;		// ASIC name for GPUs, empty for CPUs
	// Every numeric key of nodes/N/properties, in the kernel's order
	// (see ../shared/reference/kfd-amdgpu-interfaces.md §3.2). Counts
	// (mem_banks_count, caches_count, io_links_count, p2p_links_count) are
	// kept consistent with the vectors below by the profile loader.
	std::vector<std::pair<std::string, uint64_t>> properties;
	std::vector<MemBankDesc> mem_banks;
	std::vector<CacheDesc> caches;
	std::vector<IoLinkDesc> io_links;
	// nodes/N/p2p_links: peers whose VRAM this GPU reaches over PCIe.
	std::vector<IoLinkDesc> p2p_links;

	// GPU-only device facts used by the render-node model.
	uint32_t drm_render_minor = 0;	// 128..191
	uint32_t card_index = 0;	// /dev/dri/card<N>
	uint32_t family = 141;		// AMDGPU_FAMILY_AI
	uint32_t pci_device_id = 0;
	uint32_t pci_revision = 0;	// PCI revision (sysfs `revision`; DEV_INFO pci_rev)
	uint32_t rev_id = 0;		// ASIC revision (DEV_INFO chip_rev)
	uint32_t external_rev_id = 0;	// rev_id + the ASIC's offset (DEV_INFO external_rev)
	bool gfx_ring = true;		// false on compute-only chips (MI100/MI200/MI300)
	std::string vbios_version;	// sysfs vbios_version (rocm-smi needs one)
	std::string product_name;	// sysfs product_name (from the board's FRU)
	uint32_t power_cap_w = 0;	// the board's power cap (hwmon power1_cap, _cap_max); 0: none
	// Firmware versions of the blocks amdgpu shows in fw_version/ besides
	// MEC/MEC2 and SDMA/SDMA2 (the topology's fw_version and
	// sdma_fw_version), by file prefix ("rlc", "smc", "sos", ...); a block
	// not here shows 0, as the kernel shows a block the ASIC loads no
	// firmware for.
	std::map<std::string, uint32_t> firmware;
	uint32_t ras_features = 0;	// ras/features' mask: one bit per RAS block (enum amdgpu_ras_block)
	std::string pci_slot;		// "0000:03:00.0"
	uint32_t num_sdma_engines = 2;
	double sdma_gbps = 0;		// per-engine bandwidth model; 0 = unthrottled
	// VRAM BOs get their host memory when they are allocated, not at first
	// touch: real VRAM is there before a BO is, so a DMA into a new BO
	// pays no page faults (on a VM host memory can fault in at < 1 GB/s).
	bool vram_resident = false;
	bool large_bar = true;

	uint64_t property(std::string_view key, uint64_t dflt = 0) const;
};

struct MachineDesc {
	std::string name;
	std::vector<NodeDesc> nodes;	// CPUs first, then GPUs (kernel order)
	uint32_t kfd_minor_version = 14; // reported by GET_VERSION (>= 8 has CRIU)
	// Render minors the processes' device cgroup allows (kfd-emu
	// --device-cgroup); empty = every GPU. A KFD process gets device data
	// only for these (and, in a container, only for those its /dev has:
	// Caller::container_denies), as the kernel's kfd_init_apertures skips
	// GPUs the cgroup denies (so CRIU_OP RESTORE expects exactly as many
	// devices).
	std::vector<uint32_t> cgroup_minors;
	// How long after a VRAM eviction a process's BOs and queues are
	// restored, and how long a restore that found no room waits to try
	// again: the kernel's PROCESS_RESTORE_TIME_MS and
	// PROCESS_BACK_OFF_TIME_MS (100 ms each). Unit tests that look at an
	// evicted state lengthen it so that a loaded machine cannot restore
	// before they look.
	uint32_t restore_delay_ms = 100;
	// CREATE_QUEUE checks a compute queue's control stack, CWSR area and
	// EOP buffer sizes against its GPU's (KfdCwsrSizes) as Linux 6.12's
	// kfd_queue_acquire_buffers does (machine file `queue_size_checks on`);
	// off, the sizes are the client's, as before 6.12.
	bool queue_size_checks = false;
};

// What amdkfd derives for CWSR from a GPU node's properties when it adds
// the node (kfd_queue_ctx_save_restore_size, Linux 6.12), per XCC: the
// control stack (the context-save header, 8 bytes per wave on GFX9, 12
// from GFX10.1, and 8 more, page aligned; at most 0x7000 on GFX10), the
// CWSR area (that stack and each CU's VGPRs, SGPRs, LDS and HWREGs, page
// aligned), the debugger's 32 bytes per wave after the area, and the EOP
// buffer. The topology publishes cwsr_size and ctl_stack_size (Linux
// 8fc2796dea6f); all 0 before GFX8.0.1.
struct KfdCwsrSizes {
	uint32_t ctl_stack = 0, cwsr = 0, debug_memory = 0, eop_buffer = 0;
};
inline KfdCwsrSizes kfd_cwsr_sizes(uint64_t gfxv, uint64_t simd_count, uint64_t simd_per_cu, uint64_t num_xcc,
				   uint64_t array_count, uint64_t arrays_per_engine, uint64_t lds_kb)
{
	KfdCwsrSizes s;
	if (gfxv < 80001 || !simd_per_cu || !arrays_per_engine)
		return s;
	auto align = [](uint64_t v, uint64_t a) { return (v + a - 1) / a * a; };
	const uint64_t cu = simd_count / simd_per_cu / (num_xcc ? num_xcc : 1);
	const uint64_t waves = gfxv < 100100 ? std::min(cu * 40, array_count / arrays_per_engine * 512) : cu * 32;
	const bool big = gfxv == 90402 || gfxv == 90010 || gfxv == 90008 || gfxv == 90500;
	const bool mid = gfxv == 110000 || gfxv == 110001 || gfxv == 120000 || gfxv == 120001;
	const uint64_t vgprs = big ? 0x80000 : mid ? 0x60000 : 0x40000;
	const uint64_t per_cu = vgprs + 0x4000 + (gfxv == 90500 ? lds_kb << 10 : 0x10000) + 0x1000;
	uint64_t stack = align(40 + waves * (gfxv >= 100100 ? 12 : 8) + 8, 4096);
	if (gfxv / 10000 == 10)
		stack = std::min<uint64_t>(stack, 0x7000);
	s.ctl_stack = static_cast<uint32_t>(stack);
	s.cwsr = static_cast<uint32_t>(stack + align(cu * per_cu, 4096));
	s.debug_memory = static_cast<uint32_t>(align(waves * 32, 64));
	s.eop_buffer = gfxv == 80002 ? 0x8000 : gfxv >= 80000 ? 4096 : 0;
	return s;
}

// The memory limits the kernel derives at boot from the system memory
// (the CPU nodes' banks; the host's RAM for a machine without any), one set
// per machine, as a kernel without module options sets them (Linux 6.5+):
//   ttm_limit         TTM's page limit, half the system memory
//                     (ttm_global_init), in bytes;
//   gtt_size          each GPU's GTT manager size: the TTM limit (amdgpu's
//                     gttsize -1, amdgpu_ttm_init), mem_info_gtt_total;
//   kfd_system_limit  KFD's limit on its GTT and userptr BOs together
//                     (kfd_mem_limit.max_system_mem_limit: the memory less
//                     1/64, less 1.5 GiB, or halved when under 3 GiB);
//   kfd_ttm_limit     KFD's limit on its GTT BOs (max_ttm_mem_limit: the
//                     TTM limit).
struct MemoryLimits {
	uint64_t system_memory = 0, ttm_limit = 0, gtt_size = 0, kfd_system_limit = 0, kfd_ttm_limit = 0;
};
inline MemoryLimits memory_limits(const MachineDesc &m)
{
	MemoryLimits l;
	for (const NodeDesc &n : m.nodes)
		if (!n.is_gpu)
			for (const MemBankDesc &b : n.mem_banks)
				l.system_memory += b.size_in_bytes;
	if (!l.system_memory) {
		struct sysinfo si {};
		if (::sysinfo(&si) == 0)
			l.system_memory = uint64_t{si.totalram} * si.mem_unit;
	}
	const uint64_t page = 4096;
	l.ttm_limit = l.system_memory / 2 / page * page; // ttm_global_init: num_pages / 2
	l.gtt_size = l.ttm_limit;
	constexpr uint64_t kReserve = 3ull << 29; // AMDGPU_RESERVE_MEM_LIMIT, 1.5 GiB
	const uint64_t sys = l.system_memory - (l.system_memory >> 6);
	l.kfd_system_limit = sys < 2 * kReserve ? sys >> 1 : sys - kReserve;
	l.kfd_ttm_limit = l.ttm_limit;
	return l;
}

// ---------------------------------------------------------------------------
// Fault injection and introspection.
// ---------------------------------------------------------------------------

struct FaultRule {
	// What to match: an ioctl name ("AMDKFD_IOC_CRIU_OP",
	// "DRM_IOCTL_AMDGPU_CS", ...), a CRIU sub-op ("CRIU_OP:CHECKPOINT"),
	// "sdma" for SDMA jobs, or "*" for any ioctl.
	std::string target;
	uint32_t nth = 1;		// the Nth matching call (1-based) fails
	int err = 5;			// positive errno to fail with (EIO default)
	// Hang: sdma only. Stall: an ioctl (not sdma) blocks without any effect
	// until the calling process has ended, as if it had been killed right
	// before it entered the call (a kernel ioctl never runs for a caller
	// that never made it); after kStallLimitMs it fails with `err`.
	// StallAfter: the ioctl takes its effect, then blocks until the caller
	// has ended, as if it had been killed right after the call returned
	// (its result never reaches the caller); after kStallLimitMs it
	// returns its result.
	enum class Action { Fail, Hang, Stall, StallAfter } action = Action::Fail;
	// Every matching call from the Nth on fails, not the Nth only (a
	// kernel that disables an ioctl: DRM_IOCTL_GEM_CHANGE_HANDLE).
	bool every = false;
	static constexpr int kStallLimitMs = 60000;
};

// ---------------------------------------------------------------------------
// Files.
// ---------------------------------------------------------------------------

// Identity of an emulated open file: the inode of the real file (a memfd)
// that backs the fd in client processes. One open file description of a
// device node = one FileKey. fds are never identified by (pid, number).
struct FileKey {
	dev_t dev = 0;
	ino_t ino = 0;
	auto operator<=>(const FileKey &) const = default;
};

enum class FileKind { Kfd, Render, DmaBuf };

struct FileInfo {
	FileKind kind;
	uint32_t render_minor = 0;	// Render
	uint64_t size = 0;		// DmaBuf: buffer size
};

// ---------------------------------------------------------------------------
// The caller: implemented by the transport for each device call.
// ---------------------------------------------------------------------------

struct CallerIdentity {
	pid_t tgid = 0;
	pid_t tid = 0;
	bool cap_checkpoint_restore = false; // CAP_CHECKPOINT_RESTORE or CAP_SYS_ADMIN
	bool compat32 = false;
};

class Caller {
public:
	virtual ~Caller() = default;
	virtual const CallerIdentity &identity() const = 0;
	// The pid process `pid` (the daemon's view) has in its own active pid
	// namespace (its last NSpid): what KFD's PROCESS_INFO reports.
	virtual pid_t own_ns_pid(pid_t pid) = 0;

	// copy_from_user / copy_to_user on the calling process: 0 or -EFAULT.
	virtual int read(uint64_t addr, void *dst, size_t len) = 0;
	virtual int write(uint64_t addr, const void *src, size_t len) = 0;

	// fd_install: give the caller a new fd referring to the same open file
	// description as `model_fd` (an fd the model owns; the transport dups
	// what it needs). The fd number is only known once the caller has
	// received it, so the transport writes it, as a u32, at user address
	// `patch_addr` (0: nowhere) and returns it from the syscall when
	// `as_result` is set (open, PRIME export). fds are delivered only if
	// the call returns 0 (or >= 0); on error none is installed.
	virtual void install_fd(int model_fd, bool cloexec, uint64_t patch_addr,
				bool as_result = false) = 0;

	// Caller methods are called by the model with its lock held: an
	// implementation must never call back into the Model.
	//
	// The emulated file behind one of the caller's fd numbers (drm_fd of
	// ACQUIRE_VM and of CRIU RESTORE device buckets, PRIME_FD_TO_HANDLE).
	// nullopt when the fd is not open. The key is the fd's backing inode;
	// the model checks it against its own files (dma-bufs not exported
	// by this model are therefore refused with EINVAL).
	virtual std::optional<FileKey> resolve_fd(int caller_fd) = 0;

	// Whether the calling thread (identity().tid) is the ptrace tracer of
	// process `pid`'s leader thread: KFD's rule for CRIU_OP on another
	// process's context is ptrace_parent(lead_thread) == current, so
	// another thread of the tracer's process does not count.
	virtual bool is_tracer_of(pid_t pid) = 0;

	// Whether process `pid` is alive in the caller's pid namespace
	// (CRIU RESUME looks up by pid).
	virtual bool process_exists(pid_t pid) = 0;

	// Blocks until the calling process has ended, `ms` milliseconds at
	// most: true when it ended (a `stall` fault). Called without the
	// model's lock. Default: no way to watch the caller, false at once.
	virtual bool wait_caller_gone(int ms)
	{
		(void)ms;
		return false;
	}

	// The call now holds the model's lock (Model::ioctl): calls made after
	// it may go in. The transport lets a process's ioctls in in the order
	// its threads made them (a kernel ioctl runs in its thread as it is
	// made; the daemon's threads could otherwise serve a later call
	// first). Default: nothing.
	virtual void entered() {}

	// Whether a call this caller's process makes of itself is sent back to
	// be made again (Model::ioctl and mmap return -abi::kErestartsys
	// before doing anything; a WAIT_EVENTS in progress when CRIU pauses
	// the process ends so, writing nothing) rather than served, when the
	// call was made before the process's last PROCESS_INFO (made_ns) and
	// reaches the model after it. A call made after it (a process that
	// checkpoints itself, a thread CRIU did not freeze) is served, as the
	// kernel serves it. On a kernel, CRIU
	// pauses a process only once all its threads are frozen: each ioctl
	// either returned before (the checkpoint and the dumped memory have
	// what it did) or is restarted when the thread runs again, never done
	// in between. A shim's request can reach the model after the freeze,
	// even after the dump's UNPAUSE and memory dump (the adapter settles a
	// connection when CRIU dumps it, at the end); served then it would
	// change a process the image no longer follows, write results into
	// memory already dumped, and its reply would reach the restored
	// thread. Default: served (model tests call as the process itself).
	virtual bool restarts_while_paused() const { return false; }
	// When the thread made the call (CLOCK_MONOTONIC ns, as
	// wire::Request::made_ns); 0: unknown.
	virtual uint64_t made_ns() const { return 0; }

	// Whether the caller's device cgroup denies the GPU with render minor
	// `minor`. A caller in a container (a mount namespace other than the
	// host's) may use the GPUs whose render node its /dev has with that
	// minor's numbers: runc puts the same nodes in both. Default: none.
	virtual bool container_denies(uint32_t /*minor*/) { return false; }
};

// Access to any client process's memory outside a call: SDMA engine threads
// copy to and from userptr BOs of the process that registered them, after
// the ioctl that submitted the job has returned. Implemented by the
// transport (process_vm_readv/writev); in-process tests use memcpy.
class ProcessMemory {
public:
	virtual ~ProcessMemory() = default;
	// 0 or -errno (-EFAULT: unmapped, -ESRCH: the process is gone).
	virtual int read(pid_t tgid, uint64_t addr, void *dst, size_t len) = 0;
	virtual int write(pid_t tgid, uint64_t addr, const void *src, size_t len) = 0;
	// The bounds [*start, *end) of the process's mapping (VMA) that holds
	// addr: false when there is none, or when this memory cannot tell.
	virtual bool vma_of(pid_t tgid, uint64_t addr, uint64_t *start, uint64_t *end)
	{
		(void)tgid, (void)addr, (void)start, (void)end;
		return false;
	}
};

// Where an mmap of an emulated fd lands: `fd` (model-owned) at `offset`;
// `dont_copy`: the kernel sets VM_DONTCOPY on the mapping (a fork's child
// does not inherit it), as KFD does for doorbell, MMIO and event pages.
struct MmapTarget {
	int fd = -1;
	uint64_t offset = 0;
	bool dont_copy = false;
};

// ---------------------------------------------------------------------------
// The model.
// ---------------------------------------------------------------------------

class Model {
public:
	virtual ~Model() = default;

	// open(2) of /dev/kfd or /dev/dri/renderD<minor>: creates the open file
	// (the model creates the backing memfd; the transport installs it in
	// the caller with Caller::install_fd(as_result=true)). Returns 0 or
	// -errno (ENODEV: no such minor, EPERM: 32-bit caller, ...).
	virtual int open_kfd(Caller &c, bool cloexec) = 0;
	virtual int open_render(Caller &c, uint32_t minor, bool cloexec) = 0;

	// Called when the last reference to an open file description is gone
	// (its release): frees its handles, VM, contexts as the kernel does.
	virtual void release(FileKey file) = 0;

	// Called when a client process exits (its KFD context goes away).
	virtual void process_exit(pid_t tgid) = 0;

	// CRIU is about to dump the process's daemon connections: its waits in
	// progress (WAIT_EVENTS) end now, as timed out, as the kernel's
	// interrupted waits would be restarted (see Op::Settle).
	virtual void interrupt_waits(pid_t tgid) = 0;

	// The client process unmapped [addr, addr + len) of its address space
	// (munmap, or mremap's old pages): its SVM ranges lose those pages, as
	// kfd_svm.c's MMU notifier removes them.
	virtual void svm_unmap(pid_t tgid, uint64_t addr, uint64_t len) = 0;

	// What an fd is, for the shim's fstat/readlink/lseek answers.
	virtual std::optional<FileInfo> describe(FileKey file) const = 0;

	// ioctl(2) on an emulated fd. 0 (or a non-negative result) or -errno.
	virtual long ioctl(Caller &c, FileKey file, unsigned long cmd,
			   uint64_t arg) = 0;

	// mmap(2) of an emulated fd at `offset` for `len` bytes.
	virtual int mmap(Caller &c, FileKey file, uint64_t offset, uint64_t len,
			 int prot, MmapTarget *out) = 0;

	// Test and benchmark support. `query` is one of the commands listed in
	// tests/emulator/README.md ("processes", "bos <pid>", "counters",
	// "queues <pid>", ...); the answer is JSON.
	virtual std::string introspect(std::string_view query) = 0;
	virtual void set_faults(std::vector<FaultRule> rules) = 0;
	// Where the emulator's root is: the model then keeps the sysfs files
	// the kernel updates at run time (/sys/class/kfd/kfd/proc/<pid>/...,
	// mem_info_vram_used) current there. Not called: nothing is written.
	virtual void set_sysfs_root(const std::string &root) { (void)root; }
};

// The model keeps `memory` for the life of the model. Thread-safe: the
// transport calls it from one thread per client connection; calls that block
// (WAIT_CS, WAIT_EVENTS) must not hold locks that other calls need.
std::unique_ptr<Model> make_model(const MachineDesc &machine,
				  std::shared_ptr<ProcessMemory> memory);

} // namespace kfdemu
