// SPDX-License-Identifier: GPL-2.0-only
//
// KFD AQL compute queues (CREATE_QUEUE with queue_type COMPUTE_AQL) on family
// >= AI: what the CP's firmware does as the packet processor of a user-mode
// AQL queue ROCr made, on the doorbell-polling walker of user_queue.cpp.
//
// The contract (ROCr's AqlQueue on GFX9, doorbell type 2): the ring holds
// ring_size / 64 packets of 64 bytes. write_pointer_address is the
// amd_queue_t's write_dispatch_id and read_pointer_address its
// read_dispatch_id, both 64-bit packet indices (monotonic; slot = index mod
// packets). A producer reserves an index, writes the packet's body, then its
// header (a 16-bit store; the slot held INVALID until then), then rings the
// doorbell with the packet's index. The packet processor takes the packet at
// the read index; an INVALID header there means the producer has not
// finished it, so it waits (re-reads) without consuming it. When a packet is
// done the processor writes its completion signal, writes INVALID into the
// slot's header (the slot is free again) and stores the advanced read index.
// A new queue starts at read index 0 (ROCr zeroes its amd_queue_t) and reads
// nothing before its first doorbell; a restored one goes on from the read
// index in its restored memory (a first look at a write index that cannot be
// read finds nothing to do: the CP's restored MQD would hold it).
//
// The amd_queue_t itself is found as the CP finds it: its
// read_dispatch_id_field_base_byte_offset (the dword 8 bytes after
// read_dispatch_id) gives the structure's start. The processor reads from it
// the profiling bit of queue_properties (then a completion signal gets the
// packet's start_ts and end_ts, the GPU clock when the packet was picked up
// and when it was done) and queue_inactive_signal (the queue's errors).
//
// Packets (hsa.h, hsa_ext_amd.h):
//  * KERNEL_DISPATCH: the shader core (tests/emulator/shader) runs the grid;
//    the CP's own checks first (dimensions 1-3, non-zero workgroup sizes of at
//    most 1024 work-items, at most 64 KiB of group segment, a kernel object).
//    A dispatch runs in slices of kSliceBudget wave-instructions under the
//    model lock, which is released between slices: an eviction (CRIU
//    PROCESS_INFO, a memory eviction, RESTORE until RESUME) stops it at an
//    instruction boundary with every wave's state kept, and it goes on when
//    the queue runs again. A CRIU pause (PROCESS_INFO) saves its waves
//    instead, as the CP's context save does (CWSR, aql_cwsr_save): the
//    control stack entries into the queue's control stack (carried by
//    CHECKPOINT), the waves' registers and LDS into its CWSR area (process
//    memory); the queue resumes them (aql_cwsr_resume) when it runs again,
//    after UNPAUSE or a restore's RESUME, then the rest of the grid, then
//    its later packets. A dispatch that cannot be saved (no CWSR area or
//    one too small) stays in the shader core, and CHECKPOINT refuses it.
//  * BARRIER_AND / BARRIER_OR: wait until every / any of the five dependent
//    signals has value 0 (a null handle: satisfied for AND, never for OR).
//  * VENDOR_SPECIFIC with AMD's formats: BARRIER_VALUE (2; waits until
//    (value & mask) <cond> reference holds for its signal, HSA conditions EQ,
//    NE, LT, GTE; a null signal is satisfied) and PM4_IB (1; ROCr's
//    ExecutePM4, e.g. the instruction cache invalidation after a code object
//    load: the INDIRECT_BUFFER in the packet runs on cp_queue.cpp's PM4
//    interpreter).
//  * INVALID: waited on, never consumed. AGENT_DISPATCH (no GPU takes one)
//    and unknown types or formats are malformed.
// The header's barrier bit and fence scopes need nothing more: a packet
// starts only after the one before it has completed (the model runs one
// packet at a time per queue, so every packet is ordered as if its barrier
// bit were set), and memory is coherent (every store of a packet or a wave
// reaches the BO or process memory before the packet completes, and no
// cache is in between), which is what an acquire or release at any scope
// asks for.
//
// Completion signals (amd_signal_t): the value is decremented atomically
// (BO memory; in userptr memory a read-modify-write through the process's
// memory, not atomic against its CPUs); then, when event_mailbox_ptr is set,
// event_id is written to the mailbox and the end-of-pipe interrupt raised
// with it as a 32-bit context id (kfd_int_process_v9.c), which sets the
// event, as kfd_signal_event_interrupt does.
//
// Queue errors stop the queue for good, logged on the daemon's stderr
// ("kfd-emu: AQL queue ... stopped at ...: why") and recorded as for the
// other queues. A VM fault (the ring, a signal, a wave's access) raises the
// process's MEMORY events, as the fault interrupt does. Any other error is
// reported as the CP and ROCr's trap handler do: its code (ROCr's
// DynamicScratchHandler decodes them: 2 bad dimensions, 4 group memory, 8
// code object, 32 packet format, 64 workgroup size, 256 vendor packet
// format, 0x40000000 illegal instruction, 0x80000000 trap) stored in the
// amd_queue_t's queue_inactive_signal, with its mailbox and interrupt; a
// queue without that signal hangs instead (HW_EXCEPTION events, as after
// the reset a hang ends in).
//
// Priorities (CREATE_QUEUE / UPDATE_QUEUE queue_priority 0-15, which
// amdkfd writes into the MQD as cp_hqd_queue_priority and, through
// pipe_priority_map, cp_hqd_pipe_priority; state.h's pipe_priority): the
// shader engine is given to the highest. Before it starts a dispatch or
// runs a slice of one, an AQL queue yields (waits, its state kept) while an
// AQL queue of higher queue_priority on the same GPU, of any process, has a
// dispatch (in flight, or a KERNEL_DISPATCH packet at its read index with
// its write index past it: the CP sees work when the producer has written
// it, a real CP at the doorbell ROCr rings right after). Ordering by the
// pair (pipe, queue priority) is ordering by queue_priority, the map being
// monotonic. So when several queues have work, the highest one's dispatches
// run first, each slice, deterministically. Where this differs from
// hardware: there, waves of every queue share the CUs and priority only
// decides whose waves the CP and SPI launch first; here a waiting queue
// runs nothing, except one slice each kStarvationSlices slices its GPU's
// AQL queues run (so a high-priority kernel spinning on a lower queue's
// work still ends, slowly); queues of equal priority share the engine as
// the host schedules their threads (no fixed order); barriers and vendor
// packets, SDMA and PM4 queues are not arbitrated.
//
// Not emulated: CU masks, the dynamic
// scratch requests (the shader core keeps private memory per wave), a
// write index more than a ring ahead of the read index (the packets past the
// ring's end are the producer's to write once slots free up; the processor
// only ever reads the slot at the read index).
#include "model/packet_common.h"
#include "model/state.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace kfdemu::detail {

