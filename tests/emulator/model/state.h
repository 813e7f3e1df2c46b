// SPDX-License-Identifier: GPL-2.0-only
//
// The device model's object graph. One ModelImpl per emulated machine:
//
//   Device      one GPU node: gpu_id, render minor, fake mmap offset space,
//               VRAM accounting, its SDMA engines.
//   Bo          one buffer object (GEM BO or KFD BO); memory is a Backing
//               (one sparse memfd, mapped once in this process) or, for
//               userptr BOs, the registering process's memory.
//   DrmFile     one open file description of a render node: GEM handles,
//               the VM, contexts with fence timelines, BO lists.
//   KfdProcess  the KFD context of one process: per-device data (Pdd),
//               KFD BOs, queues, events, CRIU pause/evict state.
//
// Locking: ModelImpl::mu_ guards the whole graph; every ioctl runs under it
// except the waiting part of WAIT_CS (waits on a Fence's own mutex) and
// WAIT_EVENTS (a condition variable on mu_, which releases it). SDMA engine
// threads never take mu_: a job carries the resolved Bo references it needs.
// mu_ is recursive so that a transport's Caller callbacks (resolve_fd, ...)
// may call describe() on the model while an ioctl is in progress.
#pragma once

#include "model/abi.h"
#include "model/interface.h"
#include "shader/dispatch.h"

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace kfdemu::detail {

constexpr uint64_t kPage = 4096;
// The ioctl chokepoint's argument buffer: larger than any argument struct
// (the SVM ioctl's attributes beyond it are copied by its handler).
constexpr size_t kArgBuf = 1024;
constexpr uint64_t page_align(uint64_t v) { return (v + kPage - 1) & ~(kPage - 1); }

// GPU virtual address layout (GFX9+, 48-bit VM).
constexpr uint64_t kVaReservedBottom = 0x10000;			// AMDGPU_VA_RESERVED_BOTTOM
constexpr uint64_t kVaReservedTop = (4ull << 20) + 2 * kPage;	// CSA + SEQ64 + trap
constexpr uint64_t kVmMaxPfnBytes = 1ull << 48;
constexpr uint64_t kVmSize = kVmMaxPfnBytes - kVaReservedTop;
constexpr uint64_t kHoleStart = 0x0000800000000000ull, kHoleEnd = 0xffff800000000000ull;
constexpr uint64_t kHoleMask = 0x0000ffffffffffffull;
constexpr uint64_t kFakeOffsetStart = 0x100000000ull;		// DRM_FILE_PAGE_OFFSET_START
constexpr uint64_t kGpuvmBase = kVaReservedBottom, kGpuvmLimit = 0x00007fffffffffffull;

// A fd owned by the model.
class Fd {
public:
	Fd() = default;
	explicit Fd(int fd) : fd_(fd) {}
	Fd(Fd &&o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
	Fd &operator=(Fd &&o) noexcept;
	Fd(const Fd &) = delete;
	Fd &operator=(const Fd &) = delete;
	~Fd();
	int get() const { return fd_; }
	explicit operator bool() const { return fd_ >= 0; }

private:
	int fd_ = -1;
};

// Sparse memory of one BO (or a doorbell/MMIO page): a memfd of exactly
// `size` bytes, mapped MAP_SHARED once in the model's address space. Its
// inode is the BO's dma-buf identity.
class Backing {
public:
	static std::shared_ptr<Backing> create(uint64_t size, const char *name, int *err);
	// Gives every page host memory now, mapped in data() (0, or -ENOMEM).
	int populate();
	~Backing();
	Backing(const Backing &) = delete;
	Backing &operator=(const Backing &) = delete;
	int fd() const { return fd_.get(); }
	uint8_t *data() const { return base_; }
	uint64_t size() const { return size_; }
	FileKey key() const { return key_; }

private:
	Backing() = default;
	Fd fd_;
	uint8_t *base_ = nullptr;
	uint64_t size_ = 0;
	FileKey key_;
};

// Per-process userptr bytes (current and peak), and those of the GEM
// userptr BOs (render nodes: the plugin's staging) of all processes
// together, shared with BOs so that a BO freed on an engine thread still
// updates it.
class UserptrLedger {
public:
	void add(pid_t tgid, uint64_t bytes, bool gem);
	void sub(pid_t tgid, uint64_t bytes, bool gem);
	std::pair<uint64_t, uint64_t> get(pid_t tgid) const; // current, peak
	std::pair<uint64_t, uint64_t> gem_all() const;	     // current, peak

private:
	mutable std::mutex mu_;
	std::map<pid_t, std::pair<uint64_t, uint64_t>> m_;
	std::pair<uint64_t, uint64_t> all_{0, 0};
};

struct Device;

// Who asks for a VRAM BO (eviction.cpp): the calling process (TTM never
// evicts its KFD BOs for it), whether KFD allocates it, and whether GTT is
// one of its domains too (GEM_CREATE with VRAM|GTT).
struct VramClient {
	pid_t current = 0;
	bool kfd = false;
	bool gtt_too = false;
};

enum class BoType { Vram, Gtt, Userptr, Doorbell, Mmio, Cpu };

// KFD's accounting against MemoryLimits' kfd_* (amdgpu_amdkfd_reserve_mem_limit),
// machine-wide: its GTT BOs count as system and TTM memory, its userptr BOs
// as system memory. A BO gives its share back when it dies (on any thread).
class KfdMemLimit {
public:
	explicit KfdMemLimit(const MemoryLimits &l) : max_system_(l.kfd_system_limit), max_ttm_(l.kfd_ttm_limit) {}
	bool reserve(uint64_t system, uint64_t ttm);	// false: past a limit
	void unreserve(uint64_t system, uint64_t ttm);

private:
	std::mutex mu_;
	const uint64_t max_system_, max_ttm_;
	uint64_t system_used_ = 0, ttm_used_ = 0;
};

struct Bo {
	Bo() = default;
	Bo(const Bo &) = delete;
	Bo &operator=(const Bo &) = delete;
	~Bo();

	Device *dev = nullptr;
	BoType type = BoType::Gtt;
	uint64_t size = 0;
	// GEM creation info (GEM_OP GET_GEM_CREATE_INFO, GEM_LIST_HANDLES).
	uint64_t alignment = 0, domains = 0, domain_flags = 0;
	std::shared_ptr<Backing> mem;	// null for userptr
	pid_t userptr_tgid = 0;
	uint64_t userptr_addr = 0;
	uint32_t userptr_flags = 0;
	bool userptr_gem = false;	// a render node's GEM_USERPTR (not KFD's)
	std::shared_ptr<UserptrLedger> ledger;
	uint64_t fake_offset = 0;	// render-node mmap offset on dev
	std::shared_ptr<Bo> import_of;	// dma-buf import of another device's BO
	// VRAM accounting (VRAM BOs): the device's residency counter, which
	// counts this BO while in_vram, and KFD's own allocation counter
	// (KFD BOs, wherever they are).
	std::shared_ptr<std::atomic<uint64_t>> vram_used, kfd_vram_used;
	// Where a VRAM BO's pages are (eviction.cpp): in VRAM, or moved to GTT
	// by an eviction (contents kept). `lru` is its key in the device's
	// vram_lru while in VRAM.
	std::atomic<bool> in_vram{false};
	// GTT accounting (eviction.cpp): the device's GTT manager counter,
	// which counts this BO while in_gtt (a GTT BO, a VRAM BO placed in or
	// evicted to GTT); KFD's limit and this BO's share of it.
	std::shared_ptr<std::atomic<uint64_t>> gtt_used;
	std::atomic<bool> in_gtt{false};
	std::shared_ptr<KfdMemLimit> kfd_limit;
	uint64_t kfd_system = 0, kfd_ttm = 0;
	uint64_t lru = 0;
	uint32_t evictions = 0;		// times moved out of VRAM
	std::atomic<int> busy{0};	// unfinished SDMA jobs using this BO
	// GEM metadata (amdgpu_bo_set_metadata): exactly the bytes the client
	// set, at most 256; the tiling flags are kept apart.
	uint64_t md_flags = 0, md_tiling = 0;
	std::vector<uint8_t> md_data;
	// KFD side (BOs allocated through /dev/kfd)
	bool kfd = false;
	uint32_t kfd_flags = 0, kfd_id = 0;
	uint64_t va = 0;
	pid_t kfd_tgid = 0;		// the process whose KFD BO this is

	bool is_userptr() const { return type == BoType::Userptr; }
	// The BO whose identity a dma-buf of this BO carries.
	const Bo *exporter() const { return import_of ? import_of.get() : this; }
};

// One GPU VA mapping in a VM.
struct Mapping {
	uint64_t start = 0, size = 0, offset = 0;
	uint32_t flags = 0;
	std::shared_ptr<Bo> bo;
	bool kfd = false; // made by KFD MAP_MEMORY_TO_GPU
};

class Vm {
public:
	bool overlaps(uint64_t start, uint64_t size) const;
	int insert(Mapping m); // -EINVAL on overlap
	const Mapping *find(uint64_t va) const;
	// Removes the mapping of `bo` that starts at `start`; false if none.
	bool remove(const Bo *bo, uint64_t start);
	// Removes [start, start+size) from every mapping, splitting as needed.
	void clear(uint64_t start, uint64_t size);
	void remove_bo(const Bo *bo);
	void remove_gem_mappings(const Bo *bo); // keeps KFD mappings
	std::vector<Mapping> of_bo(const Bo *bo) const;
	const std::map<uint64_t, Mapping> &all() const { return maps_; }

private:
	void add(Mapping m);
	std::map<uint64_t, Mapping>::iterator erase(std::map<uint64_t, Mapping>::iterator it);

	std::map<uint64_t, Mapping> maps_; // keyed by start
	// The starts of each BO's mappings: closing or freeing one BO does not
	// walk the whole VM (the kernel keeps a BO's mappings per VM too).
	std::unordered_map<const Bo *, std::set<uint64_t>> by_bo_;
};

// A fence: completion of one submitted job.
struct Fence {
	std::mutex mu;
	std::condition_variable cv;
	bool done = false;
	int error = 0; // negative errno of a failed job
	void signal(int err);
};

struct Entity {
	uint64_t next_seq = 1;
	std::map<uint64_t, std::shared_ptr<Fence>> fences; // recent window
};

struct Ctx {
	int32_t priority = 0;
	// The stable pstate when it was created, set again when it is freed
	// (amdgpu_ctx_init/fini).
	uint32_t stable_pstate = 0;
	// Set when one of its jobs timed out (the GPU reset blames it): later
	// submissions on the context fail with ECANCELED.
	std::shared_ptr<std::atomic<bool>> guilty = std::make_shared<std::atomic<bool>>(false);
	// (ip_type, ip_instance, ring) -> timeline
	std::map<std::tuple<uint32_t, uint32_t, uint32_t>, Entity> entities;
};

struct DrmFile {
	Device *dev = nullptr;
	FileKey key;
	Fd memfd;
	pid_t opener = 0;
	Vm vm;
	bool compute_vm = false;
	pid_t kfd_owner = 0;
	std::map<uint32_t, Ctx> ctxs;
	std::map<uint32_t, std::vector<std::shared_ptr<Bo>>> bo_lists;
	// KFD BOs of the process that acquired this file: mmap-able through it.
	std::map<uint64_t, std::weak_ptr<Bo>> kfd_mmap;

	const std::map<uint32_t, std::shared_ptr<Bo>> &handles() const { return handles_; }
	uint32_t handle_of(const Bo *bo) const; // the lowest, 0 if none
	// The lowest handle this file holds for a BO exported by `exporter`
	// (the PRIME import cache), 0 if none.
	uint32_t handle_of_export(const Bo *exporter) const;
	uint32_t lowest_free_handle() const;
	void add_handle(uint32_t h, std::shared_ptr<Bo> bo);
	std::shared_ptr<Bo> take_handle(uint32_t h); // null if none

private:
	std::map<uint32_t, std::shared_ptr<Bo>> handles_;
	// Indexes of handles_ (a dump of thousands of BOs must not cost O(n)
	// per ioctl where the kernel's idr and PRIME cache do not): handles
	// by BO and by exporter, and a handle below which every one is taken.
	std::unordered_map<const Bo *, std::set<uint32_t>> by_bo_, by_exporter_;
	uint32_t taken_below_ = 1;
};

// ---- SDMA -------------------------------------------------------------------

// A resolved piece of GPU memory: `len` bytes at `off` in bo.
struct Segment {
	std::shared_ptr<Bo> bo;
	uint64_t off = 0, len = 0;
};

struct SdmaOp {
	// Poll: wait until (the dword at dst & mask) <func> (fill & mask)
	// holds (a CP WAIT_REG_MEM on memory), re-read until then.
	enum class Kind { Copy, Fill, Write, Poll } kind = Kind::Copy;
	std::vector<Segment> src, dst;
	uint32_t fill = 0;
	uint32_t mask = 0, func = 0; // Poll
	std::vector<uint8_t> data;
	uint64_t bytes = 0;
};

struct Counters;

struct SdmaJob {
	std::vector<SdmaOp> ops;
	int error_after_ops = 0;	// job fails after executing ops
	bool hang = false;
	std::shared_ptr<Fence> fence;
	uint32_t gpu_id = 0;
	std::vector<std::shared_ptr<Bo>> busy; // Bo::busy raised until the job ends
	std::shared_ptr<std::atomic<bool>> guilty; // the context's flag
};

class SdmaEngine {
public:
	SdmaEngine(double gbps, std::shared_ptr<ProcessMemory> pm, std::shared_ptr<Counters> counters);
	~SdmaEngine();
	SdmaEngine(const SdmaEngine &) = delete;
	SdmaEngine &operator=(const SdmaEngine &) = delete;
	void submit(SdmaJob job);
	void drain(); // wait until the queue is empty (tests, teardown)
	// Executes `job` on the calling thread (a KFD user queue's ring walker,
	// user_queue.cpp), sharing this engine's bandwidth model. Returns 0 or
	// the job's -errno; counts bytes, not jobs.
	int execute_now(const SdmaJob &job);

private:
	void run(std::stop_token st);
	int execute(const SdmaJob &job, std::stop_token &st);
	int poll(const SdmaJob &job, const SdmaOp &op, std::stop_token &st);
	int copy_piece(const Segment &s, const Segment &d, uint64_t n, std::vector<uint8_t> &bounce);
	void throttle(uint64_t bytes);

	double bytes_per_ns_;
	std::shared_ptr<ProcessMemory> pm_;
	std::shared_ptr<Counters> counters_;
	std::mutex mu_;
	std::condition_variable_any cv_;
	std::condition_variable idle_cv_;
	std::deque<SdmaJob> q_;
	bool busy_ = false;
	std::mutex bw_mu_; // the bandwidth window, shared by the thread and execute_now
	std::chrono::steady_clock::time_point bw_start_{};
	uint64_t bw_bytes_ = 0;
	std::jthread thread_;
};

struct Counters {
	std::atomic<uint64_t> sdma_jobs{0}, sdma_failed{0}, sdma_bytes{0}, vm_faults{0};
	std::atomic<uint64_t> stalls{0}; // calls a `stall` fault has held (begun)
	// VRAM eviction (eviction.cpp; a GPU's own counts are in Device): BOs
	// moved back by a KFD restore, processes whose queues an eviction
	// stopped and later restored, GEM VRAM BOs created in GTT.
	std::atomic<uint64_t> bo_restores{0}, process_evictions{0}, process_restores{0}, gem_gtt_fallbacks{0};
	std::mutex mu;
	std::vector<std::string> faults; // JSON objects, most recent last (bounded)
	void vm_fault(uint32_t gpu_id, uint64_t va, const char *why);
};

// The hardware priorities a compute queue's MQD gets from its KFD
// queue_priority (0-15): cp_hqd_queue_priority is the priority itself,
// cp_hqd_pipe_priority amdkfd's pipe_priority_map (kfd_mqd_manager.c):
// CS_LOW (0) for 0-6, CS_MEDIUM (1) for 7-10, CS_HIGH (2) for 11-15.
constexpr uint32_t pipe_priority(uint32_t queue_priority)
{
	return queue_priority >= 11 ? 2 : queue_priority >= 7 ? 1 : 0;
}

struct Device {
	const NodeDesc *node = nullptr;
	uint32_t gpu_id = 0;
	uint32_t minor = 0;
	uint32_t family = 141;
	uint64_t vram_size = 0;
	uint32_t topology_index = 0;
	// Bytes of VRAM BOs resident in VRAM (what mem_info_vram_used shows),
	// and of KFD VRAM BOs wherever they are (KFD's limit, AVAILABLE_MEMORY).
	std::shared_ptr<std::atomic<uint64_t>> vram_used = std::make_shared<std::atomic<uint64_t>>(0);
	std::shared_ptr<std::atomic<uint64_t>> kfd_vram_used = std::make_shared<std::atomic<uint64_t>>(0);
	// The context whose SET_STABLE_PSTATE holds the GPU's performance
	// level (adev->pm.stable_pstate_ctx): its file and id.
	std::optional<std::pair<FileKey, uint32_t>> pstate_ctx;
	// The forced performance level without a sysfs root (in-process
	// tests); with one, its power_dpm_force_performance_level file.
	std::string dpm_level = "auto";
	// The GTT manager: its size (MemoryLimits::gtt_size) and the bytes of
	// the BOs in GTT (mem_info_gtt_used, INFO_GTT_USAGE).
	uint64_t gtt_size = 0;
	std::shared_ptr<std::atomic<uint64_t>> gtt_used = std::make_shared<std::atomic<uint64_t>>(0);
	// The BOs resident in VRAM, least recently placed first (TTM's LRU:
	// placement is the only use the model tracks).
	std::map<uint64_t, std::weak_ptr<Bo>> vram_lru;
	uint64_t next_lru = 1;
	// INFO_NUM_EVICTIONS and INFO_NUM_BYTES_MOVED (adev->num_evictions,
	// num_bytes_moved): BOs evicted from VRAM, bytes moved either way.
	uint64_t num_evictions = 0, bytes_moved = 0;
	uint64_t next_fake_offset = kFakeOffsetStart;
	std::map<uint64_t, std::weak_ptr<Bo>> by_offset;
	std::shared_ptr<Backing> mmio;	// the MMIO remap page
	// Dispatch slices the GPU's AQL queues have run (under the model
	// lock): the clock of aql_queue.cpp's priority arbitration.
	uint64_t aql_slices = 0;
	std::vector<std::unique_ptr<SdmaEngine>> engines;
	// The COMPUTE rings CS submits to (kComputeRings, HW_IP_INFO's
	// available_rings): in-order job runners of their own
	// (the engine's job runner, unthrottled), one per ring.
	std::vector<std::unique_ptr<SdmaEngine>> compute_rings;

	uint64_t alloc_fake_offset(const std::shared_ptr<Bo> &bo);
	std::shared_ptr<Bo> bo_at_offset(uint64_t off);
	uint64_t doorbell_slice() const { return family >= abi::sdma::kFamilyAi ? 2 * kPage : kPage; }
};

// ---- KFD --------------------------------------------------------------------

struct Pdd {
	Device *dev = nullptr;
	uint32_t user_gpu_id = 0;
	std::shared_ptr<DrmFile> drm;
	std::map<uint32_t, std::shared_ptr<Bo>> bos; // KFD id -> BO
	std::shared_ptr<Backing> doorbells;
	uint64_t scratch_va = 0, tba = 0, tma = 0;
	uint32_t default_policy = 0, alt_policy = 0;
	uint64_t alt_base = 0, alt_size = 0;
};

// A kernel dispatch an AQL queue's packet processor has started and not
// finished (aql_queue.cpp): the shader core's state of its waves and the
// packet it came from, kept while the queue is evicted. A CRIU pause saves
// it into the queue's control stack and CWSR area instead (and drops it);
// when that cannot be done it stays here, `unsaved` saying why.
struct AqlInFlight {
	std::unique_ptr<shader::Dispatch> dispatch;
	std::array<uint8_t, 64> packet{};
	uint64_t packet_va = 0;
	std::string unsaved;
};

// The engine behind one KFD SDMA user queue (user_queue.cpp): a thread
// that notices doorbell writes and walks the ring. Destroying it stops and
// joins the thread (it never blocks while holding the model lock).
struct UserQueueEngine {
	pid_t tgid = 0;
	uint32_t qid = 0;
	size_t engine = 0;		// index into the device's SDMA engines
	// Only the walker thread changes these (under the model lock; another
	// AQL queue's walker reads them there, aql_has_dispatch):
	std::shared_ptr<Backing> doorbells;	// the page its doorbell lives in
	uint64_t doorbell_off = 0;
	bool started = false;		// rptr known (new queue: 0; restored: loaded from read_pointer_address)
	uint64_t rptr = 0;		// the engine's read pointer (SDMA: bytes, CP: dwords; monotonic)
	bool cp = false;		// a CP (PM4 compute) queue, not SDMA
	bool aql = false;		// an AQL queue's packet processor (aql_queue.cpp; rptr: packets)
	// AQL only: the amd_queue_t the read index lives in (0: none found),
	// the GPU clock when the packet at rptr was picked up (0: not yet; a
	// completion signal's start_ts), and the dispatch in flight, run
	// slice by slice with the model lock released in between.
	uint64_t amd_queue = 0, picked_at = 0;
	// A new AQL queue runs only once rung (its pointers may not be set up
	// before, as the CP reads none of them until a doorbell); a restored
	// one looks once at its write index (the CP's MQD holds the write
	// pointer it was dumped with), a look that reads nothing if the index
	// is not readable.
	bool wait_for_doorbell = false, restored_look = false;
	std::unique_ptr<AqlInFlight> in_flight;
	// Priority arbitration (aql_yields): waiting for a queue of higher
	// priority since its GPU's aql_slices was `yield_mark`.
	bool yielding = false;
	uint64_t yield_mark = 0;
	std::atomic<uint64_t> instructions{0};	// wave-instructions its dispatches ran
	// CWSR: saved waves resumed so far, and at the last resume the waves
	// and the grid's workgroups (done, all) the control stack held.
	uint32_t cwsr_resumes = 0, cwsr_waves = 0;
	uint64_t cwsr_groups_done = 0, cwsr_groups = 0;
	// Introspection (read under the model lock or atomically):
	std::atomic<uint64_t> packets{0};
	std::atomic<bool> hung{false};	// stopped on a bad packet or fault
	std::string why;		// why it stopped (under the model lock)
	std::jthread thread;		// last: stopped and joined first
};

struct Queue {
	uint32_t id = 0;
	uint32_t user_gpu_id = 0;
	// The CREATE_QUEUE arguments; UPDATE_QUEUE replaces the ring, its
	// size, the percentage and the priority.
	abi::kfd::CreateQueue args{};
	// SET_CU_MASK: the mask as the client gave it, 32 CUs per word (at
	// most MAX_CU_MASK_BITS); empty until one is set.
	std::vector<uint32_t> cu_mask;
	// ALLOC_QUEUE_GWS: this queue holds its GPU's global wave sync
	// (at most one queue per process and GPU).
	bool gws = false;
	// A compute queue's control stack, as the compute MQD holds it
	// (kfd_mqd_manager_v9.c init_mqd: with CWSR, which every emulated GPU
	// enables, and a CWSR area, cp_hqd_cntl_stack_size is CREATE_QUEUE's
	// ctl_stack_size, else 0; the stack lives after the MQD, one per XCC).
	// The CP writes wave state into it when it saves a queue's context: an
	// AQL queue's dispatch at a CRIU pause (aql_cwsr_save), its used part
	// [offset, size) of XCC 0's stack, the waves' registers and LDS in the
	// CWSR area from `size` to `wg_state_offset`. Nothing saved: both
	// offsets at `size`.
	struct ControlStack {
		uint32_t size = 0;		// per XCC (cp_hqd_cntl_stack_size)
		uint32_t offset = 0;		// cp_hqd_cntl_stack_offset
		uint32_t wg_state_offset = 0;	// cp_hqd_wg_state_offset
		// size x XCCs bytes as a CRIU RESTORE brought them; empty: zeros,
		// as allocated (nothing has written them).
		std::vector<uint8_t> bytes;
	} ctl_stack;
	std::shared_ptr<UserQueueEngine> engine; // SDMA queues on family >= AI

	// KFD_QUEUE_TYPE_COMPUTE: a PM4 or an AQL compute queue, not SDMA.
	bool compute() const
	{
		return args.queue_type == abi::kfd::QUEUE_COMPUTE || args.queue_type == abi::kfd::QUEUE_COMPUTE_AQL;
	}
	// QUEUE_IS_ACTIVE of the kernel's queue properties, eviction aside: a
	// ring (address and size) and a non-zero percentage. An inactive
	// queue keeps its state and runs nothing until an UPDATE_QUEUE gives
	// it a ring again.
	bool active() const
	{
		return args.ring_base_address != 0 && args.ring_size != 0 && (args.queue_percentage & 0xff) != 0;
	}
};

// CREATE_QUEUE's argument checks (kfd_queue.cpp): 0 or -errno; raises a
// ring size under the minimum.
long queue_properties_from_user(abi::kfd::CreateQueue &a);
// Linux 6.12's size checks of a compute queue's buffers against its GPU
// node (kfd_queue_acquire_buffers; kfd_queue.cpp): 0 or -EINVAL, with
// *why saying which size differs from which.
long queue_sizes_against_node(const abi::kfd::CreateQueue &a, const NodeDesc &n, std::string *why);

struct Event {
	uint32_t id = 0, type = 0, node_id = 0;
	bool auto_reset = false, signaled = false;
	// kfd_events.c set_event: every thread waiting at the time is woken
	// (its waiter activated: `age` moves on); an auto-reset event stays
	// signaled only when nobody was waiting.
	uint32_t waiters = 0;
	uint64_t age = 0;
	void set()
	{
		signaled = !auto_reset || waiters == 0;
		++age;
	}
	// MEMORY and HW_EXCEPTION events: the kfd_event_data union
	// (memory_exception_data / hw_exception_data) WAIT_EVENTS copies out.
	std::array<uint8_t, 32> exception{};
};

// VRAM an SVM range holds on one GPU (svm.cpp): added to the device's
// accounting when made, taken off when released or destroyed; split() moves
// part of it to a new charge (a range split in two keeps the total).
class VramCharge {
public:
	VramCharge() = default;
	VramCharge(Device &d, uint64_t bytes);
	VramCharge(VramCharge &&o) noexcept;
	VramCharge &operator=(VramCharge &&o) noexcept;
	VramCharge(const VramCharge &) = delete;
	VramCharge &operator=(const VramCharge &) = delete;
	~VramCharge() { release(); }
	VramCharge split(uint64_t bytes);
	void release();
	Device *device() const { return bytes_ ? dev_ : nullptr; }

private:
	Device *dev_ = nullptr; // for its gpu_id only; the accounting is used_ and kfd_
	// The device's residency counter and KFD's allocation counter (an SVM
	// range in VRAM counts against KFD's limit, as kfd_svm.c reserves it).
	std::shared_ptr<std::atomic<uint64_t>> used_, kfd_;
	uint64_t bytes_ = 0;
};

// An SVM range (kfd_svm.c's svm_range): pages [start, last], its
// attributes, which GPUs (pdd indices) may access it (in place), on which
// GPUs' page tables it is mapped (`mapped`, bit i: pdds[i]), and where it
// is: system memory, or the VRAM `vram` charges (a migration to a GPU).
struct SvmRange {
	uint64_t start = 0, last = 0;
	uint32_t preferred_loc = abi::kfd::SVM_LOCATION_UNDEFINED;
	uint32_t prefetch_loc = abi::kfd::SVM_LOCATION_UNDEFINED;
	uint32_t flags = abi::kfd::SVM_FLAG_HOST_ACCESS | abi::kfd::SVM_FLAG_COHERENT;
	uint32_t granularity = 9;
	uint64_t access = 0, aip = 0; // bit i: pdds[i]
	uint64_t mapped = 0;
	VramCharge vram;
	uint64_t npages() const { return last - start + 1; }
};

// An SVM range a CRIU RESTORE read, set again at RESUME (KFD's
// criu_svm_metadata): start and size in pages, the attributes GET_ATTR gave
// at CHECKPOINT.
struct SvmSaved {
	uint64_t start = 0, npages = 0;
	std::vector<abi::kfd::SvmAttribute> attrs;
};

struct KfdProcess {
	pid_t tgid = 0;
	std::vector<Pdd> pdds;	// one per GPU, machine order
	std::map<uint32_t, Queue> queues;
	std::map<uint32_t, Event> events;
	std::shared_ptr<Bo> event_page;	// the user-supplied signal page BO
	std::shared_ptr<Backing> event_mem; // signal page when none supplied
	uint64_t event_page_handle = 0;
	int32_t xnack = 0;
	bool queues_paused = false;	// CRIU PROCESS_INFO .. UNPAUSE
	uint64_t paused_at_ns = 0;	// the last PROCESS_INFO (CLOCK_MONOTONIC ns)
	// Whether a call made at `made_ns` (0: unknown) was made before the
	// last PROCESS_INFO: its thread was frozen with it open.
	bool made_before_pause(uint64_t made_ns) const { return made_ns && made_ns < paused_at_ns; }
	uint64_t wait_interrupts = 0;	// interrupt_waits() calls: a wait ends on a change
	bool evicted = false;		// CRIU RESTORE .. RESUME
	// Queue eviction count (qpd->evicted): PROCESS_INFO and RESTORE evict,
	// UNPAUSE and RESUME restore; queues run only at 0. A second
	// PROCESS_INFO before UNPAUSE therefore leaves them evicted, as in KFD.
	int evict_count = 0;
	bool restored = false;
	// A memory eviction (eviction.cpp): one of its VRAM BOs was moved to
	// GTT, its queues evicted (one count of evict_count) until the restore
	// worker, at restore_at or later, has every VRAM BO back in VRAM.
	bool mem_evicted = false;
	std::chrono::steady_clock::time_point restore_at{};
	uint64_t mem_evictions = 0, mem_restores = 0;
	// Which BO is mapped on which pdd (index into pdds).
	std::map<const Bo *, std::set<size_t>> mapped_on;
	uint64_t event_generation = 0;
	uint32_t pasid = 0;
	std::map<uint64_t, SvmRange> svm;	// by start page; never overlapping
	std::vector<SvmSaved> svm_restored;	// RESTORE .. RESUME
	// The process's address space as its GPUs reach SVM ranges through
	// their page tables: a userptr-like BO of the whole user address
	// space at address 0 (svm.cpp), made at the first such access.
	std::shared_ptr<Bo> svm_memory;
	// SMI_EVENTS fds: the client's end (kept until the transport has sent
	// it) and the other end of each socket pair, with the GPU it listens
	// to and the event mask the client last wrote.
	struct SmiClient {
		Fd peer;
		uint32_t gpu_id = 0; // actual
		uint64_t events = 0;
		bool suser = false; // may take every process's events
	};
	std::vector<Fd> smi_clients;
	std::vector<SmiClient> smi_peers;

	// The queue of this process that holds the GWS of GPU `user_gpu_id`
	// (the kernel's qpd.num_gws != 0), or null.
	const Queue *gws_queue(uint32_t user_gpu_id) const;

	Pdd *pdd_by_user_id(uint32_t user_gpu_id);
	Pdd *pdd_by_actual_id(uint32_t gpu_id);
	size_t index_of(const Pdd *p) const { return static_cast<size_t>(p - pdds.data()); }
};

// ---- the model ----------------------------------------------------------------

// ---- ioctl tables ------------------------------------------------------------

// One ioctl of an emulated driver, as amdkfd's amdkfd_ioctls[] and DRM's
// drm_ioctls[] / amdgpu_ioctls_kms[] describe theirs: its name (also its
// counter and fault-target name; null for numbers the model has no name
// for), the kernel's own copy directions, flags, and its handler, a member
// of the driver's Ops (KfdOps in kfd.cpp, DrmOps in render.cpp). An entry
// without a handler is an ioctl the driver has but the model does not
// emulate: -EINVAL, as the kernel's "no function".
template <typename Ops> struct IoctlDesc {
	const char *name = nullptr;
	unsigned dir = abi::kIocRead | abi::kIocWrite;
	unsigned flags = 0;
	long (Ops::*handler)() = nullptr;
};
// KFD_IOC_FLAG_CHECKPOINT_RESTORE: needs CAP_CHECKPOINT_RESTORE and may be
// called by the target's tracer.
inline constexpr unsigned kIoctlCheckpointRestore = 1;
// DRM_RENDER_ALLOW: a render node accepts it (the others: -EACCES).
inline constexpr unsigned kIoctlRenderAllow = 2;
// DRM_MASTER: only the DRM master may call it, which a render node's
// client never is (-EACCES).
inline constexpr unsigned kIoctlMaster = 4;
// A successful call changes what the model publishes in sysfs.
inline constexpr unsigned kIoctlPublishes = 8;

// The amdgpu COMPUTE rings of each GPU (HW_IP_INFO available_rings 0xf).
inline constexpr uint32_t kComputeRings = 4;

struct KfdOps;
struct DrmOps;
// A CP packet source (cp_queue.cpp): the ring (wrapping) or an IB (linear),
// read through the process's VM.
struct CpStream {
	uint64_t base;	 // GPU VA
	uint64_t dwords; // ring: ring dwords (a power of two); IB: its length
	bool ring;
	uint64_t offset(uint64_t index) const { return ring ? (index & (dwords - 1)) * 4 : index * 4; }
};
struct PrivBo; // a BO's record in the emulator's CRIU private data (criu.cpp)
using KfdIoctlDesc = IoctlDesc<KfdOps>;
using DrmIoctlDesc = IoctlDesc<DrmOps>;
// The entry of ioctl number `nr`; null when the driver has none (KFD:
// -ENOTTY; DRM: -EINVAL).
const KfdIoctlDesc *kfd_ioctl_desc(unsigned nr);
const DrmIoctlDesc *drm_ioctl_desc(unsigned nr);

struct FileEntry {
	FileKind kind = FileKind::Kfd;
	pid_t kfd_owner = 0;		// Kfd
	Fd memfd;			// Kfd
	std::shared_ptr<DrmFile> drm;	// Render
};

class ModelImpl final : public Model {
public:
	ModelImpl(const MachineDesc &machine, std::shared_ptr<ProcessMemory> memory);
	~ModelImpl() override;

	int open_kfd(Caller &c, bool cloexec) override;
	int open_render(Caller &c, uint32_t minor, bool cloexec) override;
	void release(FileKey file) override;
	void process_exit(pid_t tgid) override;
	void interrupt_waits(pid_t tgid) override;
	void svm_unmap(pid_t tgid, uint64_t addr, uint64_t len) override;
	std::optional<FileInfo> describe(FileKey file) const override;
	long ioctl(Caller &c, FileKey file, unsigned long cmd, uint64_t arg) override;
	int mmap(Caller &c, FileKey file, uint64_t offset, uint64_t len, int prot,
		 MmapTarget *out) override;
	std::string introspect(std::string_view query) override;
	void set_faults(std::vector<FaultRule> rules) override;
	void set_sysfs_root(const std::string &root) override;

	// Used by the KFD / render halves (mu_ held).
	using Lock = std::unique_lock<std::recursive_mutex>;

private:
	int do_open_kfd(Caller &c, bool cloexec);
	int do_open_render(Caller &c, uint32_t minor, bool cloexec);
	long do_ioctl(Caller &c, FileKey file, unsigned long cmd, uint64_t arg);
	int do_mmap(Caller &c, FileKey file, uint64_t offset, uint64_t len, int prot, MmapTarget *out);
	std::string do_introspect(std::string_view query);

	friend struct KfdOps;
	friend struct DrmOps;
	friend struct Introspection;

	// fault injection: -errno if the call must fail
	// 0, or the -errno a fault rule gives call `name`; *action (when not
	// null) the matching rule's action (Fail when none matched).
	int check_fault(const std::string &name, FaultRule::Action *action = nullptr);
	// check_fault for caller `c`'s ioctl `name`, a stall carried out:
	// `lk` released until `c` has ended (-EINTR, nothing done). A
	// StallAfter rule sets *after and returns 0: the caller makes the
	// call, then stall_after().
	int ioctl_fault(Lock &lk, Caller &c, const std::string &name, bool *after);
	// After a call that returned `r` under a StallAfter rule: `lk`
	// released until `c` has ended (-EINTR), at most kStallLimitMs (`r`).
	long stall_after(Lock &lk, Caller &c, long r);
	int check_fault_sdma(bool *hang);
	void count(const std::string &name);
	// Whether caller `c`'s call (not a CRIU_OP) is to be restarted: its own
	// process is paused by CRIU or was paused after the call was made
	// (Caller::restarts_while_paused). Counted as "restarted_while_paused".
	bool restart_while_paused(Caller &c, bool criu_op);

	// KFD (kfd.cpp)
	// Runs entry `d`'s handler (kfd_ioctl's call through the table).
	long kfd_ioctl(Lock &lk, Caller &c, FileEntry &f, const KfdIoctlDesc &d, void *buf, uint64_t uarg, size_t usize);
	KfdProcess &kfd_context(Caller &c);
	int kfd_mmap(Caller &c, uint64_t offset, uint64_t len, MmapTarget *out);
	void destroy_process(KfdProcess &p);
	int bind_drm(KfdProcess &p, Pdd &pdd, const std::shared_ptr<DrmFile> &drm);
	void free_kfd_bo(KfdProcess &p, Pdd &pdd, uint32_t id);
	int kfd_map_one(KfdProcess &p, Pdd &owner, const std::shared_ptr<Bo> &bo, Pdd &peer);
	int kfd_unmap_one(KfdProcess &p, const std::shared_ptr<Bo> &bo, Pdd &peer);
	long criu_op(Caller &c, FileEntry &f, abi::kfd::CriuArgs &a);
	long criu_process_info(Caller &c, KfdProcess &p, abi::kfd::CriuArgs &a);
	long criu_checkpoint(Caller &c, KfdProcess &p, abi::kfd::CriuArgs &a);
	// criu_checkpoint's records: each BO's bucket and private record (the
	// positions of the BOs whose dma-bufs it exports: `exports`); each
	// queue's, event's and SVM range's private record (-errno on failure).
	void criu_checkpoint_bos(KfdProcess &p, std::vector<uint8_t> &priv, std::vector<abi::kfd::CriuBoBucket> &bos,
				 std::vector<std::pair<size_t, std::shared_ptr<Bo>>> &exports);
	int criu_checkpoint_objects(KfdProcess &p, std::vector<uint8_t> &priv);
	long criu_restore(Caller &c, KfdProcess &p, abi::kfd::CriuArgs &a);
	int criu_restore_devices(Caller &c, KfdProcess &p, const abi::kfd::CriuArgs &a,
				 const std::vector<uint8_t> &priv, size_t &pos);
	int criu_restore_bo(KfdProcess &p, abi::kfd::CriuBoBucket &b, const PrivBo &pb, std::shared_ptr<Bo> *out);
	int criu_restore_objects(KfdProcess &p, uint32_t num_objects, const std::vector<uint8_t> &priv, size_t &pos);
	uint64_t criu_priv_size(const KfdProcess &p) const;
	uint32_t criu_num_bos(const KfdProcess &p) const;
	long wait_events(Lock &lk, Caller &c, KfdProcess &p, abi::kfd::WaitEvents &a);
	// Handlers in files of their own, which KfdOps calls: the queue state
	// (kfd_queue.cpp), the dma-buf query (kfd.cpp).
	long kfd_update_queue(KfdProcess &p, abi::kfd::UpdateQueue &a);
	long kfd_set_cu_mask(Caller &c, KfdProcess &p, const abi::kfd::SetCuMask &a);
	long kfd_alloc_queue_gws(KfdProcess &p, abi::kfd::AllocQueueGws &a);
	long kfd_get_queue_wave_state(Caller &c, KfdProcess &p, abi::kfd::GetQueueWaveState &a);
	long kfd_get_dmabuf_info(Caller &c, KfdProcess &p, abi::kfd::GetDmabufInfo &a);
	// SVM (svm.cpp): the ioctl (its attributes follow the args at uarg,
	// `usize` bytes in all per the caller's cmd; the first ones also in
	// buf, which the chokepoint copies back), SET_ATTR/GET_ATTR on pages,
	// and CRIU's part: saved ranges set again at RESUME.
	long kfd_svm(Caller &c, KfdProcess &p, void *buf, uint64_t uarg, size_t usize);
	int svm_set_attr(KfdProcess &p, uint64_t start, uint64_t npages, const std::vector<abi::kfd::SvmAttribute> &attrs);
	// (check_memory false: CRIU's CHECKPOINT of the process's own ranges)
	int svm_get_attr(KfdProcess &p, uint64_t start, uint64_t npages, std::vector<abi::kfd::SvmAttribute> &attrs,
			 bool check_memory = true);
	int svm_criu_resume(KfdProcess &p);
	// Whether pages [start, last] overlap an SVM range of p (ALLOC_MEMORY_OF_GPU's EADDRINUSE).
	static bool svm_overlaps(const KfdProcess &p, uint64_t start, uint64_t last);
	// A GPU access at `va` through f's VM that no BO mapping covers: the
	// SVM range there as the GPU's page table maps it (with XNACK on, the
	// fault recovered as svm_range_restore_pages does). 0 with *seg the
	// bytes up to the range's end (at most `len`), or -EFAULT (a VM fault,
	// recorded).
	int svm_gpu_access(DrmFile &f, uint64_t va, uint64_t len, bool write, Segment *seg);
	// svm_range_unmap_from_cpu: pages [start, last] of p unmapped by it.
	void svm_unmap_pages(KfdProcess &p, uint64_t start, uint64_t last);
	// Moves range `r` of p to system memory or to `to`'s VRAM, as
	// svm_migrate_to_vram/svm_migrate_vram_to_ram with their SMI events:
	// 0 or -ENOMEM.
	int svm_migrate(KfdProcess &p, SvmRange &r, Device *to, uint32_t trigger);
	// TTM's eviction of SVM ranges in `d`'s VRAM (not those of process
	// `current`) until at least `need` bytes are freed: each range
	// migrates to system memory. Returns the bytes freed.
	uint64_t svm_evict_vram(Device &d, uint64_t need, pid_t current);
	// The VRAM bytes svm_evict_vram could free.
	uint64_t svm_evictable(const Device &d, pid_t current) const;
	// XNACK's fault path: a range for unregistered memory at `page` (null:
	// not the process's memory), and svm_range_restore_pages for GPU
	// pdds[i] (null once mapped, else why the fault stays a VM fault).
	SvmRange *svm_new_unregistered(KfdProcess &p, const Vm &vm, uint64_t page);
	const char *svm_restore_pages(KfdProcess &p, int i, uint64_t page, bool write);
	// An SMI event of GPU `gpu_id` for process `pid` (0: none): the line
	// "<event> <text>" to each client whose mask (and process) takes it.
	void smi_event(uint32_t gpu_id, pid_t pid, uint32_t event, const std::string &text);
	// SMI_EVENTS (svm.cpp as well, the other ioctl of kfd_svm's era).
	long kfd_smi_events(Caller &c, KfdProcess &p, abi::kfd::SmiEvents &a, uint64_t uarg);

	// sysfs the kernel keeps current (published.cpp); mu_ held
	void publish_process(const KfdProcess &p);
	void unpublish_process(pid_t tgid);
	void publish_devices();
	// Writes `path` unless it already holds `content` (published_).
	void publish_file(const std::string &path, const std::string &content);
	// Removes `dir` and forgets what was published under it.
	void unpublish_dir(const std::string &dir);

	// KFD SDMA user queues (user_queue.cpp)
	void start_user_queue(KfdProcess &p, Queue &q, bool restored);
	void user_queue_thread(std::stop_token st, UserQueueEngine *e);
	enum class Step { Idle, Again, Blocked, Hung };
	Step user_queue_step(UserQueueEngine &e);
	std::shared_ptr<Backing> user_queue_doorbells(UserQueueEngine &e); // mu_ held
	Step user_queue_packets(UserQueueEngine &e, KfdProcess &p, const Queue &q, DrmFile &f, uint64_t wptr);
	Step user_queue_packet(UserQueueEngine &e, KfdProcess &p, const Queue &q, DrmFile &f,
			       const std::vector<uint32_t> &dw);
	Step user_queue_copy_rect(UserQueueEngine &e, KfdProcess &p, const Queue &q, DrmFile &f,
				  const std::vector<uint32_t> &dw);
	Step user_queue_atomic(UserQueueEngine &e, KfdProcess &p, const Queue &q, DrmFile &f,
			       const std::vector<uint32_t> &dw);
	// A queue the engine cannot go on with: logged, recorded, and raised
	// to the process as the kernel would (a VM fault: MEMORY events; a
	// hang: HW_EXCEPTION events after the reset).
	Step stop_user_queue(UserQueueEngine &e, KfdProcess &p, uint32_t gpu_id, uint64_t va, bool vm_fault,
			     const std::string &why);
	// stop_user_queue's two halves: the stop logged and recorded (false:
	// the process is gone, nothing stops), and the events it raises.
	bool record_queue_stop(UserQueueEngine &e, uint32_t gpu_id, uint64_t va, bool vm_fault, const std::string &why);
	void raise_queue_exception(KfdProcess &p, uint32_t gpu_id, uint64_t va, bool vm_fault);
	// KFD CP (PM4 compute) user queues (cp_queue.cpp)
	Step cp_queue_step(UserQueueEngine &e, KfdProcess &p, const Queue &q, DrmFile &f);
	// The packet at dword `at` of `s` (ending at `end`), at IB depth
	// `depth`; *len its length in dwords.
	Step cp_packet(UserQueueEngine &e, KfdProcess &p, const Queue &q, DrmFile &f, const CpStream &s, uint64_t at,
		       uint64_t end, int depth, uint64_t *len);
	Step cp_end_of_pipe(UserQueueEngine &e, KfdProcess &p, const Queue &q, DrmFile &f,
			    const std::vector<uint32_t> &dw, bool release_mem);
	Step cp_dma_data(UserQueueEngine &e, KfdProcess &p, const Queue &q, DrmFile &f, const std::vector<uint32_t> &dw);
	// KFD AQL compute queues (aql_queue.cpp): the packet processor.
	friend class AqlMemory;
	Step aql_queue_step(UserQueueEngine &e, KfdProcess &p, const Queue &q, DrmFile &f);
	Step aql_packet(UserQueueEngine &e, KfdProcess &p, const Queue &q, DrmFile &f,
			const std::array<uint8_t, 64> &pkt, uint64_t va);
	Step aql_vendor(UserQueueEngine &e, KfdProcess &p, const Queue &q, DrmFile &f,
			const std::array<uint8_t, 64> &pkt, uint64_t va);
	Step aql_dispatch(UserQueueEngine &e, KfdProcess &p, const Queue &q, DrmFile &f,
			  const std::array<uint8_t, 64> &pkt, uint64_t va);
	Step aql_run_slice(UserQueueEngine &e, KfdProcess &p, const Queue &q, DrmFile &f);
	bool aql_yields(UserQueueEngine &e, KfdProcess &p, const Queue &q);
	bool aql_has_dispatch(const UserQueueEngine &e, const Queue &q, DrmFile &f);
	// The shader core's Launch of the dispatch packet `pkt` at `va` (the
	// CP's view: queue, index, target); false with *why for a GPU without
	// a shader core.
	bool aql_launch(const UserQueueEngine &e, DrmFile &f, const std::array<uint8_t, 64> &pkt, uint64_t va,
			shader::Launch *l, std::string *why);
	// CWSR: the dispatch in flight on `q` saved into its control stack and
	// CWSR area at a CRIU pause; a queue with saved waves resumes them
	// from there when it runs again (a restore's RESUME, or UNPAUSE).
	// `stack_bytes`: the control stack's bytes for every XCC.
	void aql_cwsr_save(KfdProcess &p, Queue &q, uint64_t stack_bytes);
	Step aql_cwsr_resume(UserQueueEngine &e, KfdProcess &p, Queue &q, DrmFile &f);
	// The packet at the read index is done: its completion signal, its
	// slot released (header INVALID), the read index advanced.
	Step aql_retire(UserQueueEngine &e, KfdProcess &p, const Queue &q, DrmFile &f,
			const std::array<uint8_t, 64> &pkt, uint64_t va);
	// A queue error the CP reports through the amd_queue_t's
	// queue_inactive_signal (error `code`), or as a hang without one.
	Step aql_queue_error(UserQueueEngine &e, KfdProcess &p, const Queue &q, DrmFile &f, uint64_t va,
			     int64_t code, const std::string &why);
	// amd_signal_t at `sig`: its value decremented (or set to `*store`),
	// then its event mailbox and interrupt. 0 or -EFAULT.
	int aql_signal(KfdProcess &p, DrmFile &f, uint64_t sig, const int64_t *store);
	// Whether (value & mask) <cond> ref holds for the signal at `sig`
	// (HSA conditions); -EFAULT when unreadable, else 1 or 0.
	int aql_signal_test(DrmFile &f, uint64_t sig, uint32_t cond, int64_t ref, int64_t mask);
	int gpu_read(DrmFile &f, uint64_t va, void *dst, size_t len);
	int gpu_write(DrmFile &f, uint64_t va, const void *src, size_t len);
	// kfd_signal_event_interrupt: an interrupt carrying `partial_id`.
	void signal_event_interrupt(KfdProcess &p, uint32_t partial_id, unsigned valid_bits);

	// render (render.cpp)
	// Runs entry `d`'s handler (drm_ioctl's call through the table).
	long drm_ioctl(Lock &lk, Caller &c, const std::shared_ptr<DrmFile> &f, const DrmIoctlDesc &d,
		       void *buf, uint64_t uarg);
	long drm_info(Caller &c, DrmFile &f, const abi::drm::Info &a);
	long drm_cs(Caller &c, DrmFile &f, abi::drm::Cs &a);
	long drm_wait_cs(Lock &lk, DrmFile &f, abi::drm::WaitCs &a);
	long drm_prime_to_fd(Caller &c, DrmFile &f, abi::drm::PrimeHandle &a, uint64_t uarg);
	long drm_fd_to_prime(Caller &c, DrmFile &f, abi::drm::PrimeHandle &a);
	int render_mmap(DrmFile &f, uint64_t offset, uint64_t len, MmapTarget *out);
	void export_dmabuf(Caller &c, const std::shared_ptr<Bo> &bo, bool cloexec,
			   uint64_t patch_addr, bool as_result);
	int resolve_va(DrmFile &f, uint64_t va, uint64_t len, bool write, std::vector<Segment> *out);
	// Parses an IB into a job; returns -errno for submission errors.
	int build_job(DrmFile &f, uint64_t ib_va, uint32_t ib_bytes, SdmaJob *job);
	// The same for a COMPUTE ring's IB of PM4 packets (cp_queue.cpp), an
	// IB inside it at `depth` 1.
	int build_pm4_job(DrmFile &f, uint64_t ib_va, uint32_t ib_bytes, SdmaJob *job, int depth = 0);
	// An IB's dwords (it must lie inside one mapping of the VM).
	int read_ib(DrmFile &f, uint64_t ib_va, uint32_t ib_bytes, std::vector<uint32_t> *dw);

	// BOs (model.cpp). A VRAM BO is placed as eviction.cpp says for
	// `who`.
	std::shared_ptr<Bo> new_bo(Device &d, BoType type, uint64_t size, int *err, VramClient who = {});

	// VRAM eviction (eviction.cpp); mu_ held
	// Places VRAM BO `bo` (not yet counted anywhere) for `who`: 0, or
	// -ENOMEM (KFD's limit, or VRAM that evicting cannot free for KFD).
	int place_vram_bo(const std::shared_ptr<Bo> &bo, const VramClient &who);
	// amdgpu_bo_validate_size and KFD's limit for a new BO of `type`, then
	// its place (VRAM as above, GTT within the GTT size): 0 or -ENOMEM.
	int place_bo(const std::shared_ptr<Bo> &bo, const VramClient &who);
	// Counts `bo` in its device's GTT when it fits: false when not.
	bool put_in_gtt(const std::shared_ptr<Bo> &bo);
	// Evicts least recently placed BOs of `d` until `size` bytes are
	// free; false if the evictable ones do not free enough (nothing is
	// evicted then).
	bool make_vram_room(Device &d, uint64_t size, pid_t current);
	void put_in_vram(Device &d, const std::shared_ptr<Bo> &bo);
	void evict_bo(const std::shared_ptr<Bo> &bo);
	// The restore worker's pass: restores each due process; the next
	// deadline (max() if none).
	std::chrono::steady_clock::time_point restore_due(std::chrono::steady_clock::time_point now);
	bool restore_process_bos(KfdProcess &p);
	void restore_worker(std::stop_token st);
	std::shared_ptr<Bo> dmabuf_bo(FileKey key); // exporter BO of a dma-buf
	Device *device_by_id(uint32_t gpu_id);
	Device *device_by_minor(uint32_t minor);

	const MachineDesc machine_;
	std::shared_ptr<ProcessMemory> pm_;
	std::shared_ptr<Counters> counters_ = std::make_shared<Counters>();
	std::shared_ptr<UserptrLedger> ledger_ = std::make_shared<UserptrLedger>();
	const MemoryLimits limits_;
	std::shared_ptr<KfdMemLimit> kfd_limit_ = std::make_shared<KfdMemLimit>(limits_);

	mutable std::recursive_mutex mu_;
	std::condition_variable_any events_cv_; // SET_EVENT, DESTROY_EVENT, exit
	std::vector<std::unique_ptr<Device>> devices_;
	std::map<FileKey, FileEntry> files_;
	std::map<FileKey, std::weak_ptr<Bo>> backings_;	 // memfd inode -> exporter BO
	std::map<FileKey, std::shared_ptr<Bo>> exported_; // live dma-buf files
	std::map<pid_t, std::unique_ptr<KfdProcess>> procs_;
	uint32_t next_pasid_ = 0x8001;	// amdgpu allocates PASIDs from the top half
	std::string sysfs_root_;	// "" = publish nothing
	std::unordered_map<std::string, std::string> published_; // path -> contents written
	std::map<std::string, uint64_t> ioctl_counts_;
	struct RuleState {
		FaultRule rule;
		uint32_t seen = 0;
	};
	std::vector<RuleState> rules_;
	std::condition_variable_any restore_cv_; // an eviction scheduled a restore
	bool restore_kick_ = false;		 // (under mu_) the worker has not seen it yet
	std::jthread restore_thread_;		 // last: stopped first (~ModelImpl)
};

// JSON helpers
std::string json_str(std::string_view s);

} // namespace kfdemu::detail
