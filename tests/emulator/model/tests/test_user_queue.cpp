// SPDX-License-Identifier: GPL-2.0-only
// KFD SDMA user queues (user_queue.cpp): the doorbell makes the engine run
// the ring up to the write pointer; copies, FENCE + TRAP raising a signal
// event, POLL_REGMEM waiting for memory, a bad packet hanging the queue.
// And the device identity DEV_INFO / HW_IP_INFO report.
#include "harness.h"

#include <criterion/criterion.h>

#include <atomic>
#include <chrono>
#include <thread>

using namespace kfdemu;
using namespace kfdemu::testing;
using namespace kfdemu::abi::kfd;

namespace {

constexpr uint32_t G0 = 0x1111;
constexpr uint64_t kVram = 0x100000000ull, kEvents = 0x200000000ull;
constexpr uint32_t kRing = 4096;

struct alignas(4096) Host {
	uint8_t ring[kRing];
	uint64_t rptr, wptr;
	uint32_t flag;
	uint8_t pad[4096 - 20];
	uint8_t src[8192], dst[8192], dst2[8192];
};

struct App {
	Rig rig{make_machine({G0})};
	FakeCaller c{1000};
	int kfd = -1, r0 = -1;
	std::unique_ptr<Host> h{new Host{}};
	uint64_t wptr = 0;
	volatile uint64_t *doorbell = nullptr;
	uint32_t qid = 0, event = 0;

	long alloc(uint64_t va, uint64_t size, uint32_t flags, uint64_t off = 0)
	{
		AllocMemoryOfGpu a{va, size, 0, off, G0, flags | ALLOC_WRITABLE};
		if (long r = rig.kfd(c, kfd, ALLOC_MEMORY_OF_GPU, &a))
			return r;
		uint32_t id = G0;
		MapMemoryToGpu m{a.handle, reinterpret_cast<uint64_t>(&id), 1, 0};
		if (long r = rig.kfd(c, kfd, MAP_MEMORY_TO_GPU, &m))
			return r;
		return static_cast<long>(a.handle & 0xffffffff) + 1; // > 0
	}
	App()
	{
		kfd = rig.open_kfd(c);
		r0 = rig.open_render(c, 128);
		AcquireVm av{static_cast<uint32_t>(r0), G0};
		cr_assert_eq(rig.kfd(c, kfd, ACQUIRE_VM, &av, abi::kIocWrite), 0);
		// All host memory as one userptr BO at its own address (as
		// libhsakmt registers system memory), VRAM and an event page.
		const uint64_t ha = reinterpret_cast<uint64_t>(h.get());
		cr_assert_gt(alloc(ha, sizeof(Host), ALLOC_USERPTR, ha), 0);
		cr_assert_gt(alloc(kVram, 8192, ALLOC_VRAM), 0);
		AllocMemoryOfGpu ep{kEvents, 32768, 0, 0, G0, ALLOC_GTT | ALLOC_WRITABLE};
		cr_assert_eq(rig.kfd(c, kfd, ALLOC_MEMORY_OF_GPU, &ep), 0);
		uint32_t id = G0;
		MapMemoryToGpu m{ep.handle, reinterpret_cast<uint64_t>(&id), 1, 0};
		cr_assert_eq(rig.kfd(c, kfd, MAP_MEMORY_TO_GPU, &m), 0);
		CreateEvent ce{ep.handle, 0, EVENT_SIGNAL, 1, 0, 0, 0};
		cr_assert_eq(rig.kfd(c, kfd, CREATE_EVENT, &ce), 0);
		event = ce.event_id;

		CreateQueue q{};
		q.ring_base_address = reinterpret_cast<uint64_t>(h->ring);
		q.ring_size = kRing;
		q.read_pointer_address = reinterpret_cast<uint64_t>(&h->rptr);
		q.write_pointer_address = reinterpret_cast<uint64_t>(&h->wptr);
		q.gpu_id = G0;
		q.queue_type = QUEUE_SDMA;
		q.queue_percentage = 100;
		q.queue_priority = 15;
		cr_assert_eq(rig.kfd(c, kfd, CREATE_QUEUE, &q), 0);
		qid = q.queue_id;
		auto *page = static_cast<uint8_t *>(rig.map(c, kfd, q.doorbell_offset & ~uint64_t{8191}, 8192));
		cr_assert_not_null(page);
		doorbell = reinterpret_cast<volatile uint64_t *>(page + (q.doorbell_offset & 8191));
	}
	void put(const std::vector<uint32_t> &dw)
	{
		for (uint32_t v : dw) {
			std::memcpy(h->ring + (wptr % kRing), &v, 4);
			wptr += 4;
		}
	}
	void ring_doorbell()
	{
		std::atomic_ref<uint64_t>(h->wptr).store(wptr);
		*doorbell = wptr;
	}
	bool wait_rptr_at_least(uint64_t want, int ms = 5000)
	{
		auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
		while (int64_t(std::atomic_ref<uint64_t>(h->rptr).load() - want) < 0) {
			if (std::chrono::steady_clock::now() >= end)
				return false;
			std::this_thread::sleep_for(std::chrono::microseconds(100));
		}
		return true;
	}
	bool wait_rptr(uint64_t want, int ms = 5000)
	{
		auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
		while (std::chrono::steady_clock::now() < end) {
			if (std::atomic_ref<uint64_t>(h->rptr).load() == want)
				return true;
			std::this_thread::sleep_for(std::chrono::milliseconds(1));
		}
		return false;
	}
};

void pkt_fence(std::vector<uint32_t> &p, uint64_t va, uint32_t v)
{
	p.insert(p.end(), {abi::sdma::OP_FENCE, uint32_t(va), uint32_t(va >> 32), v});
}

std::vector<uint32_t> copy(uint64_t src, uint64_t dst, uint64_t n)
{
	std::vector<uint32_t> p;
	pkt_copy(p, src, dst, n);
	return p;
}

uint64_t addr(const void *p) { return reinterpret_cast<uint64_t>(p); }

} // namespace