using namespace abi::kfd;

namespace {

using Packet = std::array<uint8_t, 64>;
constexpr uint64_t kPacketBytes = 64;
// Wave-instructions per slice of a dispatch (one hold of the model lock).
constexpr uint64_t kSliceBudget = 20000;
// A queue waiting for higher-priority ones runs one slice each this many
// slices of its GPU's AQL queues (1 M wave-instructions).
constexpr uint64_t kStarvationSlices = 50;

// hsa_packet_type_t, and the header's fields.
constexpr uint32_t kVendorSpecific = 0, kInvalid = 1, kKernelDispatch = 2, kBarrierAnd = 3, kAgentDispatch = 4,
		   kBarrierOr = 5;
// AMD vendor-specific formats (the byte after the header).
constexpr uint8_t kAmdPm4Ib = 1, kAmdBarrierValue = 2;
// amd_signal_t (amd_hsa_signal.h): value, event_mailbox_ptr, event_id,
// start_ts, end_ts.
constexpr uint64_t kSignalValue = 8, kSignalMailbox = 16, kSignalEventId = 24, kSignalStartTs = 32;
// amd_queue_t (amd_hsa_queue.h): read_dispatch_id, queue_properties,
// queue_inactive_signal; the profiling bit of the properties.
constexpr uint64_t kQueueReadDispatchId = 128, kQueueProperties = 180, kQueueInactiveSignal = 192;
constexpr uint32_t kQueueProfiling = 1u << 3;
// Queue error codes in queue_inactive_signal (ROCr's DynamicScratchHandler).
constexpr int64_t kErrDim = 2, kErrGroupMemory = 4, kErrCode = 8, kErrFormat = 32, kErrGroupSize = 64,
		  kErrVendorFormat = 256, kErrIllegalInstruction = 0x40000000, kErrTrap = 0x80000000ll;
// HSA signal conditions.
constexpr uint32_t kCondEq = 0, kCondNe = 1, kCondLt = 2, kCondGte = 3;

template <typename T> T at(const Packet &p, size_t off)
{
	T v;
	std::memcpy(&v, p.data() + off, sizeof v);
	return v;
}

uint64_t completion_signal(const Packet &p) { return at<uint64_t>(p, 56); }

} // namespace

