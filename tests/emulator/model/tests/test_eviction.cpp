// SPDX-License-Identifier: GPL-2.0-only
// VRAM eviction (eviction.cpp), as amdgpu's TTM and amdkfd's eviction
// fences do it: a GEM VRAM BO evicts other processes' least recently placed
// KFD BOs to GTT (contents kept) and their queues until the restore worker
// brings them back (which evicts the GEM BO in turn); a process's own KFD
// BOs are never evicted for it (its GEM BO is created in GTT instead, with
// VRAM|GTT as its domains); KFD allocations pass KFD's own limit first
// (ENOMEM past it) and evict GEM BOs. Queues stopped by an eviction are in
// test_queue_state.cpp.
#include "harness.h"

#include <criterion/criterion.h>

#include <chrono>
#include <thread>

using namespace kfdemu;
using namespace kfdemu::testing;
using namespace kfdemu::abi::kfd;

namespace {

constexpr uint32_t G0 = 0x1111;
constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kVram = 64 * kMiB; // the test GPU's VRAM
// The restore delay of the tests that look at an evicted process (the
// kernel's is 100 ms): long enough that no loaded machine restores first.
constexpr uint32_t kDelayMs = 1000;

// One GPU of kVram bytes; processes restored `delay_ms` after an eviction.
MachineDesc machine(uint32_t delay_ms = 100)
{
	MachineDesc m = make_machine({G0}, 141, kVram);
	m.restore_delay_ms = delay_ms;
	return m;
}

bool has(const std::string &json, const std::string &what) { return json.find(what) != std::string::npos; }

// One process: its KFD file and render file (the VM acquired through it).
struct Proc {
	Rig &rig;
	FakeCaller c;
	int kfd = -1, r = -1;
	uint64_t next_va = 1ull << 32;
	Proc(Rig &rig_, pid_t tgid) : rig(rig_), c(tgid)
	{
		kfd = rig.open_kfd(c);
		r = rig.open_render(c, 128);
		AcquireVm a{static_cast<uint32_t>(r), G0};
		cr_assert_eq(rig.kfd(c, kfd, ACQUIRE_VM, &a, abi::kIocWrite), 0);
	}
	long kfd_vram(uint64_t size, AllocMemoryOfGpu *out)
	{
		*out = AllocMemoryOfGpu{next_va, size, 0, 0, G0, ALLOC_VRAM | ALLOC_WRITABLE};
		next_va += size;
		return rig.kfd(c, kfd, ALLOC_MEMORY_OF_GPU, out);
	}
	// A KFD VRAM BO of `size` bytes filled with `byte` through its CPU mapping.
	AllocMemoryOfGpu filled_kfd_vram(uint64_t size, uint8_t byte)
	{
		AllocMemoryOfGpu a{};
		cr_assert_eq(kfd_vram(size, &a), 0);
		fill(a.mmap_offset, size, byte);
		return a;
	}
	void fill(uint64_t offset, uint64_t size, uint8_t byte)
	{
		void *p = rig.map(c, r, offset, size);
		cr_assert_not_null(p);
		std::memset(p, byte, size);
		munmap(p, size);
	}
	bool all_bytes(uint64_t offset, uint64_t size, uint8_t byte)
	{
		auto *p = static_cast<uint8_t *>(rig.map(c, r, offset, size));
		cr_assert_not_null(p);
		bool same = true;
		for (uint64_t i = 0; i < size && same; i += 4096)
			same = p[i] == byte && p[i + 4095] == byte;
		munmap(p, size);
		return same;
	}
	// The render node's INFO query `q` (a u64 answer).
	uint64_t info(uint32_t q)
	{
		uint64_t v = ~0ull;
		abi::drm::Info a{reinterpret_cast<uint64_t>(&v), 8, q, {}};
		cr_assert_eq(rig.amdgpu(c, r, abi::drm::INFO, &a, abi::kIocWrite), 0);
		return v;
	}
	uint64_t available()
	{
		AvailableMemory a{0, G0, 0};
		cr_assert_eq(rig.kfd(c, kfd, AVAILABLE_MEMORY, &a), 0);
		return a.available;
	}
	// The introspection record of this process's KFD BO `handle`.
	std::string bo(uint64_t handle)
	{
		const std::string all = rig.model->introspect("bos " + std::to_string(c.identity().tgid) + " nosum");
		const size_t at = all.find("{\"handle\":" + std::to_string(handle) + ",");
		cr_assert_neq(at, std::string::npos, "%s", all.c_str());
		return all.substr(at, all.find('}', at) - at);
	}
	// This process's record in `processes`.
	std::string process()
	{
		const std::string all = rig.model->introspect("processes");
		const size_t at = all.find("{\"pid\":" + std::to_string(c.identity().tgid) + ",");
		cr_assert_neq(at, std::string::npos, "%s", all.c_str());
		return all.substr(at, all.find("\"devices\"", at) - at);
	}
	// GEM BO `handle` of the process's render file, as `files` lists it.
	std::string gem(uint32_t handle)
	{
		const std::string all = rig.model->introspect("files " + std::to_string(c.identity().tgid) + " nosum");
		const size_t at = all.find("{\"handle\":" + std::to_string(handle) + ",");
		cr_assert_neq(at, std::string::npos, "%s", all.c_str());
		return all.substr(at, all.find('}', at) - at);
	}
	uint32_t preferred_domains(uint32_t handle)
	{
		abi::drm::GemListHandlesEntry e[4] = {};
		abi::drm::GemListHandles lh{reinterpret_cast<uint64_t>(e), 4, 0};
		cr_assert_eq(rig.amdgpu(c, r, abi::drm::GEM_LIST_HANDLES, &lh), 0);
		for (uint32_t i = 0; i < lh.num_entries && i < 4; ++i)
			if (e[i].gem_handle == handle)
				return static_cast<uint32_t>(e[i].preferred_domains);
		cr_assert_fail("handle %u not listed", handle);
		return 0;
	}
};

// Polls `p`'s process record until it contains `what` (at most 10 s).
bool wait_for(Proc &p, const std::string &what)
{
	const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
	while (!has(p.process(), what))
		if (std::chrono::steady_clock::now() >= end)
			return false;
		else
			std::this_thread::sleep_for(std::chrono::milliseconds(5));
	return true;
}

} // namespace

