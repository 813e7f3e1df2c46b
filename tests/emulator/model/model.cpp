// SPDX-License-Identifier: GPL-2.0-only
//
// The model's front: files, ioctl chokepoint (size tolerance, fault
// injection, counting), mmap dispatch, process lifetime, introspection.
#include "model/state.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <exception>
#include <sstream>

namespace kfdemu {

uint64_t NodeDesc::property(std::string_view key, uint64_t dflt) const
{
	for (auto &[k, v] : properties)
		if (k == key)
			return v;
	return dflt;
}

namespace detail {

namespace {

const char *kfd_name(unsigned nr)
{
	using namespace abi::kfd;
	switch (nr) {
	case GET_VERSION: return "AMDKFD_IOC_GET_VERSION";
	case CREATE_QUEUE: return "AMDKFD_IOC_CREATE_QUEUE";
	case DESTROY_QUEUE: return "AMDKFD_IOC_DESTROY_QUEUE";
	case SET_MEMORY_POLICY: return "AMDKFD_IOC_SET_MEMORY_POLICY";
	case GET_CLOCK_COUNTERS: return "AMDKFD_IOC_GET_CLOCK_COUNTERS";
	case GET_PROCESS_APERTURES: return "AMDKFD_IOC_GET_PROCESS_APERTURES";
	case UPDATE_QUEUE: return "AMDKFD_IOC_UPDATE_QUEUE";
	case CREATE_EVENT: return "AMDKFD_IOC_CREATE_EVENT";
	case DESTROY_EVENT: return "AMDKFD_IOC_DESTROY_EVENT";
	case SET_EVENT: return "AMDKFD_IOC_SET_EVENT";
	case RESET_EVENT: return "AMDKFD_IOC_RESET_EVENT";
	case WAIT_EVENTS: return "AMDKFD_IOC_WAIT_EVENTS";
	case SET_SCRATCH_BACKING_VA: return "AMDKFD_IOC_SET_SCRATCH_BACKING_VA";
	case GET_TILE_CONFIG: return "AMDKFD_IOC_GET_TILE_CONFIG";
	case SET_TRAP_HANDLER: return "AMDKFD_IOC_SET_TRAP_HANDLER";
	case GET_PROCESS_APERTURES_NEW: return "AMDKFD_IOC_GET_PROCESS_APERTURES_NEW";
	case ACQUIRE_VM: return "AMDKFD_IOC_ACQUIRE_VM";
	case ALLOC_MEMORY_OF_GPU: return "AMDKFD_IOC_ALLOC_MEMORY_OF_GPU";
	case FREE_MEMORY_OF_GPU: return "AMDKFD_IOC_FREE_MEMORY_OF_GPU";
	case MAP_MEMORY_TO_GPU: return "AMDKFD_IOC_MAP_MEMORY_TO_GPU";
	case UNMAP_MEMORY_FROM_GPU: return "AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU";
	case SET_CU_MASK: return "AMDKFD_IOC_SET_CU_MASK";
	case GET_QUEUE_WAVE_STATE: return "AMDKFD_IOC_GET_QUEUE_WAVE_STATE";
	case GET_DMABUF_INFO: return "AMDKFD_IOC_GET_DMABUF_INFO";
	case IMPORT_DMABUF: return "AMDKFD_IOC_IMPORT_DMABUF";
	case ALLOC_QUEUE_GWS: return "AMDKFD_IOC_ALLOC_QUEUE_GWS";
	case SMI_EVENTS: return "AMDKFD_IOC_SMI_EVENTS";
	case SVM: return "AMDKFD_IOC_SVM";
	case SET_XNACK_MODE: return "AMDKFD_IOC_SET_XNACK_MODE";
	case CRIU_OP: return "AMDKFD_IOC_CRIU_OP";
	case AVAILABLE_MEMORY: return "AMDKFD_IOC_AVAILABLE_MEMORY";
	case EXPORT_DMABUF: return "AMDKFD_IOC_EXPORT_DMABUF";
	case RUNTIME_ENABLE: return "AMDKFD_IOC_RUNTIME_ENABLE";
	case DBG_TRAP: return "AMDKFD_IOC_DBG_TRAP";
	default: return nullptr;
	}
}

const char *drm_name(unsigned nr)
{
	using namespace abi::drm;
	if (nr >= kCommandBase && nr < kCommandEnd) {
		switch (nr - kCommandBase) {
		case GEM_CREATE: return "DRM_IOCTL_AMDGPU_GEM_CREATE";
		case GEM_MMAP: return "DRM_IOCTL_AMDGPU_GEM_MMAP";
		case CTX: return "DRM_IOCTL_AMDGPU_CTX";
		case BO_LIST: return "DRM_IOCTL_AMDGPU_BO_LIST";
		case CS: return "DRM_IOCTL_AMDGPU_CS";
		case INFO: return "DRM_IOCTL_AMDGPU_INFO";
		case GEM_METADATA: return "DRM_IOCTL_AMDGPU_GEM_METADATA";
		case GEM_WAIT_IDLE: return "DRM_IOCTL_AMDGPU_GEM_WAIT_IDLE";
		case GEM_VA: return "DRM_IOCTL_AMDGPU_GEM_VA";
		case WAIT_CS: return "DRM_IOCTL_AMDGPU_WAIT_CS";
		case GEM_OP: return "DRM_IOCTL_AMDGPU_GEM_OP";
		case GEM_USERPTR: return "DRM_IOCTL_AMDGPU_GEM_USERPTR";
		case WAIT_FENCES: return "DRM_IOCTL_AMDGPU_WAIT_FENCES";
		case VM: return "DRM_IOCTL_AMDGPU_VM";
		case FENCE_TO_HANDLE: return "DRM_IOCTL_AMDGPU_FENCE_TO_HANDLE";
		case SCHED: return "DRM_IOCTL_AMDGPU_SCHED";
		case GEM_LIST_HANDLES: return "DRM_IOCTL_AMDGPU_GEM_LIST_HANDLES";
		default: return nullptr;
		}
	}
	switch (nr) {
	case VERSION: return "DRM_IOCTL_VERSION";
	case GET_UNIQUE: return "DRM_IOCTL_GET_UNIQUE";
	case GET_MAGIC: return "DRM_IOCTL_GET_MAGIC";
	case GET_CLIENT: return "DRM_IOCTL_GET_CLIENT";
	case GET_STATS: return "DRM_IOCTL_GET_STATS";
	case SET_VERSION: return "DRM_IOCTL_SET_VERSION";
	case GEM_CLOSE: return "DRM_IOCTL_GEM_CLOSE";
	case GEM_FLINK: return "DRM_IOCTL_GEM_FLINK";
	case GEM_OPEN: return "DRM_IOCTL_GEM_OPEN";
	case GET_CAP: return "DRM_IOCTL_GET_CAP";
	case SET_CLIENT_CAP: return "DRM_IOCTL_SET_CLIENT_CAP";
	case AUTH_MAGIC: return "DRM_IOCTL_AUTH_MAGIC";
	case PRIME_HANDLE_TO_FD: return "DRM_IOCTL_PRIME_HANDLE_TO_FD";
	case PRIME_FD_TO_HANDLE: return "DRM_IOCTL_PRIME_FD_TO_HANDLE";
	case GEM_CHANGE_HANDLE: return "DRM_IOCTL_GEM_CHANGE_HANDLE";
	default: return nullptr;
	}
}

const char *criu_name(uint32_t op)
{
	switch (op) {
	case abi::kfd::CRIU_PROCESS_INFO: return "CRIU_OP:PROCESS_INFO";
	case abi::kfd::CRIU_CHECKPOINT: return "CRIU_OP:CHECKPOINT";
	case abi::kfd::CRIU_UNPAUSE: return "CRIU_OP:UNPAUSE";
	case abi::kfd::CRIU_RESTORE: return "CRIU_OP:RESTORE";
	case abi::kfd::CRIU_RESUME: return "CRIU_OP:RESUME";
	default: return "CRIU_OP:UNKNOWN";
	}
}

std::optional<FileKey> key_of(int fd)
{
	struct stat st {};
	if (::fstat(fd, &st) != 0)
		return std::nullopt;
	return FileKey{st.st_dev, st.st_ino};
}

constexpr size_t kArgBuf = 1024; // larger than any argument struct

unsigned kfd_kernel_dir(unsigned nr)
{
	using namespace abi::kfd;
	switch (nr) {
	case GET_VERSION:
	case GET_PROCESS_APERTURES:
		return abi::kIocRead;
	case SET_MEMORY_POLICY: case UPDATE_QUEUE: case DESTROY_EVENT: case SET_EVENT:
	case RESET_EVENT: case 0x0D: case 0x0E: case 0x0F: case 0x10: case SET_TRAP_HANDLER:
	case ACQUIRE_VM: case FREE_MEMORY_OF_GPU: case SET_CU_MASK:
		return abi::kIocWrite;
	default:
		return abi::kIocRead | abi::kIocWrite;
	}
}

unsigned drm_kernel_dir(unsigned nr)
{
	using namespace abi::drm;
	if (nr >= kCommandBase && nr < kCommandEnd) {
		unsigned d = nr - kCommandBase;
		if (d == INFO || d == GEM_VA || d == SCHED)
			return abi::kIocWrite;
	}
	if (nr == GEM_CLOSE)
		return abi::kIocWrite;
	return abi::kIocRead | abi::kIocWrite;
}

// Core ioctls a render node refuses (no DRM_RENDER_ALLOW).
bool drm_render_denied(unsigned nr)
{
	using namespace abi::drm;
	switch (nr) {
	case GET_UNIQUE: case GET_MAGIC: case GET_CLIENT: case GET_STATS: case SET_VERSION:
	case GEM_FLINK: case GEM_OPEN: case SET_CLIENT_CAP: case AUTH_MAGIC:
		return true;
	default:
		return false;
	}
}

} // namespace

std::string json_str(std::string_view s)
{
	std::string o = "\"";
	for (char ch : s) {
		if (ch == '"' || ch == '\\') {
			o += '\\';
			o += ch;
		} else if (static_cast<unsigned char>(ch) < 0x20) {
			char b[8];
			std::snprintf(b, sizeof b, "\\u%04x", ch);
			o += b;
		} else {
			o += ch;
		}
	}
	return o + "\"";
}

void Counters::vm_fault(uint32_t gpu_id, uint64_t va, const char *why)
{
	++vm_faults;
	char b[160];
	std::snprintf(b, sizeof b, "{\"gpu_id\":%u,\"va\":%" PRIu64 ",\"reason\":%s}", gpu_id, va,
		      json_str(why).c_str());
	std::lock_guard lk(mu);
	if (faults.size() >= 64)
		faults.erase(faults.begin());
	faults.emplace_back(b);
}

// ---- construction -------------------------------------------------------

ModelImpl::ModelImpl(const MachineDesc &machine, std::shared_ptr<ProcessMemory> memory)
	: machine_(machine), pm_(std::move(memory))
{
	uint32_t index = 0;
	for (const NodeDesc &n : machine_.nodes) {
		if (n.is_gpu) {
			auto d = std::make_unique<Device>();
			d->node = &n;
			d->gpu_id = n.gpu_id;
			d->minor = n.drm_render_minor;
			d->family = n.family;
			d->topology_index = index;
			for (auto &b : n.mem_banks)
				if (b.heap_type == 1 || b.heap_type == 2)
					d->vram_size += b.size_in_bytes;
			if (!d->vram_size)
				d->vram_size = 16ull << 30;
			int err = 0;
			d->mmio = Backing::create(kPage, "kfdemu-mmio", &err);
			uint32_t ne = n.num_sdma_engines ? n.num_sdma_engines : 1;
			for (uint32_t i = 0; i < ne; ++i)
				d->engines.push_back(std::make_unique<SdmaEngine>(n.sdma_gbps, pm_, counters_));
			devices_.push_back(std::move(d));
		}
		++index;
	}
}

ModelImpl::~ModelImpl()
{
	// User queue engines first (they execute on the SDMA engines), then
	// the engines: their threads hold BO references. Each user queue's
	// thread is stopped and joined before its queue lets go of it: until
	// then the thread may read the queue table (ThreadSanitizer saw the
	// reset race with user_queue_doorbells).
	for (auto &[pid, p] : procs_)
		for (auto &[qid, q] : p->queues) {
			if (q.engine && q.engine->thread.joinable()) {
				q.engine->thread.request_stop();
				q.engine->thread.join();
			}
			q.engine.reset();
		}
	for (auto &d : devices_)
		d->engines.clear();
	procs_.clear();
	files_.clear();
	exported_.clear();
}

Device *ModelImpl::device_by_id(uint32_t gpu_id)
{
	for (auto &d : devices_)
		if (d->gpu_id == gpu_id)
			return d.get();
	return nullptr;
}

Device *ModelImpl::device_by_minor(uint32_t minor)
{
	for (auto &d : devices_)
		if (d->minor == minor)
			return d.get();
	return nullptr;
}

std::shared_ptr<Bo> ModelImpl::new_bo(Device &d, BoType type, uint64_t size, int *err)
{
	auto bo = std::make_shared<Bo>();
	bo->dev = &d;
	bo->type = type;
	bo->size = size;
	if (type == BoType::Vram) {
		if (*d.vram_used + size > d.vram_size) {
			*err = -ENOMEM;
			return nullptr;
		}
		*d.vram_used += size;
		bo->vram_used = d.vram_used;
	}
	if (type == BoType::Vram || type == BoType::Gtt || type == BoType::Cpu) {
		bo->mem = Backing::create(size, "kfdemu-bo", err);
		if (!bo->mem)
			return nullptr;
		if (type == BoType::Vram && d.node->vram_resident) {
			if (int e = bo->mem->populate(); e != 0) {
				*err = e;
				return nullptr;
			}
		}
		for (auto it = backings_.begin(); backings_.size() > 256 && it != backings_.end();)
			it = it->second.expired() ? backings_.erase(it) : std::next(it);
		backings_[bo->mem->key()] = bo;
	}
	return bo;
}

std::shared_ptr<Bo> ModelImpl::dmabuf_bo(FileKey key)
{
	auto it = backings_.find(key);
	if (it == backings_.end())
		return nullptr;
	return it->second.lock();
}

void ModelImpl::export_dmabuf(Caller &c, const std::shared_ptr<Bo> &bo, bool cloexec,
			      uint64_t patch_addr, bool as_result)
{
	// The dma-buf file of a BO is its backing memfd: one file per BO.
	std::shared_ptr<Bo> exp = bo->import_of ? bo->import_of : bo;
	exported_[exp->mem->key()] = exp;
	c.install_fd(exp->mem->fd(), cloexec, patch_addr, as_result);
}

// ---- files ----------------------------------------------------------------

int ModelImpl::do_open_kfd(Caller &c, bool cloexec)
{
	Lock lk(mu_);
	count("open:/dev/kfd");
	if (int e = check_fault("open:/dev/kfd"))
		return e;
	if (c.identity().compat32)
		return -EPERM;
	int fd = ::memfd_create("kfdemu-kfd", MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	Fd owned(fd);
	auto key = key_of(fd);
	if (!key)
		return -EIO;
	publish_process(kfd_context(c));
	FileEntry e;
	e.kind = FileKind::Kfd;
	e.kfd_owner = c.identity().tgid;
	e.memfd = std::move(owned);
	int mfd = e.memfd.get();
	files_[*key] = std::move(e);
	c.install_fd(mfd, cloexec, 0, true);
	return 0;
}

int ModelImpl::do_open_render(Caller &c, uint32_t minor, bool cloexec)
{
	Lock lk(mu_);
	count("open:render");
	if (int e = check_fault("open:render"))
		return e;
	Device *d = device_by_minor(minor);
	if (!d)
		return -ENODEV;
	int fd = ::memfd_create("kfdemu-render", MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	auto f = std::make_shared<DrmFile>();
	f->memfd = Fd(fd);
	auto key = key_of(fd);
	if (!key)
		return -EIO;
	f->key = *key;
	f->dev = d;
	f->opener = c.identity().tgid;
	FileEntry e;
	e.kind = FileKind::Render;
	e.drm = f;
	files_[*key] = std::move(e);
	c.install_fd(fd, cloexec, 0, true);
	return 0;
}

void ModelImpl::release(FileKey file)
{
	std::shared_ptr<DrmFile> drop; // destroyed after the lock is released
	std::shared_ptr<Bo> dropbo;
	Lock lk(mu_);
	auto it = files_.find(file);
	if (it != files_.end()) {
		drop = std::move(it->second.drm);
		files_.erase(it);
		// A KFD-acquired file stays alive through its Pdd reference.
		return;
	}
	auto ex = exported_.find(file);
	if (ex != exported_.end()) {
		dropbo = std::move(ex->second);
		exported_.erase(ex);
	}
}

void ModelImpl::destroy_process(KfdProcess &p)
{
	for (auto &pdd : p.pdds) {
		if (pdd.drm) {
			for (auto &[id, bo] : pdd.bos)
				pdd.drm->vm.remove_bo(bo.get());
			// Mappings of this process's BOs on peer VMs
			for (auto &peer : p.pdds)
				if (peer.drm)
					for (auto &[id, bo] : pdd.bos)
						peer.drm->vm.remove_bo(bo.get());
			pdd.drm->compute_vm = false;
			pdd.drm->kfd_owner = 0;
			pdd.drm->kfd_mmap.clear();
		}
		pdd.bos.clear();
		pdd.drm.reset();
	}
}

void ModelImpl::process_exit(pid_t tgid)
{
	std::unique_ptr<KfdProcess> gone;
	Lock lk(mu_);
	auto it = procs_.find(tgid);
	if (it == procs_.end())
		return;
	gone = std::move(it->second);
	procs_.erase(it);
	destroy_process(*gone);
	unpublish_process(tgid);
	events_cv_.notify_all();
	// Drop the rest (BO memory) outside the lock.
	lk.unlock();
	gone.reset();
}

void ModelImpl::interrupt_waits(pid_t tgid)
{
	Lock lk(mu_);
	auto it = procs_.find(tgid);
	if (it == procs_.end())
		return;
	++it->second->wait_interrupts;
	events_cv_.notify_all();
}

std::optional<FileInfo> ModelImpl::describe(FileKey file) const
{
	std::lock_guard lk(mu_);
	auto it = files_.find(file);
	if (it != files_.end()) {
		FileInfo fi{it->second.kind};
		if (it->second.kind == FileKind::Render)
			fi.render_minor = it->second.drm->dev->minor;
		return fi;
	}
	auto b = backings_.find(file);
	if (b != backings_.end())
		if (auto bo = b->second.lock())
			return FileInfo{FileKind::DmaBuf, 0, bo->size};
	return std::nullopt;
}

KfdProcess &ModelImpl::kfd_context(Caller &c)
{
	const pid_t tgid = c.identity().tgid;
	auto &slot = procs_[tgid];
	if (!slot) {
		slot = std::make_unique<KfdProcess>();
		slot->tgid = tgid;
		slot->pasid = next_pasid_++;
		if (next_pasid_ > 0xffff)
			next_pasid_ = 0x8001;
		const auto &allowed = machine_.cgroup_minors;
		for (auto &d : devices_) {
			if ((!allowed.empty() && std::find(allowed.begin(), allowed.end(), d->minor) == allowed.end()) ||
			    c.container_denies(d->minor))
				continue; // denied by the device cgroup: no device data
			Pdd pdd;
			pdd.dev = d.get();
			pdd.user_gpu_id = d->gpu_id;
			slot->pdds.push_back(std::move(pdd));
		}
	}
	return *slot;
}

// ---- counting and faults --------------------------------------------------

void ModelImpl::count(const std::string &name)
{
	++ioctl_counts_[name];
}

int ModelImpl::check_fault(const std::string &name, bool *stall)
{
	for (auto &r : rules_) {
		if (r.rule.target == "sdma")
			continue;
		bool match = r.rule.target == name || (r.rule.target == "*" && name.rfind("open:", 0) != 0 &&
						       name.rfind("CRIU_OP:", 0) != 0);
		if (!match)
			continue;
		if (++r.seen == r.rule.nth) {
			if (stall)
				*stall = r.rule.action == FaultRule::Action::Stall;
			return -(r.rule.err ? r.rule.err : EIO);
		}
	}
	return 0;
}

int ModelImpl::ioctl_fault(Lock &lk, Caller &c, const std::string &name)
{
	bool stall = false;
	const int e = check_fault(name, &stall);
	if (!stall)
		return e;
	++counters_->stalls;
	lk.unlock();
	const bool gone = c.wait_caller_gone(FaultRule::kStallLimitMs);
	lk.lock();
	return gone ? -EINTR : e;
}

int ModelImpl::check_fault_sdma(bool *hang)
{
	for (auto &r : rules_) {
		if (r.rule.target != "sdma")
			continue;
		if (++r.seen == r.rule.nth) {
			*hang = r.rule.action == FaultRule::Action::Hang;
			return -(r.rule.err ? r.rule.err : EIO);
		}
	}
	return 0;
}

void ModelImpl::set_faults(std::vector<FaultRule> rules)
{
	std::lock_guard lk(mu_);
	rules_.clear();
	for (auto &r : rules)
		rules_.push_back(RuleState{std::move(r), 0});
}

// ---- ioctl chokepoint -----------------------------------------------------

long ModelImpl::do_ioctl(Caller &c, FileKey file, unsigned long cmd, uint64_t arg)
{
	Lock lk(mu_);
	auto it = files_.find(file);
	if (it == files_.end()) {
		if (backings_.count(file)) {
			// dma-buf: DMA_BUF_IOCTL_SYNC ('b', 0) and SET_NAME ('b', 1).
			if (abi::ioc_type(cmd) == 'b' && abi::ioc_nr(cmd) <= 1)
				return 0;
			return -ENOTTY;
		}
		return -EBADF;
	}
	unsigned nr = abi::ioc_nr(cmd);
	size_t usize = abi::ioc_size(cmd);
	unsigned dir = abi::ioc_dir(cmd);
	FileEntry &f = it->second;
	const bool kfd = f.kind == FileKind::Kfd;
	const char *nm = kfd ? kfd_name(nr) : drm_name(nr);
	std::string name = nm ? nm : (kfd ? "AMDKFD_IOC_UNKNOWN" : "DRM_IOCTL_UNKNOWN");
	count(name);
	if (int e = ioctl_fault(lk, c, name))
		return e;
	if (kfd) {
		// kfd_ioctl(): table range, then the caller, then the capability;
		// the kernel's own definition decides the copy directions.
		if (nr == 0 || nr >= abi::kfd::COMMAND_END)
			return -ENOTTY;
		dir = kfd_kernel_dir(nr);
		const CallerIdentity &id = c.identity();
		bool tracer = nr == abi::kfd::CRIU_OP && id.tgid != f.kfd_owner && c.is_tracer_of(f.kfd_owner);
		if (id.tgid != f.kfd_owner && !tracer)
			return -EBADF;
		if (nr == abi::kfd::CRIU_OP && !id.cap_checkpoint_restore)
			return -EACCES;
	} else {
		// drm_ioctl(): unknown -> EINVAL, not render-allowed -> EACCES; the
		// directions are those of both the caller's cmd and the kernel's.
		if (!nm)
			return -EINVAL;
		if (drm_render_denied(nr))
			return -EACCES;
		dir &= drm_kernel_dir(nr);
	}

	alignas(16) uint8_t buf[kArgBuf] = {};
	if (usize > kArgBuf)
		usize = kArgBuf; // larger than any struct: the tail is ignored
	if ((dir & abi::kIocWrite) && usize && c.read(arg, buf, usize) != 0)
		return -EFAULT;

	long r;
	unsigned out_size = static_cast<unsigned>(usize);
	if (kfd) {
		// The CRIU sub-op is a fault target of its own.
		if (nr == abi::kfd::CRIU_OP) {
			uint32_t op;
			std::memcpy(&op, buf + offsetof(abi::kfd::CriuArgs, op), sizeof op);
			std::string sub = criu_name(op);
			count(sub);
			if (int e = ioctl_fault(lk, c, sub))
				return e;
		}
		r = kfd_ioctl(lk, c, f, nr, buf, usize, arg);
		using namespace abi::kfd;
		if (r >= 0 && !sysfs_root_.empty() &&
		    (nr == ACQUIRE_VM || nr == ALLOC_MEMORY_OF_GPU || nr == FREE_MEMORY_OF_GPU ||
		     nr == CREATE_QUEUE || nr == DESTROY_QUEUE || nr == UPDATE_QUEUE || nr == IMPORT_DMABUF ||
		     nr == CRIU_OP)) {
			if (auto pit = procs_.find(f.kfd_owner); pit != procs_.end())
				publish_process(*pit->second);
			publish_devices();
		}
	} else {
		std::shared_ptr<DrmFile> drm = f.drm; // may outlive the entry across waits
		r = drm_ioctl(lk, c, drm, nr, buf, usize, arg, &out_size);
		if (r >= 0 && (nr == abi::drm::GEM_CLOSE || nr == abi::drm::kCommandBase + abi::drm::GEM_CREATE))
			publish_devices();
	}
	if ((dir & abi::kIocRead) && out_size && c.write(arg, buf, out_size) != 0)
		return -EFAULT;
	return r;
}

int ModelImpl::do_mmap(Caller &c, FileKey file, uint64_t offset, uint64_t len, int prot,
		    MmapTarget *out)
{
	(void)prot;
	Lock lk(mu_);
	auto it = files_.find(file);
	if (it == files_.end()) {
		auto bo = dmabuf_bo(file);
		if (!bo)
			return -ENODEV;
		if (offset + len > page_align(bo->size))
			return -EINVAL;
		*out = MmapTarget{bo->mem->fd(), offset};
		return 0;
	}
	if (it->second.kind == FileKind::Kfd)
		return kfd_mmap(c, offset, len, out);
	return render_mmap(*it->second.drm, offset, len, out);
}

// ---- introspection ----------------------------------------------------------

namespace {

uint64_t fnv_pow(uint64_t n)
{
	uint64_t r = 1, b = 0x100000001b3ull;
	while (n) {
		if (n & 1)
			r *= b;
		b *= b;
		n >>= 1;
	}
	return r;
}

constexpr uint64_t kFnvBasis = 0xcbf29ce484222325ull, kFnvPrime = 0x100000001b3ull;

void fnv(uint64_t &h, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; ++i) {
		h ^= p[i];
		h *= kFnvPrime;
	}
}

// FNV-1a 64 over a memfd-backed BO, skipping holes (xor 0 = multiply only).
uint64_t checksum_backing(const Backing &m, uint64_t size)
{
	uint64_t h = kFnvBasis, pos = 0;
	while (pos < size) {
		off_t data = ::lseek(m.fd(), static_cast<off_t>(pos), SEEK_DATA);
		uint64_t dstart = data < 0 ? size : std::min<uint64_t>(static_cast<uint64_t>(data), size);
		if (dstart > pos) {
			h *= fnv_pow(dstart - pos);
			pos = dstart;
			continue;
		}
		off_t hole = ::lseek(m.fd(), static_cast<off_t>(pos), SEEK_HOLE);
		uint64_t dend = hole < 0 ? size : std::min<uint64_t>(static_cast<uint64_t>(hole), size);
		if (dend <= pos)
			dend = size;
		fnv(h, m.data() + pos, dend - pos);
		pos = dend;
	}
	return h;
}

} // namespace

static std::string hex64(uint64_t v)
{
	char b[24];
	std::snprintf(b, sizeof b, "\"0x%016" PRIx64 "\"", v);
	return b;
}

static const char *type_name(BoType t)
{
	switch (t) {
	case BoType::Vram: return "vram";
	case BoType::Gtt: return "gtt";
	case BoType::Userptr: return "userptr";
	case BoType::Doorbell: return "doorbell";
	case BoType::Mmio: return "mmio";
	case BoType::Cpu: return "cpu";
	}
	return "?";
}

std::string ModelImpl::do_introspect(std::string_view query)
{
	std::istringstream in{std::string(query)};
	std::string cmd;
	in >> cmd;
	std::lock_guard lk(mu_);
	std::ostringstream o;
	const bool nosum = query.find(" nosum") != std::string_view::npos;
	auto bo_checksum = [&](const Bo &bo) -> uint64_t {
		if (nosum)
			return 0;
		if (bo.mem)
			return checksum_backing(*bo.mem, bo.size);
		uint64_t h = kFnvBasis;
		std::vector<uint8_t> tmp(1 << 20);
		for (uint64_t pos = 0; pos < bo.size;) {
			size_t n = static_cast<size_t>(std::min<uint64_t>(tmp.size(), bo.size - pos));
			if (pm_->read(bo.userptr_tgid, bo.userptr_addr + pos, tmp.data(), n) != 0)
				return 0;
			fnv(h, tmp.data(), n);
			pos += n;
		}
		return h;
	};
	auto kfd_offset = [&](const Pdd &pdd, const Bo &bo) -> uint64_t {
		if (bo.type == BoType::Doorbell)
			return abi::kfd::MMAP_TYPE_DOORBELL | abi::kfd::mmap_gpu_id(pdd.dev->gpu_id);
		if (bo.type == BoType::Mmio)
			return abi::kfd::MMAP_TYPE_MMIO | abi::kfd::mmap_gpu_id(pdd.dev->gpu_id);
		return bo.fake_offset;
	};
	if (cmd == "processes") {
		o << "{\"processes\":[";
		bool first = true;
		for (auto &[pid, p] : procs_) {
			o << (first ? "" : ",") << "{\"pid\":" << pid << ",\"paused\":" << (p->queues_paused ? "true" : "false")
			  << ",\"evicted\":" << (p->evicted ? "true" : "false")
			  << ",\"evict_count\":" << p->evict_count
			  << ",\"restored\":" << (p->restored ? "true" : "false")
			  << ",\"queues\":" << p->queues.size() << ",\"events\":" << p->events.size()
			  << ",\"xnack\":" << p->xnack << ",\"devices\":[";
			for (size_t i = 0; i < p->pdds.size(); ++i)
				o << (i ? "," : "") << "{\"user_gpu_id\":" << p->pdds[i].user_gpu_id
				  << ",\"gpu_id\":" << p->pdds[i].dev->gpu_id
				  << ",\"bound\":" << (p->pdds[i].drm ? "true" : "false")
				  << ",\"bos\":" << p->pdds[i].bos.size() << "}";
			o << "]}";
			first = false;
		}
		o << "]}";
		return o.str();
	}
	if (cmd == "bos" || cmd == "queues" || cmd == "events" || cmd == "bo-bytes") {
		pid_t pid = 0;
		in >> pid;
		auto it = procs_.find(pid);
		if (it == procs_.end())
			return "{\"error\":\"no such process\"}";
		KfdProcess &p = *it->second;
		auto state = [&] {
			return p.queues_paused ? "paused" : p.evict_count > 0 ? "evicted" : "active";
		};
		if (cmd == "bos") {
			o << "{\"pid\":" << pid << ",\"bos\":[";
			bool first = true;
			for (auto &pdd : p.pdds)
				for (auto &[id, bo] : pdd.bos) {
					uint64_t handle = (static_cast<uint64_t>(pdd.user_gpu_id) << 32) | id;
					o << (first ? "" : ",") << "{\"handle\":" << handle << ",\"id\":" << id
					  << ",\"gpu_id\":" << pdd.user_gpu_id << ",\"actual_gpu_id\":" << pdd.dev->gpu_id
					  << ",\"type\":\"" << type_name(bo->type) << "\",\"va\":" << bo->va
					  << ",\"size\":" << bo->size << ",\"flags\":" << bo->kfd_flags
					  << ",\"mmap_offset\":" << kfd_offset(pdd, *bo)
					  << ",\"checksum\":" << hex64(bo_checksum(*bo)) << ",\"mapped_on\":[";
					auto m = p.mapped_on.find(bo.get());
					bool f2 = true;
					if (m != p.mapped_on.end())
						for (size_t idx : m->second) {
							o << (f2 ? "" : ",") << p.pdds[idx].user_gpu_id;
							f2 = false;
						}
					o << "]";
					if (bo->is_userptr())
						o << ",\"userptr\":" << bo->userptr_addr;
					o << "}";
					first = false;
				}
			o << "]}";
			return o.str();
		}
		if (cmd == "queues") {
			o << "{\"pid\":" << pid << ",\"state\":\"" << state() << "\",\"queues\":[";
			bool first = true;
			for (auto &[id, q] : p.queues) {
				// A queue's own state: the process's while it is paused or
				// evicted, else "inactive" for a queue without a ring.
				const std::string qs = p.queues_paused || p.evict_count > 0 || q.active() ? state() : "inactive";
				o << (first ? "" : ",") << "{\"id\":" << id << ",\"gpu_id\":" << q.user_gpu_id
				  << ",\"type\":" << q.args.queue_type << ",\"ring_base\":" << q.args.ring_base_address
				  << ",\"ring_size\":" << q.args.ring_size << ",\"priority\":" << q.args.queue_priority
				  << ",\"percentage\":" << (q.args.queue_percentage & 0xff) << ",\"state\":\"" << qs << "\""
				  << ",\"gws\":" << (q.gws ? "true" : "false") << ",\"cu_mask\":[";
				for (size_t w = 0; w < q.cu_mask.size(); ++w)
					o << (w ? "," : "") << q.cu_mask[w];
				o << "]";
				if (q.engine) {
					o << ",\"engine\":{\"rptr\":" << q.engine->rptr << ",\"packets\":" << q.engine->packets
					  << ",\"hung\":" << (q.engine->hung ? "true" : "false");
					if (q.engine->hung)
						o << ",\"why\":" << json_str(q.engine->why);
					o << "}";
				}
				o << "}";
				first = false;
			}
			o << "]}";
			return o.str();
		}
		if (cmd == "events") {
			o << "{\"pid\":" << pid << ",\"events\":[";
			bool first = true;
			for (auto &[id, e] : p.events) {
				o << (first ? "" : ",") << "{\"id\":" << id << ",\"type\":" << e.type
				  << ",\"auto_reset\":" << (e.auto_reset ? "true" : "false")
				  << ",\"signaled\":" << (e.signaled ? "true" : "false") << "}";
				first = false;
			}
			o << "]}";
			return o.str();
		}
		// bo-bytes <pid> <handle-or-va> <offset> <len>
		uint64_t key = 0, off = 0, len = 0;
		std::string ks;
		in >> ks >> off >> len;
		key = std::strtoull(ks.c_str(), nullptr, 0);
		const Bo *found = nullptr;
		uint64_t base_off = 0;
		for (auto &pdd : p.pdds)
			for (auto &[id, bo] : pdd.bos)
				if (((static_cast<uint64_t>(pdd.user_gpu_id) << 32) | id) == key)
					found = bo.get();
		if (!found)
			for (auto &pdd : p.pdds)
				for (auto &[id, bo] : pdd.bos)
					if (!found && bo->va <= key && key < bo->va + bo->size) {
						found = bo.get();
						base_off = key - bo->va;
					}
		if (!found)
			return "{\"error\":\"no such bo\"}";
		off += base_off;
		if (len > 65536 || off > found->size || len > found->size - off)
			return "{\"error\":\"range\"}";
		std::vector<uint8_t> tmp(len);
		if (found->mem)
			std::memcpy(tmp.data(), found->mem->data() + off, len);
		else if (pm_->read(found->userptr_tgid, found->userptr_addr + off, tmp.data(), len) != 0)
			return "{\"error\":\"fault\"}";
		std::string hex;
		static const char *dig = "0123456789abcdef";
		for (uint8_t b : tmp) {
			hex += dig[b >> 4];
			hex += dig[b & 15];
		}
		return "{\"bytes\":\"" + hex + "\"}";
	}
	if (cmd == "counters") {
		o << "{\"ioctls\":{";
		bool first = true;
		for (auto &[n, v] : ioctl_counts_) {
			o << (first ? "" : ",") << json_str(n) << ":" << v;
			first = false;
		}
		o << "},\"sdma_jobs\":" << counters_->sdma_jobs.load() << ",\"sdma_failed\":"
		  << counters_->sdma_failed.load() << ",\"sdma_bytes\":" << counters_->sdma_bytes.load()
		  << ",\"vm_faults\":" << counters_->vm_faults.load() << ",\"stalls\":" << counters_->stalls.load()
		  << ",\"faults\":[";
		{
			std::lock_guard fl(counters_->mu);
			for (size_t i = 0; i < counters_->faults.size(); ++i)
				o << (i ? "," : "") << counters_->faults[i];
		}
		o << "]}";
		return o.str();
	}
	if (cmd == "userptr") {
		// userptr <pid>: that process's; userptr gem-all: the GEM
		// userptr BOs of all processes together
		std::string arg;
		in >> arg;
		const bool all = arg == "gem-all";
		const pid_t pid = all ? 0 : static_cast<pid_t>(std::strtol(arg.c_str(), nullptr, 10));
		auto [cur, peak] = all ? ledger_->gem_all() : ledger_->get(pid);
		o << "{\"pid\":" << pid << ",\"current\":" << cur << ",\"peak\":" << peak << "}";
		return o.str();
	}
	if (cmd == "files") {
		// files [<pid>] [nosum]: render files opened by / kfd files of pid
		std::string arg;
		in >> arg;
		pid_t only = arg.empty() || arg == "nosum" ? 0 : static_cast<pid_t>(std::strtol(arg.c_str(), nullptr, 10));
		o << "{\"files\":[";
		bool first = true;
		for (auto &[k, f] : files_) {
			if (only && (f.kind == FileKind::Kfd ? f.kfd_owner : f.drm->opener) != only)
				continue;
			o << (first ? "" : ",") << "{\"dev\":" << k.dev << ",\"ino\":" << k.ino;
			if (f.kind == FileKind::Kfd) {
				o << ",\"kind\":\"kfd\",\"owner\":" << f.kfd_owner << "}";
			} else {
				DrmFile &d = *f.drm;
				o << ",\"kind\":\"render\",\"minor\":" << d.dev->minor << ",\"opener\":" << d.opener
				  << ",\"compute_vm\":" << (d.compute_vm ? "true" : "false") << ",\"handles\":[";
				bool f2 = true;
				for (auto &[h, bo] : d.handles()) {
					o << (f2 ? "" : ",") << "{\"handle\":" << h << ",\"size\":" << bo->size
					  << ",\"offset\":" << bo->fake_offset << ",\"type\":\"" << type_name(bo->type)
					  << "\",\"checksum\":" << hex64(bo_checksum(*bo)) << "}";
					f2 = false;
				}
				o << "],\"mappings\":[";
				f2 = true;
				for (auto &[s, m] : d.vm.all()) {
					o << (f2 ? "" : ",") << "{\"va\":" << m.start << ",\"size\":" << m.size
					  << ",\"offset\":" << m.offset << ",\"flags\":" << m.flags
					  << ",\"handle\":" << d.handle_of(m.bo.get()) << ",\"kfd\":" << (m.bo->kfd ? "true" : "false")
					  << "}";
					f2 = false;
				}
				o << "]}";
			}
			first = false;
		}
		o << "]}";
		return o.str();
	}
	return "{\"error\":\"unknown query\"}";
}

// ---- entry points: no exception crosses the Model interface ---------------
// (an allocation failure while serving a client is that call's ENOMEM).

int ModelImpl::open_kfd(Caller &c, bool cloexec)
{
	try {
		return do_open_kfd(c, cloexec);
	} catch (const std::exception &) {
		return -ENOMEM;
	}
}

int ModelImpl::open_render(Caller &c, uint32_t minor, bool cloexec)
{
	try {
		return do_open_render(c, minor, cloexec);
	} catch (const std::exception &) {
		return -ENOMEM;
	}
}

long ModelImpl::ioctl(Caller &c, FileKey file, unsigned long cmd, uint64_t arg)
{
	try {
		return do_ioctl(c, file, cmd, arg);
	} catch (const std::exception &) {
		return -ENOMEM;
	}
}

int ModelImpl::mmap(Caller &c, FileKey file, uint64_t offset, uint64_t len, int prot, MmapTarget *out)
{
	try {
		return do_mmap(c, file, offset, len, prot, out);
	} catch (const std::exception &) {
		return -ENOMEM;
	}
}

std::string ModelImpl::introspect(std::string_view query)
{
	try {
		return do_introspect(query);
	} catch (const std::exception &e) {
		return std::string("{\"error\":") + json_str(e.what()) + "}";
	}
}

} // namespace detail

std::unique_ptr<Model> make_model(const MachineDesc &machine, std::shared_ptr<ProcessMemory> memory)
{
	return std::make_unique<detail::ModelImpl>(machine, std::move(memory));
}

} // namespace kfdemu