// The process's GPU memory as the shader core sees it: host bytes of BOs the
// model has mapped, copies through the process for userptr memory.
class AqlMemory final : public shader::Memory {
public:
	AqlMemory(ModelImpl &m, DrmFile &f) : m_(m), f_(f) {}
	uint8_t *host(uint64_t va, bool write, uint64_t *len) override
	{
		const Mapping *mp = f_.vm.find(va & kHoleMask);
		if (!mp || !mp->bo || !mp->bo->mem)
			return nullptr;
		if (!(mp->flags & (write ? abi::drm::VM_PAGE_WRITEABLE : abi::drm::VM_PAGE_READABLE)))
			return nullptr;
		const uint64_t off = mp->offset + ((va & kHoleMask) - mp->start);
		if (off >= mp->bo->size)
			return nullptr;
		*len = std::min(mp->start + mp->size - (va & kHoleMask), mp->bo->size - off);
		return mp->bo->mem->data() + off;
	}
	int read(uint64_t va, void *dst, size_t n) override { return m_.gpu_read(f_, va, dst, n); }
	int write(uint64_t va, const void *src, size_t n) override { return m_.gpu_write(f_, va, src, n); }

private:
	ModelImpl &m_;
	DrmFile &f_;
};

ModelImpl::Step ModelImpl::aql_queue_step(UserQueueEngine &e, KfdProcess &p, const Queue &queue, DrmFile &f)
{
	const CreateQueue &q = queue.args;
	const uint32_t gpu = queue.user_gpu_id;
	if (e.in_flight)
		return aql_yields(e, p, queue) ? Step::Blocked : aql_run_slice(e, p, queue, f);
	const uint64_t slots = q.ring_size / kPacketBytes;
	if (!slots || (slots & (slots - 1)))
		return aql_queue_error(e, p, queue, f, q.ring_base_address, kErrFormat, "bad aql ring size");
	const bool look = e.restored_look;
	e.restored_look = false;
	if (!e.started) { // restored: the read index its memory was restored with
		if (gpu_read(f, q.read_pointer_address, &e.rptr, 8))
			return look ? Step::Idle : stop_user_queue(e, p, gpu, q.read_pointer_address, true,
								   "read index not readable");
		e.started = true;
	}
	if (!e.amd_queue) {
		uint32_t base_off = 0;
		if (!gpu_read(f, q.read_pointer_address + 8, &base_off, 4) && base_off == kQueueReadDispatchId)
			e.amd_queue = q.read_pointer_address - kQueueReadDispatchId;
	}
	if (queue.ctl_stack.offset < queue.ctl_stack.size) // waves saved at a pause
		return aql_cwsr_resume(e, p, p.queues.at(e.qid), f);
	uint64_t wptr;
	if (gpu_read(f, q.write_pointer_address, &wptr, 8))
		return look ? Step::Idle
			    : stop_user_queue(e, p, gpu, q.write_pointer_address, true, "write index not readable");
	for (int n = 0; n < kPacketsPerHold; ++n) {
		if (wptr == e.rptr)
			return Step::Idle;
		if (wptr < e.rptr)
			return aql_queue_error(e, p, queue, f, q.write_pointer_address, kErrFormat,
					       "aql write index " + std::to_string(wptr) + " behind the read index");
		const uint64_t va = q.ring_base_address + (e.rptr & (slots - 1)) * kPacketBytes;
		Packet pkt;
		if (gpu_read(f, va, pkt.data(), pkt.size()))
			return stop_user_queue(e, p, gpu, va, true, "aql ring not readable");
		if (Step r = aql_packet(e, p, queue, f, pkt, va); r != Step::Again || e.in_flight)
			return r;
	}
	return Step::Again;
}

