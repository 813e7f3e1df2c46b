// SPDX-License-Identifier: GPL-2.0-only
// KFD CP (PM4 compute) user queues (cp_queue.cpp): the doorbell makes the CP
// run the ring up to the write pointer and report its read pointer; the
// packets that need no shader (NOP, WRITE_DATA, RELEASE_MEM with its
// interrupt raising a signal event, EVENT_WRITE_EOP, WAIT_REG_MEM waiting
// for memory, INDIRECT_BUFFER, DMA_DATA); a dispatch stopping the queue with
// a HW exception event. AQL queues: test_aql_queue.cpp.
#include "harness.h"

#include <criterion/criterion.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

using namespace kfdemu;
using namespace kfdemu::testing;
using namespace kfdemu::abi::kfd;

namespace {

constexpr uint32_t G0 = 0x1111;
constexpr uint64_t kEvents = 0x200000000ull;
constexpr uint32_t kRing = 4096; // bytes: 1024 dwords

struct alignas(4096) Host {
	uint32_t ring[kRing / 4];
	uint64_t wptr;
	uint32_t rptr, flag;
	uint32_t out[16];
	uint8_t pad[4096 - 80];
	uint32_t ib[256];
	uint8_t src[4096], dst[4096];
};

uint64_t addr(const void *p) { return reinterpret_cast<uint64_t>(p); }
uint32_t pm4(uint32_t op, uint32_t dwords) { return (3u << 30) | ((dwords - 2) << 16) | (op << 8); }
uint32_t lo(uint64_t v) { return uint32_t(v); }
uint32_t hi(uint64_t v) { return uint32_t(v >> 32); }

struct App {
	Rig rig;
	FakeCaller c{1000};
	int kfd = -1, r0 = -1;
	std::unique_ptr<Host> h{new Host{}};
	uint64_t wptr = 0;
	volatile uint64_t *doorbell = nullptr;
	uint32_t qid = 0, event = 0;

	void map(uint64_t handle)
	{
		uint32_t id = G0;
		MapMemoryToGpu m{handle, addr(&id), 1, 0};
		cr_assert_eq(rig.kfd(c, kfd, MAP_MEMORY_TO_GPU, &m), 0);
	}
	explicit App(uint32_t type = QUEUE_COMPUTE) : rig(make_machine({G0}, 141))
	{
		kfd = rig.open_kfd(c);
		r0 = rig.open_render(c, 128);
		AcquireVm av{static_cast<uint32_t>(r0), G0};
		cr_assert_eq(rig.kfd(c, kfd, ACQUIRE_VM, &av, abi::kIocWrite), 0);
		// Host memory as one userptr BO at its own address, and an
		// event page.
		AllocMemoryOfGpu a{addr(h.get()), sizeof(Host), 0, addr(h.get()), G0, ALLOC_USERPTR | ALLOC_WRITABLE};
		cr_assert_eq(rig.kfd(c, kfd, ALLOC_MEMORY_OF_GPU, &a), 0);
		map(a.handle);
		AllocMemoryOfGpu ep{kEvents, 32768, 0, 0, G0, ALLOC_GTT | ALLOC_WRITABLE};
		cr_assert_eq(rig.kfd(c, kfd, ALLOC_MEMORY_OF_GPU, &ep), 0);
		map(ep.handle);
		CreateEvent ce{ep.handle, 0, EVENT_SIGNAL, 1, 0, 0, 0};
		cr_assert_eq(rig.kfd(c, kfd, CREATE_EVENT, &ce), 0);
		event = ce.event_id;
		CreateQueue q{};
		q.ring_base_address = addr(h->ring);
		q.ring_size = kRing;
		q.read_pointer_address = addr(&h->rptr);
		q.write_pointer_address = addr(&h->wptr);
		q.gpu_id = G0;
		q.queue_type = type;
		q.queue_percentage = 100;
		q.queue_priority = 7;
		cr_assert_eq(rig.kfd(c, kfd, CREATE_QUEUE, &q), 0);
		qid = q.queue_id;
		doorbell = rig.map_doorbell(c, kfd, q.doorbell_offset);
		cr_assert_not_null(doorbell);
	}
	void put(std::initializer_list<uint32_t> dw)
	{
		for (uint32_t v : dw)
			h->ring[wptr++ % (kRing / 4)] = v;
	}
	void ring_doorbell()
	{
		std::atomic_ref<uint64_t>(h->wptr).store(wptr);
		*doorbell = wptr;
	}
	// The reported read pointer (dwords, wrapped) reaches the write pointer.
	bool wait_consumed(int ms = 5000)
	{
		auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
		while (std::atomic_ref<uint32_t>(h->rptr).load() != uint32_t(wptr % (kRing / 4))) {
			if (std::chrono::steady_clock::now() >= end)
				return false;
			std::this_thread::sleep_for(std::chrono::microseconds(100));
		}
		return true;
	}
	long wait_event(uint32_t ms)
	{
		EventData ed{};
		ed.event_id = event;
		WaitEvents w{addr(&ed), 1, 1, ms, 0};
		cr_assert_eq(rig.kfd(c, kfd, WAIT_EVENTS, &w), 0);
		return w.wait_result;
	}
	std::string queues() { return rig.model->introspect("queues 1000"); }
};

} // namespace