Test(eviction, a_gem_bo_evicts_another_process_kfd_bos_which_a_delayed_restore_brings_back)
{
	Rig rig(machine(kDelayMs));
	Proc a(rig, 1000), b(rig, 2000);
	const AllocMemoryOfGpu old1 = a.filled_kfd_vram(16 * kMiB, 0x11);
	const AllocMemoryOfGpu old2 = a.filled_kfd_vram(16 * kMiB, 0x22);
	const AllocMemoryOfGpu young = a.filled_kfd_vram(24 * kMiB, 0x33);
	cr_assert_eq(b.info(abi::drm::INFO_VRAM_USAGE), 56 * kMiB);
	cr_assert_eq(b.info(abi::drm::INFO_NUM_EVICTIONS), 0);

	// 28 MiB with 8 free: the two least recently placed KFD BOs (one
	// would not do) move to GTT; the youngest stays.
	long r = 0;
	const uint32_t g = b.rig.gem_create(b.c, b.r, 28 * kMiB, abi::drm::DOMAIN_VRAM, &r);
	cr_assert_eq(r, 0, "a VRAM GEM BO evicts instead of ENOMEM");
	cr_assert_eq(b.info(abi::drm::INFO_NUM_EVICTIONS), 2);
	cr_assert_eq(b.info(abi::drm::INFO_NUM_BYTES_MOVED), 32 * kMiB);
	cr_assert_eq(b.info(abi::drm::INFO_VRAM_USAGE), 52 * kMiB);
	std::string s = a.bo(old1.handle);
	cr_assert(has(s, "\"type\":\"vram\",\"resident\":\"gtt\",\"evictions\":1"), "%s", s.c_str());
	cr_assert(has(a.bo(old2.handle), "\"resident\":\"gtt\""));
	cr_assert(has(a.bo(young.handle), "\"resident\":\"vram\",\"evictions\":0"));
	cr_assert(has(b.gem(g), "\"type\":\"vram\",\"resident\":\"vram\""), "%s", b.gem(g).c_str());
	cr_assert_eq(b.preferred_domains(g), abi::drm::DOMAIN_VRAM);
	// KFD's accounting does not move with the pages.
	cr_assert_eq(a.available(), kVram - 56 * kMiB);
	// The contents went with the BO, and the CPU mapping still reaches it.
	cr_assert(a.all_bytes(old1.mmap_offset, 16 * kMiB, 0x11));
	cr_assert(a.all_bytes(old2.mmap_offset, 16 * kMiB, 0x22));

	// The eviction fence: the process's queues are evicted, once.
	s = a.process();
	cr_assert(has(s, "\"evict_count\":1") && has(s, "\"mem_evicted\":true,\"mem_evictions\":1,\"mem_restores\":0"),
		  "%s", s.c_str());
	cr_assert(has(b.process(), "\"evict_count\":0,\"restored\":false,\"mem_evicted\":false,\"mem_evictions\":0"));

	// The restore worker (after the delay) validates A's BOs back into VRAM,
	// which evicts the GEM BO (least recently placed then).
	const auto evicted_at = std::chrono::steady_clock::now();
	cr_assert(wait_for(a, "\"evict_count\":0"), "%s", a.process().c_str());
	cr_assert_geq(std::chrono::steady_clock::now() - evicted_at, std::chrono::milliseconds(kDelayMs - 100),
		      "restored after the delay, not at once");
	s = a.process();
	cr_assert(has(s, "\"mem_evicted\":false,\"mem_evictions\":1,\"mem_restores\":1"), "%s", s.c_str());
	cr_assert(has(a.bo(old1.handle), "\"resident\":\"vram\",\"evictions\":1"));
	cr_assert(has(a.bo(old2.handle), "\"resident\":\"vram\""));
	cr_assert(has(b.gem(g), "\"resident\":\"gtt\",\"evictions\":1"), "%s", b.gem(g).c_str());
	cr_assert_eq(b.info(abi::drm::INFO_NUM_EVICTIONS), 3);
	cr_assert_eq(b.info(abi::drm::INFO_NUM_BYTES_MOVED), (32 + 28 + 32) * kMiB);
	cr_assert_eq(b.info(abi::drm::INFO_VRAM_USAGE), 56 * kMiB);
	cr_assert(a.all_bytes(old1.mmap_offset, 16 * kMiB, 0x11));
	s = rig.model->introspect("counters");
	cr_assert(has(s, "\"bo_restores\":2,\"process_evictions\":1,\"process_restores\":1,\"gem_gtt_fallbacks\":0"),
		  "%s", s.c_str());
	cr_assert(has(s, "{\"gpu_id\":4369,\"size\":67108864,\"used\":58720256,\"kfd_used\":58720256,\"evictions\":3"),
		  "%s", s.c_str());

	// Freeing an evicted-then-restored BO gives its VRAM back.
	FreeMemoryOfGpu f{old1.handle};
	cr_assert_eq(a.rig.kfd(a.c, a.kfd, FREE_MEMORY_OF_GPU, &f, abi::kIocWrite), 0);
	cr_assert_eq(b.info(abi::drm::INFO_VRAM_USAGE), 40 * kMiB);
	cr_assert_eq(a.available(), kVram - 40 * kMiB);
}