ModelImpl::Step ModelImpl::aql_packet(UserQueueEngine &e, KfdProcess &p, const Queue &queue, DrmFile &f,
				      const Packet &pkt, uint64_t va)
{
	const uint32_t type = at<uint16_t>(pkt, 0) & 0xff;
	if (type == kInvalid)
		return Step::Blocked; // the producer has not written the header yet
	if (type == kKernelDispatch && aql_yields(e, p, queue))
		return Step::Blocked; // a queue of higher priority has the engine
	if (!e.picked_at)
		e.picked_at = gpu_clock();
	switch (type) {
	case kKernelDispatch:
		return aql_dispatch(e, p, queue, f, pkt, va);
	case kBarrierAnd:
	case kBarrierOr: {
		bool all = true, any = false;
		for (size_t i = 0; i < 5; ++i) {
			const uint64_t dep = at<uint64_t>(pkt, 8 + 8 * i);
			if (!dep)
				continue; // AND: satisfied; OR: never
			const int r = aql_signal_test(f, dep, kCondEq, 0, -1);
			if (r < 0)
				return stop_user_queue(e, p, queue.user_gpu_id, dep, true, "VM fault (dependent signal)");
			all = all && r;
			any = any || r;
		}
		if (!(type == kBarrierAnd ? all : any))
			return Step::Blocked;
		return aql_retire(e, p, queue, f, pkt, va);
	}
	case kVendorSpecific:
		return aql_vendor(e, p, queue, f, pkt, va);
	default: {
		char why[96];
		std::snprintf(why, sizeof why, "%s aql packet (header 0x%04x)",
			      type == kAgentDispatch ? "agent dispatch" : "unknown", at<uint16_t>(pkt, 0));
		return aql_queue_error(e, p, queue, f, va, kErrFormat, why);
	}
	}
}

ModelImpl::Step ModelImpl::aql_vendor(UserQueueEngine &e, KfdProcess &p, const Queue &queue, DrmFile &f,
				      const Packet &pkt, uint64_t va)
{
	const uint8_t format = pkt[2];
	if (format == kAmdBarrierValue) {
		const uint64_t sig = at<uint64_t>(pkt, 8);
		if (at<uint32_t>(pkt, 32) > kCondGte)
			return aql_queue_error(e, p, queue, f, va, kErrVendorFormat,
					       "barrier-value packet with condition " + std::to_string(at<uint32_t>(pkt, 32)));
		if (sig) {
			const int r = aql_signal_test(f, sig, at<uint32_t>(pkt, 32), at<int64_t>(pkt, 16),
						      at<int64_t>(pkt, 24));
			if (r < 0)
				return stop_user_queue(e, p, queue.user_gpu_id, sig, true, "VM fault (barrier-value signal)");
			if (!r)
				return Step::Blocked;
		}
		return aql_retire(e, p, queue, f, pkt, va);
	}
	if (format == kAmdPm4Ib) {
		// The four dwords after the vendor header: one INDIRECT_BUFFER
		// packet, run as a CP queue runs its ring's.
		const CpStream jump{va + 4, 4, false};
		uint64_t len = 0;
		if (Step r = cp_packet(e, p, queue, f, jump, 0, 4, 0, &len); r != Step::Again)
			return r;
		return aql_retire(e, p, queue, f, pkt, va);
	}
	char why[96];
	std::snprintf(why, sizeof why, "unknown AMD vendor aql packet format %u", unsigned{format});
	return aql_queue_error(e, p, queue, f, va, kErrVendorFormat, why);
}

