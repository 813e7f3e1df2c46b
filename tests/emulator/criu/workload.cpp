// SPDX-License-Identifier: GPL-2.0-only
//
// kfdemu_criu_workload: the process real CRIU dumps and restores in the
// emulator's realcriu tests (realcriu_test.py). Unmodified libhsakmt 5.2.3
// and libdrm_amdgpu 2.4.114.
//
//   kfdemu_criu_workload [--tree] [--kfd-gem [--gem-cpu-visible] [--gem-high-va | --gem-va-offset]] [--metadata] [--queue-state] [--svm [--svm-pending]] [--user-queue | --cp-queue]
//                        [--periodic N] [--named-semaphore] [--fork-holder | --scm-holder] [--replica] DIR
//   kfdemu_criu_workload --render [--second-file] DIR
//
// (The options, which each needs and excludes: kOptions below; a wrong
// combination prints them.)
// Setup: on every GPU node a VRAM BO (2 MiB; $KFDEMU_WORKLOAD_VRAM_MIB
// MiB when set, as the benchmark's side by side with upstream's plugin
// sets it), plus one system-memory (GTT) BO, each
// filled with a pattern through the process's own CPU mapping and mapped to
// the GPUs; on the first GPU a signal event and an AQL queue. It notes the
// render-node fd libhsakmt opened for each GPU (found in /proc/self/fd by
// the node's DrmRenderMinor). Then writes DIR/ready ("<pid>" and a
// "<addr> <size> <seed>" line per BO) and polls for DIR/go (CRIU dumps and
// restores it while it polls; DIR/go is also the signal to go on after a
// failed dump). After DIR/go it checks in the (restored) process:
// - every BO's pattern through its own mapping;
// - per GPU, SDMA through libdrm_amdgpu on libhsakmt's own render-node file
//   (the file the GPU's VM is bound to, so its KFD BOs are in that VM at
//   their addresses): the VRAM BO is copied by the GPU's DMA engine into a
//   new GEM GTT BO (bytes compared with the pattern); then a new KFD VRAM
//   BO is allocated and mapped, a new pattern is copied into it from the
//   GTT BO and read back through its CPU mapping, and it is unmapped and
//   freed. With $KFDEMU_WORKLOAD_SDMA_CHECK_MIB set, these copies take
//   only the VRAM BO's first that many MiB (the CPU check above still
//   reads all of it): the tests on slow SDMA engines (realcriu_test.py's
//   slow machine) so spend seconds less waiting for them;
// - the event is set and waited on; the queue is destroyed.
// --user-queue: the event is not set by the CPU but by a TRAP on a KFD SDMA
// user queue, after a copy and a fence through it (UserQueue below), which
// a queue left paused or evicted never runs: the verdict then fails.
// --cp-queue: the event is set by a RELEASE_MEM on a KFD CP (PM4) compute
// queue, dumped while it waits at a WAIT_REG_MEM with that packet pending
// (CpQueue below).
// --kfd-gem: libhsakmt's render-node file of the first GPU also holds GEM
// BOs the process made through libdrm_amdgpu (RenderSet below), checked
// after the restore too.
// --gem-cpu-visible (with --kfd-gem): the SDMA-filled VRAM BO is made
// without AMDGPU_GEM_CREATE_NO_CPU_ACCESS (still never CPU-mapped): upstream's
// plugin asks every GEM BO's mmap offset (DRM_IOCTL_AMDGPU_GEM_MMAP) at dump
// and restore, which the kernel refuses for such a BO (EPERM).
// --gem-high-va (with --kfd-gem): those GEM BOs' GPU VAs come from libdrm's
// range above the hole (AMDGPU_VA_RANGE_HIGH, as Mesa takes them), which the
// kernel reports masked to 48 bits.
// --gem-va-offset (with --kfd-gem): those GEM BOs' GPU VAs start 64 GiB above
// the bottom of libdrm's general range (a range held first), where upstream's
// plugin maps its SDMA staging BOs in the same VM (a fresh libdrm VA manager
// starts there).
// --metadata: GEM BOs with amdgpu metadata, one of them with its dma-buf
// held (MetadataSet below), their metadata checked after the restore
// through libdrm and KFD.
// --render: a process with no /dev/kfd at all: the first render node
// opened with libdrm_amdgpu, the RenderSet's GEM BOs (GEM_CREATE, GEM_VA,
// SDMA CS, CPU mappings), checked after the restore; DIR/render lists them
// (RenderSet::describe) before DIR/ready appears. Its CPU-invisible VRAM
// BO is 2 MiB + 4 KiB ($KFDEMU_WORKLOAD_VRAM_MIB MiB + 4 KiB when set),
// its GTT BO 1 MiB more. With $KFDEMU_WORKLOAD_GEM_GAPS set (--render and
// --kfd-gem), the RenderSet's GEM handles have gaps (RenderSet::setup).
// --second-file (with --render): a second open file of the same render
// node holding a GTT BO of its own, made through the raw uapi (libdrm_amdgpu
// keeps one device per node, so it cannot fill a second file): its handle
// is 1 as in the first file, and it is mapped at the first file's GTT BO's
// GPU VA (each file has a VM of its own); CPU-mapped through the second
// file, filled, checked after the restore; DIR/render lists it as a second
// "fd" section.
// --queue-state: the queue state a ROCm process gives its queues after
// creating them, through libhsakmt (QueueState below): the AQL queue gets a
// CU mask and the GPU's GWS; an SDMA queue on the first GPU is made
// inactive (hsaKmtUpdateQueue without a ring) with a FENCE pending in its
// ring (doorbell rung). After the restore the GWS is still held (given
// back: accepted), the FENCE has not run, and once hsaKmtUpdateQueue gives
// the ring back it does.
// --svm: SVM ranges made through libhsakmt's hsaKmtSVMSetAttr (SvmState
// below) on two anonymous regions of the process: one in system memory
// with access for the first GPU, flags and a granularity, whose middle part
// gets other ones (so it is three ranges), and one prefetched to the first
// GPU's VRAM. hsaKmtSVMGetAttr's answers for them before DIR/ready must be
// its answers after the restore; the regions' bytes are checked, and the
// VRAM range is then prefetched back to system memory.
// --svm-pending (with --svm): GPU work pending on the VRAM range when it is
// dumped: an inactive SDMA queue holds a copy into it, which must not have
// run at the restore and must run, and a copy out of it after it, once the
// ring is given back (SvmState's setup_pending).
// --periodic N: for the periodic incremental dumps (criu dump
// --leave-running N times): after DIR/ready, for k = 1..N it waits for
// DIR/step<k> (written after the k-th dump, which left it running), checks
// every BO's contents and its GPUs as after a restore (the SDMA checks
// above), then, for k < N, rewrites MiB 3k % n of each VRAM BO (n MiB)
// with a new pattern through the GPU (an SDMA copy from a GEM GTT BO; with
// --replica the same pattern on every GPU, as data-parallel training
// updates each replica of its weights alike), and
// writes DIR/step<k>.done ("OK", or the verdict "FAIL: ..." in DIR/result).
// The BOs' expected contents then include those patches; after the N
// steps it waits for DIR/go as usual (the restore from the last dump).
// --named-semaphore: before hsaKmtOpenKFD the process creates libhsakmt's
// named semaphore and closes it, so that libhsakmt opens it by its name
// (as in any process after the first on a machine) instead of creating it:
// glibc's sem_open(O_CREAT) maps a temporary file that it links under the
// name and unlinks, a deleted mapping CRIU dumps as a --link-remap link,
// which a --leave-running dump removes again (the container test's
// periodic checkpoints, tests/container/README.md).
// --fork-holder: once its GPU state is made, before DIR/ready, the process
// forks a child that keeps every inherited fd, its /dev/kfd file among
// them, and uses no GPU (as a PyTorch DataLoader worker forked from a ROCm
// process). After DIR/go the child checks that its /dev/kfd fd is still
// the parent's open file (kcmp KCMP_FILE) and that KFD refuses it an ioctl
// (EBADF: the file's KFD process is the parent's), and exits 0 (1 and the
// reason on stderr otherwise); the parent's verdict requires that exit.
// --scm-holder: the process first forks a child that does all of the
// above in DIR/child and, once its GPU state is made, before its
// DIR/child/ready, sends its /dev/kfd file over a Unix socket (SCM_RIGHTS)
// to the parent, which holds it unused (so the older process, listed
// first in /proc, is not the file's KFD process) and writes DIR/ready
// ("<pid>", no BOs). After its DIR/go the parent checks that KFD refuses
// it an ioctl through the file (EBADF), and its verdict requires the
// child's exit 0; the child checks (kcmp KCMP_FILE) that the parent's fd
// is still its own /dev/kfd file, before its other checks.
// --replica: every GPU's VRAM BO holds the same pattern (one seed, in every
// process of a --tree too): replicated GPU memory, which a deduplicated
// checkpoint stores once.
// --tree: the process first forks a child that does all of the above in
// DIR/child (its own KFD context and BOs); the parent's verdict also
// requires the child to have exited 0 (it waits for it after its own
// checks). The verdict goes to DIR/result ("OK" or "FAIL: why") and the
// exit status (0 / 1).
#include <amdgpu.h>
#include <amdgpu_drm.h>
#include <hsakmt.h>

#include <dirent.h>
#include <linux/kcmp.h>
#include <semaphore.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <initializer_list>
#include <optional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "testcommon/marker.h"
#include "testcommon/pattern.h"
#include "testcommon/sdma_copy.h"
#include "testcommon/scm_rights.h"

