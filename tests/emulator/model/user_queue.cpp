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
// a change, walks the ring under the model lock. All of the ring, the
// pointers and the packets' addresses are GPU virtual addresses, resolved
// through the VM of the process's KFD render file exactly as CS IBs are.
//
// Packets (SDMA v4 layouts): NOP, COPY_LINEAR (count = bytes - 1), WRITE
// LINEAR, FENCE (32-bit store), CONST_FILL, POLL_REGMEM (memory polls wait
// until (value & mask) <func> reference holds, re-read on every pass;
// register polls, e.g. ROCr's HDP flush, complete at once: the model's
// memory is coherent), ATOMIC (ADD64 only), TIMESTAMP GET_GLOBAL (the same
// 100 MHz clock as GET_CLOCK_COUNTERS) and TRAP (an interrupt with the
// packet's 28-bit context id, handled as kfd_signal_event_interrupt does).
// A packet the model does not know, a truncated packet or a VM fault stops
// the queue for good (the hardware would hang until a reset); the fault is
// recorded in the counters. The read pointer is stored after every packet.
//
// Queues run only while the process's queues are not evicted (evict_count
// 0: not CRIU-paused, resumed after a restore). A packet executes entirely
// under the model lock, so an eviction (CRIU PROCESS_INFO) takes effect at
// a packet boundary, as the hardware's preemption does; copies are split
// into packets of at most 4 MiB by their issuers (ROCr's kMaxSingleCopySize).
#include "model/state.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <thread>