ModelImpl::Step ModelImpl::aql_dispatch(UserQueueEngine &e, KfdProcess &p, const Queue &queue, DrmFile &f,
					const Packet &pkt, uint64_t va)
{
	// The CP's checks of the packet (its error codes as ROCr decodes them).
	const uint32_t dims = at<uint16_t>(pkt, 2) & 3;
	const uint64_t wg = uint64_t{at<uint16_t>(pkt, 4)} * at<uint16_t>(pkt, 6) * at<uint16_t>(pkt, 8);
	if (dims == 0 || !at<uint16_t>(pkt, 4) || !at<uint16_t>(pkt, 6) || !at<uint16_t>(pkt, 8))
		return aql_queue_error(e, p, queue, f, va, kErrDim, "kernel dispatch with bad dimensions");
	if (wg > 1024)
		return aql_queue_error(e, p, queue, f, va, kErrGroupSize,
				       "kernel dispatch of " + std::to_string(wg) + " work-items per workgroup");
	if (at<uint32_t>(pkt, 28) > 65536)
		return aql_queue_error(e, p, queue, f, va, kErrGroupMemory, "kernel dispatch with too much group memory");
	if (!at<uint64_t>(pkt, 32))
		return aql_queue_error(e, p, queue, f, va, kErrCode, "kernel dispatch without a kernel object");
	shader::Launch l;
	std::string error;
	if (!aql_launch(e, f, pkt, va, &l, &error))
		return aql_queue_error(e, p, queue, f, va, kErrCode, error);
	AqlMemory mem(*this, f);
	auto d = shader::Dispatch::start(l, mem, &error);
	if (!d)
		return aql_queue_error(e, p, queue, f, va, kErrCode, "kernel dispatch refused: " + error);
	e.in_flight = std::make_unique<AqlInFlight>();
	e.in_flight->dispatch = std::move(d);
	e.in_flight->packet = pkt;
	e.in_flight->packet_va = va;
	return aql_run_slice(e, p, queue, f);
}

bool ModelImpl::aql_launch(const UserQueueEngine &e, DrmFile &f, const Packet &pkt, uint64_t va, shader::Launch *l,
			   std::string *why)
{
	const uint64_t gfx = f.dev->node->property("gfx_target_version", 0);
	if (gfx != 90008 && gfx != 90010)
		return *why = "no shader core for gfx_target_version " + std::to_string(gfx), false;
	l->target = gfx == 90008 ? shader::Target::Gfx908 : shader::Target::Gfx90a;
	l->packet = pkt;
	l->packet_va = va;
	l->queue_va = e.amd_queue;
	l->dispatch_id = e.rptr;
	return true;
}