namespace {

// Bytes [off, off + len) of a BO rewritten with pattern `seed` (--periodic).
struct Patch {
	uint64_t off, len, seed;
};

struct Bo {
	void *addr;
	uint64_t size;
	uint64_t seed;
	std::vector<Patch> patches{}; // later ones over earlier ones
};

// Index of the first word of `addr` that differs from seed's pattern
// (tests/common), or -1.
int64_t check(const void *addr, uint64_t size, uint64_t seed)
{
	const int64_t at = testcommon::check_pattern(addr, size & ~uint64_t(7), seed);
	return at < 0 ? -1 : at / 8;
}

// The seed of word i of `b` (its own, or the last patch's over it).
uint64_t seed_at(const Bo &b, uint64_t i)
{
	uint64_t s = b.seed;
	for (const auto &p : b.patches)
		if (i * 8 >= p.off && i * 8 < p.off + p.len)
			s = p.seed;
	return s;
}

// Index of the first word at `addr` that is not `b`'s expected contents,
// or -1.
int64_t check_bo(const void *addr, const Bo &b)
{
	if (b.patches.empty())
		return check(addr, b.size, b.seed);
	const auto *w = static_cast<const uint64_t *>(addr);
	for (uint64_t i = 0; i < b.size / 8; i++)
		if (w[i] != testcommon::pattern_word(seed_at(b, i), i))
			return int64_t(i);
	return -1;
}

std::string g_dir;
pid_t g_child = -1;

[[noreturn]] void finish(std::string verdict)
{
	if (g_child > 0) {
		int st = 0;
		if (verdict == "OK") {
			if (::waitpid(g_child, &st, 0) != g_child)
				verdict = "FAIL: waitpid(child): " + std::string(std::strerror(errno));
			else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
				verdict = "FAIL: the child process ended with status " + std::to_string(st);
		} else {
			::kill(g_child, SIGKILL);
			::waitpid(g_child, &st, 0);
		}
	}
	(void)testcommon::publish_file(g_dir + "/result", verdict + "\n");
	std::printf("workload %d: %s\n", int(getpid()), verdict.c_str());
	std::fflush(stdout);
	std::exit(verdict == "OK" ? 0 : 1);
}

std::string status(const char *what, long s)
{
	return std::string(what) + " failed: " + std::to_string(s);
}

bool alloc_bo(uint32_t node, uint64_t size, bool vram, Bo *out, std::string *err)
{
	HsaMemFlags f{};
	f.ui32.NonPaged = 1;
	f.ui32.HostAccess = 1;
	f.ui32.PageSize = HSA_PAGE_SIZE_4KB;
	if (vram)
		f.ui32.NoSubstitute = 1;
	void *addr = nullptr;
	if (HSAKMT_STATUS s = hsaKmtAllocMemory(node, size, f, &addr); s != HSAKMT_STATUS_SUCCESS) {
		*err = status("hsaKmtAllocMemory", s);
		return false;
	}
	HSAuint64 gpuva = 0;
	if (HSAKMT_STATUS s = hsaKmtMapMemoryToGPU(addr, size, &gpuva); s != HSAKMT_STATUS_SUCCESS) {
		*err = status("hsaKmtMapMemoryToGPU", s);
		return false;
	}
	*out = Bo{addr, size, 0};
	return true;
}

// An SDMA queue of `node` on `ring`, made inactive at once
// (hsaKmtUpdateQueue without a ring): what its ring is given waits until
// the ring is given back.
bool create_inactive_sdma(uint32_t node, const Bo &ring, HsaQueueResource *q, std::string *err)
{
	if (HSAKMT_STATUS s = hsaKmtCreateQueue(node, HSA_QUEUE_SDMA, 100, HSA_QUEUE_PRIORITY_NORMAL, ring.addr,
						 ring.size, nullptr, q);
	    s != HSAKMT_STATUS_SUCCESS)
		return *err = status("hsaKmtCreateQueue(SDMA)", s), false;
	if (HSAKMT_STATUS s = hsaKmtUpdateQueue(q->QueueId, 100, HSA_QUEUE_PRIORITY_NORMAL, nullptr, 0, nullptr);
	    s != HSAKMT_STATUS_SUCCESS)
		return *err = status("hsaKmtUpdateQueue(no ring)", s), false;
	return true;
}

// The fd of /dev/dri/renderD<minor> in this process (libhsakmt's), or -1.
int find_fd_of(const std::string &want)
{
	int found = -1;
	if (DIR *d = ::opendir("/proc/self/fd")) {
		while (dirent *e = ::readdir(d)) {
			char link[256];
			const std::string path = std::string("/proc/self/fd/") + e->d_name;
			ssize_t n = ::readlink(path.c_str(), link, sizeof link - 1);
			if (n > 0 && std::string(link, size_t(n)) == want && e->d_name[0] != '.') {
				found = std::atoi(e->d_name);
				break;
			}
		}
		::closedir(d);
	}
	return found;
}

int find_render_fd(int minor)
{
	return find_fd_of("/dev/dri/renderD" + std::to_string(minor));
}


// A GEM GTT BO of the libdrm device, CPU- and GPU-mapped.
struct GemBo {
	amdgpu_device_handle dev = nullptr;
	amdgpu_bo_handle bo = nullptr;
	amdgpu_va_handle va_handle = nullptr;
	uint64_t va = 0, size = 0;
	void *cpu = nullptr;
	bool mapped = false;

	// `va_flags`: amdgpu_va_range_alloc's (AMDGPU_VA_RANGE_HIGH: the
	// range above the hole).
	GemBo(amdgpu_device_handle d, uint64_t sz, std::string *err, uint32_t domain = AMDGPU_GEM_DOMAIN_GTT,
	      uint64_t flags = 0, bool cpu_map = true, uint64_t va_flags = 0)
		: dev(d), size(sz)
	{
		amdgpu_bo_alloc_request req{};
		req.alloc_size = size;
		req.phys_alignment = 4096;
		req.preferred_heap = domain;
		req.flags = flags;
		if (int r = amdgpu_bo_alloc(dev, &req, &bo); r) {
			*err = status("amdgpu_bo_alloc", r);
			bo = nullptr;
			return;
		}
		if (int r = cpu_map ? amdgpu_bo_cpu_map(bo, &cpu) : 0; r) {
			*err = status("amdgpu_bo_cpu_map", r);
			cpu = nullptr;
			return;
		}
		if (int r = amdgpu_va_range_alloc(dev, amdgpu_gpu_va_range_general, size, 4096, 0, &va, &va_handle,
						  va_flags);
		    r) {
			*err = status("amdgpu_va_range_alloc", r);
			va_handle = nullptr;
			return;
		}
		if (int r = amdgpu_bo_va_op(bo, 0, size, va, 0, AMDGPU_VA_OP_MAP); r) {
			*err = status("amdgpu_bo_va_op(MAP)", r);
			return;
		}
		mapped = true;
	}
	GemBo(const GemBo &) = delete;
	GemBo &operator=(const GemBo &) = delete;
	~GemBo()
	{
		if (mapped)
			amdgpu_bo_va_op(bo, 0, size, va, 0, AMDGPU_VA_OP_UNMAP);
		if (va_handle)
			amdgpu_va_range_free(va_handle);
		if (cpu)
			amdgpu_bo_cpu_unmap(bo);
		if (bo)
			amdgpu_bo_free(bo);
	}
	bool ok() const { return mapped; }
};

// One SDMA linear copy (SDMA v4 COPY LINEAR packets of at most 4 MiB) of
// `n` bytes between GPU VAs on the device's DMA ring; waits for its fence.
bool sdma_copy(amdgpu_device_handle dev, std::initializer_list<amdgpu_bo_handle> extra, uint64_t src,
	       uint64_t dst, uint64_t n, std::string *err)
{
	const uint64_t ib_dw = testcommon::sdma_copy_ib_dwords(n);
	GemBo ib(dev, (ib_dw * 4 + 4095) / 4096 * 4096, err);
	if (!ib.ok())
		return false;
	testcommon::sdma_copy_ib(static_cast<uint32_t *>(ib.cpu), src, dst, n);
	std::vector<amdgpu_bo_handle> bos{ib.bo};
	bos.insert(bos.end(), extra);
	amdgpu_bo_list_handle list = nullptr;
	amdgpu_context_handle ctx = nullptr;
	bool ok = false;
	if (int r = amdgpu_bo_list_create(dev, uint32_t(bos.size()), bos.data(), nullptr, &list); r)
		*err = status("amdgpu_bo_list_create", r);
	else if (r = amdgpu_cs_ctx_create(dev, &ctx); r)
		*err = status("amdgpu_cs_ctx_create", r);
	else {
		amdgpu_cs_ib_info ibi{};
		ibi.ib_mc_address = ib.va;
		ibi.size = uint32_t(ib_dw);
		amdgpu_cs_request req{};
		req.ip_type = AMDGPU_HW_IP_DMA;
		req.resources = list;
		req.number_of_ibs = 1;
		req.ibs = &ibi;
		amdgpu_cs_fence f{};
		uint32_t expired = 0;
		if (r = amdgpu_cs_submit(ctx, 0, &req, 1); r)
			*err = status("amdgpu_cs_submit", r);
		else {
			f.context = ctx;
			f.ip_type = AMDGPU_HW_IP_DMA;
			f.fence = req.seq_no;
			// Polls (timeout 0) for up to 10 s plus 1 s per 100 MiB
			// (a large copy on an emulated SDMA throttled to a
			// storage-like rate, as the benchmark runs it) of this
			// process's own clock rather than one wait with a timeout: libdrm
			// turns a timeout into an absolute deadline on this
			// process's CLOCK_MONOTONIC, which the kernel reads on the
			// host's clock. A container CRIU restored runs in a time
			// namespace whose clock lags the host's by the time it was
			// down, so that deadline can already be past.
			const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10 + n / (100 << 20));
			for (;;) {
				if (r = amdgpu_cs_query_fence_status(&f, 0, 0, &expired); r || expired)
					break;
				if (std::chrono::steady_clock::now() >= until)
					break;
				::usleep(1000);
			}
			if (r)
				*err = status("amdgpu_cs_query_fence_status", r);
			else if (!expired)
				*err = "SDMA fence did not signal within " + std::to_string(10 + n / (100 << 20)) + " s";
			else
				ok = true;
		}
	}
	if (ctx)
		amdgpu_cs_ctx_free(ctx);
	if (list)
		amdgpu_bo_list_destroy(list);
	return ok;
}

// $NAME, a size in MiB, when set.
std::optional<uint64_t> mib_env(const char *name)
{
	const char *mib = std::getenv(name);
	if (!mib || !*mib)
		return std::nullopt;
	char *end = nullptr;
	const unsigned long long n = std::strtoull(mib, &end, 10);
	if (*end || n == 0 || n > (1ull << 20))
		finish(std::string("FAIL: ") + name + "=" + mib + ": not a size in MiB");
	return n;
}

// The SDMA checks of one GPU (see the header). `render_fd`: libhsakmt's
// render-node fd of that GPU; `whole`: its restored VRAM BO, of which the
// checks copy the first $KFDEMU_WORKLOAD_SDMA_CHECK_MIB MiB, or all.
bool gpu_copies(uint32_t node, int render_fd, const Bo &whole, std::string *err)
{
	Bo vram = whole;
	if (auto mib = mib_env("KFDEMU_WORKLOAD_SDMA_CHECK_MIB"))
		vram.size = std::min(vram.size, *mib << 20);
	uint32_t major = 0, minor = 0;
	amdgpu_device_handle dev = nullptr;
	if (int r = amdgpu_device_initialize(render_fd, &major, &minor, &dev); r) {
		*err = status("amdgpu_device_initialize", r);
		return false;
	}
	bool ok = false;
	{
		GemBo gtt(dev, vram.size, err);
		Bo fresh{};
		if (!gtt.ok())
			*err = "GEM GTT BO: " + *err;
		else if (std::memset(gtt.cpu, 0, gtt.size), !sdma_copy(dev, {gtt.bo}, uint64_t(uintptr_t(vram.addr)),
									 gtt.va, vram.size, err))
			*err = "SDMA copy of the VRAM BO: " + *err;
		else if (int64_t at = check_bo(gtt.cpu, vram); at >= 0)
			*err = "SDMA copy of the VRAM BO: word " + std::to_string(at) + " differs from the pattern";
		else if (!alloc_bo(node, vram.size, true, &fresh, err))
			*err = "new KFD VRAM BO: " + *err;
		else {
			testcommon::fill_pattern(gtt.cpu, gtt.size, 4242 + node);
			if (!sdma_copy(dev, {gtt.bo}, gtt.va, uint64_t(uintptr_t(fresh.addr)), fresh.size, err))
				*err = "SDMA copy into the new KFD BO: " + *err;
			else if (int64_t at2 = check(fresh.addr, fresh.size, 4242 + node); at2 >= 0)
				*err = "SDMA copy into the new KFD BO: word " + std::to_string(at2) + " differs";
			else
				ok = true;
			if (hsaKmtUnmapMemoryToGPU(fresh.addr) != HSAKMT_STATUS_SUCCESS ||
			    hsaKmtFreeMemory(fresh.addr, fresh.size) != HSAKMT_STATUS_SUCCESS) {
				*err = "unmap/free of the new KFD BO";
				ok = false;
			}
		}
	}
	amdgpu_device_deinitialize(dev);
	return ok;
}

