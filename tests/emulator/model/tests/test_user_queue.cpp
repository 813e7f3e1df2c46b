// SPDX-License-Identifier: GPL-2.0-only
// KFD SDMA user queues (user_queue.cpp): the doorbell makes the engine run
// the ring up to the write pointer; copies, FENCE + TRAP raising a signal
// event, POLL_REGMEM waiting for memory, COPY_LINEAR_RECT, the integer
// atomics, GCR; a packet the engine does not have stopping the queue with
// a HW exception event, a VM fault with a memory exception event.
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
	Rig rig;
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
	explicit App(uint32_t family = 141) : rig(make_machine({G0}, family))
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
		doorbell = rig.map_doorbell(c, kfd, q.doorbell_offset);
		cr_assert_not_null(doorbell);
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

// The 8-dword ATOMIC packet: TC operation `op`, loop bit, address, source
// and compare values.
std::vector<uint32_t> atomic(uint32_t op, uint64_t va, uint64_t src, uint64_t cmp = 0, bool loop = false)
{
	return {10u | (loop ? 1u << 16 : 0u) | (op << 25), uint32_t(va), uint32_t(va >> 32), uint32_t(src),
		uint32_t(src >> 32), uint32_t(cmp), uint32_t(cmp >> 32), loop ? 16u : 0u};
}

// An exception event (MEMORY or HW_EXCEPTION) of the app's process.
uint32_t exception_event(App &app, uint32_t type)
{
	CreateEvent ce{0, 0, type, 0, 0, 0, 0};
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, CREATE_EVENT, &ce), 0);
	return ce.event_id;
}

// Waits for exception event `id`; its kfd_event_data union in *out.
bool wait_exception(App &app, uint32_t id, uint8_t (&out)[32])
{
	EventData ed{};
	ed.event_id = id;
	WaitEvents w{addr(&ed), 1, 1, 5000, 0};
	if (app.rig.kfd(app.c, app.kfd, WAIT_EVENTS, &w) || w.wait_result != WAIT_COMPLETE)
		return false;
	std::memcpy(out, ed.exception_data, 32);
	return true;
}

// A packet the engine does not have: the packets before it run, the queue
// stops at it (rptr stays), `queues` says why, the daemon's log says so,
// the process's HW_EXCEPTION event is signalled with the GPU and reset
// cause "hang" (0).
void expect_stops_with_hw_exception(App &app, const std::vector<uint32_t> &bad, const char *why)
{
	const uint32_t hw = exception_event(app, EVENT_HW_EXCEPTION);
	app.put({abi::sdma::OP_NOP});
	const uint64_t good = app.wptr;
	app.put(bad);
	app.ring_doorbell();
	uint8_t data[32];
	cr_assert(wait_exception(app, hw, data), "the HW exception event is signalled");
	uint32_t cause, gpu;
	std::memcpy(&cause, data + 4, 4);
	std::memcpy(&gpu, data + 12, 4);
	cr_assert_eq(cause, 0u, "reset cause: hang");
	cr_assert_eq(gpu, G0);
	cr_assert_eq(app.h->rptr, good, "stopped at the packet");
	std::string q = app.rig.model->introspect("queues 1000");
	cr_assert(q.find("\"hung\":true") != std::string::npos && q.find(why) != std::string::npos, "%s", q.c_str());
}

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

Test(user_queue, copy_linear_rect_copies_a_box_between_pitched_arrays)
{
	App app;
	// 4-byte elements. Source: rows of 16 elements, slices of 4 rows;
	// destination: rows of 8 elements, slices of 3 rows. Box 3 x 2 x 2
	// from (1,1,1) to (2,0,1).
	auto *src = reinterpret_cast<uint32_t *>(app.h->src);
	for (uint32_t i = 0; i < 2048; ++i)
		src[i] = 0x10000 + i;
	const uint32_t sp = 16, ss = 64, dp = 8, ds = 24;
	std::vector<uint32_t> pkt{abi::sdma::OP_COPY | (4u << 8) | (2u << 29),
				  uint32_t(addr(src)), uint32_t(addr(src) >> 32),
				  1u | (1u << 16), 1u | ((sp - 1) << 13), ss - 1,
				  uint32_t(addr(app.h->dst)), uint32_t(addr(app.h->dst) >> 32),
				  2u | (0u << 16), 1u | ((dp - 1) << 13), ds - 1,
				  (3u - 1) | ((2u - 1) << 16), 2u - 1};
	app.put(pkt);
	app.ring_doorbell();
	cr_assert(app.wait_rptr(app.wptr));
	uint32_t want[2048] = {};
	for (uint32_t z = 0; z < 2; ++z)
		for (uint32_t y = 0; y < 2; ++y)
			for (uint32_t x = 0; x < 3; ++x)
				want[(1 + z) * ds + (0 + y) * dp + 2 + x] = src[(1 + z) * ss + (1 + y) * sp + 1 + x];
	cr_assert_eq(std::memcmp(app.h->dst, want, sizeof want), 0, "exactly the box, nothing around it");
	cr_assert_eq(want[ds + 2], 0x10000u + ss + sp + 1, "the box's first element");
}