Test(cp_queue, write_data_and_release_mem_interrupt_raise_the_event)
{
	App app;
	const uint64_t out = addr(app.h->out), slot = kEvents + app.event * 8;
	app.put({pm4(0x10, 3), 0, 0});					// NOP with a payload
	app.put({(3u << 30) | (0x3fffu << 16) | (0x10u << 8)});		// 1-dword NOP
	app.put({0x80000000u});						// type-2 filler
	app.put({pm4(0x37, 6), 5u << 8 | 1u << 20, lo(out), hi(out), 0x11, 0x22});	// WRITE_DATA
	// RELEASE_MEM: 64-bit data to out[2..3], then the event's slot and an
	// interrupt with the event id as its context.
	app.put({pm4(0x49, 8), 0x14, 2u << 29, lo(out + 8), hi(out + 8), 0xaabbccdd, 0x1, 0});
	app.put({pm4(0x49, 8), 0x14, 1u << 29 | 2u << 24, lo(slot), hi(slot), app.event, 0, app.event});
	std::this_thread::sleep_for(std::chrono::milliseconds(20));
	cr_assert_eq(app.h->rptr, 0u, "no doorbell, no work");
	app.ring_doorbell();
	cr_assert_eq(app.wait_event(5000), WAIT_COMPLETE, "the end-of-pipe interrupt raises the event");
	cr_assert(app.wait_consumed(), "rptr %u, wptr %lu", app.h->rptr, (unsigned long)app.wptr);
	cr_assert_eq(app.h->out[0], 0x11u);
	cr_assert_eq(app.h->out[1], 0x22u);
	cr_assert_eq(app.h->out[2], 0xaabbccddu);
	cr_assert_eq(app.h->out[3], 1u);
	std::string q = app.queues();
	cr_assert(q.find("\"packets\":6") != std::string::npos && q.find("\"hung\":false") != std::string::npos, "%s",
		  q.c_str());
}

Test(cp_queue, wait_reg_mem_waits_for_memory_then_an_ib_and_dma_data_run)
{
	App app;
	for (size_t i = 0; i < sizeof app.h->src; ++i)
		app.h->src[i] = uint8_t(i * 13 + 1);
	const uint64_t flag = addr(&app.h->flag), out = addr(app.h->out);
	// WAIT_REG_MEM: memory, function "==", reference 7, mask 0xff.
	app.put({pm4(0x3c, 7), 1u << 4 | 3, lo(flag), hi(flag), 7, 0xff, 4});
	// An IB holding DMA_DATA (memory to memory), DMA_DATA of data (a dword
	// fill) and an EVENT_WRITE_EOP of 32-bit data.
	uint32_t *ib = app.h->ib;
	size_t n = 0;
	const uint64_t s = addr(app.h->src), d = addr(app.h->dst), eop = out + 16;
	for (uint32_t v : {pm4(0x50, 7), 0u, lo(s), hi(s), lo(d), hi(d), 4096u})
		ib[n++] = v;
	for (uint32_t v : {pm4(0x50, 7), 2u << 29, 0x5a5a5a5au, 0u, lo(out + 32), hi(out + 32), 8u})
		ib[n++] = v;
	for (uint32_t v : {pm4(0x47, 6), 0x14u, lo(eop), hi(eop) | 1u << 29, 0x600du, 0u})
		ib[n++] = v;
	const uint64_t iba = addr(ib);
	app.put({pm4(0x3f, 4), lo(iba), hi(iba), uint32_t(n) | 1u << 23});
	app.ring_doorbell();
	std::this_thread::sleep_for(std::chrono::milliseconds(50));
	cr_assert_eq(app.h->rptr, 0u, "stopped at the WAIT_REG_MEM");
	cr_assert_eq(app.h->dst[0], 0);
	std::atomic_ref<uint32_t>(app.h->flag).store(0x107); // masked: 7
	cr_assert(app.wait_consumed(), "the wait passes once memory matches");
	cr_assert_eq(std::memcmp(app.h->src, app.h->dst, 4096), 0, "DMA_DATA copied");
	cr_assert_eq(app.h->out[8], 0x5a5a5a5au);
	cr_assert_eq(app.h->out[9], 0x5a5a5a5au);
	cr_assert_eq(app.h->out[4], 0x600du, "EVENT_WRITE_EOP wrote its data");
}

Test(cp_queue, a_dispatch_hangs_the_queue)
{
	App app;
	app.put({pm4(0x15, 5), 1, 1, 1, 0}); // DISPATCH_DIRECT: needs a shader
	app.ring_doorbell();
	for (int i = 0; i < 500 && app.queues().find("\"hung\":true") == std::string::npos; ++i)
		std::this_thread::sleep_for(std::chrono::milliseconds(2));
	std::string q = app.queues();
	cr_assert(q.find("\"hung\":true") != std::string::npos && q.find("unsupported cp packet") != std::string::npos,
		  "%s", q.c_str());
	cr_assert_eq(app.h->rptr, 0u);
}
