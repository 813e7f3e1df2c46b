// SPDX-License-Identifier: GPL-2.0-only
//
// KFD SDMA user queues (CREATE_QUEUE with queue_type SDMA or SDMA_XGMI) on
// family >= AI: the engine reads the ring the process writes.
//
// The hardware contract (SDMA v4+ with 64-bit, monotonic byte indices): the
// process writes packets into the ring, stores the new write pointer at
// write_pointer_address and then writes the same value to its doorbell.
// The doorbell write makes the engine read the 64-bit write pointer and
// execute packets from its read pointer up to it, storing the advanced
// read pointer at read_pointer_address. Ring offset = index mod ring_size.
//
// How the model notices doorbells: a doorbell is a plain CPU store into the
// process's mapping of its doorbell page, which is a memfd the model also
// has mapped. One thread per SDMA user queue polls its 64-bit doorbell slot
// (every 20 us while work arrives, backing off to 1 ms when idle) and, on
// a change, walks the ring under the model lock. A new queue's slot is set
// to 0 (all ones for an AQL queue, restored ones too: start_user_queue) when it is made, so that its first ring is a change even when the
// queue destroyed before it on that slot left the same value there. All of the ring, the
// pointers and the packets' addresses are GPU virtual addresses, resolved
// through the VM of the process's KFD render file exactly as CS IBs are.
//
// Packets (SDMA v4 layouts): NOP, COPY_LINEAR (count = bytes - 1),
// COPY_LINEAR_RECT (sub-window copy between pitched 3-D arrays), WRITE
// LINEAR, FENCE (32-bit store), CONST_FILL, POLL_REGMEM (memory polls wait
// until (value & mask) <func> reference holds, re-read on every pass;
// register polls, e.g. ROCr's HDP flush, complete at once: the model's
// memory is coherent), ATOMIC (the integer TC operations, 32 and 64 bits;
// a looping compare-swap retries until its compare holds), TIMESTAMP
// GET_GLOBAL (the same 100 MHz clock as GET_CLOCK_COUNTERS), TRAP (an
// interrupt with the packet's 28-bit context id, handled as
// kfd_signal_event_interrupt does) and, from SDMA v5 (family NV) on, GCR
// (cache control: nothing to do on coherent memory).
// Anything else stops the queue for good instead of hanging it silently: a
// packet the model does not have (unknown op, a float atomic, COPY_LINEAR_RECT
// with an element size over 16 bytes), a truncated packet or a bad write
// pointer as a hang (the hardware would hang until a GPU reset: the process's
// HW_EXCEPTION events are signalled with reset cause "hang"), a VM fault as
// one (its MEMORY events are signalled with the address, as
// kfd_signal_vm_fault_event does; ROCr reports "Memory access fault"). Each
// stop is logged on the daemon's stderr ("kfd-emu: SDMA queue ... stopped
// at ...: why"), recorded in the counters' faults and in `queues <pid>`
// ("why"). The read pointer is stored after every packet.
//
// Queues run only while the process's queues are not evicted (evict_count
// 0: not CRIU-paused, resumed after a restore) and the queue is active (an
// UPDATE_QUEUE with a NULL ring, size 0 or percentage 0 deactivates it:
// doorbells rung meanwhile run once a later update gives the ring back).
// A packet executes entirely under the model lock, so an eviction (CRIU
// PROCESS_INFO) takes effect at a packet boundary, as the hardware's
// preemption does; copies are split into packets of at most 4 MiB by their
// issuers (ROCr's kMaxSingleCopySize).
#include "model/packet_common.h"
#include "model/state.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>