void ModelImpl::aql_cwsr_save(KfdProcess &p, Queue &q, uint64_t stack_bytes)
{
	if (!q.engine || !q.engine->in_flight)
		return;
	AqlInFlight &d = *q.engine->in_flight;
	Queue::ControlStack &cs = q.ctl_stack;
	const CreateQueue &a = q.args;
	const Pdd *pdd = p.pdd_by_user_id(q.user_gpu_id);
	const uint64_t room = a.ctx_save_restore_size > cs.size ? a.ctx_save_restore_size - cs.size : 0;
	const uint64_t area_va = a.ctx_save_restore_address + cs.size;
	shader::WaveSave s;
	std::string why;
	auto saved = [&] {
		if (!a.ctx_save_restore_address || !cs.size)
			return why = "the queue has no CWSR area (CREATE_QUEUE without ctx_save_restore_address and "
				     "ctl_stack_size)", false;
		if (!d.dispatch->save(&s, &why))
			return false;
		if (s.control.size() > cs.size)
			return why = "its control stack needs " + std::to_string(s.control.size()) +
				     " bytes, the queue's ctl_stack_size is " + std::to_string(cs.size), false;
		if (s.area.size() > room)
			return why = "its waves need " + std::to_string(s.area.size()) + " bytes of wave save area, the "
				     "CWSR area has " + std::to_string(room) + " after the control stack", false;
		if (!pdd || !pdd->drm || gpu_write(*pdd->drm, area_va, s.area.data(), s.area.size())) {
			char at[32];
			std::snprintf(at, sizeof at, "0x%llx", static_cast<unsigned long long>(area_va));
			return why = std::string("its wave save area at ") + at + " is not writable by the GPU", false;
		}
		return true;
	};
	if (!saved()) {
		d.unsaved = why;
		return;
	}
	cs.bytes.resize(stack_bytes);
	std::copy(s.control.begin(), s.control.end(), cs.bytes.begin() + (cs.size - s.control.size()));
	cs.offset = static_cast<uint32_t>(cs.size - s.control.size());
	cs.wg_state_offset = static_cast<uint32_t>(cs.size + s.area.size());
	q.engine->in_flight.reset(); // the waves are off the shader core
}

ModelImpl::Step ModelImpl::aql_cwsr_resume(UserQueueEngine &e, KfdProcess &p, Queue &q, DrmFile &f)
{
	Queue::ControlStack &cs = q.ctl_stack;
	const CreateQueue &a = q.args;
	shader::WaveSave s;
	s.control.assign(cs.size - cs.offset, 0); // no bytes kept: zeros, which no save is
	if (cs.bytes.size() >= cs.size)
		std::copy(cs.bytes.begin() + cs.offset, cs.bytes.begin() + cs.size, s.control.begin());
	s.area.resize(cs.wg_state_offset - cs.size);
	const uint64_t area_va = a.ctx_save_restore_address + cs.size;
	cs.offset = cs.wg_state_offset = cs.size; // the CP has taken the save
	const uint64_t va = a.ring_base_address + (e.rptr & (a.ring_size / kPacketBytes - 1)) * kPacketBytes;
	Packet pkt;
	if (gpu_read(f, va, pkt.data(), pkt.size()))
		return stop_user_queue(e, p, q.user_gpu_id, va, true, "aql ring not readable");
	if (gpu_read(f, area_va, s.area.data(), s.area.size()))
		return stop_user_queue(e, p, q.user_gpu_id, area_va, true, "CWSR area not readable");
	shader::Launch l;
	std::string why;
	AqlMemory mem(*this, f);
	std::unique_ptr<shader::Dispatch> d;
	if (aql_launch(e, f, pkt, va, &l, &why))
		d = shader::Dispatch::resume(l, mem, s, &why);
	if (!d)
		return aql_queue_error(e, p, q, f, va, kErrCode, "saved waves cannot be resumed: " + why);
	shader::SaveSummary sum;
	shader::Dispatch::describe(s.control, &sum); // resume() read the same entries
	++e.cwsr_resumes;
	e.cwsr_waves = sum.waves, e.cwsr_groups_done = sum.groups_done, e.cwsr_groups = sum.groups;
	e.in_flight = std::make_unique<AqlInFlight>();
	e.in_flight->dispatch = std::move(d);
	e.in_flight->packet = pkt;
	e.in_flight->packet_va = va;
	if (!e.picked_at)
		e.picked_at = gpu_clock();
	return aql_run_slice(e, p, q, f);
}

