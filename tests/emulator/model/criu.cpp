// SPDX-License-Identifier: GPL-2.0-only
//
// AMDKFD_IOC_CRIU_OP: PROCESS_INFO, CHECKPOINT, UNPAUSE, RESTORE, RESUME.
//
// The private data is the model's own layout (opaque to the plugin):
//   header   PrivHeader
//   devices  num_devices x PrivDevice
//   bos      num_bos x PrivBo
//   objects  num_objects x PrivObject (queues, events, then SVM ranges); a
//            queue's object is followed by its CU mask words
//            (PrivQueue::cu_mask_bits / 32 of them) and its control stack
//            (PrivQueue::ctl_stack_size bytes), as KFD follows each queue's
//            record with its MQD and control stack, an SVM range's by its
//            nattr attributes
// so priv_data_size == what CHECKPOINT writes == what RESTORE consumes.
//
// SVM ranges are saved as KFD's kfd_criu_checkpoint_svm saves them: each
// range's GET_ATTR view of PREFERRED_LOC, PREFETCH_LOC, SET_FLAGS,
// GRANULARITY and ACCESS per device (by user gpu_id). RESTORE keeps them;
// RESUME, when the process's memory is back, sets them again
// (svm_criu_resume in svm.cpp), a range prefetched to a GPU going back to
// that GPU's VRAM.
//
// A queue is saved as KFD's kfd_criu_queue_priv_data saves it: its
// properties (the ring, its size and the percentage, so an inactive queue
// comes back inactive), the GWS flag (restored through the same path as
// ALLOC_QUEUE_GWS: EINVAL on a GPU without GWS) and, for compute queues
// only, the CU mask, which KFD keeps in the compute MQD (the SDMA MQD has
// none: an SDMA queue's mask is not carried, as with KFD), and for a CP
// (PM4) queue the CP's read pointer, also from the MQD: a queue paused with
// packets pending goes on with them after RESUME. A compute queue's control
// stack is saved as KFD's checkpoint_mqd saves it (get_checkpoint_info: the
// MQD's cp_hqd_cntl_stack_size times the GPU's XCCs, one stack per XCC as
// Linux 6.17's f6c0f3d24478 saves them, in the 6.16 stable since; 0 for
// SDMA queues), its bytes as the CP left them, with the MQD's stack and
// wave-state offsets, and put back at RESTORE (restore_mqd: the size
// divided by the restoring GPU's XCCs; the model refuses, EINVAL, a size
// that is not a multiple of them, which the kernel does not check, and
// used wave state reaching past the queue's CWSR area). GET_QUEUE_WAVE_STATE
// after the restore answers as before the dump.
//
// CWSR: PROCESS_INFO's pause preempts every queue, and an AQL queue's
// kernel dispatch in flight has its waves saved as the hardware saves them
// (aql_cwsr_save in aql_queue.cpp; the layout in shader/cwsr.cpp): the
// control stack entries into the MQD's stack, carried here, and each wave's
// registers and each workgroup's LDS into the queue's CWSR area, process
// memory the plugin dumps as BO contents. After RESUME (or UNPAUSE) the
// queue resumes the waves from there. A dispatch that could not be saved
// (no CWSR area, one too small, a dispatch that stopped on an error) makes
// CHECKPOINT fail with EBUSY and a stderr line saying why.
#include "model/state.h"

#include <time.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>