namespace kfdemu::detail {

using namespace abi::kfd;

namespace {

constexpr uint32_t OP_ATOMIC = 10, OP_GCR = 17;
constexpr uint32_t kSubopCopyLinearRect = 4; // the kernel's SDMA_SUBOP_COPY_LINEAR_SUB_WIND
constexpr uint32_t SUBOP_TIMESTAMP_GET_LOCAL = 1, SUBOP_TIMESTAMP_GET_GLOBAL = 2;
constexpr uint64_t kUnsignaledSlot = ~0ull;
constexpr auto kBusyPoll = std::chrono::microseconds(20);
constexpr auto kIdlePoll = std::chrono::milliseconds(1);
// Between two steps that both have work (a dispatch's slices): long
// enough for a thread blocked on the model lock to take it.
constexpr auto kSliceGap = std::chrono::microseconds(10);

// A packet's length in dwords from its header (WRITE_LINEAR: without its
// data); 0 for a packet this engine does not have.
uint64_t packet_dwords(uint32_t op, uint32_t sub, uint32_t hdr, uint32_t family)
{
	using namespace abi::sdma;
	switch (op) {
	case OP_NOP: return 1 + ((hdr >> 16) & 0x3fff);
	case OP_COPY: return sub == SUBOP_COPY_LINEAR ? 7 : sub == kSubopCopyLinearRect ? 13 : 0;
	case OP_WRITE: return sub == SUBOP_WRITE_LINEAR ? 4 : 0;
	case OP_FENCE: return 4;
	case OP_TRAP: return 2;
	case OP_POLL_REGMEM: return 6;
	case OP_ATOMIC: return 8;
	case OP_CONST_FILL: return 5;
	case OP_TIMESTAMP: return sub == SUBOP_TIMESTAMP_GET_LOCAL || sub == SUBOP_TIMESTAMP_GET_GLOBAL ? 3 : 0;
	// GCR_REQ exists from SDMA v5 (family NV) on: sub-op 0 (the kernel's
	// rings) and 1 (USER_GCR, ROCr's).
	case OP_GCR: return family >= kFamilyNv && sub <= 1 ? 5 : 0;
	default: return 0;
	}
}

// The integer TC atomic operations, by the operation number's low five
// bits (bit 5: 64-bit, bit 6: no return value).
enum class AtomicOp { Unsupported, Swap, CmpSwap, Add, Sub, SMin, UMin, SMax, UMax, And, Or, Xor, Inc, Dec };

AtomicOp atomic_op(uint32_t low5)
{
	switch (low5) {
	case 0x07: return AtomicOp::Swap;
	case 0x08: return AtomicOp::CmpSwap;
	case 0x0f: return AtomicOp::Add;
	case 0x10: return AtomicOp::Sub;
	case 0x11: return AtomicOp::SMin;
	case 0x12: return AtomicOp::UMin;
	case 0x13: return AtomicOp::SMax;
	case 0x14: return AtomicOp::UMax;
	case 0x15: return AtomicOp::And;
	case 0x16: return AtomicOp::Or;
	case 0x17: return AtomicOp::Xor;
	case 0x18: return AtomicOp::Inc;
	case 0x19: return AtomicOp::Dec;
	default: return AtomicOp::Unsupported; // float, cache and reserved operations
	}
}

// The new value of an atomic on `old` (32-bit: the low halves);
// *matched: a compare-swap's compare held.
uint64_t atomic_result(AtomicOp k, bool wide, uint64_t old, uint64_t src, uint64_t cmp, bool *matched)
{
	const uint64_t mask = wide ? ~0ull : 0xffffffffull;
	old &= mask;
	src &= mask;
	auto sx = [&](uint64_t v) { return wide ? int64_t(v) : int64_t(int32_t(uint32_t(v))); };
	switch (k) {
	case AtomicOp::Swap: return src;
	case AtomicOp::CmpSwap:
		*matched = old == (cmp & mask);
		return *matched ? src : old;
	case AtomicOp::Add: return (old + src) & mask;
	case AtomicOp::Sub: return (old - src) & mask;
	case AtomicOp::SMin: return sx(src) < sx(old) ? src : old;
	case AtomicOp::UMin: return std::min(old, src);
	case AtomicOp::SMax: return sx(src) > sx(old) ? src : old;
	case AtomicOp::UMax: return std::max(old, src);
	case AtomicOp::And: return old & src;
	case AtomicOp::Or: return old | src;
	case AtomicOp::Xor: return old ^ src;
	case AtomicOp::Inc: return old >= src ? 0 : old + 1;
	case AtomicOp::Dec: return old == 0 || old > src ? src : old - 1;
	case AtomicOp::Unsupported: break;
	}
	return old;
}

} // namespace

int ModelImpl::gpu_read(DrmFile &f, uint64_t va, void *dst, size_t len)
{
	std::vector<Segment> segs;
	if (resolve_va(f, va, len, false, &segs))
		return -EFAULT;
	auto *out = static_cast<uint8_t *>(dst);
	for (const Segment &s : segs) {
		if (s.bo->mem)
			std::memcpy(out, s.bo->mem->data() + s.off, s.len);
		else if (pm_->read(s.bo->userptr_tgid, s.bo->userptr_addr + s.off, out, s.len))
			return -EFAULT;
		out += s.len;
	}
	return 0;
}

int ModelImpl::gpu_write(DrmFile &f, uint64_t va, const void *src, size_t len)
{
	std::vector<Segment> segs;
	if (resolve_va(f, va, len, true, &segs))
		return -EFAULT;
	const auto *in = static_cast<const uint8_t *>(src);
	for (const Segment &s : segs) {
		if (s.bo->mem)
			std::memcpy(s.bo->mem->data() + s.off, in, s.len);
		else if (pm_->write(s.bo->userptr_tgid, s.bo->userptr_addr + s.off, in, s.len))
			return -EFAULT;
		in += s.len;
	}
	return 0;
}

void ModelImpl::signal_event_interrupt(KfdProcess &p, uint32_t partial_id, unsigned valid_bits)
{
	// The signal page: the process's event page BO, or the model's page.
	uint8_t *page = nullptr;
	uint64_t page_size = 0;
	if (p.event_page && p.event_page->mem) {
		page = p.event_page->mem->data();
		page_size = p.event_page->size;
	} else if (!p.event_page && p.event_mem) {
		page = p.event_mem->data();
		page_size = p.event_mem->size();
	}
	auto slot_signaled = [&](uint32_t id) {
		if (!page || (uint64_t{id} + 1) * 8 > page_size)
			return false;
		uint64_t v;
		std::memcpy(&v, page + uint64_t{id} * 8, 8);
		return v != kUnsignaledSlot;
	};
	// set_event_from_interrupt: acknowledge the slot (back to unsignaled),
	// then set the event.
	bool any = false;
	auto set = [&](Event &ev) {
		std::memcpy(page + uint64_t{ev.id} * 8, &kUnsignaledSlot, 8);
		ev.set();
		any = true;
	};
	auto is_gpu_signaled = [](const Event &ev) { return ev.type == EVENT_SIGNAL || ev.type == EVENT_DEBUG; };
	// The id in the payload names the event when all of its bits fit.
	auto it = p.events.end();
	if (valid_bits >= 31 || partial_id < (1u << valid_bits))
		it = p.events.find(partial_id);
	if (it != p.events.end() && is_gpu_signaled(it->second) && slot_signaled(it->first)) {
		set(it->second);
	} else if (page) {
		// The id did not name a signaled event: every event whose slot
		// has been written is raised.
		for (auto &[id, ev] : p.events)
			if (is_gpu_signaled(ev) && slot_signaled(id))
				set(ev);
	}
	if (any) {
		++p.event_generation;
		events_cv_.notify_all();
	}
}

void ModelImpl::start_user_queue(KfdProcess &p, Queue &q, bool restored)
{
	const bool cp = q.args.queue_type == QUEUE_COMPUTE;	// PM4 (cp_queue.cpp)
	const bool aql = q.args.queue_type == QUEUE_COMPUTE_AQL; // the packet processor (aql_queue.cpp)
	if (q.args.queue_type != QUEUE_SDMA && q.args.queue_type != QUEUE_SDMA_XGMI && !cp && !aql)
		return;
	Pdd *pdd = p.pdd_by_user_id(q.user_gpu_id);
	if (!pdd || pdd->dev->family < abi::sdma::kFamilyAi || pdd->dev->engines.empty())
		return;
	auto e = std::make_shared<UserQueueEngine>();
	e->tgid = p.tgid;
	e->qid = q.id;
	e->cp = cp;
	e->aql = aql;
	e->wait_for_doorbell = aql && !restored;
	e->restored_look = aql && restored;
	e->engine = q.id % pdd->dev->engines.size();
	e->doorbells = pdd->doorbells;
	e->doorbell_off = (q.id * 8ull) & (pdd->dev->doorbell_slice() - 1);
	// A new queue's engine starts at read pointer 0, as the kernel's MQD
	// does; whatever the read pointer's memory holds (it may be reused,
	// stale memory) is only written, never read. A restored queue goes on
	// from the read pointer its process memory was restored with.
	e->started = !restored;
	// The hardware takes every doorbell write; the engine sees a change of
	// the slot's value. A queue destroyed on this slot may have left there
	// the very value the new queue's first ring writes (the same packets
	// give the same write pointer), which would then go unseen: a new
	// queue's slot starts at a value no ring with work writes: 0 for SDMA
	// and CP queues (byte and dword write pointers past their first
	// packet), all ones for AQL queues, whose producers ring the index of
	// the packet they wrote, 0 for the first one. A restored AQL queue's
	// slot starts at all ones too: the restored doorbell page is new
	// (zeros), and a first ring of index 0 after the restore must be a
	// change; it is also what the checkpointed slot held unless the
	// process had rung it (the page's contents are not checkpointed).
	if ((!restored || aql) && e->doorbells && e->doorbells->size() >= e->doorbell_off + 8)
		std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t *>(e->doorbells->data() + e->doorbell_off))
			.store(aql ? ~uint64_t{0} : 0, std::memory_order_release);
	UserQueueEngine *raw = e.get();
	e->thread = std::jthread([this, raw](std::stop_token st) { user_queue_thread(st, raw); });
	q.engine = std::move(e);
}