// GEM BOs of a render-node file that CRIU must carry over (--render,
// --kfd-gem): a GTT BO filled through its CPU mapping; a VRAM BO the CPU
// cannot map, filled by SDMA (so its contents exist only on the GPU); a
// CPU-visible VRAM BO mapped at two GPU VAs. verify() checks them in the
// restored process with the handles, VAs and mappings libdrm kept from
// before: contents through the CPU mappings, and SDMA copies out of the
// VRAM BO and out of the second mapping into new GEM BOs.
struct RenderSet {
	GemBo *gtt = nullptr, *vram = nullptr, *vcpu = nullptr;
	amdgpu_va_handle va2_range = nullptr, held_range = nullptr;
	uint64_t va2 = 0;
	uint64_t seed_gtt = 0, seed_vram = 0, seed_vcpu = 0;

	static constexpr uint64_t kVramBytes = (2 << 20) + 4096;

	// `vram_bytes`: the CPU-invisible VRAM BO's size (the GTT BO, which
	// fills it, is 1 MiB larger, rounded down to whole MiB); `vram_flags`
	// its creation flags; `va_flags` amdgpu_va_range_alloc's for every VA;
	// `va_offset`: VA bytes of the general range held before them.
	bool setup(amdgpu_device_handle dev, uint64_t seed, std::string *err, uint64_t vram_bytes = kVramBytes,
		   uint64_t vram_flags = AMDGPU_GEM_CREATE_NO_CPU_ACCESS, uint64_t va_flags = 0,
		   uint64_t va_offset = 0)
	{
		uint64_t held = 0;
		if (va_offset)
			if (int r = amdgpu_va_range_alloc(dev, amdgpu_gpu_va_range_general, va_offset, 4096, 0, &held,
							  &held_range, 0);
			    r)
				return *err = status("amdgpu_va_range_alloc(held)", r), false;
		seed_gtt = seed;
		seed_vram = seed + 1;
		seed_vcpu = seed + 2;
		// $KFDEMU_WORKLOAD_GEM_GAPS: a BO before the GTT BO and one between
		// it and the VRAM BO, freed at return, leave the set's handles with
		// gaps ({2, 4, 5} in a new file), which a restore that makes BOs
		// one after the other in a new file does not get by itself.
		std::unique_ptr<GemBo> gap1, gap2;
		auto gap = [&](std::unique_ptr<GemBo> *g) {
			if (std::getenv("KFDEMU_WORKLOAD_GEM_GAPS"))
				g->reset(new GemBo(dev, 4096, err, AMDGPU_GEM_DOMAIN_GTT, 0, false));
			return !*g || (*g)->ok();
		};
		if (!gap(&gap1))
			return *err = "GEM BO before the set: " + *err, false;
		gtt = new GemBo(dev, ((vram_bytes >> 20) + 1) << 20, err, AMDGPU_GEM_DOMAIN_GTT, 0, true, va_flags);
		if (!gtt->ok())
			return *err = "GTT GEM BO: " + *err, false;
		if (!gap(&gap2))
			return *err = "GEM BO between the set's: " + *err, false;
		vram = new GemBo(dev, vram_bytes, err, AMDGPU_GEM_DOMAIN_VRAM, vram_flags, false, va_flags);
		if (!vram->ok())
			return *err = "VRAM GEM BO: " + *err, false;
		vcpu = new GemBo(dev, 64 << 10, err, AMDGPU_GEM_DOMAIN_VRAM, AMDGPU_GEM_CREATE_CPU_ACCESS_REQUIRED, true,
				 va_flags);
		if (!vcpu->ok())
			return *err = "CPU-visible VRAM GEM BO: " + *err, false;
		if (int r = amdgpu_va_range_alloc(dev, amdgpu_gpu_va_range_general, vcpu->size, 4096, 0, &va2,
						  &va2_range, va_flags);
		    r)
			return *err = status("amdgpu_va_range_alloc", r), false;
		if (int r = amdgpu_bo_va_op(vcpu->bo, 0, vcpu->size, va2, 0, AMDGPU_VA_OP_MAP); r)
			return *err = status("amdgpu_bo_va_op(MAP, second VA)", r), false;
		testcommon::fill_pattern(gtt->cpu, vram->size, seed_vram);
		if (!sdma_copy(dev, {gtt->bo, vram->bo}, gtt->va, vram->va, vram->size, err))
			return *err = "SDMA fill of the VRAM GEM BO: " + *err, false;
		testcommon::fill_pattern(gtt->cpu, gtt->size, seed_gtt);
		testcommon::fill_pattern(vcpu->cpu, vcpu->size, seed_vcpu);
		return true;
	}

	// `what`'s bytes at GPU VA `va` (a BO in `bo`) copied by SDMA into a
	// new GTT BO and compared with the pattern of `seed`.
	static bool copy_out(amdgpu_device_handle dev, amdgpu_bo_handle bo, uint64_t va, uint64_t size,
			     uint64_t seed, const char *what, std::string *err)
	{
		GemBo out(dev, size, err);
		if (!out.ok())
			return *err = std::string("new GTT BO for ") + what + ": " + *err, false;
		std::memset(out.cpu, 0, size);
		if (!sdma_copy(dev, {bo, out.bo}, va, out.va, size, err))
			return *err = std::string("SDMA copy of ") + what + ": " + *err, false;
		if (int64_t at = check(out.cpu, size, seed); at >= 0)
			return *err = std::string("SDMA copy of ") + what + ": word " + std::to_string(at) +
				      " differs from the pattern",
			       false;
		return true;
	}

	// Writes "fd <render fd>" and per GPU mapping "gem <handle> <cpu
	// address or 0> <size> <seed> <va>" to `path` (DIR/render, what
	// tests/e2e's render verifier checks in a task the CRIU stand-in
	// restored).
	void describe(int render_fd, const std::string &path) const
	{
		FILE *f = std::fopen(path.c_str(), "w");
		if (!f)
			finish("FAIL: cannot append to " + path);
		std::fprintf(f, "fd %d\n", render_fd);
		auto line = [&](const GemBo *b, uint64_t seed, uint64_t va) {
			uint32_t h = 0;
			amdgpu_bo_export(b->bo, amdgpu_bo_handle_type_kms, &h);
			std::fprintf(f, "gem %u %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", h,
				     uint64_t(uintptr_t(b->cpu)), b->size, seed, va);
		};
		line(gtt, seed_gtt, gtt->va);
		line(vram, seed_vram, vram->va);
		line(vcpu, seed_vcpu, vcpu->va);
		line(vcpu, seed_vcpu, va2);
		std::fclose(f);
	}

	bool verify(amdgpu_device_handle dev, std::string *err) const
	{
		if (int64_t at = check(gtt->cpu, gtt->size, seed_gtt); at >= 0)
			return *err = "GTT GEM BO through its CPU mapping: word " + std::to_string(at) + " differs", false;
		if (int64_t at = check(vcpu->cpu, vcpu->size, seed_vcpu); at >= 0)
			return *err = "VRAM GEM BO through its CPU mapping: word " + std::to_string(at) + " differs",
			       false;
		return copy_out(dev, vram->bo, vram->va, vram->size, seed_vram, "the CPU-invisible VRAM GEM BO", err) &&
		       copy_out(dev, vcpu->bo, va2, vcpu->size, seed_vcpu, "the second VA of the VRAM GEM BO", err);
	}
};

// --metadata: a CPU-visible VRAM GEM BO on libhsakmt's render-node file of
// the first GPU with amdgpu metadata as Mesa gives a shared surface (flags,
// tiling info and a 37-byte blob, set through amdgpu_bo_set_metadata), its
// dma-buf held open (a bare dma-buf fd: a shared BO in the checkpoint), and
// what KFD tells a process importing that dma-buf:
// hsaKmtRegisterGraphicsHandleToNodes' metadata (AMDKFD_IOC_GET_DMABUF_INFO),
// deregistered again before DIR/ready. And a GTT GEM BO of that file, not
// exported, whose metadata was set and then set again without data: flags
// and tiling info without data (the kernel keeps the flags). verify():
// amdgpu_bo_query_info's metadata of both BOs and a new registration's are
// byte for byte those read before the dump (which were those set), and the
// first BO's bytes are the pattern through its CPU mapping and through an
// mmap of the held dma-buf.
struct MetadataSet {
	static constexpr uint64_t kFlags = 0x8000'0000'0000'0123ull, kTiling = 0x0000'3a00'0000'4c05ull;
	static constexpr uint32_t kDataBytes = 37; // odd: the kernel keeps the exact size
	static constexpr uint64_t kPlainFlags = 0x42, kPlainTiling = 0x7;
	GemBo *bo = nullptr, *plain = nullptr;
	int dmabuf = -1;
	uint32_t node = 0;
	uint64_t seed = 0;
	amdgpu_bo_metadata gem{}; // amdgpu_bo_query_info's, before the dump
	amdgpu_bo_metadata plain_gem{};
	std::vector<uint8_t> kfd; // GET_DMABUF_INFO's, before the dump

	static std::vector<uint8_t> blob()
	{
		std::vector<uint8_t> b(kDataBytes);
		for (uint32_t i = 0; i < kDataBytes; i++)
			b[i] = static_cast<uint8_t>(0xa5 ^ (i * 29));
		return b;
	}

	static bool read_gem(const GemBo *b, amdgpu_bo_metadata *out, std::string *err)
	{
		amdgpu_bo_info info{};
		if (int r = amdgpu_bo_query_info(b->bo, &info); r)
			return *err = status("amdgpu_bo_query_info", r), false;
		*out = info.metadata;
		return true;
	}

	// KFD's metadata of the dma-buf, through a registration of it.
	bool read_kfd(std::vector<uint8_t> *out, std::string *err) const
	{
		HsaGraphicsResourceInfo info{};
		uint32_t nodes[] = {node};
		if (HSAKMT_STATUS s = hsaKmtRegisterGraphicsHandleToNodes(uint64_t(dmabuf), &info, 1, nodes);
		    s != HSAKMT_STATUS_SUCCESS)
			return *err = status("hsaKmtRegisterGraphicsHandleToNodes", s), false;
		const auto *m = static_cast<const uint8_t *>(info.Metadata);
		out->assign(m, m + (m ? info.MetadataSizeInBytes : 0));
		const uint64_t size = info.SizeInBytes;
		if (HSAKMT_STATUS s = hsaKmtDeregisterMemory(info.MemoryAddress); s != HSAKMT_STATUS_SUCCESS)
			return *err = status("hsaKmtDeregisterMemory", s), false;
		if (size != bo->size)
			return *err = "GET_DMABUF_INFO: size " + std::to_string(size), false;
		return true;
	}