// TTM does not evict a KFD BO for the process that owns it
// (amdkfd_fence_check_mm); GEM_CREATE then retries with VRAM|GTT and the
// BO lives in GTT: no ENOMEM, no eviction, the queues run on.
Test(eviction, a_process_gem_bo_never_evicts_its_own_kfd_bos_and_is_created_in_gtt)
{
	Rig rig(machine());
	Proc a(rig, 1000);
	const AllocMemoryOfGpu k = a.filled_kfd_vram(60 * kMiB, 0x5a);
	long r = 0;
	const uint32_t g = a.rig.gem_create(a.c, a.r, 8 * kMiB, abi::drm::DOMAIN_VRAM, &r);
	cr_assert_eq(r, 0);
	cr_assert(has(a.gem(g), "\"type\":\"vram\",\"resident\":\"gtt\",\"evictions\":0"), "%s", a.gem(g).c_str());
	cr_assert_eq(a.preferred_domains(g), abi::drm::DOMAIN_VRAM | abi::drm::DOMAIN_GTT);
	cr_assert_eq(a.info(abi::drm::INFO_NUM_EVICTIONS), 0);
	cr_assert_eq(a.info(abi::drm::INFO_VRAM_USAGE), 60 * kMiB);
	cr_assert(has(a.bo(k.handle), "\"resident\":\"vram\""));
	cr_assert(has(a.process(), "\"evict_count\":0,\"restored\":false,\"mem_evicted\":false,\"mem_evictions\":0"));
	// The GTT-placed BO is memory like any other.
	a.fill(a.rig.gem_mmap_offset(a.c, a.r, g), 8 * kMiB, 0x77);
	cr_assert(a.all_bytes(a.rig.gem_mmap_offset(a.c, a.r, g), 8 * kMiB, 0x77));
	cr_assert(has(rig.model->introspect("counters"), "\"gem_gtt_fallbacks\":1"));
	// A GEM BO larger than the whole VRAM too.
	a.rig.gem_create(a.c, a.r, 2 * kVram, abi::drm::DOMAIN_VRAM, &r);
	cr_assert_eq(r, 0);
}