void ModelImpl::user_queue_thread(std::stop_token st, UserQueueEngine *e)
{
	// A queue (re)starts by looking at its write pointer, except a new
	// AQL queue, which waits for a change of its slot from all ones.
	uint64_t seen = e->wait_for_doorbell ? ~uint64_t{0} : 0;
	bool have_seen = e->wait_for_doorbell;
	bool pending = !e->wait_for_doorbell;
	auto wait = kBusyPoll;
	while (!st.stop_requested()) {
		// The doorbell page, looked up afresh: libhsakmt maps it after
		// CREATE_QUEUE returns, so it may not exist when the queue
		// starts. It is only replaced under the lock; a stale pointer
		// here only delays noticing (the slot is re-read below).
		std::shared_ptr<Backing> db;
		{
			std::unique_lock lk(mu_, std::try_to_lock);
			if (lk.owns_lock())
				db = user_queue_doorbells(*e);
		}
		if (db && db->size() >= e->doorbell_off + 8) {
			uint64_t v = std::atomic_ref<uint64_t>(
				*reinterpret_cast<uint64_t *>(db->data() + e->doorbell_off)).load(std::memory_order_acquire);
			// The first sight of the page counts as a doorbell too: the
			// process may have rung it before the engine saw the page.
			if (!have_seen || v != seen) {
				pending = true;
				seen = v;
				have_seen = true;
				wait = kBusyPoll;
			}
		}
		if (!pending || e->hung) {
			std::this_thread::sleep_for(wait);
			wait = std::min<std::chrono::microseconds>(wait * 2, kIdlePoll);
			continue;
		}
		Step r = Step::Blocked;
		{
			std::unique_lock lk(mu_, std::try_to_lock);
			while (!lk.owns_lock()) {
				if (st.stop_requested())
					return;
				std::this_thread::sleep_for(std::chrono::microseconds(50));
				lk.try_lock();
			}
			r = user_queue_step(*e);
		}
		switch (r) {
		case Step::Idle:
			pending = false;
			wait = kBusyPoll;
			break;
		case Step::Again:
			// More to do (a dispatch's next slice): first let a thread
			// waiting for the model lock in (a CRIU pause, an ioctl),
			// which try_lock above would otherwise overtake at once.
			std::this_thread::sleep_for(kSliceGap);
			break;
		case Step::Blocked: // a poll not yet satisfied, or evicted
			std::this_thread::sleep_for(wait);
			wait = std::min<std::chrono::microseconds>(wait * 2, kIdlePoll);
			break;
		case Step::Hung: // stop_user_queue has set e->hung
			break;
		}
	}
}