	bool setup(amdgpu_device_handle dev, uint32_t gpu_node, uint64_t s, std::string *err)
	{
		node = gpu_node;
		seed = s;
		bo = new GemBo(dev, 64 << 10, err, AMDGPU_GEM_DOMAIN_VRAM, AMDGPU_GEM_CREATE_CPU_ACCESS_REQUIRED);
		if (!bo->ok())
			return *err = "VRAM GEM BO: " + *err, false;
		testcommon::fill_pattern(bo->cpu, bo->size, seed);
		amdgpu_bo_metadata md{};
		md.flags = kFlags;
		md.tiling_info = kTiling;
		const auto b = blob();
		md.size_metadata = kDataBytes;
		std::memcpy(md.umd_metadata, b.data(), b.size());
		if (int r = amdgpu_bo_set_metadata(bo->bo, &md); r)
			return *err = status("amdgpu_bo_set_metadata", r), false;
		uint32_t fd = 0;
		if (int r = amdgpu_bo_export(bo->bo, amdgpu_bo_handle_type_dma_buf_fd, &fd); r)
			return *err = status("amdgpu_bo_export(dma-buf)", r), false;
		dmabuf = int(fd);
		if (!read_gem(bo, &gem, err) || !read_kfd(&kfd, err))
			return false;
		plain = new GemBo(dev, 4096, err);
		if (!plain->ok())
			return *err = "GTT GEM BO: " + *err, false;
		amdgpu_bo_metadata p{};
		p.flags = kPlainFlags;
		p.tiling_info = kPlainTiling;
		p.size_metadata = 1;
		if (int r = amdgpu_bo_set_metadata(plain->bo, &p); r)
			return *err = status("amdgpu_bo_set_metadata(GTT BO)", r), false;
		p.size_metadata = 0;
		if (int r = amdgpu_bo_set_metadata(plain->bo, &p); r)
			return *err = status("amdgpu_bo_set_metadata(GTT BO, no data)", r), false;
		if (!read_gem(plain, &plain_gem, err))
			return false;
		if (plain_gem.flags != kPlainFlags || plain_gem.tiling_info != kPlainTiling || plain_gem.size_metadata)
			return *err = "GTT BO: amdgpu_bo_query_info: not flags and tiling without data", false;
		if (gem.flags != kFlags || gem.tiling_info != kTiling || gem.size_metadata != kDataBytes ||
		    std::memcmp(gem.umd_metadata, b.data(), b.size()) != 0)
			return *err = "amdgpu_bo_query_info: not the metadata just set", false;
		if (kfd != b)
			return *err = "GET_DMABUF_INFO: " + std::to_string(kfd.size()) +
				      " bytes of metadata, not the 37 just set",
			       false;
		return true;
	}

	bool verify(std::string *err) const
	{
		amdgpu_bo_metadata now{};
		if (!read_gem(plain, &now, err))
			return false;
		if (now.flags != plain_gem.flags || now.tiling_info != plain_gem.tiling_info || now.size_metadata) {
			char m[160];
			std::snprintf(m, sizeof m,
				      "GTT BO's GEM metadata: flags 0x%" PRIx64 ", tiling 0x%" PRIx64 ", %u bytes; dumped "
				      "with 0x%" PRIx64 ", 0x%" PRIx64 ", none",
				      now.flags, now.tiling_info, now.size_metadata, plain_gem.flags, plain_gem.tiling_info);
			return *err = m, false;
		}
		if (!read_gem(bo, &now, err))
			return false;
		if (now.flags != gem.flags || now.tiling_info != gem.tiling_info) {
			char m[160];
			std::snprintf(m, sizeof m,
				      "GEM metadata: flags 0x%" PRIx64 ", tiling 0x%" PRIx64 "; dumped with 0x%" PRIx64
				      ", 0x%" PRIx64,
				      now.flags, now.tiling_info, gem.flags, gem.tiling_info);
			return *err = m, false;
		}
		if (now.size_metadata != gem.size_metadata ||
		    std::memcmp(now.umd_metadata, gem.umd_metadata, gem.size_metadata) != 0)
			return *err = "GEM metadata: " + std::to_string(now.size_metadata) + " bytes, not the " +
				      std::to_string(gem.size_metadata) + " dumped (or other bytes)",
			       false;
		std::vector<uint8_t> k;
		if (!read_kfd(&k, err))
			return false;
		if (k != kfd)
			return *err = "GET_DMABUF_INFO metadata: " + std::to_string(k.size()) + " bytes, not the " +
				      std::to_string(kfd.size()) + " dumped (or other bytes)",
			       false;
		if (int64_t at = check(bo->cpu, bo->size, seed); at >= 0)
			return *err = "the BO through its CPU mapping: word " + std::to_string(at) + " differs", false;
		void *view = ::mmap(nullptr, bo->size, PROT_READ, MAP_SHARED, dmabuf, 0);
		if (view == MAP_FAILED)
			return *err = std::string("mmap of the dma-buf: ") + std::strerror(errno), false;
		const int64_t at = check(view, bo->size, seed);
		::munmap(view, bo->size);
		if (at >= 0)
			return *err = "the BO through its dma-buf: word " + std::to_string(at) + " differs", false;
		return true;
	}
};

// --periodic: bytes [off, off + len) of `vram` rewritten with pattern
// `seed` by the GPU (SDMA from a GEM GTT BO filled by the CPU).
bool gpu_patch(int render_fd, Bo &vram, uint64_t off, uint64_t len, uint64_t seed, std::string *err)
{
	uint32_t major = 0, minor = 0;
	amdgpu_device_handle dev = nullptr;
	if (int r = amdgpu_device_initialize(render_fd, &major, &minor, &dev); r)
		return *err = status("amdgpu_device_initialize", r), false;
	bool ok = false;
	{
		GemBo gtt(dev, len, err);
		if (gtt.ok()) {
			auto *w = static_cast<uint64_t *>(gtt.cpu);
			for (uint64_t j = 0; j < len / 8; j++)
				w[j] = testcommon::pattern_word(seed, off / 8 + j);
			ok = sdma_copy(dev, {gtt.bo}, gtt.va, uint64_t(uintptr_t(vram.addr)) + off, len, err);
		}
	}
	amdgpu_device_deinitialize(dev);
	if (ok)
		vram.patches.push_back({off, len, seed});
	return ok;
}

void write_ready(const std::vector<Bo> &bos)
{
	std::string text = std::to_string(getpid()) + "\n";
	for (const auto &b : bos)
		text += std::to_string(uint64_t(uintptr_t(b.addr))) + " " + std::to_string(b.size) + " " +
			std::to_string(b.seed) + "\n";
	if (!testcommon::publish_file(g_dir + "/ready", text))
		finish("FAIL: cannot write ready");
}

void wait_for_go()
{
	const std::string go = g_dir + "/go";
	while (access(go.c_str(), F_OK) != 0)
		usleep(10000);
}

// Why KFD's answer to an ioctl of this process through /dev/kfd fd `kfd`,
// a file another process owns, is not the kernel's (EBADF: kfd_ioctl takes
// a file only from its KFD process), or "" when it is.
std::string kfd_refused_here(int kfd)
{
	// AMDKFD_IOC_GET_VERSION (kfd_ioctl.h: _IOR('K', 0x01), two u32),
	// declared here: <linux/kfd_ioctl.h> needs <drm/drm.h>, absent here.
	struct {
		uint32_t major, minor;
	} v{};
	if (::ioctl(kfd, _IOR('K', 0x01, v), &v) == 0)
		return "KFD took an ioctl through /dev/kfd fd " + std::to_string(kfd) +
		       ", whose KFD process is another's";
	if (errno != EBADF)
		return "GET_VERSION through /dev/kfd fd " + std::to_string(kfd) + ": " + std::strerror(errno) +
		       " (KFD says EBADF to a process that does not own the file)";
	return "";
}

// Why fd `fd` of this process is not the open file `their_fd` of process
// `pid` (kcmp KCMP_FILE), or "".
std::string not_same_file(int fd, pid_t pid, int their_fd)
{
	const long r = ::syscall(SYS_kcmp, ::getpid(), pid, KCMP_FILE, fd, their_fd);
	if (r == 0)
		return "";
	return "its /dev/kfd fd " + std::to_string(fd) + " is not process " + std::to_string(pid) + "'s fd " +
	       std::to_string(their_fd) + " (kcmp: " + (r < 0 ? std::strerror(errno) : std::to_string(r)) + ")";
}

// --fork-holder's child (see the header): holds the inherited fds until
// DIR/go, then checks its /dev/kfd fd. Never returns.
[[noreturn]] void hold_inherited_fds(pid_t parent, int kfd)
{
	wait_for_go();
	std::string why = not_same_file(kfd, parent, kfd);
	if (why.empty())
		why = kfd_refused_here(kfd);
	if (!why.empty())
		std::fprintf(stderr, "fork holder %d: FAIL: %s\n", int(::getpid()), why.c_str());
	std::fflush(nullptr);
	::_exit(why.empty() ? 0 : 1);
}

// --scm-holder: the two ends of the passing of the child's /dev/kfd
// file, over a SOCK_SEQPACKET pair. The child sends the file with its own
// fd number; the parent answers with the number it holds the file at.
bool send_fd(int sock, int fd, std::string *err)
{
	const int number = fd;
	if (!testcommon::send_with_fd(sock, &number, sizeof number, fd))
		return *err = std::string("sendmsg SCM_RIGHTS: ") + std::strerror(errno), false;
	return true;
}

// The fd received (-1 and *err on failure); *number: the sender's.
int receive_fd(int sock, int *number, std::string *err)
{
	int fd = -1;
	const ssize_t n = testcommon::recv_with_fd(sock, number, sizeof *number, &fd);
	if (n == 0)
		return *err = "the child ended without sending it", -1;
	if (n != ssize_t(sizeof *number)) {
		if (fd >= 0)
			::close(fd);
		return *err = std::string("recvmsg: ") + (n < 0 ? std::strerror(errno) : "short message"), -1;
	}
	if (fd < 0)
		return *err = "recvmsg: no fd came", -1;
	return fd;
}

// --scm-holder's parent (see the header): receives the child's /dev/kfd
// file, writes DIR/ready, holds the file until DIR/go, then checks it.
// Never returns.
[[noreturn]] void hold_received_kfd(int sock)
{
	std::string err;
	int child_number = -1;
	const int kfd = receive_fd(sock, &child_number, &err);
	if (kfd < 0)
		finish("FAIL: the child's /dev/kfd file: " + err);
	if (::send(sock, &kfd, sizeof kfd, MSG_NOSIGNAL) != ssize_t(sizeof kfd))
		finish(std::string("FAIL: send of the held fd's number: ") + std::strerror(errno));
	::close(sock);
	write_ready({});
	wait_for_go(); // CRIU dumps it in here
	if (std::string why = kfd_refused_here(kfd); !why.empty())
		finish("FAIL: after DIR/go: " + why);
	finish("OK"); // and the child's exit 0
}

// The second file of --second-file: a 64 KiB GTT BO at GPU VA `va`.
struct SecondFile {
	int fd = -1;
	uint32_t handle = 0;
	void *cpu = nullptr;
	uint64_t size = 64 << 10, seed = 0, va = 0;

