// SPDX-License-Identifier: GPL-2.0-only
// KFD AQL queues (aql_queue.cpp): the packet processor as ROCr drives it
// (amd_queue_t read/write dispatch ids, 64-byte packets, doorbells with the
// packet index): barrier-AND and barrier-OR on dependency signals, the
// completion signal decremented with its mailbox event and profiling
// timestamps, the slot released (INVALID), an INVALID header waited on, AMD's
// barrier-value and PM4-IB vendor packets, queue errors (a malformed packet
// through the queue_inactive_signal, or a hang without one; a VM fault as the
// MEMORY event), two queues waiting for each other, a CRIU pause holding a
// queue until UNPAUSE; kernel dispatches of a hand-assembled kernel: paused
// mid-way and resumed (CHECKPOINT refused meanwhile: the queue has no CWSR
// area to save its waves in; test_aql_cwsr saves them), a VM fault, an illegal
// instruction and a trap; pointers read only once rung; priorities: the
// queue of higher priority (also after UPDATE_QUEUE) runs its dispatch
// first, and each priority's MQD pipe priority.
#include "harness.h"

#include <criterion/criterion.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

using namespace kfdemu;
using namespace kfdemu::testing;
using namespace kfdemu::abi::kfd;

namespace {

constexpr uint32_t G0 = 0x1111;
constexpr uint64_t kEvents = 0x200000000ull, kSignals = 0x300000000ull, kUnmapped = 0x700000000ull;
constexpr uint32_t kSlots = 16;		 // 1 KiB of ring
constexpr uint16_t kInvalid = 1, kDispatch = 2, kAnd = 3, kAgent = 4, kOr = 5, kVendor = 0;

// amd_signal_t (amd_hsa_signal.h).
struct AmdSignal {
	int64_t kind, value;
	uint64_t mailbox;
	uint32_t event_id, reserved1;
	uint64_t start_ts, end_ts, queue;
	uint32_t reserved3[2];
};
static_assert(sizeof(AmdSignal) == 64);

struct alignas(4096) Host {
	uint8_t ring[kSlots * 64];
	alignas(64) uint8_t amd_queue[256]; // amd_queue_t, by offset
	uint32_t out[16];
	uint32_t ib[16];
	alignas(256) uint8_t kernel[256]; // kernel descriptor, code at +64
	uint64_t kernarg[2];
	uint32_t flag;
};

// The test kernel (gfx908 and gfx90a alike; llvm-mc-15's encoding of):
//   s_load_dwordx2 s[2:3], s[0:1], 0x0	; kernarg[0]: out
//   s_load_dwordx2 s[6:7], s[0:1], 0x8	; kernarg[1]: flag
//   s_waitcnt lgkmcnt(0)
//   v_mov_b32 v1, 0
// loop:
//   global_load_dword v3, v1, s[6:7] glc	; spins while *flag == 0
//   s_waitcnt vmcnt(0)
//   v_cmp_eq_u32 vcc, 0, v3
//   s_cbranch_vccnz loop
//   v_mov_b32 v2, 42
//   global_store_dword v1, v2, s[2:3]	; *out = 42
//   s_endpgm
constexpr uint32_t kSpinKernel[] = {0xc0060080, 0x00000000, 0xc0060180, 0x00000008, 0xbf8cc07f, 0x7e020280,
				    0xdc518000, 0x03060001, 0xbf8c0f70, 0x7d940680, 0xbf87fffb, 0x7e0402aa,
				    0xdc708000, 0x00020201, 0xbf810000};
constexpr uint32_t kIllegal = 0xbfa00000; // SOPP opcode 0x20: no gfx9 instruction
constexpr uint32_t kTrap = 0xbf920002;	  // s_trap 2

uint64_t addr(const void *p) { return reinterpret_cast<uint64_t>(p); }

struct Packet {
	uint8_t b[64]{};
	template <typename T> Packet &set(size_t off, T v)
	{
		std::memcpy(b + off, &v, sizeof v);
		return *this;
	}
};

// CREATE_QUEUE's arguments for an AQL queue on G0 whose ring and amd_queue_t
// are those of `h` (write_dispatch_id at byte 56, read_dispatch_id at 128).
CreateQueue aql_queue(Host &h, uint32_t priority)
{
	CreateQueue q{};
	q.ring_base_address = addr(h.ring);
	q.ring_size = sizeof h.ring;
	q.write_pointer_address = addr(h.amd_queue + 56);
	q.read_pointer_address = addr(h.amd_queue + 128);
	q.gpu_id = G0;
	q.queue_type = QUEUE_COMPUTE_AQL;
	q.queue_percentage = 100;
	q.queue_priority = priority;
	return q;
}

Packet barrier(uint16_t type, std::vector<uint64_t> deps, uint64_t completion)
{
	Packet p;
	p.set<uint16_t>(0, type | 1u << 8 | 2u << 9 | 2u << 11); // barrier bit, system fences
	for (size_t i = 0; i < deps.size(); ++i)
		p.set<uint64_t>(8 + 8 * i, deps[i]);
	return p.set<uint64_t>(56, completion);
}

struct App {
	Rig rig;
	FakeCaller c{1000};
	FakeCaller dumper{500, true};
	int kfd = -1, r0 = -1;
	std::unique_ptr<Host> h{new Host{}};
	AmdSignal *sig = nullptr; // 64 signals at GPU VA kSignals, CPU-mapped here
	uint64_t wptr = 0;
	volatile uint64_t *doorbell = nullptr;
	uint32_t event = 0, inactive_event = 0, memory_event = 0, hw_event = 0;

