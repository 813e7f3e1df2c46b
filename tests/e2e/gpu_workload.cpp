// SPDX-License-Identifier: GPL-2.0-only
//
// gpu-workload: a ROCm-like GPU process for the end-to-end tests and the
// benchmarks. Through libhsakmt (the real library, unmodified) it opens KFD,
// allocates VRAM BOs on every GPU and system-memory (GTT) BOs, maps them,
// fills each with a deterministic pattern through its CPU mapping, creates a
// compute queue and a signal event per GPU, writes a manifest of what it
// made, then waits to be checkpointed (or exits with --exit).
//
//   gpu-workload --manifest FILE [--ready FILE] [--vram LIST] [--gtt LIST]
//                [--gem LIST] [--no-queues] [--exit] [--children N] [--zero]
//                [--changes FILE] [--replica LIST]
//   --gem LIST: on every GPU, GEM BOs (libdrm_amdgpu) of these sizes in
//   VRAM on the render-node file libhsakmt opened for that GPU (as a ROCm
//   runtime's own GEM BOs sit beside its KFD BOs), CPU-visible and
//   CPU-mapped, mapped at a GPU VA, filled like the KFD BOs; their manifest
//   entries say "gem" (the render-node benchmark).
//   --zero: VRAM BOs hold zeros, not a pattern: the sparse-pages
//   benchmark (their manifest entries fill 0 bytes). The zeros are
//   written, as a pattern would be, so the emulator's memory behind them
//   is resident as VRAM is (untouched, every first read of a page would
//   allocate it, a cost real VRAM does not have).
//   --children N: first fork N children; each runs the same workload with
//   its own KFD context, seeds and manifest (FILE.<k>, k = 1..N), and the
//   root writes the ready file once all are ready.
//   --changes FILE: on each SIGUSR1, read FILE ("ADDR SIZE SEED" lines,
//   decimal) and write each range with the pattern of SEED through the
//   CPU mapping, as the BOs were filled; then create FILE.done (the
//   incremental-dump benchmark changes chosen 1 MiB chunks of a BO between
//   two dumps this way). SIGUSR1 is blocked except while the workload waits.
//   --replica LIST: on every GPU, VRAM BOs of these sizes after the
//   --vram ones, the k-th filled with the pattern of seed kReplicaSeed + k
//   on every GPU and in every process of a --children tree: the same
//   bytes several times (the deduplicated-checkpoint tests).
//   LIST: comma-separated sizes with K/M/G suffixes and '+' sums, e.g.
//         4K,12K,1M+4K,1G+36K (each a multiple of 4 KiB); SIZExN repeats
//         a size N times (64Kx16384)
#include <amdgpu.h>
#include <amdgpu_drm.h>
#include <dirent.h>
#include <hsakmt.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gpu_workload.h"
#include "testcommon/marker.h"
#include "testcommon/pattern.h"