	bool make(const std::string &path, uint64_t at, uint64_t s, std::string *err)
	{
		va = at;
		seed = s;
		fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
		if (fd < 0)
			return *err = "second open of " + path + ": " + std::strerror(errno), false;
		drm_amdgpu_gem_create create{};
		create.in.bo_size = size;
		create.in.alignment = 4096;
		create.in.domains = AMDGPU_GEM_DOMAIN_GTT;
		if (::ioctl(fd, DRM_IOCTL_AMDGPU_GEM_CREATE, &create))
			return *err = std::string("GEM_CREATE on the second file: ") + std::strerror(errno), false;
		handle = create.out.handle;
		drm_amdgpu_gem_mmap mm{};
		mm.in.handle = handle;
		if (::ioctl(fd, DRM_IOCTL_AMDGPU_GEM_MMAP, &mm))
			return *err = std::string("GEM_MMAP on the second file: ") + std::strerror(errno), false;
		cpu = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(mm.out.addr_ptr));
		if (cpu == MAP_FAILED)
			return cpu = nullptr, *err = std::string("mmap through the second file: ") + std::strerror(errno),
			       false;
		drm_amdgpu_gem_va map{};
		map.handle = handle;
		map.operation = AMDGPU_VA_OP_MAP;
		map.flags = AMDGPU_VM_PAGE_READABLE | AMDGPU_VM_PAGE_WRITEABLE;
		map.va_address = va;
		map.map_size = size;
		if (::ioctl(fd, DRM_IOCTL_AMDGPU_GEM_VA, &map))
			return *err = std::string("GEM_VA on the second file: ") + std::strerror(errno), false;
		testcommon::fill_pattern(cpu, size, seed);
		return true;
	}
	void describe(const std::string &path) const
	{
		FILE *f = std::fopen(path.c_str(), "a");
		if (!f)
			finish("FAIL: cannot append to " + path);
		std::fprintf(f, "fd %d\ngem %u %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", fd, handle,
			     uint64_t(uintptr_t(cpu)), size, seed, va);
		std::fclose(f);
	}
};

// $KFDEMU_WORKLOAD_VRAM_MIB, when set.
std::optional<uint64_t> vram_mib_env()
{
	return mib_env("KFDEMU_WORKLOAD_VRAM_MIB");
}

// --render: a process with a render node and no /dev/kfd.
[[noreturn]] void run_render(bool second)
{
	std::string err;
	int fd = -1;
	for (int m = 128; m <= 255 && fd < 0; m++)
		fd = ::open(("/dev/dri/renderD" + std::to_string(m)).c_str(), O_RDWR | O_CLOEXEC);
	if (fd < 0)
		finish("FAIL: no /dev/dri/renderD* opens");
	uint32_t major = 0, minor = 0;
	amdgpu_device_handle dev = nullptr;
	if (int r = amdgpu_device_initialize(fd, &major, &minor, &dev); r)
		finish(status("FAIL: amdgpu_device_initialize", r));
	RenderSet set;
	const auto mib = vram_mib_env();
	const uint64_t vram = mib ? (*mib << 20) + 4096 : RenderSet::kVramBytes;
	if (!set.setup(dev, 0x7e4d + uint64_t(getpid()) * 16, &err, vram))
		finish("FAIL: " + err);
	set.describe(fd, g_dir + "/render");
	SecondFile two;
	if (second) {
		char path[64];
		std::snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
		char node[256] = {};
		if (::readlink(path, node, sizeof node - 1) <= 0)
			finish("FAIL: readlink of the render fd");
		if (!two.make(node, set.gtt->va, set.seed_vcpu + 1, &err))
			finish("FAIL: " + err);
		two.describe(g_dir + "/render");
	}
	write_ready({});
	wait_for_go(); // dumped and restored in here
	if (!set.verify(dev, &err))
		finish("FAIL: after restore: " + err);
	if (second && check(two.cpu, two.size, two.seed) >= 0)
		finish("FAIL: after restore: the second file's BO differs through its CPU mapping");
	finish("OK");
}

// --queue-state (see the header). The SDMA queue's ring and its read
// pointer (+0), write pointer (+8) and fence (+16) are system memory BOs,
// at the same address for the CPU and the GPU.
struct QueueState {
	static constexpr uint32_t kSdmaOpFence = 5; // SDMA v4 FENCE: header, address lo/hi, value
	static constexpr uint32_t kValue = 0xc0ffee;
	Bo ring{}, ptrs{};
	HsaQueueResource sdma{};

	volatile uint64_t *word64(size_t i) const { return static_cast<volatile uint64_t *>(ptrs.addr) + i; }
	uint32_t fence() const { return *reinterpret_cast<volatile uint32_t *>(word64(2)); }

	bool setup(uint32_t gpu, HSA_QUEUEID aql, std::string *err)
	{
		HSAuint32 mask[2] = {0x0000ffffu, 0x3u};
		if (HSAKMT_STATUS s = hsaKmtSetQueueCUMask(aql, 64, mask); s != HSAKMT_STATUS_SUCCESS)
			return *err = status("hsaKmtSetQueueCUMask", s), false;
		HSAuint32 first = ~0u;
		if (HSAKMT_STATUS s = hsaKmtAllocQueueGWS(aql, 1, &first); s != HSAKMT_STATUS_SUCCESS)
			return *err = status("hsaKmtAllocQueueGWS", s), false;
		if (first != 0)
			return *err = "hsaKmtAllocQueueGWS: first GWS " + std::to_string(first), false;
		if (!alloc_bo(0, 4096, false, &ring, err) || !alloc_bo(0, 4096, false, &ptrs, err))
			return false;
		std::memset(ptrs.addr, 0, ptrs.size);
		sdma.Queue_read_ptr_aql = static_cast<HSAuint64 *>(ptrs.addr);
		sdma.Queue_write_ptr_aql = static_cast<HSAuint64 *>(ptrs.addr) + 1;
		if (!create_inactive_sdma(gpu, ring, &sdma, err))
			return false;
		const uint64_t fence_va = reinterpret_cast<uint64_t>(word64(2));
		const uint32_t pkt[4] = {kSdmaOpFence, uint32_t(fence_va), uint32_t(fence_va >> 32), kValue};
		std::memcpy(ring.addr, pkt, sizeof pkt);
		__atomic_store_n(sdma.Queue_write_ptr_aql, uint64_t{sizeof pkt}, __ATOMIC_RELEASE);
		__atomic_store_n(sdma.Queue_DoorBell_aql, uint64_t{sizeof pkt}, __ATOMIC_RELEASE);
		::usleep(50 * 1000);
		if (fence() != 0)
			return *err = "the inactive SDMA queue ran its FENCE", false;
		return true;
	}

	bool verify(HSA_QUEUEID aql, std::string *err)
	{
		if (fence() != 0)
			return *err = "the SDMA queue, inactive when dumped, ran its FENCE before it got its ring back", false;
		HSAuint32 first = ~0u;
		if (hsaKmtAllocQueueGWS(aql, 1, &first) == HSAKMT_STATUS_SUCCESS)
			return *err = "a second GWS allocation succeeded: the restored queue does not hold the GWS", false;
		if (HSAKMT_STATUS s = hsaKmtAllocQueueGWS(aql, 0, &first); s != HSAKMT_STATUS_SUCCESS)
			return *err = status("giving the restored GWS back: hsaKmtAllocQueueGWS(0)", s), false;
		if (HSAKMT_STATUS s = hsaKmtUpdateQueue(sdma.QueueId, 100, HSA_QUEUE_PRIORITY_NORMAL, ring.addr, ring.size,
							 nullptr);
		    s != HSAKMT_STATUS_SUCCESS)
			return *err = status("hsaKmtUpdateQueue(ring back)", s), false;
		for (int i = 0; i < 5000 && fence() != kValue; i++)
			::usleep(1000);
		if (fence() != kValue)
			return *err = "the pending FENCE did not run once the ring was given back (fence " +
				      std::to_string(fence()) + ", read pointer " + std::to_string(*word64(0)) + ")",
			       false;
		if (HSAKMT_STATUS s = hsaKmtDestroyQueue(sdma.QueueId); s != HSAKMT_STATUS_SUCCESS)
			return *err = status("hsaKmtDestroyQueue(SDMA)", s), false;
		return true;
	}
};

// --svm (see the header).
struct SvmState {
	static constexpr size_t kSize = 256 << 10, kPart = 64 << 10;
	void *sys = nullptr, *vram = nullptr;
	uint32_t node = 0;
	std::vector<std::vector<HSA_SVM_ATTRIBUTE>> dumped; // per probe, before the dump

