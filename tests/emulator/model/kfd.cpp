// SPDX-License-Identifier: GPL-2.0-only
//
// /dev/kfd: the per-process KFD context, its memory, queues, events, mmap
// offsets and the CRIU_OP protocol.
#include "model/state.h"

#include <time.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

namespace kfdemu::detail {

using namespace abi::kfd;

namespace {

uint64_t now_ns(clockid_t clk)
{
	timespec ts{};
	clock_gettime(clk, &ts);
	return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

BoType type_of_flags(uint32_t flags)
{
	if (flags & ALLOC_VRAM)
		return BoType::Vram;
	if (flags & ALLOC_GTT)
		return BoType::Gtt;
	if (flags & ALLOC_USERPTR)
		return BoType::Userptr;
	if (flags & ALLOC_DOORBELL)
		return BoType::Doorbell;
	return BoType::Mmio;
}

// The prologue kfd_chardev.c's handlers share: the calling process's
// device for `gpu_id` (kfd_process_device_data_by_id), -EINVAL when it has
// none; with `unbound` nonzero, that errno when the device has no VM bound
// yet (the handler's kfd_bind_process_to_device failed: -ESRCH or -ENODEV
// depending on the handler). 0 and *out set otherwise.
int find_pdd(KfdProcess &p, uint32_t gpu_id, Pdd **out, int unbound = 0)
{
	*out = p.pdd_by_user_id(gpu_id);
	if (!*out)
		return -EINVAL;
	if (unbound && !(*out)->drm)
		return unbound;
	return 0;
}

// The same for a BO handle (gpu_id << 32 | KFD id): its device (-EINVAL
// when unknown), then its BO (`missing` when the device has no such BO;
// MAP/UNMAP answer -ENOMEM there, the others -EINVAL).
int find_bo(KfdProcess &p, uint64_t handle, Pdd **pdd, std::shared_ptr<Bo> **bo, int missing = -EINVAL)
{
	if (int e = find_pdd(p, static_cast<uint32_t>(handle >> 32), pdd))
		return e;
	auto it = (*pdd)->bos.find(static_cast<uint32_t>(handle));
	if (it == (*pdd)->bos.end())
		return missing;
	*bo = &it->second;
	return 0;
}

} // namespace

int ModelImpl::bind_drm(KfdProcess &p, Pdd &pdd, const std::shared_ptr<DrmFile> &drm)
{
	if (pdd.drm)
		return pdd.drm == drm ? 0 : -EBUSY;
	if (drm->dev != pdd.dev || drm->compute_vm)
		return -EINVAL;
	drm->compute_vm = true;
	drm->kfd_owner = p.tgid;
	pdd.drm = drm;
	return 0;
}

void ModelImpl::free_kfd_bo(KfdProcess &p, Pdd &pdd, uint32_t id)
{
	auto it = pdd.bos.find(id);
	if (it == pdd.bos.end())
		return;
	p.mapped_on.erase(it->second.get());
	if (pdd.drm)
		pdd.drm->kfd_mmap.erase(it->second->fake_offset);
	pdd.bos.erase(it);
}

int ModelImpl::kfd_map_one(KfdProcess &p, Pdd &owner, const std::shared_ptr<Bo> &bo, Pdd &peer)
{
	(void)owner;
	auto &set = p.mapped_on[bo.get()];
	size_t idx = p.index_of(&peer);
	if (set.count(idx))
		return 0; // already mapped there
	if (!peer.drm)
		return -ENODEV; // kfd_bind_process_to_device: no VM
	if ((bo->va & (kPage - 1)) || bo->va < kVaReservedBottom || bo->va + page_align(bo->size) > kVmSize)
		return -EINVAL;
	Mapping m;
	m.start = bo->va;
	m.size = page_align(bo->size);
	m.bo = bo;
	m.kfd = true;
	m.flags = abi::drm::VM_PAGE_READABLE | abi::drm::VM_PAGE_EXECUTABLE;
	if (bo->kfd_flags & ALLOC_WRITABLE)
		m.flags |= abi::drm::VM_PAGE_WRITEABLE;
	if (int e = peer.drm->vm.insert(std::move(m)))
		return e;
	set.insert(idx);
	return 0;
}

int ModelImpl::kfd_unmap_one(KfdProcess &p, const std::shared_ptr<Bo> &bo, Pdd &peer)
{
	auto &set = p.mapped_on[bo.get()];
	size_t idx = p.index_of(&peer);
	if (!set.count(idx))
		return -EINVAL;
	if (peer.drm)
		peer.drm->vm.remove(bo.get(), bo->va);
	set.erase(idx);
	return 0;
}

// ---- the ioctl handlers, one per ioctl as kfd_chardev.c's kfd_ioctl_<name> ----

// What one KFD ioctl works on (kfd_ioctl's file, process and argument
// copy): the model with its lock held, the caller, the /dev/kfd file, its
// owner's context (null only for CRIU_OP, whose target may have none yet),
// the argument struct and the user address it came from.
struct KfdOps {
	ModelImpl &m;
	ModelImpl::Lock &lk;
	Caller &c;
	FileEntry &f;
	KfdProcess *p;
	void *buf;
	uint64_t uarg;
	size_t usize; // the caller's cmd's argument size