ModelImpl::Step ModelImpl::aql_run_slice(UserQueueEngine &e, KfdProcess &p, const Queue &queue, DrmFile &f)
{
	AqlInFlight &d = *e.in_flight;
	AqlMemory mem(*this, f);
	const uint64_t before = d.dispatch->instructions();
	++f.dev->aql_slices;
	const shader::Dispatch::Status st = d.dispatch->run(mem, kSliceBudget);
	e.instructions += d.dispatch->instructions() - before;
	using S = shader::Dispatch::Status;
	switch (st) {
	case S::Running:
		return Step::Again;
	case S::Done: {
		const Packet pkt = d.packet;
		const uint64_t va = d.packet_va;
		e.in_flight.reset();
		return aql_retire(e, p, queue, f, pkt, va);
	}
	case S::VmFault:
		return stop_user_queue(e, p, queue.user_gpu_id, d.dispatch->fault_va(), true,
				       "VM fault in a kernel dispatch: " + d.dispatch->why());
	case S::IllegalInstruction:
		return aql_queue_error(e, p, queue, f, d.packet_va, kErrIllegalInstruction,
				       "illegal instruction in a kernel dispatch: " + d.dispatch->why());
	case S::Trap:
		return aql_queue_error(e, p, queue, f, d.packet_va, kErrTrap, "trap in a kernel dispatch: " + d.dispatch->why());
	}
	return Step::Hung;
}

bool ModelImpl::aql_yields(UserQueueEngine &e, KfdProcess &p, const Queue &queue)
{
	const Pdd *mine = p.pdd_by_user_id(queue.user_gpu_id);
	bool higher = false;
	for (auto it = procs_.begin(); it != procs_.end() && !higher && mine; ++it) {
		KfdProcess &other = *it->second;
		if (other.evict_count > 0)
			continue; // evicted or paused: its queues run nothing
		for (auto &[id, q] : other.queues) {
			const Pdd *pdd = other.pdd_by_user_id(q.user_gpu_id);
			if (&q == &queue || q.args.queue_priority <= queue.args.queue_priority || !q.engine ||
			    !q.engine->aql || q.engine->hung || !q.active() || !pdd || pdd->dev != mine->dev || !pdd->drm)
				continue;
			if ((higher = aql_has_dispatch(*q.engine, q, *pdd->drm)))
				break;
		}
	}
	if (!higher)
		return e.yielding = false;
	const uint64_t now = mine->dev->aql_slices;
	if (!e.yielding)
		e.yielding = true, e.yield_mark = now;
	if (now - e.yield_mark < kStarvationSlices)
		return true;
	e.yield_mark = now; // one slice now, then wait again
	return false;
}

bool ModelImpl::aql_has_dispatch(const UserQueueEngine &e, const Queue &q, DrmFile &f)
{
	if (e.in_flight)
		return true;
	const uint64_t slots = q.args.ring_size / kPacketBytes;
	uint64_t wptr = 0;
	uint16_t header = 0;
	if (!e.started || !slots || (slots & (slots - 1)) || gpu_read(f, q.args.write_pointer_address, &wptr, 8) ||
	    wptr <= e.rptr)
		return false;
	const uint64_t va = q.args.ring_base_address + (e.rptr & (slots - 1)) * kPacketBytes;
	return !gpu_read(f, va, &header, 2) && (header & 0xff) == kKernelDispatch;
}