	uint64_t alloc_map(uint64_t va, uint64_t size, uint32_t flags, uint64_t cpu = 0, uint64_t *off = nullptr)
	{
		AllocMemoryOfGpu a{va, size, 0, cpu, G0, flags};
		cr_assert_eq(rig.kfd(c, kfd, ALLOC_MEMORY_OF_GPU, &a), 0);
		uint32_t id = G0;
		MapMemoryToGpu m{a.handle, addr(&id), 1, 0};
		cr_assert_eq(rig.kfd(c, kfd, MAP_MEMORY_TO_GPU, &m), 0);
		if (off)
			*off = a.mmap_offset;
		return a.handle;
	}
	uint32_t new_event(uint64_t page, uint32_t type)
	{
		CreateEvent ce{page, 0, type, 1, 0, 0, 0};
		cr_assert_eq(rig.kfd(c, kfd, CREATE_EVENT, &ce), 0);
		return ce.event_id;
	}
	// A queue with ROCr's amd_queue_t; `inactive_signal`: its
	// queue_inactive_signal is signal 63 (mailbox to inactive_event).
	explicit App(bool inactive_signal = true) : rig(make_machine({G0}, 141))
	{
		dumper.traced.insert(1000);
		kfd = rig.open_kfd(c);
		r0 = rig.open_render(c, 128);
		AcquireVm av{static_cast<uint32_t>(r0), G0};
		cr_assert_eq(rig.kfd(c, kfd, ACQUIRE_VM, &av, abi::kIocWrite), 0);
		alloc_map(addr(h.get()), sizeof(Host), ALLOC_USERPTR | ALLOC_WRITABLE, addr(h.get()));
		const uint64_t page = alloc_map(kEvents, 32768, ALLOC_GTT | ALLOC_WRITABLE);
		uint64_t off = 0;
		alloc_map(kSignals, 4096, ALLOC_GTT | ALLOC_WRITABLE, 0, &off);
		sig = static_cast<AmdSignal *>(rig.map(c, r0, off, 4096));
		cr_assert_not_null(sig);
		event = new_event(page, EVENT_SIGNAL);
		inactive_event = new_event(0, EVENT_SIGNAL);
		memory_event = new_event(0, EVENT_MEMORY);
		hw_event = new_event(0, EVENT_HW_EXCEPTION);
		for (uint32_t i = 0; i < kSlots; ++i)
			set16(h->ring + 64 * i, kInvalid);
		set<uint32_t>(136, 128); // read_dispatch_id_field_base_byte_offset
		if (inactive_signal) {
			make_signal(63, 0, inactive_event);
			set<uint64_t>(192, sva(63));
		}
		CreateQueue q = aql_queue(*h, 7);
		cr_assert_eq(rig.kfd(c, kfd, CREATE_QUEUE, &q), 0);
		doorbell = rig.map_doorbell(c, kfd, q.doorbell_offset);
		cr_assert_not_null(doorbell);
	}
	~App() { munmap(sig, 4096); }
	template <typename T> void set(size_t off, T v) { std::memcpy(h->amd_queue + off, &v, sizeof v); }
	static void set16(uint8_t *p, uint16_t v) { std::atomic_ref<uint16_t>(*reinterpret_cast<uint16_t *>(p)).store(v); }
	uint64_t sva(uint32_t i) const { return kSignals + 64ull * i; }
	// Signal i with `value`, its mailbox the slot of `ev` (or none).
	void make_signal(uint32_t i, int64_t value, int64_t ev = -1)
	{
		sig[i] = AmdSignal{1, value, ev < 0 ? 0 : kEvents + 8ull * uint64_t(ev), uint32_t(ev < 0 ? 0 : ev), 0, 0, 0, 0, {}};
	}
	int64_t value(uint32_t i) const { return std::atomic_ref<int64_t>(sig[i].value).load(); }
	void store(uint32_t i, int64_t v) { std::atomic_ref<int64_t>(sig[i].value).store(v); }
	uint8_t *slot(uint64_t index) { return h->ring + 64 * (index % kSlots); }
	// Writes a packet as ROCr does: body, then header; `header` false
	// leaves the slot's header INVALID (the producer is not done).
	uint64_t write(const Packet &p, bool header = true)
	{
		const uint64_t index = wptr++;
		std::memcpy(slot(index) + 2, p.b + 2, 62);
		if (header)
			set16(slot(index), uint16_t(p.b[0] | p.b[1] << 8));
		std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t *>(h->amd_queue + 56)).store(wptr);
		*doorbell = index;
		return index;
	}
	uint64_t read_index() { return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t *>(h->amd_queue + 128)).load(); }
	bool wait_read_index(uint64_t n, int ms = 5000)
	{
		auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
		while (read_index() < n) {
			if (std::chrono::steady_clock::now() >= end)
				return false;
			std::this_thread::sleep_for(std::chrono::microseconds(200));
		}
		return true;
	}
	long wait_event(uint32_t id, uint32_t ms, EventData *out = nullptr)
	{
		EventData ed{};
		ed.event_id = id;
		WaitEvents w{addr(&ed), 1, 1, ms, 0};
		cr_assert_eq(rig.kfd(c, kfd, WAIT_EVENTS, &w), 0);
		if (out)
			*out = ed;
		return w.wait_result;
	}
	std::string queues() { return rig.model->introspect("queues 1000"); }
	uint64_t instructions()
	{
		const std::string q = queues();
		const size_t at = q.find("\"instructions\":");
		return at == std::string::npos ? 0 : std::stoull(q.substr(at + 15));
	}
	// A one-work-item dispatch of `code` (kernarg: out, flag).
	Packet dispatch(const uint32_t *code, size_t words, uint64_t out, uint64_t completion)
	{
		std::memset(h->kernel, 0, sizeof h->kernel);
		const int64_t entry = 64;
		const uint32_t rsrc2 = 2u << 1; // two user SGPRs
		const uint16_t props = 1u << 3; // the kernarg segment pointer
		std::memcpy(h->kernel + 16, &entry, 8);
		std::memcpy(h->kernel + 52, &rsrc2, 4);
		std::memcpy(h->kernel + 56, &props, 2);
		std::memcpy(h->kernel + 64, code, words * 4);
		h->kernarg[0] = out;
		h->kernarg[1] = addr(&h->flag);
		Packet p;
		p.set<uint16_t>(0, kDispatch | 1u << 8 | 2u << 9 | 2u << 11).set<uint16_t>(2, 1);
		p.set<uint16_t>(4, 1).set<uint16_t>(6, 1).set<uint16_t>(8, 1);
		p.set<uint32_t>(12, 1).set<uint32_t>(16, 1).set<uint32_t>(20, 1);
		p.set<uint64_t>(32, addr(h->kernel)).set<uint64_t>(40, addr(h->kernarg));
		return p.set<uint64_t>(56, completion);
	}
	void settle() { std::this_thread::sleep_for(std::chrono::milliseconds(30)); }
	long criu(uint32_t op)
	{
		CriuArgs a{};
		a.op = op;
		return rig.kfd(dumper, kfd, CRIU_OP, &a);
	}
};

} // namespace