// KFD's allocations pass its own limit first: past it ENOMEM, whatever
// GEM BOs could be evicted; within it, GEM BOs (of any process) are
// evicted to make room, and their contents kept.
Test(eviction, kfd_allocations_evict_gem_bos_within_kfd_limit_and_fail_past_it)
{
	Rig rig(machine());
	Proc a(rig, 1000), b(rig, 2000);
	long r = 0;
	const uint32_t g = b.rig.gem_create(b.c, b.r, 48 * kMiB, abi::drm::DOMAIN_VRAM, &r);
	cr_assert_eq(r, 0);
	b.fill(b.rig.gem_mmap_offset(b.c, b.r, g), 48 * kMiB, 0x42);
	cr_assert_eq(a.available(), kVram, "GEM BOs are not KFD's");

	AllocMemoryOfGpu k{};
	cr_assert_eq(a.kfd_vram(32 * kMiB, &k), 0, "the GEM BO is evicted to make room");
	cr_assert(has(b.gem(g), "\"resident\":\"gtt\",\"evictions\":1"), "%s", b.gem(g).c_str());
	cr_assert(b.all_bytes(b.rig.gem_mmap_offset(b.c, b.r, g), 48 * kMiB, 0x42));
	cr_assert_eq(a.info(abi::drm::INFO_VRAM_USAGE), 32 * kMiB);
	cr_assert(has(b.process(), "\"mem_evicted\":false,\"mem_evictions\":0"), "GEM BOs have no eviction fence");

	// KFD's limit counts KFD's VRAM of every process.
	AllocMemoryOfGpu k2{};
	cr_assert_eq(b.kfd_vram(32 * kMiB, &k2), 0);
	AllocMemoryOfGpu k3{};
	cr_assert_eq(a.kfd_vram(4096, &k3), -ENOMEM, "past KFD's limit");
	cr_assert_eq(a.available(), 0);
	cr_assert(has(rig.model->introspect("processes"), "\"mem_evictions\":0"), "nothing evicted for it");
	FreeMemoryOfGpu f{k2.handle};
	cr_assert_eq(b.rig.kfd(b.c, b.kfd, FREE_MEMORY_OF_GPU, &f, abi::kIocWrite), 0);
	cr_assert_eq(a.kfd_vram(4096, &k3), 0);
}

// Both processes' KFD BOs fill VRAM: a third process's GEM BO evicts
// both, and each restore needs room only the other's BOs could give, which
// TTM takes from the least recently placed: the two processes end resident
// again and the GEM BO in GTT.
Test(eviction, two_evicted_processes_are_each_restored)
{
	Rig rig(machine(kDelayMs));
	Proc a(rig, 1000), b(rig, 2000), gem(rig, 3000);
	const AllocMemoryOfGpu ka = a.filled_kfd_vram(28 * kMiB, 0xaa);
	const AllocMemoryOfGpu kb = b.filled_kfd_vram(28 * kMiB, 0xbb);
	long r = 0;
	const uint32_t g = gem.rig.gem_create(gem.c, gem.r, 40 * kMiB, abi::drm::DOMAIN_VRAM, &r);
	cr_assert_eq(r, 0);
	cr_assert(has(a.process(), "\"mem_evicted\":true") && has(b.process(), "\"mem_evicted\":true"));
	cr_assert(wait_for(a, "\"evict_count\":0") && wait_for(b, "\"evict_count\":0"));
	cr_assert(has(a.bo(ka.handle), "\"resident\":\"vram\"") && has(b.bo(kb.handle), "\"resident\":\"vram\""));
	cr_assert(has(gem.gem(g), "\"resident\":\"gtt\""), "%s", gem.gem(g).c_str());
	cr_assert(a.all_bytes(ka.mmap_offset, 28 * kMiB, 0xaa) && b.all_bytes(kb.mmap_offset, 28 * kMiB, 0xbb));
}