Test(user_queue, doorbell_runs_the_ring_and_trap_raises_the_event)
{
	App app;
	for (size_t i = 0; i < sizeof app.h->src; ++i)
		app.h->src[i] = uint8_t(i * 7 + 3);
	app.put(copy(addr(app.h->src), kVram, 8192));
	app.put(copy(kVram, addr(app.h->dst), 8191)); // count = bytes - 1: 8191 bytes
	std::vector<uint32_t> tail;
	pkt_fence(tail, kEvents + app.event * 8, app.event);
	tail.insert(tail.end(), {abi::sdma::OP_TRAP, app.event});
	app.put(tail);
	// Nothing happens before the doorbell.
	std::this_thread::sleep_for(std::chrono::milliseconds(20));
	cr_assert_eq(app.h->rptr, 0u, "no doorbell, no work");
	app.ring_doorbell();

	EventData ed{};
	ed.event_id = app.event;
	WaitEvents w{addr(&ed), 1, 1, 5000, 0};
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, WAIT_EVENTS, &w), 0);
	cr_assert_eq(w.wait_result, WAIT_COMPLETE, "TRAP after FENCE raises the signal event");
	cr_assert(app.wait_rptr(app.wptr), "rptr reaches wptr (%lu of %lu)", (unsigned long)app.h->rptr,
		  (unsigned long)app.wptr);
	cr_assert_eq(std::memcmp(app.h->src, app.h->dst, 8191), 0, "host -> VRAM -> host");
	cr_assert_eq(app.h->dst[8191], 0, "the last byte was not copied (count 8190)");
	std::string q = app.rig.model->introspect("queues 1000");
	cr_assert(q.find("\"packets\":4") != std::string::npos, "%s", q.c_str());
	cr_assert(q.find("\"hung\":false") != std::string::npos, "%s", q.c_str());
}

Test(user_queue, poll_regmem_waits_for_memory)
{
	App app;
	std::memset(app.h->src, 0x5a, 4096);
	std::vector<uint32_t> poll{abi::sdma::OP_POLL_REGMEM | (1u << 31) | (3u << 28),
				   uint32_t(addr(&app.h->flag)), uint32_t(addr(&app.h->flag) >> 32), 1, 0xffffffff,
				   0x0fff0004};
	app.put(poll);
	const uint64_t after_poll = app.wptr;
	app.put(copy(addr(app.h->src), addr(app.h->dst2), 4096));
	app.ring_doorbell();
	std::this_thread::sleep_for(std::chrono::milliseconds(50));
	cr_assert_eq(app.h->rptr, 0u, "stopped at the poll");
	cr_assert_eq(app.h->dst2[0], 0);
	std::atomic_ref<uint32_t>(app.h->flag).store(1);
	cr_assert(app.wait_rptr(app.wptr), "the poll passes once memory matches");
	cr_assert_eq(app.h->dst2[4095], 0x5a);
	cr_assert_gt(app.wptr, after_poll);
}