namespace {

// The seed of the first --replica BO's pattern (above any per-process seed:
// those start at 1 + 1000 k).
constexpr uint64_t kReplicaSeed = 1'000'000;

[[noreturn]] void die(const char *what, long code = 0)
{
	std::fprintf(stderr, "gpu-workload: %s (%ld)\n", what, code);
	std::exit(2);
}

uint64_t parse_size(const std::string &s)
{
	uint64_t total = 0;
	size_t pos = 0;
	while (pos < s.size()) {
		size_t end = s.find('+', pos);
		if (end == std::string::npos)
			end = s.size();
		std::string term = s.substr(pos, end - pos);
		uint64_t mult = 1;
		switch (term.empty() ? 0 : term.back()) {
		case 'K': mult = 1ull << 10; break;
		case 'M': mult = 1ull << 20; break;
		case 'G': mult = 1ull << 30; break;
		default: break;
		}
		if (mult != 1)
			term.pop_back();
		total += std::strtoull(term.c_str(), nullptr, 10) * mult;
		pos = end + 1;
	}
	return total;
}

std::vector<uint64_t> parse_list(const char *s)
{
	std::vector<uint64_t> out;
	std::string str = s;
	size_t pos = 0;
	while (pos <= str.size()) {
		size_t end = str.find(',', pos);
		if (end == std::string::npos)
			end = str.size();
		if (end > pos) {
			// SIZExN: N BOs of SIZE.
			std::string item = str.substr(pos, end - pos);
			unsigned long count = 1;
			if (auto x = item.find('x'); x != std::string::npos) {
				count = std::strtoul(item.c_str() + x + 1, nullptr, 10);
				item.resize(x);
			}
			out.insert(out.end(), count, parse_size(item));
		}
		pos = end + 1;
	}
	return out;
}

// The fd of /dev/dri/renderD<minor> that libhsakmt opened, or -1.
int libhsakmt_render_fd(int minor)
{
	const std::string want = "/dev/dri/renderD" + std::to_string(minor);
	int found = -1;
	DIR *d = ::opendir("/proc/self/fd");
	if (!d)
		return -1;
	while (dirent *e = ::readdir(d)) {
		if (e->d_name[0] == '.')
			continue;
		char link[256];
		const std::string path = std::string("/proc/self/fd/") + e->d_name;
		const ssize_t n = ::readlink(path.c_str(), link, sizeof link - 1);
		if (n > 0 && std::string(link, static_cast<size_t>(n)) == want) {
			found = std::atoi(e->d_name);
			break;
		}
	}
	::closedir(d);
	return found;
}

// A CPU-visible VRAM GEM BO of `size` on `dev`, CPU-mapped and mapped at a
// GPU VA; its CPU address. The BO, its mappings and `dev` live as long as
// the process (the workload is ended by a signal).
void *gem_vram_bo(amdgpu_device_handle dev, uint64_t size)
{
	amdgpu_bo_alloc_request req{};
	req.alloc_size = size;
	req.phys_alignment = 4096;
	req.preferred_heap = AMDGPU_GEM_DOMAIN_VRAM;
	req.flags = AMDGPU_GEM_CREATE_CPU_ACCESS_REQUIRED;
	amdgpu_bo_handle bo = nullptr;
	if (int r = amdgpu_bo_alloc(dev, &req, &bo); r)
		die("amdgpu_bo_alloc(VRAM GEM BO)", r);
	void *cpu = nullptr;
	if (int r = amdgpu_bo_cpu_map(bo, &cpu); r)
		die("amdgpu_bo_cpu_map", r);
	uint64_t va = 0;
	amdgpu_va_handle range = nullptr;
	if (int r = amdgpu_va_range_alloc(dev, amdgpu_gpu_va_range_general, size, 4096, 0, &va, &range, 0); r)
		die("amdgpu_va_range_alloc", r);
	if (int r = amdgpu_bo_va_op(bo, 0, size, va, 0, AMDGPU_VA_OP_MAP); r)
		die("amdgpu_bo_va_op(MAP)", r);
	return cpu;
}

// The root leads its own process group; SIGTERM to it ends the whole tree.
void on_term(int)
{
	if (getpid() == getpgrp())
		kill(0, SIGTERM);
	_exit(0);
}

// SIGUSR1 only ends the wait (sigsuspend) for --changes.
void on_usr1(int)
{
}

// --changes: writes the ranges FILE lists with their patterns, then
// creates FILE.done.
void apply_changes(const std::string &path)
{
	FILE *f = std::fopen(path.c_str(), "r");
	if (!f)
		die("--changes: cannot open the file", errno);
	unsigned long long addr = 0, size = 0, seed = 0;
	while (std::fscanf(f, "%llu %llu %llu", &addr, &size, &seed) == 3)
		testcommon::fill_pattern(reinterpret_cast<void *>(static_cast<uintptr_t>(addr)), size, seed);
	const bool bad = !std::feof(f);
	std::fclose(f);
	if (bad)
		die("--changes: a line is not ADDR SIZE SEED");
	if (!testcommon::publish_file(path + ".done"))
		die("--changes: cannot create the .done file", errno);
}

// A KFD VRAM BO of `size` bytes on `node`, mapped to the GPU: its CPU
// address.
uint64_t vram_bo(uint32_t node, uint64_t size)
{
	HsaMemFlags f{};
	f.ui32.NonPaged = 1;
	f.ui32.HostAccess = 1;
	f.ui32.NoSubstitute = 1;
	f.ui32.PageSize = HSA_PAGE_SIZE_4KB;
	void *addr = nullptr;
	if (HSAKMT_STATUS s = hsaKmtAllocMemory(node, size, f, &addr); s != HSAKMT_STATUS_SUCCESS)
		die("hsaKmtAllocMemory(VRAM)", s);
	HSAuint64 gpuva = 0;
	if (HSAKMT_STATUS s = hsaKmtMapMemoryToGPU(addr, size, &gpuva); s != HSAKMT_STATUS_SUCCESS)
		die("hsaKmtMapMemoryToGPU(VRAM)", s);
	return reinterpret_cast<uint64_t>(addr);
}

// A KFD system-memory (GTT) BO of `size` bytes, mapped to the GPU: its CPU
// address.
uint64_t system_bo(uint64_t size)
{
	HsaMemFlags f{};
	f.ui32.NonPaged = 1;
	f.ui32.HostAccess = 1;
	f.ui32.PageSize = HSA_PAGE_SIZE_4KB;
	void *addr = nullptr;
	if (HSAKMT_STATUS s = hsaKmtAllocMemory(0, size, f, &addr); s != HSAKMT_STATUS_SUCCESS)
		die("hsaKmtAllocMemory(system)", s);
	HSAuint64 gpuva = 0;
	if (HSAKMT_STATUS s = hsaKmtMapMemoryToGPU(addr, size, &gpuva); s != HSAKMT_STATUS_SUCCESS)
		die("hsaKmtMapMemoryToGPU(system)", s);
	return reinterpret_cast<uint64_t>(addr);
}

// libdrm_amdgpu on libhsakmt's file of render node `minor`.
amdgpu_device_handle gem_device(int minor)
{
	const int fd = libhsakmt_render_fd(minor);
	if (fd < 0)
		die("no fd of the GPU's render node (libhsakmt's) in /proc/self/fd", minor);
	uint32_t major = 0, drm_minor = 0;
	amdgpu_device_handle dev = nullptr;
	if (int r = amdgpu_device_initialize(fd, &major, &drm_minor, &dev); r)
		die("amdgpu_device_initialize", r);
	return dev;
}

// BO `b` (its address, size and seed set) zeroed when `zero`, else filled
// with its pattern, listed in `m` with the bytes it holds.
void add_bo(e2e::Manifest &m, e2e::ManifestBo b, bool zero)
{
	void *addr = reinterpret_cast<void *>(static_cast<uintptr_t>(b.addr));
	if (zero)
		std::memset(addr, 0, b.size);
	else
		testcommon::fill_pattern(addr, b.size, b.seed);
	b.fill = zero ? 0 : b.size;
	m.bos.push_back(b);
}

// A signal event and an AQL queue on GPU node `node`.
void make_queue(uint32_t node)
{
	HsaEventDescriptor desc{};
	desc.EventType = HSA_EVENTTYPE_SIGNAL;
	desc.NodeId = node;
	HsaEvent *ev = nullptr;
	if (HSAKMT_STATUS s = hsaKmtCreateEvent(&desc, false, false, &ev); s != HSAKMT_STATUS_SUCCESS)
		die("hsaKmtCreateEvent", s);
	HsaMemFlags f{};
	f.ui32.HostAccess = 1;
	f.ui32.NonPaged = 1;
	f.ui32.PageSize = HSA_PAGE_SIZE_4KB;
	void *ring = nullptr;
	if (HSAKMT_STATUS s = hsaKmtAllocMemory(0, 64 << 10, f, &ring); s != HSAKMT_STATUS_SUCCESS)
		die("hsaKmtAllocMemory(ring)", s);
	HSAuint64 gpuva = 0;
	if (HSAKMT_STATUS s = hsaKmtMapMemoryToGPU(ring, 64 << 10, &gpuva); s != HSAKMT_STATUS_SUCCESS)
		die("hsaKmtMapMemoryToGPU(ring)", s);
	HsaQueueResource res{};
	if (HSAKMT_STATUS s = hsaKmtCreateQueue(node, HSA_QUEUE_COMPUTE_AQL, 100, HSA_QUEUE_PRIORITY_NORMAL, ring,
						64 << 10, nullptr, &res);
	    s != HSAKMT_STATUS_SUCCESS)
		die("hsaKmtCreateQueue", s);
}

// The command line (see the header).
struct Options {
	std::string manifest_path, ready_path, changes_path;
	std::vector<uint64_t> vram = {4 << 10, 12 << 10, (1 << 20) + (4 << 10), (7 << 20) + (12 << 10)};
	std::vector<uint64_t> gtt = {8 << 10, (3 << 20) + (4 << 10)};
	std::vector<uint64_t> gem, replica;
	bool queues = true, hold = true, zero = false;
	int children = 0;
};

Options parse_options(int argc, char **argv)
{
	Options o;
	for (int i = 1; i < argc; i++) {
		const std::string a = argv[i];
		auto next = [&]() -> const char * {
			if (i + 1 >= argc)
				die("missing value");
			return argv[++i];
		};
		if (a == "--manifest") o.manifest_path = next();
		else if (a == "--ready") o.ready_path = next();
		else if (a == "--vram") o.vram = parse_list(next());
		else if (a == "--gtt") o.gtt = parse_list(next());
		else if (a == "--gem") o.gem = parse_list(next());
		else if (a == "--no-queues") o.queues = false;
		else if (a == "--exit") o.hold = false;
		else if (a == "--children") o.children = std::atoi(next());
		else if (a == "--zero") o.zero = true;
		else if (a == "--changes") o.changes_path = next();
		else if (a == "--replica") o.replica = parse_list(next());
		else die("unknown option");
	}
	if (o.manifest_path.empty())
		die("--manifest is required");
	return o;
}

} // namespace