std::shared_ptr<Backing> ModelImpl::user_queue_doorbells(UserQueueEngine &e)
{
	auto pit = procs_.find(e.tgid);
	if (pit == procs_.end())
		return e.doorbells;
	auto qit = pit->second->queues.find(e.qid);
	if (qit == pit->second->queues.end() || qit->second.engine.get() != &e)
		return e.doorbells;
	if (Pdd *pdd = pit->second->pdd_by_user_id(qit->second.user_gpu_id))
		e.doorbells = pdd->doorbells;
	return e.doorbells;
}

ModelImpl::Step ModelImpl::stop_user_queue(UserQueueEngine &e, KfdProcess &p, uint32_t user_gpu_id, uint64_t va,
					   bool vm_fault, const std::string &why)
{
	if (record_queue_stop(e, user_gpu_id, va, vm_fault, why))
		raise_queue_exception(p, user_gpu_id, va, vm_fault);
	return Step::Hung;
}

bool ModelImpl::record_queue_stop(UserQueueEngine &e, uint32_t user_gpu_id, uint64_t va, bool vm_fault,
				  const std::string &why)
{
	// A process that has died (its exit not yet reported to the model)
	// faults on nothing: its memory is gone, and so is the queue.
	uint8_t probe;
	if (pm_->read(e.tgid, va, &probe, 1) == -ESRCH)
		return false;
	if (!vm_fault) // resolve_va has recorded a VM fault itself
		counters_->vm_fault(user_gpu_id, va, why.c_str());
	e.why = why;
	e.hung = true;
	std::fprintf(stderr, "kfd-emu: %s queue %u of process %d on GPU 0x%x stopped at 0x%llx (read pointer %llu): %s\n",
		     e.aql ? "AQL" : e.cp ? "CP" : "SDMA", e.qid, int(e.tgid), user_gpu_id,
		     static_cast<unsigned long long>(va), static_cast<unsigned long long>(e.rptr), why.c_str());
	return true;
}