Test(aql_queue, the_first_doorbell_of_an_idle_queue_rings_index_0)
{
	App app;
	app.make_signal(0, 1);
	app.settle(); // the processor has looked and gone idle
	app.write(barrier(kAnd, {}, app.sva(0)));
	cr_assert(app.wait_read_index(1), "a doorbell of 0 is a change for a new AQL queue");
	cr_assert_eq(app.value(0), 0);
}

Test(aql_queue, barrier_and_waits_for_every_signal_then_completes_its_signal)
{
	App app;
	app.set<uint32_t>(180, 1u << 3); // queue_properties: profiling
	app.make_signal(0, 1);
	app.make_signal(1, 1);
	app.make_signal(2, 1, app.event);
	app.write(barrier(kAnd, {app.sva(0), 0, app.sva(1)}, app.sva(2)));
	app.settle();
	cr_assert_eq(app.read_index(), 0u, "both dependencies pending");
	app.store(0, 0);
	app.settle();
	cr_assert_eq(app.read_index(), 0u, "one dependency pending");
	cr_assert_eq(app.value(2), 1);
	app.store(1, 0);
	cr_assert_eq(app.wait_event(app.event, 5000), WAIT_COMPLETE, "the completion signal's mailbox event");
	cr_assert(app.wait_read_index(1));
	cr_assert_eq(app.value(2), 0, "the completion signal was decremented");
	cr_assert_eq(*reinterpret_cast<uint16_t *>(app.slot(0)), kInvalid, "the slot was released");
	cr_assert(app.sig[2].start_ts != 0 && app.sig[2].end_ts >= app.sig[2].start_ts, "profiling timestamps %lu %lu",
		  (unsigned long)app.sig[2].start_ts, (unsigned long)app.sig[2].end_ts);
	cr_assert_eq(app.sig[0].start_ts, 0u, "a dependency is only read");
	const std::string q = app.queues();
	cr_assert(q.find("\"packets\":1") != std::string::npos && q.find("\"hung\":false") != std::string::npos, "%s",
		  q.c_str());
}