	// kSize bytes at a multiple of kSize: never across a boundary at which
	// SET_ATTR cuts new ranges (1/32 of the smallest VRAM, 2 MiB at least),
	// so each region starts as one range.
	static void *region(std::string *err)
	{
		void *p = ::mmap(nullptr, 2 * kSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return *err = "mmap", nullptr;
		const uintptr_t a = reinterpret_cast<uintptr_t>(p), at = (a + kSize - 1) / kSize * kSize;
		if (at > a)
			::munmap(p, at - a);
		::munmap(reinterpret_cast<void *>(at + kSize), a + kSize - at);
		return reinterpret_cast<void *>(at);
	}
	static bool set(void *at, size_t size, std::vector<HSA_SVM_ATTRIBUTE> attrs, std::string *err)
	{
		if (HSAKMT_STATUS s = hsaKmtSVMSetAttr(at, size, static_cast<unsigned>(attrs.size()), attrs.data());
		    s != HSAKMT_STATUS_SUCCESS)
			return *err = status("hsaKmtSVMSetAttr", s), false;
		return true;
	}
	// The views compared: all of the system-memory region (three ranges),
	// its middle part, the VRAM region.
	std::vector<std::pair<void *, size_t>> probes() const
	{
		return {{sys, kSize}, {static_cast<char *>(sys) + kPart, kPart}, {vram, kSize}};
	}
	bool query(std::vector<std::vector<HSA_SVM_ATTRIBUTE>> *out, std::string *err) const
	{
		out->clear();
		for (auto [at, size] : probes()) {
			std::vector<HSA_SVM_ATTRIBUTE> q{{HSA_SVM_ATTR_PREFERRED_LOC, 0}, {HSA_SVM_ATTR_PREFETCH_LOC, 0},
							 {HSA_SVM_ATTR_SET_FLAGS, 0},	   {HSA_SVM_ATTR_CLR_FLAGS, 0},
							 {HSA_SVM_ATTR_GRANULARITY, 0},	   {HSA_SVM_ATTR_ACCESS, node}};
			if (HSAKMT_STATUS s = hsaKmtSVMGetAttr(at, size, static_cast<unsigned>(q.size()), q.data());
			    s != HSAKMT_STATUS_SUCCESS)
				return *err = status("hsaKmtSVMGetAttr", s), false;
			out->push_back(q);
		}
		return true;
	}
	static std::string show(const std::vector<HSA_SVM_ATTRIBUTE> &v)
	{
		std::string s;
		for (const auto &a : v)
			s += " " + std::to_string(a.type) + ":" + std::to_string(a.value);
		return s;
	}

	bool setup(uint32_t gpu_node, uint64_t seed, std::string *err)
	{
		node = gpu_node;
		if (!(sys = region(err)) || !(vram = region(err)))
			return false;
		testcommon::fill_pattern(sys, kSize, seed);
		testcommon::fill_pattern(vram, kSize, seed + 1);
		if (!set(sys, kSize,
			 {{HSA_SVM_ATTR_ACCESS, node},
			  {HSA_SVM_ATTR_PREFERRED_LOC, 0},
			  {HSA_SVM_ATTR_SET_FLAGS, HSA_SVM_FLAG_GPU_EXEC},
			  {HSA_SVM_ATTR_CLR_FLAGS, HSA_SVM_FLAG_COHERENT},
			  {HSA_SVM_ATTR_GRANULARITY, 4}},
			 err) ||
		    !set(static_cast<char *>(sys) + kPart, kPart,
			 {{HSA_SVM_ATTR_GRANULARITY, 2}, {HSA_SVM_ATTR_SET_FLAGS, HSA_SVM_FLAG_GPU_RO}}, err) ||
		    !set(vram, kSize,
			 {{HSA_SVM_ATTR_ACCESS, node}, {HSA_SVM_ATTR_PREFERRED_LOC, node}, {HSA_SVM_ATTR_PREFETCH_LOC, node}},
			 err))
			return false;
		if (!query(&dumped, err))
			return false;
		// What was set must be what GET_ATTR says, or the comparison after
		// the restore proves little.
		if (dumped[2][1].value != node || dumped[2][0].value != node || dumped[1][4].value != 2 ||
		    !(dumped[1][2].value & HSA_SVM_FLAG_GPU_RO) || dumped[0][4].value != 2 ||
		    dumped[0][5].type != HSA_SVM_ATTR_ACCESS)
			return *err = "GET_ATTR does not show what was set:" + show(dumped[0]) + " |" + show(dumped[1]) +
				      " |" + show(dumped[2]),
			       false;
		return true;
	}

	// --svm-pending: GPU work on the VRAM range left pending at the dump.
	// An SDMA queue on the GPU is made inactive (hsaKmtUpdateQueue without
	// a ring) with a COPY_LINEAR of a system BO (pattern seed + 2) into the
	// first kPart bytes of the VRAM range and a FENCE in its ring, doorbell
	// rung. After the restore the range still has its own bytes; once the
	// ring is given back the copy runs, then a second one copies that part
	// out of VRAM into another system BO: both must hold the new pattern.
	static constexpr uint32_t kSdmaCopy = 1, kSdmaFence = 5;
	Bo ring{}, src{}, out{};
	HsaQueueResource q{};
	uint64_t wptr = 0;

	volatile uint32_t *fence_word() const { return static_cast<volatile uint32_t *>(out.addr) + kPart / 4; }
	void put(std::initializer_list<uint32_t> dw)
	{
		for (uint32_t v : dw) {
			static_cast<uint32_t *>(ring.addr)[wptr / 4 % (ring.size / 4)] = v;
			wptr += 4;
		}
	}
	void copy_and_fence(uint64_t dst, uint64_t from, uint32_t value)
	{
		put({kSdmaCopy, uint32_t(kPart - 1), 0, uint32_t(from), uint32_t(from >> 32), uint32_t(dst),
		     uint32_t(dst >> 32)});
		const uint64_t f = reinterpret_cast<uint64_t>(fence_word());
		put({kSdmaFence, uint32_t(f), uint32_t(f >> 32), value});
		__atomic_store_n(q.Queue_write_ptr_aql, wptr, __ATOMIC_RELEASE);
		__atomic_store_n(q.Queue_DoorBell_aql, wptr, __ATOMIC_RELEASE);
	}
	bool wait_fence(uint32_t value) const
	{
		for (int i = 0; i < 5000 && *fence_word() != value; i++)
			::usleep(1000);
		return *fence_word() == value;
	}

	bool setup_pending(uint64_t seed, std::string *err)
	{
		if (!alloc_bo(0, 4096, false, &ring, err) || !alloc_bo(0, kPart, false, &src, err) ||
		    !alloc_bo(0, kPart + 4096, false, &out, err))
			return false;
		testcommon::fill_pattern(src.addr, kPart, seed + 2);
		std::memset(out.addr, 0, out.size);
		if (!create_inactive_sdma(node, ring, &q, err))
			return false;
		copy_and_fence(reinterpret_cast<uint64_t>(vram), reinterpret_cast<uint64_t>(src.addr), 1);
		::usleep(50 * 1000);
		if (*fence_word() != 0 || check(vram, kSize, seed + 1) >= 0)
			return *err = "the inactive SDMA queue ran its copy into the VRAM range", false;
		return true;
	}

	bool verify_pending(std::string *err)
	{
		if (HSAKMT_STATUS s = hsaKmtUpdateQueue(q.QueueId, 100, HSA_QUEUE_PRIORITY_NORMAL, ring.addr, ring.size,
							 nullptr);
		    s != HSAKMT_STATUS_SUCCESS)
			return *err = status("hsaKmtUpdateQueue(ring back)", s), false;
		if (!wait_fence(1))
			return *err = "the copy pending into the VRAM range did not run once the ring was given back", false;
		if (std::memcmp(vram, src.addr, kPart) != 0)
			return *err = "the VRAM range does not hold what the pending copy wrote", false;
		copy_and_fence(reinterpret_cast<uint64_t>(out.addr), reinterpret_cast<uint64_t>(vram), 2);
		if (!wait_fence(2) || std::memcmp(out.addr, src.addr, kPart) != 0)
			return *err = "a copy out of the VRAM range did not bring its bytes", false;
		if (HSAKMT_STATUS s = hsaKmtDestroyQueue(q.QueueId); s != HSAKMT_STATUS_SUCCESS)
			return *err = status("hsaKmtDestroyQueue(SDMA)", s), false;
		return true;
	}

	bool verify(uint64_t seed, bool pending, std::string *err)
	{
		std::vector<std::vector<HSA_SVM_ATTRIBUTE>> now;
		if (!query(&now, err))
			return false;
		for (size_t i = 0; i < now.size(); i++)
			if (show(now[i]) != show(dumped[i]))
				return *err = "SVM attributes of probe " + std::to_string(i) + " are" + show(now[i]) +
					      ", dumped" + show(dumped[i]),
				       false;
		if (check(sys, kSize, seed) >= 0 || check(vram, kSize, seed + 1) >= 0)
			return *err = "an SVM region's bytes differ", false;
		if (pending && !verify_pending(err))
			return false;
		return set(vram, kSize, {{HSA_SVM_ATTR_PREFETCH_LOC, 0}}, err);
	}
};

// --user-queue: an SDMA user queue of KFD (HSA_QUEUE_SDMA) on the first
// GPU, which runs only while the process's queues are neither paused nor
// evicted (unlike libdrm_amdgpu's CS above). After DIR/go one COPY_LINEAR
// of the GTT BO into a new buffer, a FENCE, and a FENCE into the event's
// slot plus a TRAP that signal the event go through it; the verdict needs the event within 2 s, the fence
// and the copied bytes.
struct UserQueue {
	static constexpr uint64_t kRing = 16 << 10;
	Bo mem{};		 // the ring, then the fence (system memory)
	Bo dst{};		 // the copy's destination
	HsaQueueResource q{};
	uint64_t wptr = 0;

	// libhsakmt places an SDMA queue's read and write pointers itself.
	uint64_t *rptr_slot() const { return q.Queue_read_ptr_aql; }
	uint64_t *wptr_slot() const { return q.Queue_write_ptr_aql; }
	volatile uint32_t *fence() const
	{
		return reinterpret_cast<uint32_t *>(static_cast<char *>(mem.addr) + kRing);
	}

	bool create(uint32_t node, uint64_t copy_size, std::string *err)
	{
		if (!alloc_bo(0, kRing + 4096, false, &mem, err) || !alloc_bo(0, copy_size, false, &dst, err))
			return false;
		std::memset(mem.addr, 0, mem.size);
		if (HSAKMT_STATUS s = hsaKmtCreateQueue(node, HSA_QUEUE_SDMA, 100, HSA_QUEUE_PRIORITY_NORMAL, mem.addr,
							 kRing, nullptr, &q);
		    s != HSAKMT_STATUS_SUCCESS)
			return *err = status("hsaKmtCreateQueue(SDMA)", s), false;
		return true;
	}
	void put(std::initializer_list<uint32_t> dw)
	{
		for (uint32_t v : dw) {
			std::memcpy(static_cast<char *>(mem.addr) + wptr % kRing, &v, 4);
			wptr += 4;
		}
	}
	// The copy, fence and trap; true when all three happened.
	bool run(const Bo &src, HsaEvent *ev, std::string *err)
	{
		constexpr uint32_t kOpCopy = 1, kOpFence = 5, kOpTrap = 6, kDone = 0x600dC0DE;
		const auto s = uint64_t(uintptr_t(src.addr)), d = uint64_t(uintptr_t(dst.addr));
		const auto f = uint64_t(uintptr_t(fence()));
		put({kOpCopy, uint32_t(src.size - 1), 0, uint32_t(s), uint32_t(s >> 32), uint32_t(d), uint32_t(d >> 32)});
		put({kOpFence, uint32_t(f), uint32_t(f >> 32), kDone});
		// KFD signals an event from an interrupt only when its slot in
		// the event page is written first (HWData2: the slot's address).
		const uint64_t slot = ev->EventData.HWData2;
		put({kOpFence, uint32_t(slot), uint32_t(slot >> 32), ev->EventId});
		put({kOpTrap, ev->EventId});
		__atomic_store_n(wptr_slot(), wptr, __ATOMIC_RELEASE);
		__atomic_store_n(q.Queue_DoorBell_aql, wptr, __ATOMIC_RELEASE);
		if (HSAKMT_STATUS st = hsaKmtWaitOnEvent(ev, 2000); st != HSAKMT_STATUS_SUCCESS)
			return *err = status("the SDMA user queue's TRAP did not signal the event within 2 s: "
					     "hsaKmtWaitOnEvent",
					     st) +
				      " (read pointer " + std::to_string(__atomic_load_n(rptr_slot(), __ATOMIC_ACQUIRE)) +
				      " of " + std::to_string(wptr) + ")",
			       false;
		if (*fence() != kDone)
			return *err = "the SDMA user queue's FENCE was not written", false;
		if (int64_t at = check(dst.addr, src.size, src.seed); at >= 0)
			return *err = "the SDMA user queue's copy differs at word " + std::to_string(at), false;
		return true;
	}
};

// --cp-queue: a KFD CP (PM4) compute queue (HSA_QUEUE_COMPUTE) on the first
// GPU, paused with packets pending: a WRITE_DATA of kFirst, a WAIT_REG_MEM
// on a flag in system memory (0 when dumped), then a WRITE_DATA of kDone and
// a RELEASE_MEM that writes the event's slot and raises the end-of-pipe
// interrupt with the event's id. Before the dump the CP has run the first
// WRITE_DATA and waits at the WAIT_REG_MEM (read pointer 5, kDone not
// written); the process then clears kFirst. After the restore the CP still
// waits there and kFirst is still clear (a CP that started over would have
// written it again); once the flag is set it runs the rest: the event comes
// within 2 s, kDone is written, kFirst stays clear and the read pointer
// reaches the write pointer.
struct CpQueue {
	static constexpr uint64_t kRing = 4096;
	static constexpr uint32_t kDone = 0xc0de600d, kFirst = 0xf125;
	static constexpr uint32_t kWaitAt = 5; // dwords: the WAIT_REG_MEM follows the first WRITE_DATA
	// The ring, then the flag (+kRing) and the WRITE_DATA targets (kDone at
	// +kRing+4, kFirst at +kRing+8).
	Bo mem{};
	HsaQueueResource q{};
	uint64_t wptr = 0; // dwords

