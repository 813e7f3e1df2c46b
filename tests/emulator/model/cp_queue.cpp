// SPDX-License-Identifier: GPL-2.0-only
//
// KFD user-mode CP compute queues (CREATE_QUEUE with queue_type COMPUTE, the
// PM4 queues kfdtest's PM4Queue drives) on family >= AI: the CP's command
// processor reads the ring the process writes, as user_queue.cpp's SDMA
// engine does, with the same doorbell-polling thread.
//
// The hardware contract on family AI and later: the process writes PM4
// packets into the ring, stores the new 64-bit write pointer (in dwords,
// monotonic) at write_pointer_address and writes the same value to its
// doorbell. The CP executes from its read pointer up to it and reports its
// read pointer at read_pointer_address as 32 bits, in dwords, wrapped at the
// ring size (RPTR_REPORT). Ring offset = dword index mod ring dwords.
//
// Packets (type 3, gfx9 layouts) that need no shader: NOP (also the 1-dword
// count-0x3fff form and type-2 filler dwords), WRITE_DATA to memory (a
// register destination is accepted and dropped), WAIT_REG_MEM (memory polls
// wait until (value & mask) <func> reference holds, re-read on every pass;
// register polls complete at once), RELEASE_MEM and EVENT_WRITE_EOP (the
// 32- or 64-bit data, or the GPU clock, then with INT_SEL the end-of-pipe
// interrupt, which KFD handles as kfd_signal_event_interrupt with 28 bits of
// context id: RELEASE_MEM's INT_CTXID, EVENT_WRITE_EOP's data), INDIRECT_BUFFER
// (its packets run at once, an IB inside an IB too; CHAIN ends the IB
// holding it), DMA_DATA (memory to memory, or a dword of data to memory) and
// the cache actions ACQUIRE_MEM and EVENT_WRITE (nothing to do on coherent
// memory). Anything else (a shader dispatch among them) stops the queue as a
// hang, as user_queue.cpp does for SDMA: logged, recorded, and the process's
// HW_EXCEPTION events signalled. The read pointer is reported after every
// packet of the ring. AQL queues (COMPUTE_AQL) are aql_queue.cpp's, whose
// PM4_IB vendor packets run here too (cp_packet).
//
// The same packets in a CS IB on an amdgpu COMPUTE ring (build_pm4_job)
// become a job of the ring's in-order runner: WRITE_DATA and the
// end-of-pipe data as writes (the GPU clock read when the IB is parsed;
// INT_SEL means nothing to a render node's job), DMA_DATA as a copy or a
// fill, WAIT_REG_MEM on memory as a poll the job waits in, INDIRECT_BUFFER
// parsed in place. A packet the CP cannot run hangs the job, which then
// fails with ETIME (the scheduler's timeout) and blames its context, as an
// unknown SDMA packet does.
#include "model/packet_common.h"
#include "model/state.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