void ModelImpl::raise_queue_exception(KfdProcess &p, uint32_t user_gpu_id, uint64_t va, bool vm_fault)
{
	// What the process is told (kfd_events.c): a VM fault signals its
	// MEMORY events with kfd_hsa_memory_exception_data {failure
	// {NotPresent, ReadOnly, NoExecute, imprecise}, va, gpu_id, ErrorType};
	// a hang ends in a GPU reset, which signals its HW_EXCEPTION events
	// with kfd_hsa_hw_exception_data {reset_type, reset_cause (0: hang),
	// memory_lost, gpu_id}.
	std::array<uint8_t, 32> data{};
	const uint32_t type = vm_fault ? EVENT_MEMORY : EVENT_HW_EXCEPTION;
	if (vm_fault) {
		const uint32_t not_present = 1;
		std::memcpy(data.data(), &not_present, 4);
		std::memcpy(data.data() + 16, &va, 8);
		std::memcpy(data.data() + 24, &user_gpu_id, 4);
	} else {
		std::memcpy(data.data() + 12, &user_gpu_id, 4);
	}
	bool any = false;
	for (auto &[id, ev] : p.events)
		if (ev.type == type) {
			ev.exception = data;
			ev.set();
			any = true;
		}
	if (any) {
		++p.event_generation;
		events_cv_.notify_all();
	}
}

ModelImpl::Step ModelImpl::user_queue_step(UserQueueEngine &e)
{
	auto pit = procs_.find(e.tgid);
	if (pit == procs_.end())
		return Step::Idle;
	KfdProcess &p = *pit->second;
	auto qit = p.queues.find(e.qid);
	if (qit == p.queues.end() || qit->second.engine.get() != &e)
		return Step::Idle;
	const Queue &queue = qit->second;
	const CreateQueue &q = queue.args;
	const uint32_t gpu = queue.user_gpu_id;
	Pdd *pdd = p.pdd_by_user_id(gpu);
	if (!pdd || !pdd->drm)
		return stop_user_queue(e, p, gpu, q.ring_base_address, false, "no VM bound on the queue's GPU");
	if (pdd->doorbells != e.doorbells)
		e.doorbells = pdd->doorbells;
	// Evicted (CRIU) or inactive (UPDATE_QUEUE without a ring): the queue
	// keeps its read pointer and what is pending until it runs again.
	if (p.evict_count > 0 || !queue.active())
		return Step::Blocked;
	DrmFile &f = *pdd->drm;
	if (e.cp)
		return cp_queue_step(e, p, queue, f);
	if (e.aql)
		return aql_queue_step(e, p, queue, f);
	if (!e.started) {
		if (gpu_read(f, q.read_pointer_address, &e.rptr, 8))
			return stop_user_queue(e, p, gpu, q.read_pointer_address, true, "read pointer not readable");
		e.started = true;
	}
	uint64_t wptr;
	if (gpu_read(f, q.write_pointer_address, &wptr, 8))
		return stop_user_queue(e, p, gpu, q.write_pointer_address, true, "write pointer not readable");
	const uint64_t size = q.ring_size;
	if (!size || (size & (size - 1)) || (size & 3))
		return stop_user_queue(e, p, gpu, q.ring_base_address, false, "bad sdma ring size");
	if (wptr == e.rptr)
		return Step::Idle;
	if (wptr - e.rptr > size || (wptr & 3))
		return stop_user_queue(e, p, gpu, q.write_pointer_address, false, "sdma write pointer out of range");
	return user_queue_packets(e, p, queue, f, wptr);
}