Test(user_queue, integer_atomics_32_and_64_bit)
{
	App app;
	auto *v = reinterpret_cast<uint64_t *>(app.h->src);
	auto *w = reinterpret_cast<uint32_t *>(app.h->src + 512);
	struct Case {
		uint32_t op;
		uint64_t before, src, cmp, after;
	};
	// TC operations: 0x2f ADD_RTN_64, 0x6f ADD_64, 0x30 SUB, 0x27 SWAP,
	// 0x28 CMPSWAP (hit and miss), 0x31 SMIN, 0x32 UMIN, 0x33 SMAX,
	// 0x34 UMAX, 0x35 AND, 0x36 OR, 0x37 XOR, 0x38 INC, 0x39 DEC.
	const Case wide[] = {
		{0x2f, 5, 7, 0, 12},	{0x6f, 5, 7, 0, 12},	    {0x30, 5, 7, 0, uint64_t(-2)},
		{0x27, 5, 9, 0, 9},	{0x28, 5, 9, 5, 9},	    {0x28, 5, 9, 4, 5},
		{0x31, 5, uint64_t(-1), 0, uint64_t(-1)},	    {0x32, 5, uint64_t(-1), 0, 5},
		{0x33, 5, uint64_t(-1), 0, 5},			    {0x34, 5, uint64_t(-1), 0, uint64_t(-1)},
		{0x35, 6, 3, 0, 2},	{0x36, 6, 3, 0, 7},	    {0x37, 6, 3, 0, 5},
		{0x38, 6, 9, 0, 7},	{0x38, 9, 9, 0, 0},	    {0x39, 6, 9, 0, 5},
		{0x39, 0, 9, 0, 9},
	};
	// 32-bit: 0x0f ADD_RTN_32 wraps in 32 bits, 0x11 SMIN signed,
	// 0x12 UMIN unsigned, 0x48 CMPSWAP_32; the neighbour is untouched.
	const Case narrow[] = {
		{0x0f, 0xffffffff, 2, 0, 1}, {0x11, 5, 0xffffffff, 0, 0xffffffff}, {0x12, 5, 0xffffffff, 0, 5},
		{0x48, 5, 9, 5, 9},
	};
	size_t i = 0;
	for (const Case &c : wide) {
		v[i] = c.before;
		app.put(atomic(c.op, addr(&v[i]), c.src, c.cmp));
		++i;
	}
	i = 0;
	for (const Case &c : narrow) {
		w[2 * i] = uint32_t(c.before);
		w[2 * i + 1] = 0xabcdef01;
		app.put(atomic(c.op, addr(&w[2 * i]), c.src, c.cmp));
		++i;
	}
	app.ring_doorbell();
	cr_assert(app.wait_rptr(app.wptr));
	i = 0;
	for (const Case &c : wide) {
		cr_assert_eq(v[i], c.after, "64-bit op 0x%x on %#lx with %#lx: %#lx", c.op, (unsigned long)c.before,
			     (unsigned long)c.src, (unsigned long)v[i]);
		++i;
	}
	i = 0;
	for (const Case &c : narrow) {
		cr_assert_eq(w[2 * i], uint32_t(c.after), "32-bit op 0x%x: %#x", c.op, w[2 * i]);
		cr_assert_eq(w[2 * i + 1], 0xabcdef01u, "32-bit op 0x%x wrote beyond 4 bytes", c.op);
		++i;
	}
}

Test(user_queue, atomics_on_vram_and_a_looping_compare_swap_waits)
{
	App app;
	// ADD64 on VRAM (the model's memory), read back by a copy.
	const uint64_t zero = 40;
	std::memcpy(app.h->src, &zero, 8);
	app.put(copy(addr(app.h->src), kVram, 8));
	app.put(atomic(0x2f, kVram, 2));
	app.put(copy(kVram, addr(app.h->dst), 8));
	// A looping CMPSWAP on host memory: waits until the compare holds.
	auto *flag = reinterpret_cast<uint64_t *>(app.h->dst2);
	*flag = 1;
	app.put(atomic(0x28, addr(flag), 100, 7, true));
	const uint64_t end = app.wptr;
	app.ring_doorbell();
	std::this_thread::sleep_for(std::chrono::milliseconds(50));
	uint64_t got;
	std::memcpy(&got, app.h->dst, 8);
	cr_assert_eq(got, 42u, "ADD64 on VRAM");
	cr_assert_lt(app.h->rptr, end, "the looping compare-swap waits");
	cr_assert_eq(std::atomic_ref<uint64_t>(*flag).load(), 1u);
	std::atomic_ref<uint64_t>(*flag).store(7);
	cr_assert(app.wait_rptr(end), "the compare holds: done");
	cr_assert_eq(std::atomic_ref<uint64_t>(*flag).load(), 100u);
}

