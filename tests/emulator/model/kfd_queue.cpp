// SPDX-License-Identifier: GPL-2.0-only
//
// The per-queue state a client gives at CREATE_QUEUE and changes after it,
// as amdkfd keeps it (kfd_chardev.c, kfd_process_queue_manager.c, the
// device queue manager's update_queue):
//
//   CREATE_QUEUE     its arguments' checks (queue_properties_from_user).
//   UPDATE_QUEUE     a new ring, ring size, percentage and priority. The
//                    size is 0 or a power of 2, raised to the 1 KiB minimum
//                    (KFD_MIN_QUEUE_RING_SIZE, as CREATE_QUEUE does). A NULL
//                    ring or a percentage of 0 make the queue inactive
//                    (QUEUE_IS_ACTIVE), which is not an error; it keeps its
//                    read pointer and runs what is pending once an update
//                    gives it a ring again.
//   SET_CU_MASK      the CUs the queue may use (kept per queue; the shader
//                    core has no CUs to choose from, so the mask changes
//                    nothing else).
//   ALLOC_QUEUE_GWS  the GPU's global wave sync for one queue per process
//                    and GPU, on GPUs whose topology has num_gws != 0.
//   GET_QUEUE_WAVE_STATE  the used sizes of a stopped compute queue's
//                    control stack and wave save area (what a CRIU pause
//                    saved of an AQL dispatch in flight, else none), with
//                    the save-area header.
//
// Errnos and their order are the kernel's, including its quirks: an
// unknown queue is EFAULT for UPDATE_QUEUE and SET_CU_MASK, EINVAL for
// ALLOC_QUEUE_GWS.
#include "model/state.h"

#include <algorithm>
#include <cerrno>
#include <vector>