ModelImpl::Step ModelImpl::user_queue_packets(UserQueueEngine &e, KfdProcess &p, const Queue &queue, DrmFile &f,
					      uint64_t wptr)
{
	using namespace abi::sdma;
	const CreateQueue &q = queue.args;
	const uint64_t size = q.ring_size;
	const uint32_t gpu = queue.user_gpu_id;
	// Reads dword k of the packet at the read pointer (the ring wraps).
	auto ring_dw = [&](uint64_t k, uint32_t *out) {
		uint64_t off = (e.rptr + k * 4) & (size - 1);
		return gpu_read(f, q.ring_base_address + off, out, 4);
	};
	for (int n = 0; n < kPacketsPerHold; ++n) {
		if (e.rptr == wptr)
			return Step::Idle;
		const uint64_t avail = (wptr - e.rptr) / 4;
		const uint64_t pkt_va = q.ring_base_address + (e.rptr & (size - 1));
		auto ring_fault = [&] { return stop_user_queue(e, p, gpu, pkt_va, true, "ring not readable"); };
		uint32_t hdr;
		if (ring_dw(0, &hdr))
			return ring_fault();
		const uint32_t op = hdr & 0xff, sub = (hdr >> 8) & 0xff;
		uint64_t len = packet_dwords(op, sub, hdr, f.dev->family);
		if (!len) {
			char why[96];
			std::snprintf(why, sizeof why, "unknown sdma packet (op %u, sub-op %u, header 0x%08x)", op, sub, hdr);
			return stop_user_queue(e, p, gpu, pkt_va, false, why);
		}
		if (len > avail)
			return stop_user_queue(e, p, gpu, pkt_va, false, "truncated sdma packet");
		// A NOP's payload is never read.
		std::vector<uint32_t> dw(op == OP_NOP ? 1 : len);
		dw[0] = hdr;
		for (uint64_t k = 1; k < dw.size(); ++k)
			if (ring_dw(k, &dw[k]))
				return ring_fault();
		if (op == OP_WRITE) {
			const uint64_t ndw = (dw[3] & 0xfffff) + 1;
			if (4 + ndw > avail)
				return stop_user_queue(e, p, gpu, pkt_va, false, "truncated sdma packet");
			dw.resize(4 + ndw);
			for (uint64_t k = 4; k < 4 + ndw; ++k)
				if (ring_dw(k, &dw[k]))
					return ring_fault();
			len = 4 + ndw;
		}
		if (Step r = user_queue_packet(e, p, queue, f, dw); r != Step::Again)
			return r; // Hung, or Blocked: re-executed on the next pass
		e.rptr += len * 4;
		++e.packets;
		if (gpu_write(f, q.read_pointer_address, &e.rptr, 8))
			return stop_user_queue(e, p, gpu, q.read_pointer_address, true, "read pointer not writable");
	}
	return Step::Again;
}