Test(aql_queue, barrier_or_goes_on_when_any_signal_is_zero_and_a_null_one_never_is)
{
	App app;
	app.make_signal(0, 1);
	app.make_signal(1, 2);
	app.make_signal(2, 5);
	app.write(barrier(kOr, {0, app.sva(0), app.sva(1)}, app.sva(2)));
	app.write(barrier(kOr, {0}, 0)); // only a null handle: never satisfied
	app.settle();
	cr_assert_eq(app.read_index(), 0u);
	app.store(1, 0);
	cr_assert(app.wait_read_index(1));
	cr_assert_eq(app.value(2), 4, "decremented by one");
	app.settle();
	cr_assert_eq(app.read_index(), 1u, "a barrier-OR of null handles waits");
}

Test(aql_queue, an_invalid_header_is_waited_on_until_the_producer_writes_it)
{
	App app;
	app.make_signal(0, 1);
	const Packet p = barrier(kAnd, {}, app.sva(0));
	const uint64_t index = app.write(p, false);
	app.settle();
	cr_assert_eq(app.read_index(), 0u, "INVALID: not consumed");
	cr_assert_eq(app.value(0), 1);
	App::set16(app.slot(index), uint16_t(p.b[0] | p.b[1] << 8));
	cr_assert(app.wait_read_index(1), "the header written: the packet runs (on the processor's next look)");
	cr_assert_eq(app.value(0), 0);
	const std::string q = app.queues();
	cr_assert(q.find("\"hung\":false") != std::string::npos, "%s", q.c_str());
}

Test(aql_queue, barrier_value_and_pm4_ib_vendor_packets)
{
	App app;
	app.make_signal(0, 3);
	app.make_signal(1, 1);
	Packet bv;
	bv.set<uint16_t>(0, kVendor | 1u << 8).set<uint8_t>(2, 2); // AMD BARRIER_VALUE
	bv.set<uint64_t>(8, app.sva(0)).set<int64_t>(16, 5).set<int64_t>(24, 0xff).set<uint32_t>(32, 3); // GTE
	bv.set<uint64_t>(56, app.sva(1));
	app.write(bv);
	// PM4_IB: an INDIRECT_BUFFER to an IB with a WRITE_DATA of 0x1234.
	const uint64_t out = addr(app.h->out), ib = addr(app.h->ib);
	const uint32_t wd[] = {(3u << 30) | (3u << 16) | (0x37u << 8), 5u << 8, uint32_t(out), uint32_t(out >> 32), 0x1234};
	std::memcpy(app.h->ib, wd, sizeof wd);
	Packet pm4;
	pm4.set<uint16_t>(0, kVendor).set<uint16_t>(2, 1);
	pm4.set<uint32_t>(4, (3u << 30) | (2u << 16) | (0x3fu << 8)).set<uint32_t>(8, uint32_t(ib));
	pm4.set<uint32_t>(12, uint32_t(ib >> 32)).set<uint32_t>(16, 5u | 1u << 23).set<uint32_t>(20, 0xa);
	app.write(pm4);
	app.settle();
	cr_assert_eq(app.read_index(), 0u, "3 >= 5 does not hold");
	app.store(0, 0x104);
	app.settle();
	cr_assert_eq(app.read_index(), 0u, "masked: 4 >= 5 does not hold");
	app.store(0, 0x105);
	cr_assert(app.wait_read_index(2));
	cr_assert_eq(app.value(1), 0);
	cr_assert_eq(app.h->out[0], 0x1234u, "the PM4 IB ran");
}