int main(int argc, char **argv)
{
	Options o = parse_options(argc, argv);
	auto &[manifest_path, ready_path, changes_path, vram, gtt, gem, replica, queues, hold, zero, children] = o;
	setpgid(0, 0);
	signal(SIGTERM, on_term);
	sigset_t usr1{}, waiting{};
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	if (!changes_path.empty()) {
		signal(SIGUSR1, on_usr1);
		sigprocmask(SIG_BLOCK, &usr1, &waiting);
		sigdelset(&waiting, SIGUSR1);
	}

	// A process tree: each child is a GPU process of its own.
	uint64_t seed = 1;
	std::vector<pid_t> kids;
	std::vector<std::string> kid_ready;
	for (int k = 1; k <= children; k++) {
		const std::string ready = ready_path.empty() ? "" : ready_path + "." + std::to_string(k);
		const pid_t pid = fork();
		if (pid < 0)
			die("fork");
		if (pid == 0) {
			manifest_path += "." + std::to_string(k);
			ready_path = ready;
			seed = 1 + 1000 * static_cast<uint64_t>(k);
			children = 0;
			kids.clear();
			kid_ready.clear();
			break;
		}
		kids.push_back(pid);
		kid_ready.push_back(ready);
	}

	if (HSAKMT_STATUS s = hsaKmtOpenKFD(); s != HSAKMT_STATUS_SUCCESS)
		die("hsaKmtOpenKFD", s);
	HsaSystemProperties sys{};
	if (HSAKMT_STATUS s = hsaKmtAcquireSystemProperties(&sys); s != HSAKMT_STATUS_SUCCESS)
		die("hsaKmtAcquireSystemProperties", s);

	e2e::Manifest m;
	m.pid = static_cast<int>(getpid());
	std::vector<uint32_t> gpu_nodes;
	for (uint32_t node = 0; node < sys.NumNodes; node++) {
		HsaNodeProperties props{};
		if (HSAKMT_STATUS s = hsaKmtGetNodeProperties(node, &props); s != HSAKMT_STATUS_SUCCESS)
			die("hsaKmtGetNodeProperties", s);
		if (props.NumFComputeCores == 0 || props.DrmRenderMinor <= 0)
			continue;
		gpu_nodes.push_back(node);
		const auto render = static_cast<uint32_t>(props.DrmRenderMinor);
		for (uint64_t size : vram)
			add_bo(m, {node, render, true, false, vram_bo(node, size), size, 0, seed++}, zero);
		for (size_t k = 0; k < replica.size(); k++)
			add_bo(m, {node, render, true, false, vram_bo(node, replica[k]), replica[k], 0, kReplicaSeed + k},
			       zero);
		if (gem.empty())
			continue;
		const amdgpu_device_handle dev = gem_device(props.DrmRenderMinor);
		for (uint64_t size : gem)
			add_bo(m, {node, render, true, true, reinterpret_cast<uint64_t>(gem_vram_bo(dev, size)), size, 0, seed++},
			       zero);
	}
	if (gpu_nodes.empty())
		die("no GPU node");
	for (uint64_t size : gtt)
		add_bo(m, {0, 0, false, false, system_bo(size), size, 0, seed++}, false);

	if (queues)
		for (uint32_t node : gpu_nodes)
			make_queue(node);

	if (!e2e::write_manifest(manifest_path, m))
		die("write manifest");
	for (const auto &r : kid_ready)
		while (!r.empty() && access(r.c_str(), F_OK) != 0)
			usleep(10000);
	if (!ready_path.empty() && !testcommon::publish_file(ready_path))
		die("ready file");
	std::printf("gpu-workload: pid %d ready: %zu BOs on %zu GPUs\n", m.pid, m.bos.size(), gpu_nodes.size());
	std::fflush(stdout);
	while (hold) {
		if (changes_path.empty()) {
			pause();
			continue;
		}
		sigsuspend(&waiting); // returns after SIGUSR1's handler (SIGTERM's exits)
		apply_changes(changes_path);
	}
	hsaKmtCloseKFD();
	return 0;
}