// Executes one whole packet: Again when done, Blocked when it must be run
// again later (an unsatisfied poll), Hung when the queue stopped.
ModelImpl::Step ModelImpl::user_queue_packet(UserQueueEngine &e, KfdProcess &p, const Queue &queue, DrmFile &f,
					     const std::vector<uint32_t> &dw)
{
	using namespace abi::sdma;
	const uint32_t hdr = dw[0], op = hdr & 0xff, sub = (hdr >> 8) & 0xff;
	const uint32_t gpu = queue.user_gpu_id;
	Device &dev = *f.dev;
	SdmaEngine &engine = *dev.engines[e.engine];
	const uint32_t count_mask = dev.family >= kFamilyGc11 ? 0x3fffffffu : 0x3fffffu;
	auto addr = [&](size_t k) { return uint64_t{dw[k]} | (uint64_t{dw[k + 1]} << 32); };
	auto fault = [&](uint64_t va) { return stop_user_queue(e, p, gpu, va, true, "VM fault"); };
	auto run = [&](SdmaOp o, uint64_t va) {
		SdmaJob job;
		job.gpu_id = dev.gpu_id;
		job.ops.push_back(std::move(o));
		return engine.execute_now(job) ? fault(va) : Step::Again;
	};
	switch (op) {
	case OP_COPY: {
		if (sub == kSubopCopyLinearRect)
			return user_queue_copy_rect(e, p, queue, f, dw);
		SdmaOp o;
		o.kind = SdmaOp::Kind::Copy;
		o.bytes = (dw[1] & count_mask) + 1;
		if (resolve_va(f, addr(3), o.bytes, false, &o.src))
			return fault(addr(3));
		if (resolve_va(f, addr(5), o.bytes, true, &o.dst))
			return fault(addr(5));
		return run(std::move(o), addr(5));
	}
	case OP_CONST_FILL: {
		// Count: bytes - 1; a dword fill (fillsize 2) ignores the
		// low two bits.
		const uint64_t cnt = dw[4] & count_mask;
		const uint32_t fillsize = hdr >> 30;
		SdmaOp o;
		o.kind = SdmaOp::Kind::Fill;
		o.fill = fillsize == 0 ? (dw[3] & 0xff) * 0x01010101u : dw[3];
		o.bytes = fillsize == 2 ? ((cnt >> 2) + 1) * 4 : cnt + 1;
		if (resolve_va(f, addr(1), o.bytes, true, &o.dst))
			return fault(addr(1));
		return run(std::move(o), addr(1));
	}
	case OP_WRITE:
		return gpu_write(f, addr(1), &dw[4], (dw.size() - 4) * 4) ? fault(addr(1)) : Step::Again;
	case OP_FENCE:
		return gpu_write(f, addr(1), &dw[3], 4) ? fault(addr(1)) : Step::Again;
	case OP_TIMESTAMP: {
		const uint64_t t = gpu_clock();
		return gpu_write(f, addr(1), &t, 8) ? fault(addr(1)) : Step::Again;
	}
	case OP_POLL_REGMEM: {
		const bool mem_poll = hdr >> 31;
		const uint32_t func = (hdr >> 28) & 7;
		if (!mem_poll)
			return Step::Again;
		uint32_t v;
		if (gpu_read(f, addr(1), &v, 4))
			return fault(addr(1));
		return poll_satisfied(func, v & dw[4], dw[3] & dw[4]) ? Step::Again : Step::Blocked;
	}
	case OP_ATOMIC:
		return user_queue_atomic(e, p, queue, f, dw);
	case OP_TRAP:
		// The SDMA trap interrupt carries 28 bits of int_ctx.
		signal_event_interrupt(p, dw[1] & 0x0fffffff, 28);
		return Step::Again;
	default: // NOP; GCR (SDMA v5+): caches the model does not have
		return Step::Again;
	}
}

// COPY_LINEAR_RECT (sub-window copy): a rect_x x rect_y x rect_z box of
// elements (2^element bytes) from one pitched 3-D array into another; the
// pitches and the box are in elements, stored minus one; the offsets are
// in elements.
ModelImpl::Step ModelImpl::user_queue_copy_rect(UserQueueEngine &e, KfdProcess &p, const Queue &queue, DrmFile &f,
						const std::vector<uint32_t> &dw)
{
	const uint32_t gpu = queue.user_gpu_id;
	const uint32_t element = dw[0] >> 29;
	if (element > 4)
		return stop_user_queue(e, p, gpu, 0, false,
				       "sdma COPY_LINEAR_RECT with element size 2^" + std::to_string(element));
	struct Side {
		uint64_t base, x, y, z, pitch, slice;
	};
	auto side = [&](size_t k) {
		return Side{uint64_t{dw[k]} | (uint64_t{dw[k + 1]} << 32), dw[k + 2] & 0x3fffu,
			    (dw[k + 2] >> 16) & 0x3fffu, dw[k + 3] & 0x7ffu, uint64_t{dw[k + 3] >> 13} + 1,
			    uint64_t{dw[k + 4] & 0xfffffffu} + 1};
	};
	const Side src = side(1), dst = side(6);
	const uint64_t rx = (dw[11] & 0x3fffu) + 1, ry = ((dw[11] >> 16) & 0x3fffu) + 1, rz = (dw[12] & 0x7ffu) + 1;
	const uint64_t row = rx << element;
	SdmaEngine &engine = *f.dev->engines[e.engine];
	auto at = [&](const Side &s, uint64_t y, uint64_t z) {
		return s.base + (((s.z + z) * s.slice + (s.y + y) * s.pitch + s.x) << element);
	};
	for (uint64_t z = 0; z < rz; ++z)
		for (uint64_t y = 0; y < ry; ++y) {
			SdmaJob job;
			job.gpu_id = f.dev->gpu_id;
			SdmaOp o;
			o.kind = SdmaOp::Kind::Copy;
			o.bytes = row;
			const uint64_t s = at(src, y, z), d = at(dst, y, z);
			if (resolve_va(f, s, row, false, &o.src))
				return stop_user_queue(e, p, gpu, s, true, "VM fault");
			if (resolve_va(f, d, row, true, &o.dst))
				return stop_user_queue(e, p, gpu, d, true, "VM fault");
			job.ops.push_back(std::move(o));
			if (engine.execute_now(job))
				return stop_user_queue(e, p, gpu, d, true, "VM fault");
		}
	return Step::Again;
}