Test(aql_queue, a_malformed_packet_stops_the_queue_through_its_inactive_signal)
{
	App app;
	app.make_signal(0, 1);
	app.write(barrier(kAgent, {}, app.sva(0)));
	app.write(barrier(kAnd, {}, app.sva(0)));
	cr_assert_eq(app.wait_event(app.inactive_event, 5000), WAIT_COMPLETE);
	cr_assert_eq(app.value(63), 32, "HSA_STATUS_ERROR_INVALID_PACKET_FORMAT's code for ROCr");
	app.settle();
	cr_assert_eq(app.read_index(), 0u, "the queue stopped at the packet");
	cr_assert_eq(app.value(0), 1);
	const std::string q = app.queues();
	cr_assert(q.find("\"hung\":true") != std::string::npos && q.find("agent dispatch") != std::string::npos, "%s",
		  q.c_str());
	cr_assert_eq(app.wait_event(app.hw_event, 0), WAIT_TIMEOUT, "reported through the queue, not a reset");
}

Test(aql_queue, a_bad_dispatch_without_an_inactive_signal_hangs_with_a_hw_exception)
{
	App app(false);
	Packet d;
	d.set<uint16_t>(0, kDispatch).set<uint16_t>(2, 1).set<uint16_t>(4, 0); // workgroup size 0
	app.write(d);
	EventData ed{};
	cr_assert_eq(app.wait_event(app.hw_event, 5000, &ed), WAIT_COMPLETE);
	uint32_t gpu;
	std::memcpy(&gpu, ed.exception_data + 12, 4);
	cr_assert_eq(gpu, G0);
	const std::string q = app.queues();
	cr_assert(q.find("bad dimensions") != std::string::npos && q.find("queue error 0x2") != std::string::npos, "%s",
		  q.c_str());
}

Test(aql_queue, an_unmapped_signal_raises_the_memory_event)
{
	App app;
	app.write(barrier(kAnd, {kUnmapped}, 0));
	EventData ed{};
	cr_assert_eq(app.wait_event(app.memory_event, 5000, &ed), WAIT_COMPLETE);
	uint64_t va;
	std::memcpy(&va, ed.exception_data + 16, 8);
	cr_assert_eq(va, kUnmapped);
	cr_assert_eq(app.read_index(), 0u);
}

Test(aql_queue, two_queues_wait_for_each_other)
{
	App app;
	// A second queue of the same process, its amd_queue_t in a second host block.
	std::unique_ptr<Host> h2{new Host{}};
	app.alloc_map(addr(h2.get()), sizeof(Host), ALLOC_USERPTR | ALLOC_WRITABLE, addr(h2.get()));
	for (uint32_t i = 0; i < kSlots; ++i)
		App::set16(h2->ring + 64 * i, kInvalid);
	std::memcpy(h2->amd_queue + 136, "\x80\0\0\0", 4);
	CreateQueue q = aql_queue(*h2, 15);
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, CREATE_QUEUE, &q), 0);
	volatile uint64_t *db2 = app.rig.map_doorbell(app.c, app.kfd, q.doorbell_offset);
	app.make_signal(0, 1); // queue 2 -> queue 1
	app.make_signal(1, 1); // queue 1 -> queue 2
	app.make_signal(2, 1, app.event);
	app.write(barrier(kAnd, {app.sva(0)}, app.sva(1)));
	app.settle();
	cr_assert_eq(app.read_index(), 0u);
	// Queue 2: one barrier completing signal 0, then one waiting for signal 1.
	Packet a = barrier(kAnd, {}, app.sva(0)), b = barrier(kAnd, {app.sva(1)}, app.sva(2));
	std::memcpy(h2->ring, a.b, 64);
	std::memcpy(h2->ring + 64, b.b, 64);
	std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t *>(h2->amd_queue + 56)).store(2);
	*db2 = 1;
	cr_assert_eq(app.wait_event(app.event, 5000), WAIT_COMPLETE);
	cr_assert(app.wait_read_index(1));
	cr_assert_eq(std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t *>(h2->amd_queue + 128)).load(), 2u);
	cr_assert_eq(app.value(0) + app.value(1) + app.value(2), 0);
}