ModelImpl::Step ModelImpl::aql_retire(UserQueueEngine &e, KfdProcess &p, const Queue &queue, DrmFile &f,
				      const Packet &pkt, uint64_t va)
{
	const uint32_t gpu = queue.user_gpu_id;
	if (const uint64_t sig = completion_signal(pkt)) {
		uint32_t props = 0;
		if (e.amd_queue && !gpu_read(f, e.amd_queue + kQueueProperties, &props, 4) && (props & kQueueProfiling)) {
			const uint64_t ts[2] = {e.picked_at, gpu_clock()};
			if (gpu_write(f, sig + kSignalStartTs, ts, sizeof ts))
				return stop_user_queue(e, p, gpu, sig, true, "VM fault (completion signal)");
		}
		if (aql_signal(p, f, sig, nullptr))
			return stop_user_queue(e, p, gpu, sig, true, "VM fault (completion signal)");
	}
	e.picked_at = 0;
	const uint16_t invalid = kInvalid;
	if (gpu_write(f, va, &invalid, 2))
		return stop_user_queue(e, p, gpu, va, true, "aql ring not writable");
	++e.rptr;
	++e.packets;
	if (gpu_write(f, queue.args.read_pointer_address, &e.rptr, 8))
		return stop_user_queue(e, p, gpu, queue.args.read_pointer_address, true, "read index not writable");
	return Step::Again;
}

ModelImpl::Step ModelImpl::aql_queue_error(UserQueueEngine &e, KfdProcess &p, const Queue &queue, DrmFile &f,
					   uint64_t va, int64_t code, const std::string &why)
{
	const uint32_t gpu = queue.user_gpu_id;
	uint64_t inactive = 0;
	if (e.amd_queue && gpu_read(f, e.amd_queue + kQueueInactiveSignal, &inactive, 8))
		inactive = 0;
	char what[64];
	std::snprintf(what, sizeof what, " (queue error 0x%llx)", static_cast<unsigned long long>(code));
	if (!record_queue_stop(e, gpu, va, false, why + what))
		return Step::Hung;
	if (!inactive || aql_signal(p, f, inactive, &code))
		raise_queue_exception(p, gpu, va, false); // nothing to report it through: a hang
	return Step::Hung;
}

int ModelImpl::aql_signal(KfdProcess &p, DrmFile &f, uint64_t sig, const int64_t *store)
{
	std::vector<Segment> seg;
	if (resolve_va(f, sig + kSignalValue, 8, true, &seg) || seg.size() != 1 || ((sig + kSignalValue) & 7))
		return -EFAULT;
	if (seg[0].bo->mem) {
		std::atomic_ref<int64_t> value(*reinterpret_cast<int64_t *>(seg[0].bo->mem->data() + seg[0].off));
		if (store)
			value.store(*store);
		else
			value.fetch_sub(1);
	} else {
		const uint64_t ua = seg[0].bo->userptr_addr + seg[0].off;
		int64_t v = 0;
		if (pm_->read(seg[0].bo->userptr_tgid, ua, &v, 8))
			return -EFAULT;
		v = store ? *store : v - 1;
		if (pm_->write(seg[0].bo->userptr_tgid, ua, &v, 8))
			return -EFAULT;
	}
	uint64_t mailbox = 0;
	uint32_t event_id = 0;
	if (gpu_read(f, sig + kSignalMailbox, &mailbox, 8) || gpu_read(f, sig + kSignalEventId, &event_id, 4))
		return -EFAULT;
	if (!mailbox)
		return 0;
	if (gpu_write(f, mailbox, &event_id, 4))
		return -EFAULT;
	signal_event_interrupt(p, event_id, 32);
	return 0;
}

int ModelImpl::aql_signal_test(DrmFile &f, uint64_t sig, uint32_t cond, int64_t ref, int64_t mask)
{
	int64_t v;
	if (gpu_read(f, sig + kSignalValue, &v, 8))
		return -EFAULT;
	v &= mask;
	switch (cond) {
	case kCondEq: return v == ref;
	case kCondNe: return v != ref;
	case kCondLt: return v < ref;
	default: return v >= ref; // kCondGte (the callers take no other)
	}
}

} // namespace kfdemu::detail