namespace kfdemu::detail {

using namespace abi::kfd;

// The records of the private data (outside the anonymous namespace: the
// restore's steps, members of ModelImpl, take them).
constexpr uint32_t kPrivMagic = 0x554d454b; // "KEMU"
constexpr uint32_t kPrivVersion = 5; // 3: the CP read pointer, 4: SVM ranges, 5: control stacks
constexpr uint32_t kMaxGpus = 16;

struct PrivHeader {
	uint32_t magic, version, xnack, num_devices, num_bos, num_objects;
	uint64_t event_page_handle;
};
struct PrivDevice {
	uint32_t user_gpu_id, has_doorbells;
	uint64_t scratch_va;
};
struct PrivBo {
	uint64_t user_addr;
	uint32_t id, n_mapped;
	uint32_t mapped[kMaxGpus];
};
constexpr uint32_t kObjQueue = 0, kObjEvent = 1, kObjSvmRange = 2;
// (Named outside the union: clang refuses types declared in an anonymous
// union under -Werror.)
struct PrivQueue {
	CreateQueue args;
	uint32_t user_gpu_id, id;
	uint32_t gws, cu_mask_bits;
	// A CP queue's read pointer (dwords, monotonic), which KFD keeps in
	// the compute MQD (cp_hqd_pq_rptr); 0 for SDMA queues, which go on
	// from the read pointer in their restored memory.
	uint64_t mqd_rptr;
	// The control stack bytes after the CU mask (KFD's
	// q_data->ctl_stack_size: every XCC's), and the compute MQD's
	// cp_hqd_cntl_stack_size (per XCC), cp_hqd_cntl_stack_offset and
	// cp_hqd_wg_state_offset.
	uint32_t ctl_stack_size, mqd_ctl_stack_size, mqd_ctl_stack_offset, mqd_wg_state_offset;
};
struct PrivEvent {
	uint32_t id, type, auto_reset, signaled, node_id;
};
// kfd_criu_svm_range_priv_data's fields (in bytes here); nattr attributes
// follow the object.
struct PrivSvm {
	uint64_t start_addr, size;
	uint32_t nattr;
};
struct PrivObject {
	uint32_t type, pad;
	union {
		PrivQueue q;
		PrivEvent e;
		PrivSvm s;
		uint8_t raw[128];
	};
};
static_assert(sizeof(PrivHeader) == 32 && sizeof(PrivDevice) == 16 && sizeof(PrivBo) == 80);
static_assert(sizeof(PrivObject) == 136);

namespace {

// CLOCK_MONOTONIC in ns: the clock of wire::Request::made_ns (Caller::made_ns).
uint64_t monotonic_ns()
{
	timespec t{};
	::clock_gettime(CLOCK_MONOTONIC, &t);
	return uint64_t(t.tv_sec) * 1000000000u + uint64_t(t.tv_nsec);
}

// The CU mask words saved after a queue's object.
size_t saved_cu_mask_words(const Queue &q) { return q.compute() ? q.cu_mask.size() : 0; }

// The XCCs of the queue's GPU (the topology's num_xcc): one MQD and one
// control stack each.
uint64_t num_xcc(const KfdProcess &p, const Queue &q)
{
	for (const Pdd &pdd : p.pdds)
		if (pdd.user_gpu_id == q.user_gpu_id)
			return std::max<uint64_t>(pdd.dev->node->property("num_xcc", 1), 1);
	return 1;
}

// The control stack bytes saved after a queue's object (compute queues'
// only, as get_queue_checkpoint_info), every XCC's.
uint64_t saved_ctl_stack_bytes(const KfdProcess &p, const Queue &q)
{
	return q.compute() ? uint64_t{q.ctl_stack.size} * num_xcc(p, q) : 0;
}

template <typename T> void put(std::vector<uint8_t> &v, const T &t)
{
	const auto *p = reinterpret_cast<const uint8_t *>(&t);
	v.insert(v.end(), p, p + sizeof t);
}

template <typename T> bool take(const std::vector<uint8_t> &v, size_t &pos, T *t)
{
	if (pos + sizeof(T) > v.size())
		return false;
	std::memcpy(t, v.data() + pos, sizeof(T));
	pos += sizeof(T);
	return true;
}

// The attributes saved per SVM range: 4 common ones and ACCESS per device.
size_t svm_nattr(const KfdProcess &p) { return 4 + p.pdds.size(); }

uint32_t num_objects(const KfdProcess &p)
{
	return static_cast<uint32_t>(p.queues.size() + p.events.size() + p.svm.size());
}

bool excluded(const Bo &bo) { return bo.va && bo.va <= kGpuvmBase; }

uint64_t bo_offset(const Bo &bo, uint32_t actual_gpu_id)
{
	if (bo.type == BoType::Doorbell)
		return MMAP_TYPE_DOORBELL | mmap_gpu_id(actual_gpu_id);
	if (bo.type == BoType::Mmio)
		return MMAP_TYPE_MMIO | mmap_gpu_id(actual_gpu_id);
	return bo.fake_offset;
}

// The queue a RESTORE recreates from its record `r` (and the CU mask words
// after it, consumed from `priv` at `pos`): 0, or -errno.
int queue_of_record(KfdProcess &p, const PrivQueue &r, const std::vector<uint8_t> &priv, size_t &pos, Queue *q)
{
	Pdd *pdd = p.pdd_by_user_id(r.user_gpu_id);
	if (!pdd || p.queues.count(r.id))
		return -EINVAL;
	q->id = r.id;
	q->user_gpu_id = r.user_gpu_id;
	q->args = r.args;
	if (r.cu_mask_bits % 32 || r.cu_mask_bits > MAX_CU_MASK_BITS)
		return -EINVAL;
	q->cu_mask.resize(r.cu_mask_bits / 32);
	for (uint32_t &w : q->cu_mask)
		if (!take(priv, pos, &w))
			return -EINVAL;
	// restore_mqd: the control stacks back behind the MQD, as saved (the
	// model keeps bytes only when some are not 0).
	Queue::ControlStack &cs = q->ctl_stack;
	cs = {r.mqd_ctl_stack_size, r.mqd_ctl_stack_offset, r.mqd_wg_state_offset, {}};
	if (cs.offset > cs.size || cs.wg_state_offset < cs.size ||
	    (cs.offset < cs.size && cs.wg_state_offset > r.args.ctx_save_restore_size) ||
	    r.ctl_stack_size != (q->compute() ? uint64_t{cs.size} * num_xcc(p, *q) : 0) ||
	    r.ctl_stack_size > priv.size() - pos)
		return -EINVAL;
	const auto first = priv.begin() + static_cast<std::ptrdiff_t>(pos);
	const auto last = first + r.ctl_stack_size;
	if (std::any_of(first, last, [](uint8_t b) { return b != 0; }))
		cs.bytes.assign(first, last);
	pos += r.ctl_stack_size;
	// pqm_set_gws with the restoring GPU's GWS: none is EINVAL.
	if (r.gws && pdd->dev->node->property("num_gws") == 0)
		return -EINVAL;
	if (r.gws && p.gws_queue(r.user_gpu_id))
		return -EBUSY;
	q->gws = r.gws != 0;
	return 0;
}

} // namespace

uint32_t ModelImpl::criu_num_bos(const KfdProcess &p) const
{
	uint32_t n = 0;
	for (auto &pdd : p.pdds)
		for (auto &[id, bo] : pdd.bos)
			if (!excluded(*bo))
				++n;
	return n;
}

uint64_t ModelImpl::criu_priv_size(const KfdProcess &p) const
{
	uint64_t masks = 0;
	for (const auto &[qid, q] : p.queues)
		masks += saved_cu_mask_words(q) * sizeof(uint32_t) + saved_ctl_stack_bytes(p, q);
	return sizeof(PrivHeader) + p.pdds.size() * sizeof(PrivDevice) + criu_num_bos(p) * sizeof(PrivBo) +
	       num_objects(p) * sizeof(PrivObject) + masks + p.svm.size() * svm_nattr(p) * sizeof(SvmAttribute);
}

long ModelImpl::criu_op(Caller &c, FileEntry &f, CriuArgs &a)
{
	if (a.op == CRIU_RESUME) {
		// Looked up by pid in the caller's namespace.
		pid_t pid = static_cast<pid_t>(a.pid);
		if (!c.process_exists(pid))
			return -ESRCH;
		auto it = procs_.find(pid);
		if (it == procs_.end())
			return -ESRCH;
		// amdgpu_amdkfd_criu_resume(): -EINVAL unless RESTORE blocked the
		// process's MMU notifications and no RESUME has cleared them yet.
		// A dump's pause (PROCESS_INFO) is not a restore: only UNPAUSE
		// ends it, through the target's own file.
		KfdProcess &p = *it->second;
		if (!p.restored || !p.evicted)
			return -EINVAL;
		if (int e = svm_criu_resume(p))
			return e;
		if (p.evict_count > 0)
			--p.evict_count;
		p.evicted = false;
		return 0;
	}
	auto it = procs_.find(f.kfd_owner);
	if (it == procs_.end())
		return -ESRCH;
	KfdProcess &p = *it->second;
	switch (a.op) {
	case CRIU_PROCESS_INFO:
		return criu_process_info(c, p, a);
	case CRIU_CHECKPOINT:
		return criu_checkpoint(c, p, a);
	case CRIU_UNPAUSE:
		if (!p.queues_paused)
			return -EINVAL;
		p.queues_paused = false;
		if (p.evict_count > 0)
			--p.evict_count;
		return 0;
	case CRIU_RESTORE:
		return criu_restore(c, p, a);
	default:
		return -EINVAL;
	}
}

long ModelImpl::criu_process_info(Caller &c, KfdProcess &p, CriuArgs &a)
{
	// get_checkpoint_info's check_mul_overflow: a control stack whose
	// size for all XCCs does not fit KFD's 32 bits.
	for (const auto &[qid, q] : p.queues)
		if (saved_ctl_stack_bytes(p, q) > UINT32_MAX)
			return -EINVAL;
	p.queues_paused = true; // evicts every queue of the target
	p.paused_at_ns = monotonic_ns();
	++p.evict_count;
	events_cv_.notify_all(); // the target's waits end (wait_events)
	// The CP preempts the queues: a dispatch in flight has its waves
	// saved (CWSR) into its queue's control stack and CWSR area.
	for (auto &[qid, q] : p.queues)
		aql_cwsr_save(p, q, saved_ctl_stack_bytes(p, q));
	// As the kernel: the target's pid in its own pid namespace.
	a.pid = static_cast<uint32_t>(c.own_ns_pid(p.tgid));
	a.num_devices = static_cast<uint32_t>(p.pdds.size());
	a.num_bos = criu_num_bos(p);
	a.num_objects = num_objects(p);
	a.priv_data_size = criu_priv_size(p);
	return 0;
}

long ModelImpl::criu_checkpoint(Caller &c, KfdProcess &p, CriuArgs &a)
{
	if (!a.devices || !a.bos || !a.priv_data)
		return -EINVAL;
	if (p.pdds.empty())
		return -ENODEV;
	if (!p.queues_paused)
		return -EINVAL;
	if (a.num_devices != p.pdds.size() || a.num_bos != criu_num_bos(p) ||
	    a.num_objects != num_objects(p) || a.priv_data_size != criu_priv_size(p))
		return -EINVAL;
	// A kernel dispatch the pause could not save (aql_cwsr_save says why):
	// its waves are only in the shader core, which no record carries, so it
	// is refused rather than restored without them.
	for (const auto &[qid, q] : p.queues)
		if (q.engine && q.engine->in_flight) {
			std::fprintf(stderr, "kfd-emu: CRIU CHECKPOINT of process %d refused: AQL queue %u has a kernel "
					     "dispatch in flight whose waves could not be saved: %s\n", int(p.tgid), qid,
				     q.engine->in_flight->unsaved.c_str());
			return -EBUSY;
		}

	std::vector<uint8_t> priv;
	priv.reserve(a.priv_data_size);
	PrivHeader h{kPrivMagic, kPrivVersion, static_cast<uint32_t>(p.xnack), a.num_devices,
		     a.num_bos, a.num_objects, p.event_page_handle};
	put(priv, h);

	std::vector<CriuDeviceBucket> devs(p.pdds.size());
	for (size_t i = 0; i < p.pdds.size(); ++i) {
		devs[i].user_gpu_id = p.pdds[i].user_gpu_id;
		devs[i].actual_gpu_id = p.pdds[i].dev->gpu_id;
		PrivDevice pd{p.pdds[i].user_gpu_id, p.pdds[i].doorbells ? 1u : 0u, p.pdds[i].scratch_va};
		put(priv, pd);
	}

	std::vector<CriuBoBucket> bos;
	std::vector<std::pair<size_t, std::shared_ptr<Bo>>> exports;
	criu_checkpoint_bos(p, priv, bos, exports);
	if (int e = criu_checkpoint_objects(p, priv))
		return e;
	if (priv.size() != a.priv_data_size)
		return -EINVAL; // internal inconsistency

	if (c.write(a.devices, devs.data(), devs.size() * sizeof(CriuDeviceBucket)) ||
	    (!bos.empty() && c.write(a.bos, bos.data(), bos.size() * sizeof(CriuBoBucket))) ||
	    c.write(a.priv_data, priv.data(), priv.size()))
		return -EFAULT;
	// dma-buf fds land in the caller (the dumper), without O_CLOEXEC.
	for (auto &[i, bo] : exports)
		export_dmabuf(c, bo, false, a.bos + i * sizeof(CriuBoBucket) + offsetof(CriuBoBucket, dmabuf_fd),
			      false);
	return 0;
}

void ModelImpl::criu_checkpoint_bos(KfdProcess &p, std::vector<uint8_t> &priv, std::vector<CriuBoBucket> &bos,
				    std::vector<std::pair<size_t, std::shared_ptr<Bo>>> &exports)
{
	for (auto &pdd : p.pdds)
		for (auto &[id, bo] : pdd.bos) {
			if (excluded(*bo))
				continue;
			CriuBoBucket b{};
			b.addr = bo->va;
			b.size = bo->size;
			b.offset = bo_offset(*bo, pdd.dev->gpu_id);
			b.gpu_id = pdd.user_gpu_id;
			b.alloc_flags = bo->kfd_flags;
			b.dmabuf_fd = INVALID_FD;
			if (bo->type == BoType::Vram || bo->type == BoType::Gtt)
				exports.emplace_back(bos.size(), bo);
			PrivBo pb{};
			pb.user_addr = bo->is_userptr() ? bo->userptr_addr : 0;
			pb.id = id;
			auto m = p.mapped_on.find(bo.get());
			if (m != p.mapped_on.end())
				for (size_t idx : m->second)
					if (pb.n_mapped < kMaxGpus)
						pb.mapped[pb.n_mapped++] = p.pdds[idx].user_gpu_id;
			put(priv, pb);
			bos.push_back(b);
		}

}

int ModelImpl::criu_checkpoint_objects(KfdProcess &p, std::vector<uint8_t> &priv)
{
	for (auto &[qid, q] : p.queues) {
		PrivObject o{};
		o.type = kObjQueue;
		o.q.args = q.args;
		o.q.user_gpu_id = q.user_gpu_id;
		o.q.id = qid;
		o.q.gws = q.gws;
		o.q.cu_mask_bits = static_cast<uint32_t>(saved_cu_mask_words(q) * 32);
		o.q.mqd_rptr = q.engine && q.engine->cp ? q.engine->rptr : 0;
		const uint64_t stack = saved_ctl_stack_bytes(p, q);
		o.q.ctl_stack_size = static_cast<uint32_t>(stack);
		if (stack) {
			o.q.mqd_ctl_stack_size = q.ctl_stack.size;
			o.q.mqd_ctl_stack_offset = q.ctl_stack.offset;
			o.q.mqd_wg_state_offset = q.ctl_stack.wg_state_offset;
		}
		put(priv, o);
		for (size_t w = 0; w < saved_cu_mask_words(q); ++w)
			put(priv, q.cu_mask[w]);
		if (q.ctl_stack.bytes.size() == stack)
			priv.insert(priv.end(), q.ctl_stack.bytes.begin(), q.ctl_stack.bytes.end());
		else
			priv.resize(priv.size() + stack); // never written: zeros
	}
	for (auto &[eid, e] : p.events) {
		PrivObject o{};
		o.type = kObjEvent;
		o.e.id = eid;
		o.e.type = e.type;
		o.e.auto_reset = e.auto_reset;
		o.e.signaled = e.signaled;
		o.e.node_id = e.node_id;
		put(priv, o);
	}
	for (auto &[start, r] : p.svm) {
		std::vector<SvmAttribute> attrs{{SVM_ATTR_PREFERRED_LOC, 0}, {SVM_ATTR_PREFETCH_LOC, 0},
						{SVM_ATTR_SET_FLAGS, 0}, {SVM_ATTR_GRANULARITY, 0}};
		for (auto &pdd : p.pdds)
			attrs.push_back({SVM_ATTR_ACCESS, pdd.user_gpu_id});
		if (int e = svm_get_attr(p, r.start, r.npages(), attrs, false))
			return e;
		PrivObject o{};
		o.type = kObjSvmRange;
		o.s.start_addr = r.start * kPage;
		o.s.size = r.npages() * kPage;
		o.s.nattr = static_cast<uint32_t>(attrs.size());
		put(priv, o);
		for (auto &at : attrs)
			put(priv, at);
	}
	return 0;
}

// The device buckets and their private records: each device bound to the
// render file CRIU restored for it, with its user gpu_id and scratch VA.
int ModelImpl::criu_restore_devices(Caller &c, KfdProcess &p, const CriuArgs &a, const std::vector<uint8_t> &priv,
				    size_t &pos)
{
	if (a.num_devices != p.pdds.size())
		return -EINVAL;
	std::vector<CriuDeviceBucket> devs(a.num_devices);
	if (c.read(a.devices, devs.data(), devs.size() * sizeof(CriuDeviceBucket)))
		return -EFAULT;
	for (auto &db : devs) {
		PrivDevice pd{};
		if (!take(priv, pos, &pd))
			return -EINVAL;
		if (db.user_gpu_id == 0)
			return -EINVAL;
		Pdd *pdd = p.pdd_by_actual_id(db.actual_gpu_id);
		if (!pdd)
			return -EINVAL;
		auto key = c.resolve_fd(static_cast<int>(db.drm_fd));
		if (!key)
			return -EINVAL;
		auto fe = files_.find(*key);
		if (fe == files_.end() || fe->second.kind != FileKind::Render)
			return -EINVAL;
		if (pdd->drm)
			return -EINVAL;
		if (int e = bind_drm(p, *pdd, fe->second.drm))
			return e;
		pdd->user_gpu_id = db.user_gpu_id;
		pdd->scratch_va = pd.scratch_va;
		if (!pdd->doorbells) {
			int err = 0;
			pdd->doorbells = Backing::create(pdd->dev->doorbell_slice(), "kfdemu-doorbell", &err);
			if (!pdd->doorbells)
				return err;
		}
	}
	return 0;
}

// One BO bucket `b` and its private record: the BO made again at its VA,
// mapped where it was, and the bucket's restored offset set. *bo is the
// new BO.
int ModelImpl::criu_restore_bo(KfdProcess &p, CriuBoBucket &b, const PrivBo &pb, std::shared_ptr<Bo> *out)
{
	Pdd *pdd = p.pdd_by_user_id(b.gpu_id);
	if (!pdd || !pdd->drm)
		return -EINVAL;
	if (!(b.alloc_flags & ALLOC_TYPE_MASK) || b.size == 0)
		return -EINVAL;
	if (pdd->bos.count(pb.id))
		return -ENOMEM; // id collision
	BoType type = b.alloc_flags & ALLOC_VRAM ? BoType::Vram
		    : b.alloc_flags & ALLOC_GTT ? BoType::Gtt
		    : b.alloc_flags & ALLOC_USERPTR ? BoType::Userptr
		    : b.alloc_flags & ALLOC_DOORBELL ? BoType::Doorbell
						     : BoType::Mmio;
	int err = 0;
	auto bo = new_bo(*pdd->dev, type, b.size, &err, VramClient{p.tgid, true});
	if (!bo)
		return err;
	bo->kfd = true;
	bo->kfd_flags = b.alloc_flags;
	bo->kfd_id = pb.id;
	bo->va = b.addr;
	bo->domains = type == BoType::Vram ? abi::drm::DOMAIN_VRAM : abi::drm::DOMAIN_GTT;
	bo->domain_flags = abi::gem_flags_of_kfd_alloc(b.alloc_flags);
	bo->alignment = 1; // as ALLOC_MEMORY_OF_GPU
	if (type == BoType::Userptr) {
		bo->userptr_tgid = p.tgid;
		bo->userptr_addr = pb.user_addr;
		bo->ledger = ledger_;
		ledger_->add(p.tgid, bo->size, false);
	} else if (type == BoType::Doorbell) {
		bo->mem = pdd->doorbells;
	} else if (type == BoType::Mmio) {
		bo->mem = pdd->dev->mmio;
	}
	bo->fake_offset = pdd->dev->alloc_fake_offset(bo);
	pdd->drm->kfd_mmap[bo->fake_offset] = bo;
	pdd->bos[pb.id] = bo;
	for (uint32_t k = 0; k < pb.n_mapped && k < kMaxGpus; ++k) {
		Pdd *peer = p.pdd_by_user_id(pb.mapped[k]);
		if (!peer)
			return -EINVAL;
		if (int e = kfd_map_one(p, *pdd, bo, *peer))
			return e;
	}
	b.dmabuf_fd = INVALID_FD;
	if (type == BoType::Doorbell || type == BoType::Mmio)
		b.restored_offset = bo_offset(*bo, pdd->dev->gpu_id);
	else if (type != BoType::Userptr)
		b.restored_offset = bo->fake_offset;
	*out = bo;
	return 0;
}

// The objects' private records: queues (started again, an SDMA queue from
// the read pointer in its restored memory once the process is resumed),
// events and SVM ranges (set again at RESUME).
int ModelImpl::criu_restore_objects(KfdProcess &p, uint32_t num_objects, const std::vector<uint8_t> &priv,
				    size_t &pos)
{
	for (uint32_t i = 0; i < num_objects; ++i) {
		PrivObject o{};
		if (!take(priv, pos, &o))
			return -EINVAL;
		if (o.type == kObjQueue) {
			Queue q;
			if (int e = queue_of_record(p, o.q, priv, pos, &q))
				return e;
			Pdd *qpdd = p.pdd_by_user_id(q.user_gpu_id);
			if (!qpdd->doorbells) {
				int err = 0;
				qpdd->doorbells = Backing::create(qpdd->dev->doorbell_slice(), "kfdemu-doorbell", &err);
				if (!qpdd->doorbells)
					return err;
			}
			p.queues[q.id] = q;
			Queue &restored = p.queues[q.id];
			start_user_queue(p, restored, true);
			if (restored.engine && restored.engine->cp) { // the CP goes on where its MQD says
				restored.engine->rptr = o.q.mqd_rptr;
				restored.engine->started = true;
			}
		} else if (o.type == kObjEvent) {
			if (p.events.count(o.e.id))
				return -EINVAL;
			Event e;
			e.id = o.e.id;
			e.type = o.e.type;
			e.auto_reset = o.e.auto_reset;
			e.signaled = o.e.signaled;
			e.node_id = o.e.node_id;
			p.events[e.id] = e;
		} else if (o.type == kObjSvmRange) {
			// Kept for RESUME (kfd_criu_restore_svm): the same number
			// of attributes as this process has devices to save.
			if (o.s.nattr != svm_nattr(p) || !o.s.size || (o.s.start_addr | o.s.size) % kPage)
				return -EINVAL;
			SvmSaved sv{o.s.start_addr / kPage, o.s.size / kPage, std::vector<SvmAttribute>(o.s.nattr)};
			for (auto &at : sv.attrs)
				if (!take(priv, pos, &at))
					return -EINVAL;
			p.svm_restored.push_back(std::move(sv));
		} else {
			return -EINVAL;
		}
	}
	return 0;
}

long ModelImpl::criu_restore(Caller &c, KfdProcess &p, CriuArgs &a)
{
	if ((a.num_bos && !a.bos) || !a.devices || !a.priv_data || !a.priv_data_size || !a.num_devices)
		return -EINVAL;
	// The blob must hold what the counts announce (and stay reasonable)
	// before anything is allocated from the counts.
	if (a.priv_data_size > (256ull << 20) ||
	    a.priv_data_size < sizeof(PrivHeader) + uint64_t{a.num_devices} * sizeof(PrivDevice) +
				   uint64_t{a.num_bos} * sizeof(PrivBo) + uint64_t{a.num_objects} * sizeof(PrivObject))
		return -EINVAL;
	p.evicted = true; // until RESUME
	++p.evict_count;

	std::vector<uint8_t> priv(a.priv_data_size);
	if (c.read(a.priv_data, priv.data(), priv.size()))
		return -EFAULT;
	size_t pos = 0;
	PrivHeader h{};
	if (!take(priv, pos, &h) || h.magic != kPrivMagic || h.version != kPrivVersion)
		return -EINVAL;
	if (h.num_devices != a.num_devices || h.num_bos != a.num_bos || h.num_objects != a.num_objects)
		return -EINVAL;
	if (int e = criu_restore_devices(c, p, a, priv, pos))
		return e;

	std::vector<CriuBoBucket> bos(a.num_bos);
	if (a.num_bos && c.read(a.bos, bos.data(), bos.size() * sizeof(CriuBoBucket)))
		return -EFAULT;
	std::vector<std::pair<size_t, std::shared_ptr<Bo>>> exports;
	for (size_t i = 0; i < bos.size(); ++i) {
		PrivBo pb{};
		if (!take(priv, pos, &pb))
			return -EINVAL;
		std::shared_ptr<Bo> bo;
		if (int e = criu_restore_bo(p, bos[i], pb, &bo))
			return e;
		if (bo->type == BoType::Vram || bo->type == BoType::Gtt)
			exports.emplace_back(i, bo);
	}
	if (int e = criu_restore_objects(p, a.num_objects, priv, pos))
		return e;
	if (pos != a.priv_data_size)
		return -EINVAL;
	p.xnack = static_cast<int32_t>(h.xnack);
	if (h.event_page_handle) {
		Pdd *pdd = p.pdd_by_user_id(static_cast<uint32_t>(h.event_page_handle >> 32));
		if (pdd) {
			auto it = pdd->bos.find(static_cast<uint32_t>(h.event_page_handle));
			if (it != pdd->bos.end()) {
				p.event_page = it->second;
				p.event_page_handle = h.event_page_handle;
			}
		}
	}
	if (!bos.empty() && c.write(a.bos, bos.data(), bos.size() * sizeof(CriuBoBucket)))
		return -EFAULT;
	for (auto &[i, bo] : exports)
		export_dmabuf(c, bo, false, a.bos + i * sizeof(CriuBoBucket) + offsetof(CriuBoBucket, dmabuf_fd),
			      false);
	p.restored = true;
	return 0;
}

} // namespace kfdemu::detail