namespace kfdemu::detail {

using namespace abi::kfd;

namespace {

constexpr uint32_t OP_ATOMIC = 10;
constexpr uint32_t ATOMIC_ADD64 = 47;
constexpr uint32_t SUBOP_TIMESTAMP_GET_LOCAL = 1, SUBOP_TIMESTAMP_GET_GLOBAL = 2;
constexpr uint64_t kUnsignaledSlot = ~0ull;
constexpr auto kBusyPoll = std::chrono::microseconds(20);
constexpr auto kIdlePoll = std::chrono::milliseconds(1);
// Packets walked per lock hold: others get the lock in between.
constexpr int kPacketsPerHold = 64;

uint64_t gpu_clock()
{
	timespec ts{};
	clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
	return (static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec)) / 10;
}

bool poll_satisfied(uint32_t func, uint32_t value, uint32_t ref)
{
	switch (func) {
	case 0: return true;
	case 1: return value < ref;
	case 2: return value <= ref;
	case 3: return value == ref;
	case 4: return value != ref;
	case 5: return value >= ref;
	case 6: return value > ref;
	default: return false;
	}
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
		ev.signaled = true;
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
	if (q.args.queue_type != QUEUE_SDMA && q.args.queue_type != QUEUE_SDMA_XGMI)
		return;
	Pdd *pdd = p.pdd_by_user_id(q.user_gpu_id);
	if (!pdd || pdd->dev->family < abi::sdma::kFamilyAi || pdd->dev->engines.empty())
		return;
	auto e = std::make_shared<UserQueueEngine>();
	e->tgid = p.tgid;
	e->qid = q.id;
	e->engine = q.id % pdd->dev->engines.size();
	e->doorbells = pdd->doorbells;
	e->doorbell_off = (q.id * 8ull) & (pdd->dev->doorbell_slice() - 1);
	// A new queue's engine starts at read pointer 0, as the kernel's MQD
	// does; whatever the read pointer's memory holds (it may be reused,
	// stale memory) is only written, never read. A restored queue goes on
	// from the read pointer its process memory was restored with.
	e->started = !restored;
	UserQueueEngine *raw = e.get();
	e->thread = std::jthread([this, raw](std::stop_token st) { user_queue_thread(st, raw); });
	q.engine = std::move(e);
}

void ModelImpl::user_queue_thread(std::stop_token st, UserQueueEngine *e)
{
	uint64_t seen = 0;
	bool have_seen = false;
	bool pending = true; // a queue (re)starts by looking at its write pointer
	auto wait = kBusyPoll;
	while (!st.stop_requested()) {
		// The doorbell page is only replaced under the lock; a stale
		// pointer here only delays noticing (the slot is re-read below).
		std::shared_ptr<Backing> db;
		{
			std::unique_lock lk(mu_, std::try_to_lock);
			if (lk.owns_lock())
				db = e->doorbells;
		}
		if (db && db->size() >= e->doorbell_off + 8) {
			uint64_t v = std::atomic_ref<uint64_t>(
				*reinterpret_cast<uint64_t *>(db->data() + e->doorbell_off)).load(std::memory_order_acquire);
			if (!have_seen || v != seen) {
				pending = pending || have_seen;
				seen = v;
				have_seen = true;
				if (pending)
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
			break;
		case Step::Blocked: // a poll not yet satisfied, or evicted
			std::this_thread::sleep_for(wait);
			wait = std::min<std::chrono::microseconds>(wait * 2, kIdlePoll);
			break;
		case Step::Hung:
			e->hung = true;
			break;
		}
	}
}

ModelImpl::Step ModelImpl::user_queue_step(UserQueueEngine &e)
{
	using namespace abi::sdma;
	auto pit = procs_.find(e.tgid);
	if (pit == procs_.end())
		return Step::Idle;
	KfdProcess &p = *pit->second;
	auto qit = p.queues.find(e.qid);
	if (qit == p.queues.end() || qit->second.engine.get() != &e)
		return Step::Idle;
	const CreateQueue &q = qit->second.args;
	Pdd *pdd = p.pdd_by_user_id(qit->second.user_gpu_id);
	if (!pdd || !pdd->drm)
		return Step::Hung;
	if (pdd->doorbells != e.doorbells)
		e.doorbells = pdd->doorbells;
	if (p.evict_count > 0)
		return Step::Blocked;
	DrmFile &f = *pdd->drm;
	Device &dev = *f.dev;
	const uint32_t gpu = dev.gpu_id;
	if (!e.started) {
		if (gpu_read(f, q.read_pointer_address, &e.rptr, 8))
			return Step::Hung;
		e.started = true;
	}
	uint64_t wptr;
	if (gpu_read(f, q.write_pointer_address, &wptr, 8))
		return Step::Hung;
	const uint64_t size = q.ring_size;
	if (!size || (size & (size - 1)) || (size & 3)) {
		counters_->vm_fault(gpu, q.ring_base_address, "bad sdma ring size");
		return Step::Hung;
	}
	if (wptr == e.rptr)
		return Step::Idle;
	if (wptr - e.rptr > size || (wptr & 3)) {
		counters_->vm_fault(gpu, q.write_pointer_address, "sdma write pointer out of range");
		return Step::Hung;
	}
	const uint32_t count_mask = dev.family >= kFamilyGc11 ? 0x3fffffffu : 0x3fffffu;
	// Reads dword k of the packet at the read pointer (the ring wraps).
	auto ring_dw = [&](uint64_t k, uint32_t *out) {
		uint64_t off = (e.rptr + k * 4) & (size - 1);
		return gpu_read(f, q.ring_base_address + off, out, 4);
	};
	auto hang = [&](uint64_t va, const char *why) {
		counters_->vm_fault(gpu, va, why);
		return Step::Hung;
	};
	SdmaEngine &engine = *dev.engines[e.engine];
	for (int n = 0; n < kPacketsPerHold; ++n) {
		if (e.rptr == wptr)
			return Step::Idle;
		const uint64_t avail = (wptr - e.rptr) / 4;
		const uint64_t pkt_va = q.ring_base_address + (e.rptr & (size - 1));
		uint32_t hdr;
		if (ring_dw(0, &hdr))
			return Step::Hung;
		const uint32_t op = hdr & 0xff, sub = (hdr >> 8) & 0xff;
		uint64_t len;
		switch (op) {
		case OP_NOP: len = 1 + ((hdr >> 16) & 0x3fff); break;
		case OP_COPY: len = sub == SUBOP_COPY_LINEAR ? 7 : 0; break;
		case OP_WRITE: len = sub == SUBOP_WRITE_LINEAR ? 4 : 0; break;
		case OP_FENCE: len = 4; break;
		case OP_TRAP: len = 2; break;
		case OP_POLL_REGMEM: len = 6; break;
		case OP_ATOMIC: len = 8; break;
		case OP_CONST_FILL: len = 5; break;
		case OP_TIMESTAMP:
			len = sub == SUBOP_TIMESTAMP_GET_LOCAL || sub == SUBOP_TIMESTAMP_GET_GLOBAL ? 3 : 0;
			break;
		default: len = 0;
		}
		if (!len)
			return hang(pkt_va, "unknown sdma packet");
		if (len > avail)
			return hang(pkt_va, "truncated sdma packet");
		std::vector<uint32_t> dw(len);
		dw[0] = hdr;
		for (uint64_t k = 1; k < std::min<uint64_t>(len, 8); ++k)
			if (ring_dw(k, &dw[k]))
				return Step::Hung;
		auto addr = [&](size_t k) { return uint64_t{dw[k]} | (uint64_t{dw[k + 1]} << 32); };
		if (op == OP_WRITE) {
			const uint64_t ndw = (dw[3] & 0xfffff) + 1;
			if (4 + ndw > avail)
				return hang(pkt_va, "truncated sdma packet");
			dw.resize(4 + ndw);
			for (uint64_t k = 4; k < 4 + ndw; ++k)
				if (ring_dw(k, &dw[k]))
					return Step::Hung;
			len = 4 + ndw;
		}
		switch (op) {
		case OP_COPY: {
			const uint64_t bytes = (dw[1] & count_mask) + 1;
			SdmaJob job;
			job.gpu_id = gpu;
			SdmaOp o;
			o.kind = SdmaOp::Kind::Copy;
			o.bytes = bytes;
			if (resolve_va(f, addr(3), bytes, false, &o.src) || resolve_va(f, addr(5), bytes, true, &o.dst))
				return Step::Hung;
			job.ops.push_back(std::move(o));
			if (engine.execute_now(job))
				return Step::Hung;
			break;
		}
		case OP_CONST_FILL: {
			// Count: bytes - 1; a dword fill (fillsize 2) ignores the
			// low two bits.
			const uint64_t cnt = dw[4] & count_mask;
			const uint32_t fillsize = hdr >> 30;
			const uint64_t bytes = fillsize == 2 ? ((cnt >> 2) + 1) * 4 : cnt + 1;
			SdmaJob job;
			job.gpu_id = gpu;
			SdmaOp o;
			o.kind = SdmaOp::Kind::Fill;
			o.fill = fillsize == 0 ? (dw[3] & 0xff) * 0x01010101u : dw[3];
			o.bytes = bytes;
			if (resolve_va(f, addr(1), bytes, true, &o.dst))
				return Step::Hung;
			job.ops.push_back(std::move(o));
			if (engine.execute_now(job))
				return Step::Hung;
			break;
		}
		case OP_WRITE:
			if (gpu_write(f, addr(1), &dw[4], (len - 4) * 4))
				return Step::Hung;
			break;
		case OP_FENCE:
			if (gpu_write(f, addr(1), &dw[3], 4))
				return Step::Hung;
			break;
		case OP_TIMESTAMP: {
			const uint64_t t = gpu_clock();
			if (gpu_write(f, addr(1), &t, 8))
				return Step::Hung;
			break;
		}
		case OP_POLL_REGMEM: {
			const bool mem_poll = hdr >> 31;
			const uint32_t func = (hdr >> 28) & 7;
			if (mem_poll) {
				uint32_t v;
				if (gpu_read(f, addr(1), &v, 4))
					return Step::Hung;
				if (!poll_satisfied(func, v & dw[4], dw[3] & dw[4]))
					return Step::Blocked; // re-executed on the next pass
			}
			break;
		}
		case OP_ATOMIC: {
			const uint32_t operation = hdr >> 25;
			if (operation != ATOMIC_ADD64)
				return hang(pkt_va, "unsupported sdma atomic");
			const uint64_t va = addr(1), src = addr(3);
			std::vector<Segment> seg;
			if ((va & 7) || resolve_va(f, va, 8, true, &seg) || seg.size() != 1)
				return Step::Hung;
			if (seg[0].bo->mem) {
				std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t *>(seg[0].bo->mem->data() + seg[0].off))
					.fetch_add(src);
			} else {
				// Userptr memory: a read-modify-write through the
				// process's memory (not atomic against its CPUs).
				uint64_t v;
				const uint64_t ua = seg[0].bo->userptr_addr + seg[0].off;
				if (pm_->read(seg[0].bo->userptr_tgid, ua, &v, 8))
					return Step::Hung;
				v += src;
				if (pm_->write(seg[0].bo->userptr_tgid, ua, &v, 8))
					return Step::Hung;
			}
			break;
		}
		case OP_TRAP:
			// The SDMA trap interrupt carries 28 bits of int_ctx.
			signal_event_interrupt(p, dw[1] & 0x0fffffff, 28);
			break;
		default: // NOP
			break;
		}
		e.rptr += len * 4;
		++e.packets;
		if (gpu_write(f, q.read_pointer_address, &e.rptr, 8))
			return Step::Hung;
	}
	return Step::Again;
}

} // namespace kfdemu::detail