Test(user_queue, gcr_is_a_no_op_from_sdma_v5)
{
	App app(abi::sdma::kFamilyNv);
	std::memset(app.h->src, 0x3c, 64);
	app.put({17u | (1u << 8), 0, 0, 0, 0}); // USER_GCR, whole range
	app.put(copy(addr(app.h->src), addr(app.h->dst), 64));
	app.ring_doorbell();
	cr_assert(app.wait_rptr(app.wptr));
	cr_assert_eq(app.h->dst[63], 0x3c);
}

Test(user_queue, gcr_on_sdma_v4_stops_the_queue)
{
	App app;
	expect_stops_with_hw_exception(app, {17u | (1u << 8), 0, 0, 0, 0}, "unknown sdma packet (op 17");
}

Test(user_queue, a_float_atomic_stops_the_queue)
{
	App app;
	expect_stops_with_hw_exception(app, atomic(0x22, addr(app.h->src), 1), // FMIN_RTN_64
				       "unsupported sdma atomic operation 34");
}

Test(user_queue, a_rect_copy_with_16_plus_byte_elements_stops_the_queue)
{
	App app;
	std::vector<uint32_t> pkt(13, 0);
	pkt[0] = abi::sdma::OP_COPY | (4u << 8) | (5u << 29);
	expect_stops_with_hw_exception(app, pkt, "element size 2^5");
}

Test(user_queue, a_vm_fault_signals_the_memory_event)
{
	App app;
	const uint32_t mem = exception_event(app, EVENT_MEMORY);
	const uint64_t hole = 0x300000000ull;
	app.put(copy(addr(app.h->src), hole, 64));
	app.ring_doorbell();
	uint8_t data[32];
	cr_assert(wait_exception(app, mem, data), "the memory exception event is signalled");
	uint32_t not_present, gpu;
	uint64_t va;
	std::memcpy(&not_present, data, 4);
	std::memcpy(&va, data + 16, 8);
	std::memcpy(&gpu, data + 24, 4);
	cr_assert_eq(not_present, 1u);
	cr_assert_eq(va, hole);
	cr_assert_eq(gpu, G0);
	cr_assert_eq(app.h->rptr, 0u);
}

// A queue destroyed and made again on the same doorbell slot, its first
// ring writing the value the last one's left there (the same packets, the
// same write pointer): the hardware takes the write, so must the model.
Test(user_queue, a_new_queue_on_a_reused_slot_sees_its_first_doorbell)
{
	App app;
	std::vector<uint32_t> fence;
	pkt_fence(fence, addr(&app.h->flag), 1);
	app.put(fence);
	app.ring_doorbell();
	cr_assert(app.wait_rptr(app.wptr), "the first queue runs its FENCE");
	const uint64_t last = app.wptr;

	DestroyQueue d{app.qid, 0};
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, DESTROY_QUEUE, &d, abi::kIocWrite), 0);
	std::memset(app.h->ring, 0, kRing);
	app.h->rptr = app.h->wptr = 0;
	app.h->flag = 0;
	CreateQueue q{};
	q.ring_base_address = addr(app.h->ring);
	q.ring_size = kRing;
	q.read_pointer_address = addr(&app.h->rptr);
	q.write_pointer_address = addr(&app.h->wptr);
	q.gpu_id = G0;
	q.queue_type = QUEUE_SDMA;
	q.queue_percentage = 100;
	q.queue_priority = 15;
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, CREATE_QUEUE, &q), 0);
	cr_assert_eq(q.queue_id, app.qid, "the same queue id, so the same doorbell slot");
	// The new engine has looked at its slot (and found nothing to do)
	// before the ring.
	std::this_thread::sleep_for(std::chrono::milliseconds(20));
	app.wptr = 0;
	fence.clear();
	pkt_fence(fence, addr(&app.h->flag), 2);
	app.put(fence);
	cr_assert_eq(app.wptr, last);
	app.ring_doorbell();
	cr_assert(app.wait_rptr(app.wptr), "the new queue runs its FENCE (read pointer %lu of %lu)",
		  (unsigned long)app.h->rptr, (unsigned long)app.wptr);
	cr_assert_eq(std::atomic_ref<uint32_t>(app.h->flag).load(), 2u);
}