// ATOMIC: the TC atomic operation in header bits 31:25 on the 32- or
// 64-bit value at ADDR with SRC_DATA (and CMP_DATA for compare-swap). The
// returning and non-returning forms act alike (SDMA drops the old value).
// With the loop bit (16), a compare-swap whose compare fails is retried.
ModelImpl::Step ModelImpl::user_queue_atomic(UserQueueEngine &e, KfdProcess &p, const Queue &queue, DrmFile &f,
					     const std::vector<uint32_t> &dw)
{
	const uint32_t gpu = queue.user_gpu_id;
	const uint32_t operation = dw[0] >> 25;
	const bool loop = (dw[0] >> 16) & 1;
	const bool wide = operation & 0x20;
	const AtomicOp kind = atomic_op(operation & 0x1f);
	if (kind == AtomicOp::Unsupported)
		return stop_user_queue(e, p, gpu, 0, false,
				       "unsupported sdma atomic operation " + std::to_string(operation) +
					       " (the model has the integer ones, no float or cache operations)");
	const uint64_t va = uint64_t{dw[1]} | (uint64_t{dw[2]} << 32);
	const uint64_t src = uint64_t{dw[3]} | (uint64_t{dw[4]} << 32);
	const uint64_t cmp = uint64_t{dw[5]} | (uint64_t{dw[6]} << 32);
	const unsigned width = wide ? 8 : 4;
	std::vector<Segment> seg;
	if ((va & (width - 1)) || resolve_va(f, va, width, true, &seg) || seg.size() != 1)
		return stop_user_queue(e, p, gpu, va, true, "VM fault (atomic)");
	bool matched = true;
	if (seg[0].bo->mem) {
		uint8_t *m = seg[0].bo->mem->data() + seg[0].off;
		if (wide) {
			std::atomic_ref<uint64_t> ref(*reinterpret_cast<uint64_t *>(m));
			uint64_t old = ref.load();
			while (!ref.compare_exchange_weak(old, atomic_result(kind, true, old, src, cmp, &matched)))
				;
		} else {
			std::atomic_ref<uint32_t> ref(*reinterpret_cast<uint32_t *>(m));
			uint32_t old = ref.load();
			while (!ref.compare_exchange_weak(
				old, uint32_t(atomic_result(kind, false, old, src, cmp, &matched))))
				;
		}
	} else {
		// Userptr memory: a read-modify-write through the process's
		// memory (not atomic against its CPUs).
		uint64_t v = 0;
		const uint64_t ua = seg[0].bo->userptr_addr + seg[0].off;
		if (pm_->read(seg[0].bo->userptr_tgid, ua, &v, width))
			return stop_user_queue(e, p, gpu, va, true, "VM fault (atomic)");
		v = atomic_result(kind, wide, v, src, cmp, &matched);
		if (pm_->write(seg[0].bo->userptr_tgid, ua, &v, width))
			return stop_user_queue(e, p, gpu, va, true, "VM fault (atomic)");
	}
	return loop && kind == AtomicOp::CmpSwap && !matched ? Step::Blocked : Step::Again;
}

} // namespace kfdemu::detail