namespace kfdemu::detail {

using namespace abi::kfd;

namespace {

constexpr uint32_t kNop = 0x10, kWriteData = 0x37, kWaitRegMem = 0x3c, kIndirectBuffer = 0x3f,
		   kEventWrite = 0x46, kEventWriteEop = 0x47, kReleaseMem = 0x49, kDmaData = 0x50,
		   kAcquireMem = 0x58;
constexpr int kMaxIbDepth = 2; // IB1 and IB2

uint64_t addr64(const std::vector<uint32_t> &dw, size_t k) { return uint64_t{dw[k]} | (uint64_t{dw[k + 1]} << 32); }

} // namespace

ModelImpl::Step ModelImpl::cp_queue_step(UserQueueEngine &e, KfdProcess &p, const Queue &queue, DrmFile &f)
{
	const CreateQueue &q = queue.args;
	const uint32_t gpu = queue.user_gpu_id;
	const uint64_t ring_dw = q.ring_size / 4;
	if (!q.ring_size || (q.ring_size & (q.ring_size - 1)) || q.ring_size < 8)
		return stop_user_queue(e, p, gpu, q.ring_base_address, false, "bad cp ring size");
	uint64_t wptr;
	if (gpu_read(f, q.write_pointer_address, &wptr, 8))
		return stop_user_queue(e, p, gpu, q.write_pointer_address, true, "write pointer not readable");
	if (!e.started) { // a new queue starts at 0; a restored one where its MQD says
		e.rptr = 0;
		e.started = true;
	}
	if (wptr == e.rptr)
		return Step::Idle;
	if (wptr - e.rptr > ring_dw)
		return stop_user_queue(e, p, gpu, q.write_pointer_address, false, "cp write pointer out of range");
	const CpStream ring{q.ring_base_address, ring_dw, true};
	for (int n = 0; n < kPacketsPerHold; ++n) {
		if (e.rptr == wptr)
			return Step::Idle;
		uint64_t len = 0;
		if (Step r = cp_packet(e, p, queue, f, ring, e.rptr, wptr, 0, &len); r != Step::Again)
			return r; // Hung, or Blocked: re-executed on the next pass
		e.rptr += len;
		++e.packets;
		const uint32_t report = static_cast<uint32_t>(e.rptr & (ring_dw - 1));
		if (gpu_write(f, q.read_pointer_address, &report, 4))
			return stop_user_queue(e, p, gpu, q.read_pointer_address, true, "read pointer not writable");
	}
	return Step::Again;
}

ModelImpl::Step ModelImpl::cp_packet(UserQueueEngine &e, KfdProcess &p, const Queue &queue, DrmFile &f,
				     const CpStream &s, uint64_t at, uint64_t end, int depth, uint64_t *len)
{
	const uint32_t gpu = queue.user_gpu_id;
	const uint64_t pkt_va = s.base + s.offset(at);
	uint32_t hdr;
	if (gpu_read(f, pkt_va, &hdr, 4))
		return stop_user_queue(e, p, gpu, pkt_va, true, "cp packet not readable");
	const uint32_t type = hdr >> 30;
	if (type == 2) { // filler
		*len = 1;
		return Step::Again;
	}
	const uint32_t op = (hdr >> 8) & 0xff, count = (hdr >> 16) & 0x3fff;
	*len = type == 3 && op == kNop && count == 0x3fff ? 1 : uint64_t{count} + 2;
	char why[96];
	if (type != 3) {
		std::snprintf(why, sizeof why, "unknown cp packet (type %u, header 0x%08x)", type, hdr);
		return stop_user_queue(e, p, gpu, pkt_va, false, why);
	}
	if (*len > end - at)
		return stop_user_queue(e, p, gpu, pkt_va, false, "truncated cp packet");
	if (op == kNop)
		return Step::Again; // a NOP's payload is never read
	std::vector<uint32_t> dw(*len);
	for (uint64_t k = 0; k < dw.size(); ++k)
		if (gpu_read(f, s.base + s.offset(at + k), &dw[k], 4))
			return stop_user_queue(e, p, gpu, pkt_va, true, "cp packet not readable");
	auto fault = [&](uint64_t va) { return stop_user_queue(e, p, gpu, va, true, "VM fault"); };
	auto bad = [&](const char *what) {
		std::snprintf(why, sizeof why, "%s (cp opcode 0x%02x, header 0x%08x)", what, op, hdr);
		return stop_user_queue(e, p, gpu, pkt_va, false, why);
	};
	switch (op) {
	case kWriteData: {
		if (dw.size() < 5)
			return bad("truncated cp packet");
		const uint32_t dst_sel = (dw[1] >> 8) & 0xf;
		if (dst_sel == 0)
			return Step::Again; // a register: nothing the model has
		if (dst_sel != 1 && dst_sel != 2 && dst_sel != 5)
			return bad("unsupported WRITE_DATA destination");
		if (dw[1] & (1u << 16)) { // no address increment: the last dword stays
			return gpu_write(f, addr64(dw, 2), &dw.back(), 4) ? fault(addr64(dw, 2)) : Step::Again;
		}
		return gpu_write(f, addr64(dw, 2), &dw[4], (dw.size() - 4) * 4) ? fault(addr64(dw, 2)) : Step::Again;
	}
	case kWaitRegMem: {
		if (dw.size() != 7)
			return bad("bad WAIT_REG_MEM length");
		if (!((dw[1] >> 4) & 1))
			return Step::Again; // a register poll: coherent memory, done
		uint32_t v;
		if (gpu_read(f, addr64(dw, 2), &v, 4))
			return fault(addr64(dw, 2));
		return poll_satisfied(dw[1] & 7, v & dw[5], dw[4] & dw[5]) ? Step::Again : Step::Blocked;
	}
	case kReleaseMem:
	case kEventWriteEop:
		return cp_end_of_pipe(e, p, queue, f, dw, op == kReleaseMem);
	case kIndirectBuffer: {
		if (dw.size() != 4)
			return bad("bad INDIRECT_BUFFER length");
		if (depth >= kMaxIbDepth)
			return bad("INDIRECT_BUFFER nested too deep");
		const CpStream ib{addr64(dw, 1) & ~uint64_t{3}, dw[3] & 0xfffff, false};
		for (uint64_t i = 0; i < ib.dwords;) {
			uint64_t n = 0;
			if (Step r = cp_packet(e, p, queue, f, ib, i, ib.dwords, depth + 1, &n); r != Step::Again)
				return r; // a wait inside an IB runs the whole IB again
			i += n;
		}
		return Step::Again;
	}
	case kDmaData:
		return dw.size() == 7 ? cp_dma_data(e, p, queue, f, dw) : bad("bad DMA_DATA length");
	case kAcquireMem:
	case kEventWrite:
		return Step::Again;
	default:
		return bad("unsupported cp packet");
	}
}

ModelImpl::Step ModelImpl::cp_end_of_pipe(UserQueueEngine &e, KfdProcess &p, const Queue &queue, DrmFile &f,
					  const std::vector<uint32_t> &dw, bool release_mem)
{
	const uint32_t gpu = queue.user_gpu_id;
	// RELEASE_MEM: dw2 DST/INT/DATA_SEL, dw3-4 address, dw5-6 data, dw7
	// INT_CTXID. EVENT_WRITE_EOP: dw2-3 address with INT/DATA_SEL in the
	// high dword, dw4-5 data.
	if (dw.size() != (release_mem ? 8u : 6u))
		return stop_user_queue(e, p, gpu, 0, false, "bad end-of-pipe packet length");
	const uint32_t sel = release_mem ? dw[2] : dw[3];
	const uint32_t data_sel = sel >> 29, int_sel = (sel >> 24) & 7;
	const uint64_t va = release_mem ? addr64(dw, 3) : (uint64_t{dw[2]} | (uint64_t{dw[3] & 0xffff} << 32));
	const size_t data = release_mem ? 5 : 4;
	uint64_t v = 0;
	size_t bytes = 0;
	switch (data_sel) {
	case 0: break;
	case 1: v = dw[data], bytes = 4; break;
	case 2: v = addr64(dw, data), bytes = 8; break;
	case 3: case 4: v = gpu_clock(), bytes = 8; break; // the GPU (global) clock
	default: return stop_user_queue(e, p, gpu, va, false, "unsupported end-of-pipe DATA_SEL");
	}
	if (bytes && gpu_write(f, va & ~uint64_t{bytes - 1}, &v, bytes))
		return stop_user_queue(e, p, gpu, va, true, "VM fault");
	if (int_sel) {
		const uint32_t ctx = release_mem ? dw[7] : dw[data];
		signal_event_interrupt(p, ctx & 0xfffffff, 28);
	}
	return Step::Again;
}

ModelImpl::Step ModelImpl::cp_dma_data(UserQueueEngine &e, KfdProcess &p, const Queue &queue, DrmFile &f,
				       const std::vector<uint32_t> &dw)
{
	const uint32_t gpu = queue.user_gpu_id;
	const uint32_t src_sel = (dw[1] >> 29) & 3, dst_sel = (dw[1] >> 20) & 3;
	const uint32_t cmd = dw[6];
	const uint64_t bytes = cmd & 0x3ffffff;
	const bool sas = cmd & (1u << 26), das = cmd & (1u << 27), saic = cmd & (1u << 28), daic = cmd & (1u << 29);
	const uint64_t dst = addr64(dw, 4);
	if (das || daic || (dst_sel != 0 && dst_sel != 3) || (src_sel != 2 && (sas || saic || src_sel == 1)))
		return stop_user_queue(e, p, gpu, dst, false, "unsupported DMA_DATA (a register, GDS or fixed address)");
	std::vector<uint8_t> buf(std::min<uint64_t>(bytes, 1 << 20));
	for (uint64_t done = 0; done < bytes;) {
		const size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), bytes - done));
		if (src_sel == 2) {
			for (size_t i = 0; i < n; ++i)
				buf[i] = static_cast<uint8_t>(dw[2] >> (((done + i) & 3) * 8));
		} else if (gpu_read(f, addr64(dw, 2) + done, buf.data(), n)) {
			return stop_user_queue(e, p, gpu, addr64(dw, 2) + done, true, "VM fault");
		}
		if (gpu_write(f, dst + done, buf.data(), n))
			return stop_user_queue(e, p, gpu, dst + done, true, "VM fault");
		done += n;
	}
	return Step::Again;
}