Test(user_queue, register_poll_and_nop_complete_and_a_bad_packet_hangs)
{
	App app;
	// ROCr's HDP flush: a register poll (mem_poll 0), done at once.
	app.put({abi::sdma::OP_POLL_REGMEM, 0, 0x80000000, 0, 0, 0});
	app.put({abi::sdma::OP_NOP | (2u << 16), 0, 0});
	const uint64_t good = app.wptr;
	app.put({0xfe, 0, 0, 0});
	app.ring_doorbell();
	cr_assert(app.wait_rptr(good), "packets before the bad one run");
	std::this_thread::sleep_for(std::chrono::milliseconds(20));
	cr_assert_eq(app.h->rptr, good, "the engine stops at the bad packet");
	std::string q = app.rig.model->introspect("queues 1000");
	cr_assert(q.find("\"hung\":true") != std::string::npos, "%s", q.c_str());
	std::string cnt = app.rig.model->introspect("counters");
	cr_assert(cnt.find("unknown sdma packet") != std::string::npos, "%s", cnt.c_str());
	DestroyQueue d{app.qid, 0};
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, DESTROY_QUEUE, &d, abi::kIocWrite), 0);
}

Test(user_queue, several_doorbells_and_a_wrapping_ring)
{
	App app;
	for (size_t i = 0; i < 4096; ++i)
		app.h->src[i] = uint8_t(i);
	// 7-dword copies: after enough of them the packets cross the ring's
	// end (the engine reads modulo the ring size).
	for (int round = 0; round < 200; ++round) {
		const uint64_t off = uint64_t(round % 16) * 256;
		// Flow control as a producer does: never overwrite what the
		// engine has not read yet.
		cr_assert(app.wait_rptr_at_least(app.wptr + 28 - kRing + 4));
		app.put(copy(addr(app.h->src) + off, addr(app.h->dst) + off, 256));
		app.ring_doorbell();
	}
	cr_assert_gt(app.wptr, kRing, "wrapped");
	cr_assert(app.wait_rptr(app.wptr));
	cr_assert_eq(std::memcmp(app.h->src, app.h->dst, 4096), 0);
}

Test(device_identity, dev_info_revisions_and_gfx_ring)
{
	MachineDesc m = make_machine({G0});
	NodeDesc &g = m.nodes.back();
	g.pci_revision = 0x02;
	g.rev_id = 1;
	g.external_rev_id = 1 + 0x3c;
	g.gfx_ring = false;
	Rig rig(m);
	FakeCaller c(1000);
	int fd = rig.open_render(c, 128);
	cr_assert_geq(fd, 0);
	using namespace abi::drm;
	uint8_t dev[devinfo::kSize] = {};
	Info q{addr(dev), sizeof dev, INFO_DEV_INFO, {}};
	cr_assert_eq(rig.amdgpu(c, fd, INFO, &q, abi::kIocWrite), 0);
	uint32_t v;
	std::memcpy(&v, dev + devinfo::chip_rev, 4);
	cr_assert_eq(v, 1u, "chip_rev = rev_id");
	std::memcpy(&v, dev + devinfo::external_rev, 4);
	cr_assert_eq(v, 0x3du, "external_rev");
	std::memcpy(&v, dev + devinfo::pci_rev, 4);
	cr_assert_eq(v, 2u, "pci_rev = the PCI revision");
	HwIpInfo ip{};
	q = Info{addr(&ip), sizeof ip, INFO_HW_IP_INFO, {HW_IP_GFX, 0, 0, 0}};
	cr_assert_eq(rig.amdgpu(c, fd, INFO, &q, abi::kIocWrite), 0);
	cr_assert_eq(ip.available_rings, 0u, "compute-only chip: no GFX ring");
	q = Info{addr(&ip), sizeof ip, INFO_HW_IP_INFO, {HW_IP_COMPUTE, 0, 0, 0}};
	cr_assert_eq(rig.amdgpu(c, fd, INFO, &q, abi::kIocWrite), 0);
	cr_assert_neq(ip.available_rings, 0u, "compute rings remain");
}
