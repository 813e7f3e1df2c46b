// SPDX-License-Identifier: GPL-2.0-only
//
// A real client nobody here wrote: Debian's libhsakmt (ROCt 5.2.3),
// unmodified, on the emulated machine. Topology as libhsakmt parses it
// must equal the profile; memory, queues and events go through the real
// KFD ioctl and mmap paths.
//
// Usage (under kfd-emu): test_hsakmt --machine NAME [overrides]
#include "hsakmt_client.h"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

#include <cstdio>
#include <cstring>
#include <vector>

using namespace kfdemu;
using namespace kfdemu::test;

namespace {

struct Gpu {
	uint32_t node;
	const NodeDesc *desc;
};

void test_properties(const MachineDesc &m, std::vector<Gpu> *gpus)
{
	HsaSystemProperties sys{};
	CHECK_OK(hsaKmtAcquireSystemProperties(&sys));
	CHECK_EQ(sys.NumNodes, m.nodes.size());
	for (uint32_t i = 0; i < sys.NumNodes && i < m.nodes.size(); i++) {
		const NodeDesc &n = m.nodes[i];
		HsaNodeProperties p{};
		CHECK_OK(hsaKmtGetNodeProperties(i, &p));
		CHECK_EQ(p.NumCPUCores, prop(n, "cpu_cores_count"));
		CHECK_EQ(p.NumFComputeCores, prop(n, "simd_count"));
		// libhsakmt lists a node's io_links, then its p2p_links (the
		// peers HIP's peer access rests on), as one list.
		std::vector<IoLinkDesc> want = n.io_links;
		want.insert(want.end(), n.p2p_links.begin(), n.p2p_links.end());
		CHECK_EQ(p.NumIOLinks, want.size());
		if (!n.is_gpu)
			continue;
		gpus->push_back({i, &n});
		CHECK_EQ(p.NumCaches, n.caches.size());
		CHECK_EQ(p.DeviceId, prop(n, "device_id"));
		CHECK_EQ(p.VendorId, prop(n, "vendor_id"));
		CHECK_EQ(p.LocationId, prop(n, "location_id"));
		CHECK_EQ(p.Domain, prop(n, "domain"));
		CHECK_EQ(int64_t(p.DrmRenderMinor), int64_t(n.drm_render_minor));
		CHECK_EQ(p.MaxWavesPerSIMD, prop(n, "max_waves_per_simd"));
		CHECK_EQ(p.LDSSizeInKB, prop(n, "lds_size_in_kb"));
		CHECK_EQ(p.WaveFrontSize, prop(n, "wave_front_size"));
		CHECK_EQ(p.NumSIMDPerCU, prop(n, "simd_per_cu"));
		CHECK_EQ(p.NumCUPerArray, prop(n, "cu_per_simd_array"));
		CHECK_EQ(p.NumSdmaEngines, prop(n, "num_sdma_engines"));
		CHECK_EQ(p.NumSdmaXgmiEngines, prop(n, "num_sdma_xgmi_engines"));
		CHECK_EQ(p.NumCpQueues, prop(n, "num_cp_queues") & 0xff);
		CHECK_EQ(p.HiveID, prop(n, "hive_id"));
		CHECK_EQ(p.UniqueID, prop(n, "unique_id"));
		CHECK_EQ(p.EngineId.ui32.uCode, prop(n, "fw_version") & 0x3ff);
		CHECK_EQ(p.uCodeEngineVersions.uCodeSDMA, prop(n, "sdma_fw_version") & 0x3ff);
		CHECK_EQ(p.MaxEngineClockMhzFCompute, prop(n, "max_engine_clk_fcompute"));

		// libhsakmt adds its own apertures (LDS, scratch, SVM) to the
		// sysfs banks; the frame buffer must be the profile's.
		std::vector<HsaMemoryProperties> banks(p.NumMemoryBanks);
		CHECK(p.NumMemoryBanks >= n.mem_banks.size());
		CHECK_OK(hsaKmtGetNodeMemoryProperties(i, p.NumMemoryBanks, banks.data()));
		bool fb = false;
		for (const auto &b : banks)
			if (b.HeapType == HSA_HEAPTYPE_FRAME_BUFFER_PUBLIC ||
			    b.HeapType == HSA_HEAPTYPE_FRAME_BUFFER_PRIVATE)
				fb = fb || b.SizeInBytes == n.mem_banks.at(0).size_in_bytes;
		CHECK(fb);

		std::vector<HsaIoLinkProperties> links(p.NumIOLinks);
		CHECK_OK(hsaKmtGetNodeIoLinkProperties(i, p.NumIOLinks, links.data()));
		for (size_t l = 0; l < links.size() && l < want.size(); l++) {
			CHECK_EQ(uint32_t(links[l].IoLinkType), want[l].type);
			CHECK_EQ(links[l].NodeTo, want[l].node_to);
			CHECK_EQ(links[l].NodeFrom, i);
			CHECK_EQ(links[l].Weight, want[l].weight);
		}
	}
}

void test_vram(const Gpu &g)
{
	const size_t size = 2 << 20;
	HsaMemFlags f{};
	f.ui32.NonPaged = 1;
	f.ui32.HostAccess = 1;
	f.ui32.CoarseGrain = 1;
	f.ui32.PageSize = HSA_PAGE_SIZE_4KB;
	void *mem = nullptr;
	if (!g.desc->large_bar) {
		// Small BAR: host-visible VRAM is refused (PUBLIC+VRAM is
		// EINVAL in the kernel), device-only VRAM still works.
		CHECK(hsaKmtAllocMemory(g.node, size, f, &mem) != HSAKMT_STATUS_SUCCESS);
		f.ui32.HostAccess = 0;
		mem = nullptr;
		CHECK_OK(hsaKmtAllocMemory(g.node, size, f, &mem));
		uint64_t alt = 0;
		if (CHECK(mem != nullptr)) {
			CHECK_OK(hsaKmtMapMemoryToGPU(mem, size, &alt));
			CHECK_OK(hsaKmtUnmapMemoryToGPU(mem));
			CHECK_OK(hsaKmtFreeMemory(mem, size));
		}
		return;
	}
	CHECK_OK(hsaKmtAllocMemory(g.node, size, f, &mem));
	CHECK(mem != nullptr);
	if (!mem)
		return;
	uint64_t alt = 0;
	CHECK_OK(hsaKmtMapMemoryToGPU(mem, size, &alt));
	auto *p = static_cast<uint32_t *>(mem);
	for (size_t i = 0; i < size / 4; i += 1021)
		p[i] = uint32_t(i * 2654435761u);
	bool same = true;
	for (size_t i = 0; i < size / 4; i += 1021)
		same = same && p[i] == uint32_t(i * 2654435761u);
	CHECK(same);
	CHECK_OK(hsaKmtUnmapMemoryToGPU(mem));
	CHECK_OK(hsaKmtFreeMemory(mem, size));
}

void test_system(const Gpu &g)
{
	const size_t size = 1 << 20;
	HsaMemFlags f{};
	f.ui32.HostAccess = 1;
	f.ui32.PageSize = HSA_PAGE_SIZE_4KB;
	void *mem = nullptr;
	CHECK_OK(hsaKmtAllocMemory(0, size, f, &mem));	// the CPU node: system memory
	CHECK(mem != nullptr);
	if (!mem)
		return;
	uint64_t alt = 0;
	CHECK_OK(hsaKmtMapMemoryToGPU(mem, size, &alt));
	std::memset(mem, 0x5a, size);
	CHECK_EQ(static_cast<unsigned char *>(mem)[size - 1], 0x5a);
	CHECK_OK(hsaKmtUnmapMemoryToGPU(mem));
	CHECK_OK(hsaKmtFreeMemory(mem, size));
	(void)g;
}

void test_queue(const Gpu &g)
{
	const size_t ring_size = 64 << 10;
	HsaMemFlags f{};
	f.ui32.HostAccess = 1;
	f.ui32.ExecuteAccess = 1;
	f.ui32.PageSize = HSA_PAGE_SIZE_4KB;
	void *ring = nullptr;
	CHECK_OK(hsaKmtAllocMemory(0, ring_size, f, &ring));
	if (!ring)
		return;
	uint64_t alt = 0;
	CHECK_OK(hsaKmtMapMemoryToGPU(ring, ring_size, &alt));
	// AQL read/write pointers are inputs: memory the GPU can see.
	void *ptrs = nullptr;
	CHECK_OK(hsaKmtAllocMemory(0, 4096, f, &ptrs));
	if (!ptrs)
		return;
	CHECK_OK(hsaKmtMapMemoryToGPU(ptrs, 4096, &alt));
	HsaQueueResource q{};
	q.Queue_write_ptr_aql = static_cast<HSAuint64 *>(ptrs);
	q.Queue_read_ptr_aql = static_cast<HSAuint64 *>(ptrs) + 1;
	CHECK_OK(hsaKmtCreateQueue(g.node, HSA_QUEUE_COMPUTE_AQL, 100, HSA_QUEUE_PRIORITY_NORMAL, ring,
				   ring_size, nullptr, &q));
	CHECK(q.QueueId != 0 || q.Queue_DoorBell != nullptr);
	CHECK(q.Queue_DoorBell != nullptr);
	CHECK(q.Queue_write_ptr_aql == static_cast<HSAuint64 *>(ptrs));
	if (q.Queue_DoorBell) {
		*reinterpret_cast<volatile uint64_t *>(q.Queue_DoorBell) = 0;	// ring it
		// KFD's doorbell mapping is VM_DONTCOPY: a forked child has no
		// page there (msync of an unmapped range: ENOMEM).
		void *page = reinterpret_cast<void *>(reinterpret_cast<uintptr_t>(q.Queue_DoorBell) & ~uintptr_t(4095));
		std::fflush(nullptr);
		const pid_t child = ::fork();
		if (child == 0)
			::_exit(::msync(page, 4096, MS_ASYNC) != 0 && errno == ENOMEM ? 0 : 1);
		int st = -1;
		CHECK(child > 0 && ::waitpid(child, &st, 0) == child);
		CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		CHECK(::msync(page, 4096, MS_ASYNC) == 0); // still mapped here
	}
	CHECK_OK(hsaKmtDestroyQueue(q.QueueId));
	CHECK_OK(hsaKmtUnmapMemoryToGPU(ring));
	CHECK_OK(hsaKmtFreeMemory(ring, ring_size));
	CHECK_OK(hsaKmtUnmapMemoryToGPU(ptrs));
	CHECK_OK(hsaKmtFreeMemory(ptrs, 4096));
}

// One round of the loop below: a new event and a new SDMA queue on a new
// ring, a COPY_LINEAR of `src` to `dst`, a FENCE of `round`, a TIMESTAMP,
// then a FENCE into the event's slot and a TRAP; the event must come, the
// fence, timestamp and copy must be there; queue and event destroyed.
void sdma_round(const Gpu &g, uint32_t round, const SysMem &src, const SysMem &dst, const SysMem &out)
{
	constexpr uint32_t kOpCopy = 1, kOpFence = 5, kOpTrap = 6, kOpTimestamp = 13, kGlobal = 2 << 8;
	constexpr size_t kRing = 16 << 10;
	HsaEventDescriptor d{};
	d.EventType = HSA_EVENTTYPE_SIGNAL;
	d.NodeId = g.node;
	HsaEvent *ev = nullptr;
	if (!CHECK_OK(hsaKmtCreateEvent(&d, false, false, &ev)) || !ev)
		return;
	SysMem ring(kRing);
	HsaQueueResource q{};
	if (ring.addr && CHECK_OK(hsaKmtCreateQueue(g.node, HSA_QUEUE_SDMA, 100, HSA_QUEUE_PRIORITY_NORMAL,
						     ring.addr, kRing, nullptr, &q))) {
		uint64_t wptr = 0;
		auto put = [&](std::initializer_list<uint32_t> dw) {
			for (uint32_t v : dw) {
				*ring.at<uint32_t>(wptr % kRing) = v;
				wptr += 4;
			}
		};
		const uint64_t s = src.va(), t = dst.va(), fence = out.va(), ts = out.va(8);
		const uint64_t slot = ev->EventData.HWData2;
		put({kOpCopy, uint32_t(src.size - 1), 0, uint32_t(s), uint32_t(s >> 32), uint32_t(t), uint32_t(t >> 32)});
		put({kOpFence, uint32_t(fence), uint32_t(fence >> 32), round});
		put({kOpTimestamp | kGlobal, uint32_t(ts), uint32_t(ts >> 32)});
		put({kOpFence, uint32_t(slot), uint32_t(slot >> 32), ev->EventId});
		put({kOpTrap, ev->EventId});
		__atomic_store_n(q.Queue_write_ptr_aql, wptr, __ATOMIC_RELEASE);
		__atomic_store_n(q.Queue_DoorBell_aql, wptr, __ATOMIC_RELEASE);
		if (!CHECK_OK(hsaKmtWaitOnEvent(ev, 2000)))
			std::fprintf(stderr, "  round %u: read pointer %llu of %llu, fence %u\n", round,
				     (unsigned long long)__atomic_load_n(q.Queue_read_ptr_aql, __ATOMIC_ACQUIRE),
				     (unsigned long long)wptr, *out.at<uint32_t>(0));
		CHECK_EQ(*out.at<uint32_t>(0), round);
		CHECK(*out.at<uint64_t>(8) != 0);
		CHECK(std::memcmp(src.addr, dst.addr, src.size) == 0);
		CHECK_EQ(__atomic_load_n(q.Queue_read_ptr_aql, __ATOMIC_ACQUIRE), wptr);
		CHECK_OK(hsaKmtDestroyQueue(q.QueueId));
	}
	CHECK_OK(hsaKmtDestroyEvent(ev));
}

// Queues and events created and destroyed in a loop, each with a copy,
// fence, timestamp and trap: no submission is lost (a new queue's doorbell
// slot and its read and write pointers may hold what the last one left).
void test_sdma_loop(const Gpu &g)
{
	SysMem src(4096), dst(4096), out(4096);
	if (!src.addr || !dst.addr || !out.addr)
		return;
	for (uint32_t round = 1; round <= 24; round++) {
		for (size_t i = 0; i < src.size / 4; i++)
			*src.at<uint32_t>(i * 4) = round * 0x10001u + uint32_t(i);
		*out.at<uint64_t>(8) = 0;
		sdma_round(g, round, src, dst, out);
	}
}

void test_event(const Gpu &g)
{
	HsaEventDescriptor d{};
	d.EventType = HSA_EVENTTYPE_SIGNAL;
	d.NodeId = g.node;
	d.SyncVar.SyncVar.UserData = nullptr;
	HsaEvent *ev = nullptr;
	CHECK_OK(hsaKmtCreateEvent(&d, true, false, &ev));
	CHECK(ev != nullptr);
	if (!ev)
		return;
	CHECK_OK(hsaKmtSetEvent(ev));
	CHECK_OK(hsaKmtWaitOnEvent(ev, 1000));
	CHECK_OK(hsaKmtResetEvent(ev));
	CHECK_EQ(int(hsaKmtWaitOnEvent(ev, 10)), int(HSAKMT_STATUS_WAIT_TIMEOUT));
	CHECK_OK(hsaKmtDestroyEvent(ev));
}

} // namespace