namespace {

// The ticket kernel (llvm-mc-15's encoding; kernarg: out, counter):
//   s_load_dwordx2 s[2:3], s[0:1], 0x0	; out
//   s_load_dwordx2 s[6:7], s[0:1], 0x8	; counter
//   s_waitcnt lgkmcnt(0)
//   s_load_dword s8, s[2:3], 0x4		; out[1]: loop iterations
//   s_waitcnt lgkmcnt(0)
// loop:
//   s_sub_u32 s8, s8, 1
//   s_cmp_lg_u32 s8, 0
//   s_cbranch_scc1 loop
//   v_mov_b32 v1, 0
//   v_mov_b32 v2, 1
//   global_atomic_add v3, v1, v2, s[6:7] glc	; the counter's old value...
//   s_waitcnt vmcnt(0)
//   global_store_dword v1, v3, s[2:3]	; ...is the dispatch's ticket: out[0]
//   s_endpgm
constexpr uint32_t kTicketKernel[] = {0xc0060080, 0x00000000, 0xc0060180, 0x00000008, 0xbf8cc07f,
				      0xc0020201, 0x00000004, 0xbf8cc07f, 0x80888108, 0xbf078008,
				      0xbf85fffd, 0x7e020280, 0x7e040281, 0xdd098000, 0x03060201,
				      0xbf8c0f70, 0xdc708000, 0x00020301, 0xbf810000};

// A second AQL queue of the app's process, with its own ring, amd_queue_t
// and kernel in `h`.
struct SecondQueue {
	std::unique_ptr<Host> h{new Host{}};
	uint32_t id = 0;
	volatile uint64_t *doorbell = nullptr;
	SecondQueue(App &app, uint32_t priority)
	{
		app.alloc_map(addr(h.get()), sizeof(Host), ALLOC_USERPTR | ALLOC_WRITABLE, addr(h.get()));
		for (uint32_t i = 0; i < kSlots; ++i)
			App::set16(h->ring + 64 * i, kInvalid);
		std::memcpy(h->amd_queue + 136, "\x80\0\0\0", 4);
		CreateQueue q = aql_queue(*h, priority);
		cr_assert_eq(app.rig.kfd(app.c, app.kfd, CREATE_QUEUE, &q), 0);
		id = q.queue_id;
		doorbell = app.rig.map_doorbell(app.c, app.kfd, q.doorbell_offset);
		cr_assert_not_null(doorbell);
	}
};

// In slot 0 of `h`'s ring: a one-work-item dispatch of the ticket kernel
// looping `iterations` times (3 wave-instructions each), its ticket in
// h.out[0], the counter h.flag of `counter_host`; not yet published.
void ticket_dispatch(Host &h, Host &counter_host, uint32_t iterations, uint64_t completion)
{
	std::memset(h.kernel, 0, sizeof h.kernel);
	const int64_t entry = 64;
	const uint32_t rsrc2 = 2u << 1;
	const uint16_t props = 1u << 3;
	std::memcpy(h.kernel + 16, &entry, 8);
	std::memcpy(h.kernel + 52, &rsrc2, 4);
	std::memcpy(h.kernel + 56, &props, 2);
	std::memcpy(h.kernel + 64, kTicketKernel, sizeof kTicketKernel);
	h.out[0] = ~0u, h.out[1] = iterations;
	h.kernarg[0] = addr(h.out), h.kernarg[1] = addr(&counter_host.flag);
	Packet p;
	p.set<uint16_t>(2, 1).set<uint16_t>(4, 1).set<uint16_t>(6, 1).set<uint16_t>(8, 1);
	p.set<uint32_t>(12, 1).set<uint32_t>(16, 1).set<uint32_t>(20, 1);
	p.set<uint64_t>(32, addr(h.kernel)).set<uint64_t>(40, addr(h.kernarg)).set<uint64_t>(56, completion);
	std::memcpy(h.ring + 2, p.b + 2, 62);
}

// Publishes slot 0's packet (header, then write index 1) and rings.
void publish(Host &h, volatile uint64_t *doorbell)
{
	App::set16(h.ring, kDispatch | 1u << 8 | 2u << 9 | 2u << 11);
	std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t *>(h.amd_queue + 56)).store(1);
	*doorbell = 0;
}