// TTM takes the free space of any allowed placement before it evicts: a
// VRAM|GTT BO goes to GTT when VRAM is full; a VRAM-only one evicts.
Test(eviction, a_vram_or_gtt_gem_bo_takes_gtt_before_evicting)
{
	Rig rig(machine(kDelayMs));
	Proc a(rig, 1000), b(rig, 2000);
	const AllocMemoryOfGpu k = a.filled_kfd_vram(60 * kMiB, 0x5a);
	long r = 0;
	const uint32_t both = b.rig.gem_create(b.c, b.r, 8 * kMiB, abi::drm::DOMAIN_VRAM | abi::drm::DOMAIN_GTT, &r);
	cr_assert_eq(r, 0);
	cr_assert(has(b.gem(both), "\"type\":\"vram\",\"resident\":\"gtt\",\"evictions\":0"), "%s", b.gem(both).c_str());
	cr_assert_eq(b.info(abi::drm::INFO_NUM_EVICTIONS), 0);
	cr_assert(has(a.bo(k.handle), "\"resident\":\"vram\""));
	const uint32_t only = b.rig.gem_create(b.c, b.r, 8 * kMiB, abi::drm::DOMAIN_VRAM, &r);
	cr_assert_eq(r, 0);
	cr_assert(has(b.gem(only), "\"resident\":\"vram\""), "%s", b.gem(only).c_str());
	cr_assert(has(a.bo(k.handle), "\"resident\":\"gtt\",\"evictions\":1"));
	cr_assert_eq(b.info(abi::drm::INFO_NUM_EVICTIONS), 1);
}

// The memory limits of a machine of 4 GiB (memory_limits): GTT 2 GiB per
// GPU, KFD's TTM limit 2 GiB and its system limit 4 GiB - 1/64 - 1.5 GiB.
// BOs are memfds without pages: their sizes cost nothing.
constexpr uint64_t kGiB = 1ull << 30;
MachineDesc small_host()
{
	MachineDesc m = machine();
	m.nodes.front().mem_banks.push_back(MemBankDesc{0, 4 * kGiB, 0, 0});
	return m;
}

Test(memory_limits, are_derived_from_system_memory_as_the_kernel_does)
{
	const MemoryLimits l = memory_limits(small_host());
	cr_assert_eq(l.gtt_size, 2 * kGiB);
	cr_assert_eq(l.kfd_ttm_limit, 2 * kGiB);
	cr_assert_eq(l.kfd_system_limit, 4 * kGiB - (4 * kGiB >> 6) - (3ull << 29));
	MachineDesc tiny = machine();
	tiny.nodes.front().mem_banks.push_back(MemBankDesc{0, 2 * kGiB, 0, 0});
	cr_assert_eq(memory_limits(tiny).kfd_system_limit, (2 * kGiB - (2 * kGiB >> 6)) / 2, "halved under 3 GiB");
}