	static uint32_t pm4(uint32_t op, uint32_t dwords) { return (3u << 30) | ((dwords - 2) << 16) | (op << 8); }
	volatile uint32_t *word(uint64_t off) const
	{
		return reinterpret_cast<volatile uint32_t *>(static_cast<char *>(mem.addr) + off);
	}
	uint32_t rptr() const { return __atomic_load_n(q.Queue_read_ptr, __ATOMIC_ACQUIRE); }
	void put(std::initializer_list<uint32_t> dw)
	{
		for (uint32_t v : dw)
			*word((wptr++ * 4) % kRing) = v;
	}
	bool setup(uint32_t node, HsaEvent *ev, std::string *err)
	{
		if (!alloc_bo(0, kRing + 4096, false, &mem, err))
			return false;
		std::memset(mem.addr, 0, mem.size);
		if (HSAKMT_STATUS s = hsaKmtCreateQueue(node, HSA_QUEUE_COMPUTE, 100, HSA_QUEUE_PRIORITY_NORMAL, mem.addr,
							 kRing, nullptr, &q);
		    s != HSAKMT_STATUS_SUCCESS)
			return *err = status("hsaKmtCreateQueue(COMPUTE)", s), false;
		const auto flag = uint64_t(uintptr_t(word(kRing))), out = flag + 4;
		const uint64_t slot = ev->EventData.HWData2;
		const auto lo = [](uint64_t v) { return uint32_t(v); };
		const auto hi = [](uint64_t v) { return uint32_t(v >> 32); };
		put({pm4(0x37, 5), 5u << 8 | 1u << 20, lo(out + 4), hi(out + 4), kFirst});	// WRITE_DATA
		put({pm4(0x3c, 7), 1u << 4 | 3, lo(flag), hi(flag), 1, 0xffffffff, 4});		// WAIT_REG_MEM ==
		put({pm4(0x37, 5), 5u << 8 | 1u << 20, lo(out), hi(out), kDone});		// WRITE_DATA
		put({pm4(0x49, 8), 0x14, 1u << 29 | 2u << 24, lo(slot), hi(slot), ev->EventId, 0, ev->EventId});
		__atomic_store_n(q.Queue_write_ptr_aql, wptr, __ATOMIC_RELEASE);
		__atomic_store_n(q.Queue_DoorBell_aql, wptr, __ATOMIC_RELEASE);
		::usleep(50 * 1000);
		if (rptr() != kWaitAt || *word(kRing + 4) != 0 || *word(kRing + 8) != kFirst)
			return *err = "the CP queue did not run its first WRITE_DATA and stop at its WAIT_REG_MEM (read "
				      "pointer " + std::to_string(rptr()) + ")",
			       false;
		*word(kRing + 8) = 0; // a CP that starts over writes it again
		return true;
	}
	bool verify(HsaEvent *ev, std::string *err)
	{
		if (*word(kRing + 8) != 0)
			return *err = "the restored CP queue ran its first WRITE_DATA again: it started over", false;
		if (rptr() != kWaitAt || *word(kRing + 4) != 0)
			return *err = "the restored CP queue is not at its WAIT_REG_MEM (read pointer " +
				      std::to_string(rptr()) + ")",
			       false;
		__atomic_store_n(word(kRing), 1u, __ATOMIC_RELEASE);
		if (HSAKMT_STATUS s = hsaKmtWaitOnEvent(ev, 2000); s != HSAKMT_STATUS_SUCCESS)
			return *err = status("the CP queue's RELEASE_MEM did not signal the event within 2 s: "
					     "hsaKmtWaitOnEvent",
					     s) +
				      " (read pointer " + std::to_string(rptr()) + " of " + std::to_string(wptr) + ")",
			       false;
		if (*word(kRing + 4) != kDone)
			return *err = "the CP queue's WRITE_DATA was not written", false;
		if (*word(kRing + 8) != 0)
			return *err = "the restored CP queue ran its first WRITE_DATA again: it started over", false;
		if (rptr() != wptr % (kRing / 4))
			return *err = "the CP queue's read pointer is " + std::to_string(rptr()) + ", not " +
				      std::to_string(wptr % (kRing / 4)),
			       false;
		if (HSAKMT_STATUS s = hsaKmtDestroyQueue(q.QueueId); s != HSAKMT_STATUS_SUCCESS)
			return *err = status("hsaKmtDestroyQueue(COMPUTE)", s), false;
		return true;
	}
};

void write_file(const std::string &name, const char *text)
{
	(void)testcommon::publish_file(g_dir + "/" + name, std::string(text) + "\n");
}

// Every BO's contents through its mapping, and each GPU's SDMA checks.
bool check_all(const std::vector<Bo> &bos, const std::vector<uint32_t> &gpus, const std::vector<int> &render_fds,
	       std::string *err)
{
	for (const auto &b : bos)
		if (int64_t at = check_bo(b.addr, b); at >= 0) {
			char msg[160];
			std::snprintf(msg, sizeof msg, "BO at %p (%" PRIu64 " bytes): word %" PRId64 " differs", b.addr,
				      b.size, at);
			return *err = msg, false;
		}
	for (size_t i = 0; i < gpus.size(); i++)
		if (!gpu_copies(gpus[i], render_fds[i], bos[i], err))
			return *err = "GPU node " + std::to_string(gpus[i]) + ": " + *err, false;
	return true;
}

// --periodic (see the header): `bos` holds the VRAM BOs first, one per GPU.
void periodic_steps(int steps, std::vector<Bo> &bos, const std::vector<uint32_t> &gpus,
		    const std::vector<int> &render_fds, bool replica)
{
	std::string err;
	for (int k = 1; k <= steps; k++) {
		const std::string step = g_dir + "/step" + std::to_string(k);
		while (access(step.c_str(), F_OK) != 0)
			usleep(10000);
		if (!check_all(bos, gpus, render_fds, &err))
			finish("FAIL: after dump " + std::to_string(k) + " (--leave-running): " + err);
		for (size_t i = 0; k < steps && i < gpus.size(); i++) {
			const uint64_t mibs = bos[i].size >> 20;
			const uint64_t off = (mibs ? (3ull * k) % mibs : 0) << 20;
			const uint64_t len = std::min<uint64_t>(1 << 20, bos[i].size);
			if (!gpu_patch(render_fds[i], bos[i], off, len, 0xc0de0000 + k * 16 + (replica ? 0 : i), &err))
				finish("FAIL: step " + std::to_string(k) + ": GPU node " + std::to_string(gpus[i]) +
				       ": rewriting a MiB of its VRAM BO: " + err);
		}
		write_file("step" + std::to_string(k) + ".done", "OK");
	}
}

// The seed of every VRAM BO under --replica (above every seed of a
// process of its own).
constexpr uint64_t kReplicaSeed = 1'000'000;

// A VRAM BO on every GPU node (2 MiB, or $KFDEMU_WORKLOAD_VRAM_MIB): the
// nodes, their render minors and the BOs, each with the next seed (with
// `replica`: all with kReplicaSeed, the same bytes on every GPU and in
// every process).
void gpu_bos(const HsaSystemProperties &sys, std::vector<uint32_t> *gpus_out, std::vector<int> *minors_out,
	     std::vector<Bo> *bos_out, uint64_t *seed_io, bool replica)
{
	std::string err;
	std::vector<uint32_t> &gpus = *gpus_out;
	std::vector<int> &minors = *minors_out;
	std::vector<Bo> &bos = *bos_out;
	uint64_t &seed = *seed_io;
	const uint64_t vram_bytes = vram_mib_env().value_or(2) << 20;
	for (uint32_t node = 0; node < sys.NumNodes; node++) {
		HsaNodeProperties props{};
		if (hsaKmtGetNodeProperties(node, &props) != HSAKMT_STATUS_SUCCESS)
			finish("FAIL: hsaKmtGetNodeProperties");
		if (props.NumFComputeCores == 0)
			continue;
		gpus.push_back(node);
		minors.push_back(props.DrmRenderMinor);
		Bo b{};
		if (!alloc_bo(node, vram_bytes, true, &b, &err))
			finish("FAIL: VRAM: " + err);
		b.seed = replica ? kReplicaSeed : seed++;
		bos.push_back(b);
	}
}

// The workload's options beyond DIR (the rows of kOptions).
struct Modes {
	bool tree = false, render = false, second_file = false;
	bool gem = false, gem_cpu_visible = false, gem_high_va = false, gem_va_offset = false;
	bool metadata = false, queue_state = false, user_queue = false, cp_queue = false, svm = false, svm_pending = false;
	int periodic = 0; // --periodic N
	bool named_semaphore = false, fork_holder = false, scm_holder = false;
	bool replica = false;
	int scm_socket = -1; // --scm-holder's child: its end of the pair to the parent (no option)
};

// One option (see the header): the switch it sets or the number it takes,
// and what it may be given with.
struct Option {
	const char *name;
	bool Modes::*on = nullptr;   // a switch
	int Modes::*number = nullptr; // an option taking a number (N >= 0)
	bool kfd = true;              // the process opens /dev/kfd: not with --render
	const char *needs = nullptr;  // only with this option
	const char *excludes[2] = {}; // not with these
};

constexpr Option kOptions[] = {
	{"--tree", &Modes::tree, nullptr, true, nullptr, {"--fork-holder", "--scm-holder"}},
	{"--replica", &Modes::replica},
	{"--render", &Modes::render, nullptr, false},
	{"--second-file", &Modes::second_file, nullptr, false, "--render"},
	{"--kfd-gem", &Modes::gem},
	{"--gem-cpu-visible", &Modes::gem_cpu_visible, nullptr, true, "--kfd-gem"},
	{"--gem-high-va", &Modes::gem_high_va, nullptr, true, "--kfd-gem", {"--gem-va-offset"}},
	{"--gem-va-offset", &Modes::gem_va_offset, nullptr, true, "--kfd-gem"},
	{"--metadata", &Modes::metadata},
	{"--queue-state", &Modes::queue_state},
	{"--user-queue", &Modes::user_queue},
	{"--cp-queue", &Modes::cp_queue, nullptr, true, nullptr, {"--user-queue"}},
	{"--svm", &Modes::svm},
	{"--svm-pending", &Modes::svm_pending, nullptr, true, "--svm"},
	{"--periodic", nullptr, &Modes::periodic},
	{"--named-semaphore", &Modes::named_semaphore},
	{"--fork-holder", &Modes::fork_holder},
	{"--scm-holder", &Modes::scm_holder, nullptr, true, nullptr, {"--fork-holder"}},
};

const Option *option(std::string_view name)
{
	for (const Option &o : kOptions)
		if (name == o.name)
			return &o;
	return nullptr;
}

bool given(const Modes &m, const Option &o)
{
	return o.on ? m.*o.on : m.*o.number != 0;
}

// Why the options given cannot go together ("" when they can).
std::string conflict(const Modes &m)
{
	for (const Option &o : kOptions) {
		if (!given(m, o))
			continue;
		if (o.kfd && m.render)
			return std::string(o.name) + " is not for --render (a process without /dev/kfd)";
		if (o.needs && !given(m, *option(o.needs)))
			return std::string(o.name) + " needs " + o.needs;
		for (const char *x : o.excludes)
			if (x && given(m, *option(x)))
				return std::string(o.name) + " and " + x + " exclude each other";
	}
	return "";
}

// Parses the options before DIR into `m`; returns the index of DIR, or -1
// after printing the usage (and why).
int parse(int argc, char **argv, Modes *m)
{
	int i = 1;
	std::string why;
	for (; i < argc && argv[i][0] == '-' && why.empty(); i++) {
		const Option *o = option(argv[i]);
		if (!o) {
			why = std::string("unknown option ") + argv[i];
		} else if (o->on) {
			m->*o->on = true;
		} else {
			char *end = nullptr;
			const long n = i + 1 < argc ? std::strtol(argv[++i], &end, 10) : -1;
			if (!end || *end || n < 0 || n > INT_MAX)
				why = std::string(o->name) + " takes a number N >= 0";
			else
				m->*o->number = int(n);
		}
	}
	if (why.empty() && argc != i + 1)
		why = "one DIR expected after the options";
	if (why.empty())
		why = conflict(*m);
	if (why.empty())
		return i;
	std::fprintf(stderr, "%s: %s\nusage: %s [OPTION]... DIR, OPTION one of:\n", argv[0], why.c_str(), argv[0]);
	for (const Option &o : kOptions) {
		std::string line = std::string("  ") + o.name + (o.number ? " N" : "");
		if (!o.kfd)
			line += " (no /dev/kfd)";
		if (o.needs)
			line += std::string(" (with ") + o.needs + ")";
		for (const char *x : o.excludes)
			if (x)
				line += std::string(" (not with ") + x + ")";
		std::fprintf(stderr, "%s\n", line.c_str());
	}
	return -1;
}

// --named-semaphore (see the header). The name is libhsakmt's
// (src/device/hsakmt_shm.cpp), its initial count libhsakmt's too.
void create_hsakmt_semaphore()
{
	sem_t *sem = ::sem_open("hsakmt_semaphore", O_CREAT, 0666, 1);
	if (sem == SEM_FAILED)
		finish(std::string("FAIL: sem_open hsakmt_semaphore: ") + std::strerror(errno));
	::sem_close(sem);
}

// A process with /dev/kfd (every mode but --render): what it makes before
// DIR/ready, in this order, and checks after DIR/go.
struct KfdProcess {
	const Modes &m;
	std::vector<Bo> bos; // one VRAM BO per GPU (in gpus order), then GTT
	std::vector<uint32_t> gpus;
	std::vector<int> minors, render_fds;
	uint64_t seed = 0x5eed + uint64_t(getpid()) * 16;
	Bo gtt{};
	HsaEvent *ev = nullptr;
	HsaQueueResource q{};
	QueueState qs;
	SvmState svm;
	uint64_t svm_seed = 0;
	UserQueue uq;
	CpQueue cq;
	amdgpu_device_handle gem_dev = nullptr;
	RenderSet gem_set;
	MetadataSet md_set;
	int kfd_mine = -1, kfd_parents = -1; // --scm-holder's child: its fd of its /dev/kfd file, the parent's