// Queue A (the app's, created with priority 7, then given `a_priority` by
// UPDATE_QUEUE) and queue B (`b_priority`) each get a dispatch: the queue
// of higher priority a long one (40000 iterations, 6 slices), the other a
// short one (3000, under one slice); both are published, B's first. The
// higher queue's long dispatch must end first (ticket 0); without
// arbitration the short one would (checked: it does).
void priority_race(uint32_t b_priority, uint32_t a_priority)
{
	App app;
	SecondQueue b(app, b_priority);
	if (a_priority != 7) {
		UpdateQueue u{addr(app.h->ring), 0, sizeof app.h->ring, 100, a_priority};
		cr_assert_eq(app.rig.kfd(app.c, app.kfd, UPDATE_QUEUE, &u), 0);
	}
	const bool b_high = b_priority > a_priority;
	app.make_signal(0, 1, app.event);
	app.make_signal(1, 1);
	app.h->flag = 0;
	ticket_dispatch(*b.h, *app.h, b_high ? 40000 : 3000, app.sva(1));
	ticket_dispatch(*app.h, *app.h, b_high ? 3000 : 40000, app.sva(0));
	publish(*b.h, b.doorbell);
	publish(*app.h, app.doorbell);
	auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
	while ((app.value(0) || app.value(1)) && std::chrono::steady_clock::now() < end)
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
	cr_assert_eq(app.value(0) + app.value(1), 0, "both dispatches complete: %s", app.queues().c_str());
	cr_assert_eq(b.h->out[0], b_high ? 0u : 1u, "queue B (priority %u) against A (priority %u): tickets B %u A %u",
		     b_priority, a_priority, b.h->out[0], app.h->out[0]);
	cr_assert_eq(app.h->out[0], b_high ? 1u : 0u);
}

} // namespace

Test(aql_queue, a_queue_of_higher_priority_gets_the_shader_engine_first)
{
	priority_race(15, 7);
}

Test(aql_queue, update_queue_priority_reorders_the_queues)
{
	priority_race(11, 14); // A raised above B by UPDATE_QUEUE
}

Test(aql_queue, queue_priorities_map_to_the_mqd_pipe_priorities)
{
	App app; // its queue: priority 7 (CS_MEDIUM)
	SecondQueue low(app, 6), high(app, 11), top(app, 15);
	const std::string q = app.queues();
	for (const char *want : {"\"priority\":7,\"pipe_priority\":1", "\"priority\":6,\"pipe_priority\":0",
				 "\"priority\":11,\"pipe_priority\":2", "\"priority\":15,\"pipe_priority\":2"})
		cr_assert(q.find(want) != std::string::npos, "%s in %s", want, q.c_str());
}

Test(aql_queue, a_criu_pause_holds_the_queue_until_unpause)
{
	App app;
	app.make_signal(0, 1);
	app.make_signal(1, 1);
	app.write(barrier(kAnd, {app.sva(0)}, app.sva(1)));
	app.settle();
	cr_assert_eq(app.criu(CRIU_PROCESS_INFO), 0);
	app.store(0, 0);
	app.settle();
	cr_assert_eq(app.read_index(), 0u, "paused: the satisfied barrier does not complete");
	cr_assert_eq(app.criu(CRIU_UNPAUSE), 0);
	cr_assert(app.wait_read_index(1));
	cr_assert_eq(app.value(1), 0);
}