namespace kfdemu::detail {

using namespace abi::kfd;

namespace {

// The highest user-space address + 1 (x86-64 TASK_SIZE): access_ok()
// refuses ranges beyond it.
constexpr uint64_t kTaskSize = 0x00007ffffffff000ull;

bool access_ok(uint64_t addr, uint64_t len) { return addr <= kTaskSize && len <= kTaskSize - addr; }

bool is_power_of_2(uint32_t v) { return v && !(v & (v - 1)); }

// The checks CREATE_QUEUE and UPDATE_QUEUE share, in the kernel's order:
// percentage and priority, the ring's address, its size (0 or a power of 2,
// then raised to the minimum). 0 or -errno; `ring_size` raised in place.
template <typename Args>
long ring_args_from_user(Args &a)
{
	if ((a.queue_percentage & 0xff) > MAX_QUEUE_PERCENTAGE || a.queue_priority > MAX_QUEUE_PRIORITY)
		return -EINVAL;
	if (a.ring_base_address && !access_ok(a.ring_base_address, sizeof(uint64_t)))
		return -EFAULT;
	if (a.ring_size && !is_power_of_2(a.ring_size))
		return -EINVAL;
	a.ring_size = std::max(a.ring_size, MIN_QUEUE_RING_SIZE);
	return 0;
}

} // namespace

const Queue *KfdProcess::gws_queue(uint32_t user_gpu_id) const
{
	for (const auto &[qid, q] : queues)
		if (q.gws && q.user_gpu_id == user_gpu_id)
			return &q;
	return nullptr;
}

// set_queue_properties_from_user (CREATE_QUEUE's checks), in its order:
// percentage and priority (bits 8-15 of the percentage are the PM4 target
// XCC), the ring's address (access_ok: in user space), its size (0 or a
// power of 2, then raised to the 1 KiB minimum of Linux 6.15, e90711946b53,
// in the 6.1-6.14 stables since; CREATE_QUEUE copies its arguments back, so
// the caller sees it), the read and write pointers, the EOP buffer and the
// CWSR area (when given), and last the queue type.
long queue_properties_from_user(CreateQueue &a)
{
	if (long err = ring_args_from_user(a))
		return err;
	if (!access_ok(a.read_pointer_address, sizeof(uint32_t)) || !access_ok(a.write_pointer_address, sizeof(uint32_t)))
		return -EFAULT;
	if ((a.eop_buffer_address && !access_ok(a.eop_buffer_address, sizeof(uint32_t))) ||
	    (a.ctx_save_restore_address && !access_ok(a.ctx_save_restore_address, sizeof(uint32_t))))
		return -EFAULT;
	if (a.queue_type > QUEUE_SDMA_XGMI)
		return -524; // ENOTSUPP
	return 0;
}

// The sizes kfd_queue_acquire_buffers (Linux 6.12) checks for a compute
// queue, in its order, each EINVAL: the EOP buffer's when one is given
// (the node's eop_buffer_size), the control stack's (the node's
// ctl_stack_size, also for a queue without a CWSR area), the CWSR area's
// (the node's cwsr_size: 6.12 wants it equal; later kernels take a larger
// one). Both are per XCC. Not modelled: the BOs' mappings it also checks
// (each buffer one whole mapping of the expected size).
long queue_sizes_against_node(const CreateQueue &a, const NodeDesc &n, std::string *why)
{
	if (a.queue_type != QUEUE_COMPUTE && a.queue_type != QUEUE_COMPUTE_AQL)
		return 0;
	const KfdCwsrSizes k = kfd_cwsr_sizes(n.property("gfx_target_version"), n.property("simd_count"),
					      n.property("simd_per_cu"), n.property("num_xcc"),
					      n.property("array_count"), n.property("simd_arrays_per_engine"),
					      n.property("lds_size_in_kb"));
	auto differs = [&](const char *what, uint64_t given, uint64_t node) {
		*why = std::string(what) + " " + std::to_string(given) + " is not the GPU's " + std::to_string(node);
		return -EINVAL;
	};
	if (a.eop_buffer_address && a.eop_buffer_size != k.eop_buffer)
		return differs("eop_buffer_size", a.eop_buffer_size, k.eop_buffer);
	if (a.ctl_stack_size != n.property("ctl_stack_size"))
		return differs("ctl_stack_size", a.ctl_stack_size, n.property("ctl_stack_size"));
	if (a.ctx_save_restore_size != n.property("cwsr_size"))
		return differs("ctx_save_restore_size", a.ctx_save_restore_size, n.property("cwsr_size"));
	return 0;
}

// kfd_ioctl_update_queue + pqm_update_queue_properties. Bits 8-15 of the
// percentage are the PM4 target XCC (kept, not checked).
long ModelImpl::kfd_update_queue(KfdProcess &p, UpdateQueue &a)
{
	if (long err = ring_args_from_user(a))
		return err;
	auto it = p.queues.find(a.queue_id);
	if (it == p.queues.end())
		return -EFAULT;
	CreateQueue &q = it->second.args;
	q.ring_base_address = a.ring_base_address;
	q.ring_size = a.ring_size;
	q.queue_percentage = a.queue_percentage;
	q.queue_priority = a.queue_priority;
	return 0;
}

// kfd_ioctl_set_cu_mask + pqm_update_mqd: the count must be a non-zero
// multiple of 32 and is cut to MAX_CU_MASK_BITS; the words are read before
// the queue is looked up; from GFX 10 (WGPs) CUs must be enabled in pairs.
long ModelImpl::kfd_set_cu_mask(Caller &c, KfdProcess &p, const SetCuMask &a)
{
	if (a.num_cu_mask % 32 != 0 || a.num_cu_mask == 0)
		return -EINVAL;
	const uint32_t bits = std::min(a.num_cu_mask, MAX_CU_MASK_BITS);
	std::vector<uint32_t> mask(bits / 32);
	if (c.read(a.cu_mask_ptr, mask.data(), mask.size() * sizeof(uint32_t)))
		return -EFAULT;
	auto it = p.queues.find(a.queue_id);
	if (it == p.queues.end())
		return -EFAULT;
	const Pdd *pdd = p.pdd_by_user_id(it->second.user_gpu_id);
	if (pdd && pdd->dev->node->property("gfx_target_version") >= 100000)
		for (uint32_t i = 0; i < bits; i += 2) {
			const uint32_t pair = (mask[i / 32] >> (i % 32)) & 3;
			if (pair == 1 || pair == 2)
				return -EINVAL;
		}
	it->second.cu_mask = std::move(mask);
	return 0;
}

// kfd_ioctl_alloc_queue_gws + pqm_set_gws: num_gws != 0 asks for the GWS,
// 0 gives it back. The emulated GPUs run the hardware scheduler (HWS), so
// the kernel's "no HWS" refusal does not arise; first_gws is always 0.
long ModelImpl::kfd_alloc_queue_gws(KfdProcess &p, AllocQueueGws &a)
{
	auto it = p.queues.find(a.queue_id);
	if (it == p.queues.end())
		return -EINVAL;
	Queue &q = it->second;
	const Pdd *pdd = p.pdd_by_user_id(q.user_gpu_id);
	if (!pdd || pdd->dev->node->property("num_gws") == 0)
		return -ENODEV; // the GPU has no GWS (dev->gws is NULL)
	const Queue *holder = p.gws_queue(q.user_gpu_id);
	a.first_gws = 0;
	if (a.num_gws && holder)
		return -EBUSY; // one GWS queue per process and GPU
	if (!a.num_gws && !holder)
		return -EINVAL;
	// Given back through another queue of the same GPU: the kernel zeroes
	// its per-device count but dereferences that queue's NULL GWS before
	// GFX 9.4.3; the model simply frees the GPU's GWS.
	if (!a.num_gws)
		for (auto &[qid, other] : p.queues)
			if (other.user_gpu_id == q.user_gpu_id)
				other.gws = false;
	q.gws = a.num_gws != 0;
	return 0;
}

// kfd_ioctl_get_queue_wave_state -> pqm_get_wave_state -> the device queue
// manager's get_wave_state -> the MQD manager's. Only a compute queue the
// CP is not running (inactive, evicted, paused for a dump) has saved its
// waves: else EINVAL (CWSR is enabled on every emulated GPU). The used sizes
// are the MQD's: the control stack grows down from its size to
// cp_hqd_cntl_stack_offset, the wave state up from it to
// cp_hqd_wg_state_offset. Every MQD manager (Linux 6.4 on, the debugger's
// series) writes the save-area header's wave_state part at
// ctl_stack_address; GFX 9's also copies the used control stack to its
// offset there (from GFX 10 the stack is in the user's CWSR area).
long ModelImpl::kfd_get_queue_wave_state(Caller &c, KfdProcess &p, GetQueueWaveState &a)
{
	auto it = p.queues.find(a.queue_id);
	if (it == p.queues.end())
		return -EFAULT;
	const Queue &q = it->second;
	const bool running = q.active() && !p.queues_paused && p.evict_count == 0;
	if (!q.compute() || running)
		return -EINVAL;
	const Queue::ControlStack &cs = q.ctl_stack;
	a.ctl_stack_used_size = cs.size - cs.offset;
	a.save_area_used_size = cs.wg_state_offset - cs.size;
	const WaveStateHeader h{cs.offset, a.ctl_stack_used_size, cs.wg_state_offset, a.save_area_used_size};
	if (c.write(a.ctl_stack_address, &h, sizeof h))
		return -EFAULT;
	const Pdd *pdd = p.pdd_by_user_id(q.user_gpu_id);
	if (!a.ctl_stack_used_size || !pdd || pdd->dev->node->property("gfx_target_version") >= 100000)
		return 0;
	std::vector<uint8_t> used(a.ctl_stack_used_size); // no bytes kept: never written, zeros
	if (cs.bytes.size() >= cs.size)
		std::copy(cs.bytes.begin() + cs.offset, cs.bytes.begin() + cs.size, used.begin());
	return c.write(a.ctl_stack_address + cs.offset, used.data(), used.size()) ? -EFAULT : 0;
}

} // namespace kfdemu::detail