	explicit KfdProcess(const Modes &modes) : m(modes) {}

	// libhsakmt opened, a VRAM BO per GPU and a GTT BO, filled; the
	// render-node fds libhsakmt opened.
	void open_kfd()
	{
		std::string err;
		if (m.named_semaphore)
			create_hsakmt_semaphore();
		if (HSAKMT_STATUS s = hsaKmtOpenKFD(); s != HSAKMT_STATUS_SUCCESS)
			finish(status("FAIL: hsaKmtOpenKFD", s));
		HsaSystemProperties sys{};
		if (HSAKMT_STATUS s = hsaKmtAcquireSystemProperties(&sys); s != HSAKMT_STATUS_SUCCESS)
			finish(status("FAIL: hsaKmtAcquireSystemProperties", s));
		gpu_bos(sys, &gpus, &minors, &bos, &seed, m.replica);
		if (gpus.empty())
			finish("FAIL: no GPU node");
		if (!alloc_bo(0, 1 << 20, false, &gtt, &err))
			finish("FAIL: GTT: " + err);
		gtt.seed = seed++;
		bos.push_back(gtt);
		for (const auto &b : bos)
			testcommon::fill_pattern(b.addr, b.size, b.seed);
		for (int minor : minors) {
			int fd = find_render_fd(minor);
			if (fd < 0)
				finish("FAIL: no fd of /dev/dri/renderD" + std::to_string(minor) +
				       " (libhsakmt's) in /proc/self/fd");
			render_fds.push_back(fd);
		}
	}

	// The signal event and the AQL queue on the first GPU; --queue-state,
	// --svm, --user-queue, --cp-queue.
	void make_queues()
	{
		std::string err;
		HsaEventDescriptor desc{};
		desc.EventType = HSA_EVENTTYPE_SIGNAL;
		desc.NodeId = gpus[0];
		if (HSAKMT_STATUS s = hsaKmtCreateEvent(&desc, true, false, &ev); s != HSAKMT_STATUS_SUCCESS)
			finish(status("FAIL: hsaKmtCreateEvent", s));
		Bo ring{};
		if (!alloc_bo(0, 64 << 10, false, &ring, &err))
			finish("FAIL: ring: " + err);
		if (HSAKMT_STATUS s = hsaKmtCreateQueue(gpus[0], HSA_QUEUE_COMPUTE_AQL, 100, HSA_QUEUE_PRIORITY_NORMAL,
							 ring.addr, ring.size, nullptr, &q);
		    s != HSAKMT_STATUS_SUCCESS)
			finish(status("FAIL: hsaKmtCreateQueue", s));
		if (m.queue_state && !qs.setup(gpus[0], q.QueueId, &err))
			finish("FAIL: queue state: " + err);
		svm_seed = seed;
		seed += 2;
		if (m.svm && !svm.setup(gpus[0], svm_seed, &err))
			finish("FAIL: SVM: " + err);
		if (m.svm_pending && !svm.setup_pending(svm_seed, &err))
			finish("FAIL: SVM pending copy: " + err);
		if (m.user_queue && !uq.create(gpus[0], gtt.size, &err))
			finish("FAIL: " + err);
		if (m.cp_queue && !cq.setup(gpus[0], ev, &err))
			finish("FAIL: " + err);
	}

	// --kfd-gem, --metadata: GEM BOs of its own on libhsakmt's render-node
	// file of the first GPU.
	void make_gem()
	{
		std::string err;
		if ((m.gem || m.metadata) && !gem_dev) {
			uint32_t major = 0, minor = 0;
			if (int r = amdgpu_device_initialize(render_fds[0], &major, &minor, &gem_dev); r)
				finish(status("FAIL: amdgpu_device_initialize", r));
		}
		const uint64_t vram_flags = m.gem_cpu_visible ? 0 : AMDGPU_GEM_CREATE_NO_CPU_ACCESS;
		if (m.gem && !gem_set.setup(gem_dev, seed, &err, RenderSet::kVramBytes, vram_flags,
					    m.gem_high_va ? AMDGPU_VA_RANGE_HIGH : 0, m.gem_va_offset ? 64ull << 30 : 0))
			finish("FAIL: GEM BOs: " + err);
		if (m.metadata && !md_set.setup(gem_dev, gpus[0], seed + 3, &err))
			finish("FAIL: metadata: " + err);
	}

	// --fork-holder: the child holding the inherited fds; --scm-holder's
	// child: its /dev/kfd file sent to the parent.
	void share_kfd_file()
	{
		std::string err;
		if (m.fork_holder) {
			const int kfd = find_fd_of("/dev/kfd");
			if (kfd < 0)
				finish("FAIL: no fd of /dev/kfd (libhsakmt's) in /proc/self/fd");
			const pid_t parent = ::getpid();
			std::fflush(nullptr);
			const pid_t c = ::fork();
			if (c < 0)
				finish("FAIL: fork of the fd holder");
			if (c == 0)
				hold_inherited_fds(parent, kfd);
			g_child = c;
		}
		if (m.scm_socket < 0)
			return;
		kfd_mine = find_fd_of("/dev/kfd");
		if (kfd_mine < 0)
			finish("FAIL: no fd of /dev/kfd (libhsakmt's) in /proc/self/fd");
		if (!send_fd(m.scm_socket, kfd_mine, &err))
			finish("FAIL: sending the /dev/kfd file to the parent: " + err);
		if (::recv(m.scm_socket, &kfd_parents, sizeof kfd_parents, 0) != ssize_t(sizeof kfd_parents))
			finish(std::string("FAIL: the parent's fd number: ") + std::strerror(errno));
		::close(m.scm_socket);
	}

	// After DIR/go (dumped and restored): every check of the modes given.
	[[noreturn]] void verify()
	{
		std::string err;
		if (kfd_mine >= 0)
			if (std::string why = not_same_file(kfd_mine, ::getppid(), kfd_parents); !why.empty())
				finish("FAIL: after DIR/go: " + why);
		if (m.gem && !gem_set.verify(gem_dev, &err))
			finish("FAIL: after restore: GEM BOs: " + err);
		if (m.metadata && !md_set.verify(&err))
			finish("FAIL: after restore: metadata: " + err);
		if (!check_all(bos, gpus, render_fds, &err))
			finish("FAIL: after restore: " + err);
		if (m.cp_queue) {
			if (!cq.verify(ev, &err))
				finish("FAIL: after restore: " + err);
		} else if (m.user_queue) {
			if (!uq.run(gtt, ev, &err))
				finish("FAIL: after restore: " + err);
			if (HSAKMT_STATUS s = hsaKmtDestroyQueue(uq.q.QueueId); s != HSAKMT_STATUS_SUCCESS)
				finish(status("FAIL: after restore: hsaKmtDestroyQueue(SDMA)", s));
		} else {
			if (HSAKMT_STATUS s = hsaKmtSetEvent(ev); s != HSAKMT_STATUS_SUCCESS)
				finish(status("FAIL: after restore: hsaKmtSetEvent", s));
			if (HSAKMT_STATUS s = hsaKmtWaitOnEvent(ev, 2000); s != HSAKMT_STATUS_SUCCESS)
				finish(status("FAIL: after restore: hsaKmtWaitOnEvent", s));
		}
		if (m.queue_state && !qs.verify(q.QueueId, &err))
			finish("FAIL: after restore: queue state: " + err);
		if (m.svm && !svm.verify(svm_seed, m.svm_pending, &err))
			finish("FAIL: after restore: SVM: " + err);
		if (HSAKMT_STATUS s = hsaKmtDestroyQueue(q.QueueId); s != HSAKMT_STATUS_SUCCESS)
			finish(status("FAIL: after restore: hsaKmtDestroyQueue", s));
		finish("OK");
	}
};

[[noreturn]] void run(const Modes &m)
{
	KfdProcess p(m);
	p.open_kfd();
	p.make_queues();
	p.make_gem();
	p.share_kfd_file();
	write_ready(p.bos);
	periodic_steps(m.periodic, p.bos, p.gpus, p.render_fds, m.replica);
	wait_for_go(); // dumped and restored in here
	p.verify();
}

// Forked before any KFD call (--tree, --scm-holder): the child goes on in
// DIR/child; returns its pid in the parent, 0 in the child.
pid_t fork_child()
{
	const std::string child_dir = g_dir + "/child";
	if (::mkdir(child_dir.c_str(), 0755) && errno != EEXIST)
		finish("FAIL: mkdir " + child_dir);
	std::fflush(nullptr);
	const pid_t c = ::fork();
	if (c < 0)
		finish("FAIL: fork");
	if (c == 0)
		g_dir = child_dir;
	else
		g_child = c;
	return c;
}

} // namespace

int main(int argc, char **argv)
{
	Modes m;
	const int dir = parse(argc, argv, &m);
	if (dir < 0)
		return 2;
	g_dir = argv[dir];
	if (m.tree)
		fork_child(); // the child opens its own KFD context
	if (m.scm_holder) {
		// The child makes the GPU state in DIR/child and hands its
		// /dev/kfd file to this process.
		int sv[2];
		if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv))
			finish(std::string("FAIL: socketpair: ") + std::strerror(errno));
		if (fork_child() > 0) {
			::close(sv[1]);
			hold_received_kfd(sv[0]);
		}
		::close(sv[0]);
		m.scm_socket = sv[1];
	}
	if (m.render)
		run_render(m.second_file);
	run(m);
}