Test(aql_queue, a_dispatch_paused_mid_way_keeps_its_waves_and_goes_on_after_unpause)
{
	App app;
	app.make_signal(0, 1, app.event);
	app.write(app.dispatch(kSpinKernel, std::size(kSpinKernel), addr(app.h->out), app.sva(0)));
	for (int i = 0; i < 2500 && app.instructions() < 100; ++i)
		std::this_thread::sleep_for(std::chrono::milliseconds(2));
	cr_assert_gt(app.instructions(), 100u, "the kernel spins: %s", app.queues().c_str());
	CriuArgs info{};
	info.op = CRIU_PROCESS_INFO;
	cr_assert_eq(app.rig.kfd(app.dumper, app.kfd, CRIU_OP, &info), 0);
	const uint64_t paused_at = app.instructions();
	std::atomic_ref<uint32_t>(app.h->flag).store(1);
	app.settle();
	cr_assert_eq(app.instructions(), paused_at, "paused at an instruction boundary: no wave runs");
	cr_assert_eq(app.h->out[0], 0u);
	cr_assert(app.queues().find("\"in_flight\":true") != std::string::npos);
	// CHECKPOINT (with the counts PROCESS_INFO gave) refuses the dispatch in
	// flight: a queue without a CWSR area could not save its waves.
	std::vector<CriuDeviceBucket> devs(info.num_devices);
	std::vector<CriuBoBucket> bos(info.num_bos);
	std::vector<uint8_t> priv(info.priv_data_size);
	CriuArgs ck = info;
	ck.op = CRIU_CHECKPOINT;
	ck.devices = addr(devs.data());
	ck.bos = addr(bos.data());
	ck.priv_data = addr(priv.data());
	cr_assert_eq(app.rig.kfd(app.dumper, app.kfd, CRIU_OP, &ck), -EBUSY);
	cr_assert_eq(app.criu(CRIU_UNPAUSE), 0);
	cr_assert_eq(app.wait_event(app.event, 5000), WAIT_COMPLETE);
	cr_assert(app.wait_read_index(1));
	cr_assert_eq(app.h->out[0], 42u, "the waves went on from where they stopped");
	cr_assert_eq(app.value(0), 0);
	cr_assert(app.queues().find("\"in_flight\":false") != std::string::npos);
}

Test(aql_queue, a_dispatch_faulting_on_memory_raises_the_memory_event)
{
	App app;
	app.h->flag = 1;
	app.write(app.dispatch(kSpinKernel, std::size(kSpinKernel), kUnmapped, 0));
	EventData ed{};
	cr_assert_eq(app.wait_event(app.memory_event, 5000, &ed), WAIT_COMPLETE);
	uint64_t va;
	std::memcpy(&va, ed.exception_data + 16, 8);
	cr_assert_eq(va, kUnmapped);
	cr_assert_eq(app.read_index(), 0u);
	const std::string q = app.queues();
	cr_assert(q.find("VM fault in a kernel dispatch") != std::string::npos, "%s", q.c_str());
}

Test(aql_queue, an_illegal_instruction_or_a_trap_reaches_the_process_through_the_inactive_signal)
{
	for (uint32_t word : {kIllegal, kTrap}) {
		App app;
		app.write(app.dispatch(&word, 1, addr(app.h->out), 0));
		cr_assert_eq(app.wait_event(app.inactive_event, 5000), WAIT_COMPLETE);
		const int64_t code = word == kIllegal ? 0x40000000 : 0x80000000ll;
		cr_assert_eq(app.value(63), code, "ROCr's code for %s", word == kIllegal ? "an illegal instruction" : "a trap");
		cr_assert_eq(app.read_index(), 0u);
		const std::string q = app.queues();
		cr_assert(q.find("\"hung\":true") != std::string::npos, "%s", q.c_str());
	}
}

Test(aql_queue, a_queue_reads_its_pointers_only_once_rung)
{
	App app;
	// A queue as libhsakmt makes one without a queue resource's pointers
	// (NULL read and write pointers): the CP reads neither until a doorbell.
	CreateQueue q{};
	q.ring_base_address = addr(app.h->ring);
	q.ring_size = sizeof app.h->ring;
	q.gpu_id = G0;
	q.queue_type = QUEUE_COMPUTE_AQL;
	q.queue_percentage = 100;
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, CREATE_QUEUE, &q), 0);
	volatile uint64_t *db = app.rig.map_doorbell(app.c, app.kfd, q.doorbell_offset);
	app.settle();
	cr_assert_eq(app.wait_event(app.memory_event, 0), WAIT_TIMEOUT, "not rung: nothing read");
	cr_assert(app.queues().find("\"hung\":true") == std::string::npos, "%s", app.queues().c_str());
	*db = 0;
	cr_assert_eq(app.wait_event(app.memory_event, 5000), WAIT_COMPLETE, "rung: the write index at 0 faults");
}