int ModelImpl::build_pm4_job(DrmFile &f, uint64_t ib_va, uint32_t ib_bytes, SdmaJob *job, int depth)
{
	std::vector<uint32_t> dw;
	if (int e = read_ib(f, ib_va, ib_bytes, &dw))
		return e;
	auto hang = [&](uint64_t i, const char *why) {
		counters_->vm_fault(f.dev->gpu_id, ib_va + i * 4, why);
		job->error_after_ops = -ETIME;
		return 0;
	};
	// The segments of `bytes` at `va`, to read or to write; false: the
	// job fails as on a VM fault (ECANCELED).
	auto segs = [&](uint64_t va, uint64_t bytes, bool write, std::vector<Segment> *out) {
		return resolve_va(f, va, bytes, write, out) == 0;
	};
	auto write_op = [&](uint64_t va, const void *data, uint64_t bytes) {
		SdmaOp o;
		o.kind = SdmaOp::Kind::Write;
		o.bytes = bytes;
		const auto *b = static_cast<const uint8_t *>(data);
		o.data.assign(b, b + bytes);
		if (!segs(va, bytes, true, &o.dst))
			return false;
		job->ops.push_back(std::move(o));
		return true;
	};
	for (uint64_t i = 0; i < dw.size();) {
		const uint32_t hdr = dw[i], type = hdr >> 30, op = (hdr >> 8) & 0xff, count = (hdr >> 16) & 0x3fff;
		if (type == 2) {
			++i;
			continue;
		}
		const uint64_t len = type == 3 && op == kNop && count == 0x3fff ? 1 : uint64_t{count} + 2;
		if (type != 3 || i + len > dw.size())
			return hang(i, type != 3 ? "unknown cp packet" : "truncated cp packet");
		const std::vector<uint32_t> p(dw.begin() + long(i), dw.begin() + long(i + len));
		bool ok = true;
		switch (op) {
		case kNop: case kAcquireMem: case kEventWrite:
			break;
		case kWriteData: {
			const uint32_t dst_sel = (p[1] >> 8) & 0xf;
			if (p.size() < 5 || (dst_sel != 0 && dst_sel != 1 && dst_sel != 2 && dst_sel != 5))
				return hang(i, "unsupported WRITE_DATA");
			if (dst_sel != 0)
				ok = p[1] & (1u << 16) ? write_op(addr64(p, 2), &p.back(), 4)
						       : write_op(addr64(p, 2), &p[4], (p.size() - 4) * 4);
			break;
		}
		case kReleaseMem: case kEventWriteEop: {
			const bool rm = op == kReleaseMem;
			if (p.size() != (rm ? 8u : 6u))
				return hang(i, "bad end-of-pipe packet length");
			const uint32_t data_sel = (rm ? p[2] : p[3]) >> 29;
			const uint64_t va = rm ? addr64(p, 3) : (uint64_t{p[2]} | (uint64_t{p[3] & 0xffff} << 32));
			const uint64_t v = data_sel >= 3 ? gpu_clock() : addr64(p, rm ? 5 : 4);
			if (data_sel > 4)
				return hang(i, "unsupported end-of-pipe DATA_SEL");
			if (data_sel)
				ok = write_op(va & ~uint64_t{data_sel == 1 ? 3u : 7u}, &v, data_sel == 1 ? 4 : 8);
			break;
		}
		case kWaitRegMem: {
			if (p.size() != 7)
				return hang(i, "bad WAIT_REG_MEM length");
			if (!((p[1] >> 4) & 1))
				break; // a register poll passes
			SdmaOp o;
			o.kind = SdmaOp::Kind::Poll;
			o.func = p[1] & 7;
			o.fill = p[4];
			o.mask = p[5];
			o.bytes = 4;
			ok = segs(addr64(p, 2), 4, false, &o.dst);
			if (ok)
				job->ops.push_back(std::move(o));
			break;
		}
		case kIndirectBuffer:
			if (p.size() != 4 || depth + 1 >= kMaxIbDepth)
				return hang(i, "bad or too deeply nested INDIRECT_BUFFER");
			if (int e = build_pm4_job(f, addr64(p, 1) & ~uint64_t{3}, (p[3] & 0xfffff) * 4, job, depth + 1))
				return e;
			break;
		case kDmaData: {
			if (p.size() != 7)
				return hang(i, "bad DMA_DATA length");
			const uint32_t src_sel = (p[1] >> 29) & 3, dst_sel = (p[1] >> 20) & 3, cmd = p[6];
			if ((cmd & (0xfu << 26)) || (dst_sel != 0 && dst_sel != 3) || (src_sel != 0 && src_sel != 2 && src_sel != 3))
				return hang(i, "unsupported DMA_DATA");
			SdmaOp o;
			o.kind = src_sel == 2 ? SdmaOp::Kind::Fill : SdmaOp::Kind::Copy;
			o.bytes = cmd & 0x3ffffff;
			o.fill = p[2];
			ok = !o.bytes || (segs(addr64(p, 4), o.bytes, true, &o.dst) &&
					  (src_sel == 2 || segs(addr64(p, 2), o.bytes, false, &o.src)));
			if (ok && o.bytes)
				job->ops.push_back(std::move(o));
			break;
		}
		default:
			return hang(i, "unsupported cp packet");
		}
		if (!ok) {
			job->error_after_ops = -ECANCELED; // a VM fault
			return 0;
		}
		if (job->error_after_ops)
			return 0;
		i += len;
	}
	return 0;
}

} // namespace kfdemu::detail