// amdgpu_bo_validate_size and the GEM_CREATE retry: a BO no domain can
// hold fails with ENOMEM (libdrm's "Memory fail alloc" case: 1 TB), a
// VRAM-only BO bigger than VRAM lives in GTT, and GTT's use is bounded by
// its size, shown in INFO_GTT_USAGE and INFO_MEMORY.
Test(memory_limits, gem_bos_past_a_domain_fail_and_gtt_fills)
{
	Rig rig(small_host());
	Proc a(rig, 1000);
	long r = 0;
	constexpr uint64_t kTiB = 1ull << 40;
	for (uint64_t dom : {abi::drm::DOMAIN_VRAM, abi::drm::DOMAIN_GTT, abi::drm::DOMAIN_VRAM | abi::drm::DOMAIN_GTT}) {
		a.rig.gem_create(a.c, a.r, kTiB, dom, &r);
		cr_assert_eq(r, -ENOMEM, "1 TB in domains %lu", static_cast<unsigned long>(dom));
	}
	a.rig.gem_create(a.c, a.r, 2 * kGiB, abi::drm::DOMAIN_GTT, &r);
	cr_assert_eq(r, -ENOMEM, "a BO the size of GTT (validate_size: smaller than the manager)");
	const uint32_t big = a.rig.gem_create(a.c, a.r, kGiB, abi::drm::DOMAIN_VRAM, &r);
	cr_assert_eq(r, 0, "bigger than VRAM: retried with GTT");
	cr_assert(has(a.gem(big), "\"resident\":\"gtt\""), "%s", a.gem(big).c_str());
	cr_assert_eq(a.info(abi::drm::INFO_GTT_USAGE), kGiB);
	const uint32_t g = a.rig.gem_create(a.c, a.r, kGiB, abi::drm::DOMAIN_GTT, &r);
	cr_assert_eq(r, 0);
	cr_assert_eq(a.info(abi::drm::INFO_GTT_USAGE), 2 * kGiB);
	a.rig.gem_create(a.c, a.r, 4096, abi::drm::DOMAIN_GTT, &r);
	cr_assert_eq(r, -ENOMEM, "GTT is full");
	abi::drm::MemoryInfo mi{};
	abi::drm::Info q{reinterpret_cast<uint64_t>(&mi), sizeof mi, abi::drm::INFO_MEMORY, {}};
	cr_assert_eq(rig.amdgpu(a.c, a.r, abi::drm::INFO, &q, abi::kIocWrite), 0);
	cr_assert_eq(mi.gtt.total_heap_size, 2 * kGiB);
	cr_assert_eq(mi.gtt.heap_usage, 2 * kGiB);
	abi::drm::GemClose cl{g, 0};
	cr_assert_eq(rig.drm(a.c, a.r, abi::drm::GEM_CLOSE, &cl, abi::kIocWrite), 0);
	cr_assert_eq(a.info(abi::drm::INFO_GTT_USAGE), kGiB);
	a.rig.gem_create(a.c, a.r, 4096, abi::drm::DOMAIN_GTT, &r);
	cr_assert_eq(r, 0);
}

// KFD's limits (amdgpu_amdkfd_reserve_mem_limit), machine-wide: GTT BOs
// count against the TTM and system limits, userptr BOs against the system
// limit; freeing gives the share back.
Test(memory_limits, kfd_gtt_and_userptr_bos_fail_past_kfd_limits)
{
	Rig rig(small_host());
	Proc a(rig, 1000), b(rig, 2000);
	void *host = mmap(nullptr, 2 * kGiB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	cr_assert_neq(host, MAP_FAILED);
	const uint64_t uaddr = reinterpret_cast<uint64_t>(host);
	auto alloc = [](Proc &p, uint64_t size, uint32_t flags, uint64_t mmap_offset, AllocMemoryOfGpu *out) {
		*out = AllocMemoryOfGpu{p.next_va, size, 0, mmap_offset, G0, flags | ALLOC_WRITABLE};
		p.next_va += size;
		return p.rig.kfd(p.c, p.kfd, ALLOC_MEMORY_OF_GPU, out);
	};
	AllocMemoryOfGpu g1{}, g2{}, u{};
	cr_assert_eq(alloc(a, 3 * kGiB / 2, ALLOC_GTT, 0, &g1), 0);
	cr_assert_eq(alloc(b, kGiB, ALLOC_GTT, 0, &g2), -ENOMEM, "past the TTM limit, whichever process");
	cr_assert_eq(alloc(b, kGiB, ALLOC_USERPTR, uaddr, &u), -ENOMEM, "past the system limit");
	cr_assert_eq(alloc(b, 900ull << 20, ALLOC_USERPTR, uaddr, &u), 0);
	cr_assert_eq(alloc(b, 512ull << 20, ALLOC_GTT, 0, &g2), -ENOMEM, "system limit: GTT and userptr together");
	FreeMemoryOfGpu f{g1.handle};
	cr_assert_eq(a.rig.kfd(a.c, a.kfd, FREE_MEMORY_OF_GPU, &f, abi::kIocWrite), 0);
	cr_assert_eq(alloc(b, 512ull << 20, ALLOC_GTT, 0, &g2), 0);
	munmap(host, 2 * kGiB);
}