	template <typename T> T &arg() { return *static_cast<T *>(buf); }
	// The legacy and the new aperture queries' one entry for device i.
	ProcessDeviceApertures apertures(uint32_t i) const;

	long get_version();
	long create_queue();
	long destroy_queue();
	long set_memory_policy();
	long get_clock_counters();
	long get_process_apertures();
	long update_queue() { return m.kfd_update_queue(*p, arg<UpdateQueue>()); }
	long create_event();
	long destroy_event();
	long set_event();
	long reset_event();
	long wait_events() { return m.wait_events(lk, c, *p, arg<WaitEvents>()); }
	long deprecated() { return -EPERM; } // the debugger ioctls 0x0D-0x10
	long set_scratch_backing_va();
	long get_tile_config();
	long set_trap_handler();
	long get_process_apertures_new();
	long acquire_vm();
	long alloc_memory_of_gpu();
	long free_memory_of_gpu();
	long map_memory_to_gpu() { return map_or_unmap(true); }
	long unmap_memory_from_gpu() { return map_or_unmap(false); }
	long map_or_unmap(bool map);
	long set_cu_mask() { return m.kfd_set_cu_mask(c, *p, arg<SetCuMask>()); }
	long get_dmabuf_info() { return m.kfd_get_dmabuf_info(c, *p, arg<GetDmabufInfo>()); }
	long import_dmabuf();
	long alloc_queue_gws() { return m.kfd_alloc_queue_gws(*p, arg<AllocQueueGws>()); }
	long get_queue_wave_state() { return m.kfd_get_queue_wave_state(c, *p, arg<GetQueueWaveState>()); }
	long set_xnack_mode();
	long criu_op() { return m.criu_op(c, f, arg<CriuArgs>()); }
	long available_memory();
	long export_dmabuf();
	long runtime_enable() { return 0; }
	long svm() { return m.kfd_svm(c, *p, buf, uarg, usize); }
	long smi_events() { return m.kfd_smi_events(c, *p, arg<SmiEvents>(), uarg); }
};

long KfdOps::get_version()
{
	auto &a = arg<GetVersion>();
	a.major_version = 1;
	a.minor_version = m.machine_.kfd_minor_version;
	return 0;
}

ProcessDeviceApertures KfdOps::apertures(uint32_t i) const
{
	ProcessDeviceApertures ap{};
	ap.lds_base = 1ull << 48;
	ap.lds_limit = ap.lds_base | 0xffffffffull;
	ap.scratch_base = 2ull << 48;
	ap.scratch_limit = ap.scratch_base | 0xffffffffull;
	ap.gpuvm_base = kGpuvmBase;
	ap.gpuvm_limit = kGpuvmLimit;
	ap.gpu_id = p->pdds[i].user_gpu_id;
	return ap;
}

long KfdOps::get_process_apertures_new()
{
	auto &a = arg<GetProcessAperturesNew>();
	if (a.num_of_nodes == 0) {
		a.num_of_nodes = static_cast<uint32_t>(p->pdds.size());
		return 0;
	}
	uint32_t n = std::min<uint32_t>(a.num_of_nodes, static_cast<uint32_t>(p->pdds.size()));
	std::vector<ProcessDeviceApertures> ap(n);
	for (uint32_t i = 0; i < n; ++i)
		ap[i] = apertures(i);
	if (c.write(a.kfd_process_device_apertures_ptr, ap.data(), n * sizeof(ProcessDeviceApertures)))
		return -EFAULT;
	a.num_of_nodes = n;
	return 0;
}

long KfdOps::get_process_apertures()
{
	// Legacy: 7 entries of 56 bytes, then the u32 count.
	auto *base = static_cast<uint8_t *>(buf);
	uint32_t n = std::min<uint32_t>(7, static_cast<uint32_t>(p->pdds.size()));
	for (uint32_t i = 0; i < n; ++i) {
		ProcessDeviceApertures ap = apertures(i);
		std::memcpy(base + i * sizeof ap, &ap, sizeof ap);
	}
	std::memcpy(base + 7 * sizeof(ProcessDeviceApertures), &n, sizeof n);
	return 0;
}

long KfdOps::acquire_vm()
{
	auto &a = arg<AcquireVm>();
	Pdd *pdd;
	if (int e = find_pdd(*p, a.gpu_id, &pdd))
		return e;
	auto key = c.resolve_fd(static_cast<int>(a.drm_fd));
	if (!key)
		return -EINVAL;
	auto fe = m.files_.find(*key);
	if (fe == m.files_.end() || fe->second.kind != FileKind::Render)
		return -EINVAL;
	if (pdd->drm == fe->second.drm)
		return 0;
	return m.bind_drm(*p, *pdd, fe->second.drm);
}

long KfdOps::alloc_memory_of_gpu()
{
	auto &a = arg<AllocMemoryOfGpu>();
	Pdd *pdd;
	if (int e = find_pdd(*p, a.gpu_id, &pdd))
		return e;
	if (a.size == 0)
		return -EINVAL;
	// A VA (or a userptr's CPU address) inside an SVM range: EADDRINUSE.
	if (m.svm_overlaps(*p, a.va_addr / kPage, (a.va_addr + a.size - 1) / kPage) ||
	    ((a.flags & ALLOC_USERPTR) && m.svm_overlaps(*p, a.mmap_offset / kPage, (a.mmap_offset + a.size - 1) / kPage)))
		return -EADDRINUSE;
	// Kernel order: gpu_id, small-BAR PUBLIC, bind (VM), then the
	// doorbell/MMIO sizes. The type is the first of VRAM, GTT,
	// USERPTR, DOORBELL, MMIO_REMAP set; none is EINVAL.
	Device &d = *pdd->dev;
	if ((a.flags & ALLOC_VRAM) && (a.flags & ALLOC_PUBLIC) && !d.node->large_bar)
		return -EINVAL;
	if (!pdd->drm)
		return -ENODEV;
	if (!(a.flags & ALLOC_TYPE_MASK))
		return -EINVAL;
	BoType type = type_of_flags(a.flags);
	if (type == BoType::Doorbell && a.size != d.doorbell_slice())
		return -EINVAL;
	if (type == BoType::Mmio && a.size != kPage)
		return -EINVAL;
	uint64_t size = type == BoType::Userptr ? a.size : page_align(a.size);
	if (type == BoType::Userptr && ((a.mmap_offset & (kPage - 1)) || (a.size & (kPage - 1))))
		return -EINVAL;
	uint32_t kid = 0;
	while (pdd->bos.count(kid))
		++kid;
	int err = 0;
	std::shared_ptr<Bo> bo = m.new_bo(d, type, size, &err, VramClient{p->tgid, true});
	if (!bo)
		return err;
	bo->kfd = true;
	bo->kfd_flags = a.flags;
	bo->kfd_id = kid;
	bo->va = a.va_addr;
	bo->domains = type == BoType::Vram ? abi::drm::DOMAIN_VRAM : abi::drm::DOMAIN_GTT;
	bo->domain_flags = abi::gem_flags_of_kfd_alloc(a.flags);
	bo->alignment = 1; // amdgpu_amdkfd_gpuvm_alloc_memory_of_gpu: byte alignment 1, one page
	if (type == BoType::Userptr) {
		bo->userptr_tgid = p->tgid;
		bo->userptr_addr = a.mmap_offset;
		bo->ledger = m.ledger_;
		m.ledger_->add(p->tgid, size, false);
	} else if (type == BoType::Doorbell) {
		if (!pdd->doorbells)
			pdd->doorbells = Backing::create(d.doorbell_slice(), "kfdemu-doorbell", &err);
		bo->mem = pdd->doorbells;
	} else if (type == BoType::Mmio) {
		bo->mem = d.mmio;
	}
	bo->fake_offset = d.alloc_fake_offset(bo);
	pdd->drm->kfd_mmap[bo->fake_offset] = bo;
	pdd->bos[kid] = bo;
	a.handle = (static_cast<uint64_t>(a.gpu_id) << 32) | kid;
	if (type == BoType::Mmio)
		a.mmap_offset = MMAP_TYPE_MMIO | mmap_gpu_id(a.gpu_id);
	else if (type != BoType::Userptr)
		a.mmap_offset = bo->fake_offset;
	return 0;
}

long KfdOps::free_memory_of_gpu()
{
	auto &a = arg<FreeMemoryOfGpu>();
	Pdd *pdd;
	std::shared_ptr<Bo> *bo;
	if (int e = find_bo(*p, a.handle, &pdd, &bo))
		return e;
	if (p->event_page == *bo)
		return -EPERM;
	auto mapped = p->mapped_on.find(bo->get());
	if (mapped != p->mapped_on.end() && !mapped->second.empty())
		return -EBUSY;
	m.free_kfd_bo(*p, *pdd, static_cast<uint32_t>(a.handle));
	return 0;
}

long KfdOps::map_or_unmap(bool map)
{
	auto &a = arg<MapMemoryToGpu>();
	if (a.n_devices == 0 || a.n_success > a.n_devices)
		return -EINVAL;
	if (a.n_devices > 4096)
		return -EINVAL;
	std::vector<uint32_t> ids(a.n_devices);
	if (c.read(a.device_ids_array_ptr, ids.data(), ids.size() * 4))
		return -EFAULT;
	Pdd *owner;
	std::shared_ptr<Bo> *found;
	if (int e = find_bo(*p, a.handle, &owner, &found, -ENOMEM))
		return e;
	std::shared_ptr<Bo> bo = *found;
	for (uint32_t i = a.n_success; i < a.n_devices; ++i) {
		Pdd *peer;
		if (int e = find_pdd(*p, ids[i], &peer))
			return e;
		int e = map ? m.kfd_map_one(*p, *owner, bo, *peer) : m.kfd_unmap_one(*p, bo, *peer);
		if (e)
			return e;
		a.n_success = i + 1;
	}
	return 0;
}

long KfdOps::create_queue()
{
	auto &a = arg<CreateQueue>();
	if (long e = queue_properties_from_user(a))
		return e;
	Pdd *pdd;
	if (int e = find_pdd(*p, a.gpu_id, &pdd, -ESRCH)) // kfd_bind_process_to_device failed
		return e;
	std::string why;
	if (m.machine_.queue_size_checks)
		if (long e = queue_sizes_against_node(a, *pdd->dev->node, &why)) {
			std::fprintf(stderr, "kfd-emu: CREATE_QUEUE on GPU %u: %s (Linux 6.12's check)\n", a.gpu_id,
				     why.c_str());
			return e;
		}
	uint32_t qid = 0;
	while (p->queues.count(qid))
		++qid;
	if (qid >= MAX_QUEUES_PER_PROCESS)
		return -ENOMEM;
	int err = 0;
	if (!pdd->doorbells)
		pdd->doorbells = Backing::create(pdd->dev->doorbell_slice(), "kfdemu-doorbell", &err);
	if (!pdd->doorbells)
		return err;
	Queue q;
	q.id = qid;
	q.user_gpu_id = a.gpu_id;
	q.args = a;
	a.queue_id = qid;
	a.doorbell_offset = MMAP_TYPE_DOORBELL | mmap_gpu_id(a.gpu_id);
	if (pdd->dev->family >= abi::sdma::kFamilyAi)
		a.doorbell_offset |= (static_cast<uint64_t>(qid) * 8) & (pdd->dev->doorbell_slice() - 1);
	q.args.queue_id = qid;
	q.args.doorbell_offset = a.doorbell_offset;
	if (q.compute() && a.ctx_save_restore_address)
		q.ctl_stack = {a.ctl_stack_size, a.ctl_stack_size, a.ctl_stack_size, {}};
	p->queues[qid] = q;
	m.start_user_queue(*p, p->queues[qid], false); // SDMA queues get an engine
	return 0;
}

long KfdOps::destroy_queue()
{
	if (!p->queues.erase(arg<DestroyQueue>().queue_id))
		return -EINVAL;
	return 0;
}

long KfdOps::set_memory_policy()
{
	auto &a = arg<SetMemoryPolicy>();
	if (a.default_policy > 1 || a.alternate_policy > 1)
		return -EINVAL;
	Pdd *pdd;
	if (int e = find_pdd(*p, a.gpu_id, &pdd, -ESRCH))
		return e;
	pdd->default_policy = a.default_policy;
	pdd->alt_policy = a.alternate_policy;
	pdd->alt_base = a.alternate_aperture_base;
	pdd->alt_size = a.alternate_aperture_size;
	return 0;
}

long KfdOps::get_clock_counters()
{
	auto &a = arg<GetClockCounters>();
	// An unknown gpu_id is not an error: the GPU counter reads 0.
	a.gpu_clock_counter = p->pdd_by_user_id(a.gpu_id) ? now_ns(CLOCK_MONOTONIC_RAW) / 10 : 0; // 100 MHz
	a.cpu_clock_counter = now_ns(CLOCK_MONOTONIC_RAW);
	a.system_clock_counter = now_ns(CLOCK_BOOTTIME);
	a.system_clock_freq = 1000000000ull;
	return 0;
}

long KfdOps::set_scratch_backing_va()
{
	auto &a = arg<SetScratchBackingVa>();
	Pdd *pdd;
	if (int e = find_pdd(*p, a.gpu_id, &pdd))
		return e;
	pdd->scratch_va = a.va_addr;
	return 0;
}

long KfdOps::get_tile_config()
{
	auto &a = arg<GetTileConfig>();
	Pdd *pdd;
	if (int e = find_pdd(*p, a.gpu_id, &pdd))
		return e;
	a.gb_addr_config = static_cast<uint32_t>(pdd->dev->node->property("gb_addr_config", 0x26010042));
	a.num_banks = 0;
	a.num_ranks = 0;
	a.num_tile_configs = 0; // GFX9+ has no tile mode tables
	a.num_macro_tile_configs = 0;
	return 0;
}

long KfdOps::set_trap_handler()
{
	auto &a = arg<SetTrapHandler>();
	Pdd *pdd;
	if (int e = find_pdd(*p, a.gpu_id, &pdd, -ESRCH))
		return e;
	pdd->tba = a.tba_addr;
	pdd->tma = a.tma_addr;
	return 0;
}

long KfdOps::set_xnack_mode()
{
	auto &a = arg<SetXnackMode>();
	if (a.xnack_enabled < 0) {
		a.xnack_enabled = p->xnack;
		return 0;
	}
	if (!p->queues.empty())
		return -EBUSY;
	// kfd_process_xnack_mode(p, supported): XNACK on needs every GPU to
	// take it per process (GC 9.4.2 and later GFX9: gfx90a, gfx94x);
	// amdgpu's default noretry leaves it off on the others (gfx908).
	for (const Pdd &pdd : p->pdds) {
		const uint64_t gfx = pdd.dev->node->property("gfx_target_version");
		if (a.xnack_enabled && gfx != 90010 && (gfx < 90400 || gfx >= 100000))
			return -EPERM;
	}
	p->xnack = a.xnack_enabled ? 1 : 0;
	return 0;
}

long KfdOps::available_memory()
{
	auto &a = arg<AvailableMemory>();
	Pdd *pdd;
	if (int e = find_pdd(*p, a.gpu_id, &pdd))
		return e;
	// amdgpu_amdkfd_get_available_memory: KFD's own VRAM bytes (GEM BOs
	// do not count: a KFD allocation evicts them).
	uint64_t used = *pdd->dev->kfd_vram_used;
	a.available = pdd->dev->vram_size > used ? pdd->dev->vram_size - used : 0;
	return 0;
}

long KfdOps::create_event()
{
	auto &a = arg<CreateEvent>();
	if (a.event_type > EVENT_MEMORY)
		return -EINVAL;
	if (a.event_page_offset && !p->event_page) {
		Pdd *pdd;
		std::shared_ptr<Bo> *bo;
		if (int e = find_bo(*p, a.event_page_offset, &pdd, &bo))
			return e;
		p->event_page = *bo;
		p->event_page_handle = a.event_page_offset;
	}
	Event ev;
	ev.type = a.event_type;
	ev.auto_reset = a.auto_reset != 0;
	ev.node_id = a.node_id;
	uint32_t eid;
	if (a.event_type == EVENT_SIGNAL || a.event_type == EVENT_DEBUG) {
		eid = 0;
		while (eid < SIGNAL_EVENT_LIMIT && p->events.count(eid))
			++eid;
		if (eid >= SIGNAL_EVENT_LIMIT)
			return -ENOSPC;
		if (!p->event_page && !p->event_mem) {
			int err = 0;
			p->event_mem = Backing::create(SIGNAL_EVENT_LIMIT * 8, "kfdemu-events", &err);
			if (!p->event_mem)
				return err;
		}
		// The kernel marks a new event's slot as unsignaled.
		const auto &mem = p->event_page ? p->event_page->mem : p->event_mem;
		if (mem && (uint64_t{eid} + 1) * 8 <= mem->size()) {
			uint64_t unsignaled = ~0ull;
			std::memcpy(mem->data() + uint64_t{eid} * 8, &unsignaled, 8);
		}
		a.event_trigger_data = eid;
		a.event_slot_index = eid;
		a.event_page_offset = MMAP_TYPE_EVENTS;
	} else {
		eid = FIRST_NONSIGNAL_EVENT_ID;
		while (p->events.count(eid))
			++eid;
		a.event_trigger_data = eid;
		a.event_slot_index = 0;
		a.event_page_offset = 0;
	}
	ev.id = eid;
	a.event_id = eid;
	p->events[eid] = ev;
	return 0;
}

long KfdOps::destroy_event()
{
	if (!p->events.erase(arg<EventId>().event_id))
		return -EINVAL;
	m.events_cv_.notify_all();
	return 0;
}

long KfdOps::set_event()
{
	auto it = p->events.find(arg<EventId>().event_id);
	if (it == p->events.end())
		return -EINVAL;
	it->second.set();
	++p->event_generation;
	m.events_cv_.notify_all();
	return 0;
}

long KfdOps::reset_event()
{
	auto it = p->events.find(arg<EventId>().event_id);
	if (it == p->events.end())
		return -EINVAL;
	it->second.signaled = false;
	return 0;
}

// kfd_ioctl_export_dmabuf: the BO's one dma-buf (made through
// drm_gem_prime_handle_to_dmabuf, whose amdgpu_gem_prime_export refuses a
// userptr BO: EPERM), installed by dma_buf_fd(), which hands `flags` to
// get_unused_fd_flags(): any bits are accepted, O_CLOEXEC is the one that
// counts (the file's mode is the export's: O_RDWR for a WRITABLE BO).
long KfdOps::export_dmabuf()
{
	auto &a = arg<ExportDmabuf>();
	Pdd *pdd;
	std::shared_ptr<Bo> *bo;
	if (int e = find_bo(*p, a.handle, &pdd, &bo))
		return e;
	if ((*bo)->is_userptr())
		return -EPERM;
	if (!(*bo)->mem || (*bo)->type == BoType::Doorbell || (*bo)->type == BoType::Mmio)
		return -EINVAL;
	// dmabuf_fd is written by the transport once the fd is installed.
	m.export_dmabuf(c, *bo, a.flags & abi::drm::CLOEXEC, uarg + offsetof(ExportDmabuf, dmabuf_fd), false);
	return 0;
}

long KfdOps::import_dmabuf()
{
	auto &a = arg<ImportDmabuf>();
	Pdd *pdd;
	if (int e = find_pdd(*p, a.gpu_id, &pdd, -ENODEV))
		return e;
	// amdgpu_amdkfd_gpuvm_import_dmabuf_fd -> drm_gem_prime_fd_to_handle:
	// dma_buf_get() answers EBADF for a closed fd, EINVAL for another file.
	auto key = c.resolve_fd(static_cast<int>(a.dmabuf_fd));
	if (!key)
		return -EBADF;
	auto src = m.dmabuf_bo(*key);
	if (!src)
		return -EINVAL;
	std::shared_ptr<Bo> bo;
	if (src->dev == pdd->dev) {
		bo = src; // same device: the same BO
	} else {
		bo = std::make_shared<Bo>();
		bo->dev = pdd->dev;
		bo->type = BoType::Gtt;
		bo->size = src->size;
		bo->mem = src->mem;
		bo->import_of = src;
		bo->domains = abi::drm::DOMAIN_GTT;
		bo->fake_offset = pdd->dev->alloc_fake_offset(bo);
	}
	// A KFD BO object of its own that shares the memory.
	auto kb = std::make_shared<Bo>();
	kb->dev = pdd->dev;
	kb->type = bo->type;
	kb->size = bo->size;
	kb->mem = bo->mem;
	kb->import_of = bo->import_of ? bo->import_of : bo;
	kb->kfd = true;
	kb->kfd_flags = (bo->type == BoType::Vram ? ALLOC_VRAM : ALLOC_GTT) | ALLOC_WRITABLE;
	kb->va = a.va_addr;
	kb->fake_offset = bo->fake_offset;
	uint32_t kid = 0;
	while (pdd->bos.count(kid))
		++kid;
	kb->kfd_id = kid;
	pdd->bos[kid] = kb;
	a.handle = (static_cast<uint64_t>(a.gpu_id) << 32) | kid;
	return 0;
}

namespace {

// amdkfd_ioctls[]: every number below COMMAND_END. The kernel's own copy
// directions; the flags: CRIU_OP's KFD_IOC_FLAG_CHECKPOINT_RESTORE, and
// which calls change what the model publishes in sysfs. The ioctls the
// model does not emulate (DBG_TRAP) have no handler: -EINVAL.
constexpr auto kKfdIoctls = [] {
	std::array<KfdIoctlDesc, COMMAND_END> t{};
	constexpr unsigned R = abi::kIocRead, W = abi::kIocWrite, RW = R | W;
	constexpr unsigned pub = kIoctlPublishes;
	auto def = [&](unsigned nr, const char *name, unsigned dir, long (KfdOps::*h)(), unsigned flags = 0) {
		t[nr] = KfdIoctlDesc{name, dir, flags, h};
	};
	def(GET_VERSION, "AMDKFD_IOC_GET_VERSION", R, &KfdOps::get_version);
	def(CREATE_QUEUE, "AMDKFD_IOC_CREATE_QUEUE", RW, &KfdOps::create_queue, pub);
	def(DESTROY_QUEUE, "AMDKFD_IOC_DESTROY_QUEUE", RW, &KfdOps::destroy_queue, pub);
	def(SET_MEMORY_POLICY, "AMDKFD_IOC_SET_MEMORY_POLICY", W, &KfdOps::set_memory_policy);
	def(GET_CLOCK_COUNTERS, "AMDKFD_IOC_GET_CLOCK_COUNTERS", RW, &KfdOps::get_clock_counters);
	def(GET_PROCESS_APERTURES, "AMDKFD_IOC_GET_PROCESS_APERTURES", R, &KfdOps::get_process_apertures);
	def(UPDATE_QUEUE, "AMDKFD_IOC_UPDATE_QUEUE", W, &KfdOps::update_queue, pub);
	def(CREATE_EVENT, "AMDKFD_IOC_CREATE_EVENT", RW, &KfdOps::create_event);
	def(DESTROY_EVENT, "AMDKFD_IOC_DESTROY_EVENT", W, &KfdOps::destroy_event);
	def(SET_EVENT, "AMDKFD_IOC_SET_EVENT", W, &KfdOps::set_event);
	def(RESET_EVENT, "AMDKFD_IOC_RESET_EVENT", W, &KfdOps::reset_event);
	def(WAIT_EVENTS, "AMDKFD_IOC_WAIT_EVENTS", RW, &KfdOps::wait_events);
	for (unsigned nr = 0x0D; nr <= 0x10; ++nr)
		def(nr, nullptr, W, &KfdOps::deprecated); // DBG_{REGISTER,UNREGISTER,ADDRESS_WATCH,WAVE_CONTROL}
	def(SET_SCRATCH_BACKING_VA, "AMDKFD_IOC_SET_SCRATCH_BACKING_VA", RW, &KfdOps::set_scratch_backing_va);
	def(GET_TILE_CONFIG, "AMDKFD_IOC_GET_TILE_CONFIG", RW, &KfdOps::get_tile_config);
	def(SET_TRAP_HANDLER, "AMDKFD_IOC_SET_TRAP_HANDLER", W, &KfdOps::set_trap_handler);
	def(GET_PROCESS_APERTURES_NEW, "AMDKFD_IOC_GET_PROCESS_APERTURES_NEW", RW,
	    &KfdOps::get_process_apertures_new);
	def(ACQUIRE_VM, "AMDKFD_IOC_ACQUIRE_VM", W, &KfdOps::acquire_vm, pub);
	def(ALLOC_MEMORY_OF_GPU, "AMDKFD_IOC_ALLOC_MEMORY_OF_GPU", RW, &KfdOps::alloc_memory_of_gpu, pub);
	def(FREE_MEMORY_OF_GPU, "AMDKFD_IOC_FREE_MEMORY_OF_GPU", W, &KfdOps::free_memory_of_gpu, pub);
	def(MAP_MEMORY_TO_GPU, "AMDKFD_IOC_MAP_MEMORY_TO_GPU", RW, &KfdOps::map_memory_to_gpu);
	def(UNMAP_MEMORY_FROM_GPU, "AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU", RW, &KfdOps::unmap_memory_from_gpu);
	def(SET_CU_MASK, "AMDKFD_IOC_SET_CU_MASK", W, &KfdOps::set_cu_mask);
	def(GET_QUEUE_WAVE_STATE, "AMDKFD_IOC_GET_QUEUE_WAVE_STATE", RW, &KfdOps::get_queue_wave_state);
	def(GET_DMABUF_INFO, "AMDKFD_IOC_GET_DMABUF_INFO", RW, &KfdOps::get_dmabuf_info);
	def(IMPORT_DMABUF, "AMDKFD_IOC_IMPORT_DMABUF", RW, &KfdOps::import_dmabuf, pub);
	def(ALLOC_QUEUE_GWS, "AMDKFD_IOC_ALLOC_QUEUE_GWS", RW, &KfdOps::alloc_queue_gws);
	def(SMI_EVENTS, "AMDKFD_IOC_SMI_EVENTS", RW, &KfdOps::smi_events);
	def(SVM, "AMDKFD_IOC_SVM", RW, &KfdOps::svm, pub);
	def(SET_XNACK_MODE, "AMDKFD_IOC_SET_XNACK_MODE", RW, &KfdOps::set_xnack_mode);
	def(CRIU_OP, "AMDKFD_IOC_CRIU_OP", RW, &KfdOps::criu_op, kIoctlCheckpointRestore | pub);
	def(AVAILABLE_MEMORY, "AMDKFD_IOC_AVAILABLE_MEMORY", RW, &KfdOps::available_memory);
	def(EXPORT_DMABUF, "AMDKFD_IOC_EXPORT_DMABUF", RW, &KfdOps::export_dmabuf);
	def(RUNTIME_ENABLE, "AMDKFD_IOC_RUNTIME_ENABLE", RW, &KfdOps::runtime_enable);
	def(DBG_TRAP, "AMDKFD_IOC_DBG_TRAP", RW, nullptr);
	return t;
}();

} // namespace

const KfdIoctlDesc *kfd_ioctl_desc(unsigned nr)
{
	if (nr == 0 || nr >= kKfdIoctls.size())
		return nullptr;
	return &kKfdIoctls[nr];
}

long ModelImpl::kfd_ioctl(Lock &lk, Caller &c, FileEntry &f, const KfdIoctlDesc &d, void *buf, uint64_t uarg,
			  size_t usize)
{
	// The caller and capability checks are done by the chokepoint. CRIU_OP
	// finds its target itself; every other call needs the owner's context.
	auto pit = procs_.find(f.kfd_owner);
	KfdProcess *p = pit == procs_.end() ? nullptr : pit->second.get();
	if (!p && !(d.flags & kIoctlCheckpointRestore))
		return -ESRCH; // the owner's context is gone
	if (!d.handler)
		return -EINVAL;
	KfdOps ops{*this, lk, c, f, p, buf, uarg, usize};
	return (ops.*d.handler)();
}

// kfd_ioctl_get_dmabuf_info + amdgpu_amdkfd_get_dmabuf_info: any amdgpu
// VRAM or GTT BO's dma-buf (a GEM BO's too). Without a metadata buffer
// (metadata_ptr 0) metadata_size is left as given; with one, metadata_size
// becomes the BO's metadata size (also when the buffer is too small:
// EINVAL, so a caller learns the size) and the bytes are copied out. The
// flags are VRAM or GTT, plus PUBLIC for a CPU-accessible VRAM BO; gpu_id
// is the BO's GPU's own id (nodes[xcp_id]->id, not a CRIU-restored
// process's user id).
long ModelImpl::kfd_get_dmabuf_info(Caller &c, KfdProcess &p, GetDmabufInfo &a)
{
	// The kernel asks the first GPU the device cgroup lets the caller use.
	if (p.pdds.empty())
		return -EINVAL;
	auto key = c.resolve_fd(static_cast<int>(a.dmabuf_fd));
	if (!key)
		return -EBADF;
	auto bo = dmabuf_bo(*key);
	if (!bo || !(bo->domains & (abi::drm::DOMAIN_VRAM | abi::drm::DOMAIN_GTT)))
		return -EINVAL;
	a.size = bo->size;
	if (a.metadata_ptr) {
		const uint32_t room = a.metadata_size;
		a.metadata_size = static_cast<uint32_t>(bo->md_data.size());
		if (room < bo->md_data.size())
			return -EINVAL;
	}
	a.gpu_id = bo->dev->gpu_id;
	a.flags = (bo->domains & abi::drm::DOMAIN_VRAM) ? ALLOC_VRAM : ALLOC_GTT;
	if (bo->domain_flags & abi::drm::CREATE_CPU_ACCESS_REQUIRED)
		a.flags |= ALLOC_PUBLIC;
	if (a.metadata_ptr && !bo->md_data.empty() && c.write(a.metadata_ptr, bo->md_data.data(), bo->md_data.size()))
		return -EFAULT;
	return 0;
}

// kfd_wait_on_events: each event gets a waiter, activated at once when the
// event is signaled (an auto-reset event is consumed by that), later by
// every set_event while it waits (Event::set); WAIT_COMPLETE when one (or,
// wait_for_all, every) waiter is activated. Activated MEMORY and
// HW_EXCEPTION events copy their exception data out
// (copy_signaled_event_data).
long ModelImpl::wait_events(Lock &lk, Caller &c, KfdProcess &p0, WaitEvents &a)
{
	if (a.num_events == 0 || a.num_events > SIGNAL_EVENT_LIMIT)
		return -EINVAL;
	std::vector<EventData> ev(a.num_events);
	if (c.read(a.events_ptr, ev.data(), ev.size() * sizeof(EventData)))
		return -EFAULT;
	for (auto &e : ev)
		if (!p0.events.count(e.event_id))
			return -EINVAL;
	const pid_t tgid = p0.tgid;
	const uint64_t interrupts = p0.wait_interrupts;
	std::vector<bool> activated(ev.size());
	std::vector<uint64_t> age(ev.size());
	for (size_t i = 0; i < ev.size(); ++i) {
		Event &x = p0.events.find(ev[i].event_id)->second;
		activated[i] = x.signaled;
		if (x.auto_reset)
			x.signaled = false;
		age[i] = x.age;
		++x.waiters;
	}
	// The waiters go when the wait ends, whichever way.
	struct Unwait {
		ModelImpl &m;
		pid_t tgid;
		const std::vector<EventData> &ev;
		~Unwait()
		{
			auto it = m.procs_.find(tgid);
			if (it == m.procs_.end())
				return;
			for (auto &e : ev)
				if (auto x = it->second->events.find(e.event_id); x != it->second->events.end() && x->second.waiters)
					--x->second.waiters;
		}
	} unwait{*this, tgid, ev};
	const bool infinite = a.timeout == 0xffffffffu;
	auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(a.timeout);
	for (;;) {
		auto it = procs_.find(tgid);
		if (it == procs_.end())
			return -ESRCH;
		KfdProcess &p = *it->second;
		size_t ready = 0;
		for (size_t i = 0; i < ev.size(); ++i) {
			auto ei = p.events.find(ev[i].event_id);
			if (ei == p.events.end()) {
				a.wait_result = WAIT_ERROR;
				return -EINVAL; // destroyed while waited for
			}
			if (ei->second.age != age[i])
				activated[i] = true;
			ready += activated[i];
		}
		if ((a.wait_for_all && ready == ev.size()) || (!a.wait_for_all && ready > 0)) {
			bool data = false;
			for (size_t i = 0; i < ev.size(); ++i) {
				const Event &x = p.events.find(ev[i].event_id)->second;
				if (activated[i] && (x.type == EVENT_MEMORY || x.type == EVENT_HW_EXCEPTION)) {
					std::memcpy(ev[i].exception_data, x.exception.data(), sizeof ev[i].exception_data);
					data = true;
				}
			}
			if (data && c.write(a.events_ptr, ev.data(), ev.size() * sizeof(EventData)))
				return -EFAULT;
			a.wait_result = WAIT_COMPLETE;
			return 0;
		}
		// A checkpoint (CRIU PROCESS_INFO, or the CRIU adapter settling
		// the process's connections before it dumps them) interrupts
		// the wait: the kernel's returns -ERESTARTSYS and is restarted
		// after the freeze, transparently. So does PROCESS_INFO here for
		// the shim's callers (Caller::restarts_while_paused: nothing
		// written, the shim makes the call again); otherwise it ends as
		// timed out (callers such as libhsakmt's wait again), so that no
		// call of a frozen thread is still open in the daemon when CRIU
		// dumps it.
		if (p.queues_paused && c.restarts_while_paused() && p.made_before_pause(c.made_ns())) {
			count("restarted_while_paused");
			return -abi::kErestartsys;
		}
		if (a.timeout == 0 || p.queues_paused || p.wait_interrupts != interrupts ||
		    (!infinite && std::chrono::steady_clock::now() >= deadline)) {
			a.wait_result = WAIT_TIMEOUT;
			return 0;
		}
		const auto step = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
		events_cv_.wait_until(lk, infinite ? step : std::min(step, deadline));
	}
}

int ModelImpl::kfd_mmap(Caller &c, uint64_t offset, uint64_t len, MmapTarget *out)
{
	auto pit = procs_.find(c.identity().tgid);
	if (pit == procs_.end())
		return -EINVAL;
	KfdProcess &p = *pit->second;
	uint32_t gid = mmap_get_gpu_id(offset);
	uint64_t type = offset & MMAP_TYPE_MASK;
	Pdd *pdd = nullptr;
	if (type != MMAP_TYPE_EVENTS) {
		pdd = p.pdd_by_user_id(gid);
		if (!pdd)
			pdd = p.pdd_by_actual_id(gid);
		if (!pdd)
			return -ENODEV;
	}
	switch (type) {
	case MMAP_TYPE_DOORBELL: {
		if (len != pdd->dev->doorbell_slice())
			return -EINVAL;
		int err = 0;
		if (!pdd->doorbells)
			pdd->doorbells = Backing::create(pdd->dev->doorbell_slice(), "kfdemu-doorbell", &err);
		if (!pdd->doorbells)
			return err;
		*out = MmapTarget{pdd->doorbells->fd(), 0, true};
		return 0;
	}
	case MMAP_TYPE_MMIO:
		if (len != kPage)
			return -EINVAL;
		*out = MmapTarget{pdd->dev->mmio->fd(), 0, true};
		return 0;
	case MMAP_TYPE_EVENTS: {
		const auto &mem = p.event_page ? p.event_page->mem : p.event_mem;
		if (!mem || len > page_align(mem->size()))
			return -EINVAL;
		*out = MmapTarget{mem->fd(), 0, true};
		return 0;
	}
	default:
		return -EFAULT;
	}
}

} // namespace kfdemu::detail
