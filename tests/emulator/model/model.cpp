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
	: machine_(machine), pm_(std::move(memory)), limits_(memory_limits(machine_))
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
			d->gtt_size = limits_.gtt_size;
			int err = 0;
			d->mmio = Backing::create(kPage, "kfdemu-mmio", &err);
			uint32_t ne = n.num_sdma_engines ? n.num_sdma_engines : 1;
			for (uint32_t i = 0; i < ne; ++i)
				d->engines.push_back(std::make_unique<SdmaEngine>(n.sdma_gbps, pm_, counters_));
			for (uint32_t i = 0; i < kComputeRings; ++i)
				d->compute_rings.push_back(std::make_unique<SdmaEngine>(0.0, pm_, counters_));
			devices_.push_back(std::move(d));
		}
		++index;
	}
	restore_thread_ = std::jthread([this](std::stop_token st) { restore_worker(st); });
}

ModelImpl::~ModelImpl()
{
	// The restore worker first: it walks procs_ under mu_.
	restore_thread_.request_stop();
	if (restore_thread_.joinable())
		restore_thread_.join();
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
	for (auto &d : devices_) {
		d->engines.clear();
		d->compute_rings.clear();
	}
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

std::shared_ptr<Bo> ModelImpl::new_bo(Device &d, BoType type, uint64_t size, int *err, VramClient who)
{
	auto bo = std::make_shared<Bo>();
	bo->dev = &d;
	bo->type = type;
	bo->size = size;
	if (int e = place_bo(bo, who); e != 0) {
		*err = e;
		return nullptr;
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

bool ModelImpl::restart_while_paused(Caller &c, bool criu_op)
{
	if (criu_op || !c.restarts_while_paused())
		return false;
	auto it = procs_.find(c.identity().tgid);
	if (it == procs_.end())
		return false;
	// Only a call made before the process's last PROCESS_INFO: its
	// thread was frozen with it open. A call made after it comes from a
	// thread that runs (a process checkpointing itself, a thread CRIU
	// did not freeze) and is served, as the kernel serves it.
	const KfdProcess &p = *it->second;
	if (!p.made_before_pause(c.made_ns()))
		return false;
	count("restarted_while_paused");
	return true;
}

int ModelImpl::check_fault(const std::string &name, FaultRule::Action *action)
{
	for (auto &r : rules_) {
		if (r.rule.target == "sdma")
			continue;
		bool match = r.rule.target == name || (r.rule.target == "*" && name.rfind("open:", 0) != 0 &&
						       name.rfind("CRIU_OP:", 0) != 0);
		if (!match)
			continue;
		if (++r.seen == r.rule.nth || (r.rule.every && r.seen > r.rule.nth)) {
			if (action)
				*action = r.rule.action;
			return -(r.rule.err ? r.rule.err : EIO);
		}
	}
	return 0;
}

int ModelImpl::ioctl_fault(Lock &lk, Caller &c, const std::string &name, bool *after)
{
	auto action = FaultRule::Action::Fail;
	const int e = check_fault(name, &action);
	if (action == FaultRule::Action::StallAfter) {
		*after = true;
		return 0;
	}
	if (action != FaultRule::Action::Stall)
		return e;
	++counters_->stalls;
	lk.unlock();
	const bool gone = c.wait_caller_gone(FaultRule::kStallLimitMs);
	lk.lock();
	return gone ? -EINTR : e;
}

long ModelImpl::stall_after(Lock &lk, Caller &c, long r)
{
	++counters_->stalls;
	lk.unlock();
	const bool gone = c.wait_caller_gone(FaultRule::kStallLimitMs);
	lk.lock();
	return gone ? -EINTR : r;
}

int ModelImpl::check_fault_sdma(bool *hang)
{
	for (auto &r : rules_) {
		if (r.rule.target != "sdma")
			continue;
		if (++r.seen == r.rule.nth || (r.rule.every && r.seen > r.rule.nth)) {
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
	c.entered();
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
	FileEntry &f = it->second;
	const bool kfd = f.kind == FileKind::Kfd;
	if (restart_while_paused(c, kfd && nr == abi::kfd::CRIU_OP))
		return -abi::kErestartsys;
	const KfdIoctlDesc *kd = kfd ? kfd_ioctl_desc(nr) : nullptr;
	const DrmIoctlDesc *dd = kfd ? nullptr : drm_ioctl_desc(nr);
	const char *nm = kd ? kd->name : dd ? dd->name : nullptr;
	std::string name = nm ? nm : (kfd ? "AMDKFD_IOC_UNKNOWN" : "DRM_IOCTL_UNKNOWN");
	count(name);
	bool stall_after_call = false;
	if (int e = ioctl_fault(lk, c, name, &stall_after_call))
		return e;
	// The kernel's own definition decides the copy directions (for DRM,
	// those of both the caller's cmd and the kernel's).
	unsigned dir;
	unsigned flags;
	if (kfd) {
		// kfd_ioctl(): table range, then the caller, then the capability.
		if (!kd)
			return -ENOTTY;
		dir = kd->dir;
		flags = kd->flags;
		const CallerIdentity &id = c.identity();
		const bool cr = flags & kIoctlCheckpointRestore;
		bool tracer = cr && id.tgid != f.kfd_owner && c.is_tracer_of(f.kfd_owner);
		if (id.tgid != f.kfd_owner && !tracer)
			return -EBADF;
		if (cr && !id.cap_checkpoint_restore)
			return -EACCES;
	} else {
		// drm_ioctl(): unknown -> EINVAL, not render-allowed -> EACCES.
		if (!dd)
			return -EINVAL;
		if (!(dd->flags & kIoctlRenderAllow))
			return -EACCES;
		dir = abi::ioc_dir(cmd) & dd->dir;
		flags = dd->flags;
	}

	alignas(16) uint8_t buf[kArgBuf] = {};
	const size_t full_size = usize; // AMDKFD_IOC_SVM's attributes may reach beyond kArgBuf
	if (usize > kArgBuf)
		usize = kArgBuf; // larger than any struct: the tail is ignored
	if ((dir & abi::kIocWrite) && usize && c.read(arg, buf, usize) != 0)
		return -EFAULT;

	long r;
	if (kfd) {
		// The CRIU sub-op is a fault target of its own.
		if (nr == abi::kfd::CRIU_OP) {
			uint32_t op;
			std::memcpy(&op, buf + offsetof(abi::kfd::CriuArgs, op), sizeof op);
			std::string sub = criu_name(op);
			count(sub);
			if (int e = ioctl_fault(lk, c, sub, &stall_after_call))
				return e;
		}
		const pid_t owner = f.kfd_owner; // `f` may go while a stall waits
		r = kfd_ioctl(lk, c, f, *kd, buf, arg, full_size);
		if (r >= 0 && (flags & kIoctlPublishes) && !sysfs_root_.empty()) {
			if (auto pit = procs_.find(owner); pit != procs_.end())
				publish_process(*pit->second);
			publish_devices();
		}
	} else {
		std::shared_ptr<DrmFile> drm = f.drm; // may outlive the entry across waits
		r = drm_ioctl(lk, c, drm, *dd, buf, arg);
		if (r >= 0 && (flags & kIoctlPublishes))
			publish_devices();
	}
	if (stall_after_call)
		r = stall_after(lk, c, r);
	if (r == -abi::kErestartsys)
		return r; // nothing done, nothing written (a wait the pause ended)
	if ((dir & abi::kIocRead) && usize && c.write(arg, buf, usize) != 0)
		return -EFAULT;
	return r;
}

int ModelImpl::do_mmap(Caller &c, FileKey file, uint64_t offset, uint64_t len, int prot,
		    MmapTarget *out)
{
	(void)prot;
	Lock lk(mu_);
	if (restart_while_paused(c, false))
		return -abi::kErestartsys;
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