int main(int argc, char **argv)
{
	const MachineDesc m = machine_from_args(argc, argv);
	if (gpu_nodes(m).empty()) {
		// The "NVIDIA node": no /dev/kfd, so libhsakmt cannot start.
		run("no GPU: hsaKmtOpenKFD fails", [] { CHECK(hsaKmtOpenKFD() != HSAKMT_STATUS_SUCCESS); });
		return summary();
	}
	std::vector<Gpu> gpus;
	bool open = false;
	run("hsaKmtOpenKFD and version", [&] {
		open = hsaKmtOpenKFD() == HSAKMT_STATUS_SUCCESS;
		CHECK(open);
		HsaVersionInfo v{};
		CHECK_OK(hsaKmtGetVersion(&v));
		CHECK_EQ(v.KernelInterfaceMajorVersion, 1u);
		CHECK_EQ(v.KernelInterfaceMinorVersion, m.kfd_minor_version);
	});
	if (!open)
		return summary();
	run("topology as libhsakmt sees it equals the profile", [&] { test_properties(m, &gpus); });
	CHECK(!gpus.empty());
	for (const Gpu &g : gpus) {
		const std::string id = " on gpu " + std::to_string(g.desc->gpu_id);
		run(("VRAM alloc, GPU map, CPU access" + id).c_str(), [&] { test_vram(g); });
		run(("system memory alloc and GPU map" + id).c_str(), [&] { test_system(g); });
		run(("AQL queue create/destroy" + id).c_str(), [&] { test_queue(g); });
		run(("signal event" + id).c_str(), [&] { test_event(g); });
		if (g.desc->family >= 141) // SDMA user queues: family AI on
			run(("SDMA queues and events made and destroyed in a loop" + id).c_str(),
			    [&] { test_sdma_loop(g); });
	}
	run("hsaKmtCloseKFD", [] { CHECK_OK(hsaKmtCloseKFD()); });
	return summary();
}
