// SPDX-License-Identifier: GPL-2.0-only
//
// The sysfs files the kernel keeps current as processes use the GPU, written
// into the emulator's root (Model::set_sysfs_root) so that tools such as
// rocm-smi read them through the shim as they would read the kernel's:
//
//   /sys/class/kfd/kfd/proc/<pid>/     one per KFD context (created when the
//       pasid                          process opens /dev/kfd, removed at its
//       vram_<gpu_id>                  exit): VRAM bytes it allocated through
//       sdma_<gpu_id>                  KFD; SDMA activity (0: not modelled);
//       stats_<gpu_id>/{evicted_ms,cu_occupancy}   (0: no shaders run)
//       queues/<qid>/{size,type,gpuid} (no newline, as the kernel prints
//                                       them; type 0 compute, 1 SDMA,
//                                       4 SDMA XGMI)
//   <PCI device>/mem_info_vram_used    the GPU's VRAM accounting
//   <PCI device>/mem_info_vis_vram_used (large BAR: the same)
//   <PCI device>/mem_info_gtt_used     the GPU's GTT manager use
//
// They are rewritten after the ioctls that change them (ACQUIRE_VM, ALLOC
// and FREE_MEMORY_OF_GPU, CREATE/DESTROY_QUEUE, IMPORT_DMABUF, CRIU_OP,
// GEM_CREATE, GEM_CLOSE), each file replaced by a rename so a reader never
// sees a partial one, and only when its contents change: a dump closes
// thousands of imported handles, none of which changes what a file says,
// and creating an inode per ioctl cost the emulator hundreds of
// microseconds each (the kernel computes these files when they are read).
// Without a root (in-process tests) nothing is written.
#include "model/state.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <vector>
#include <filesystem>

namespace kfdemu::detail {

namespace {

namespace fs = std::filesystem;

bool put_file(const fs::path &p, const std::string &content)
{
	std::error_code ec;
	fs::create_directories(p.parent_path(), ec);
	const fs::path tmp = p.string() + ".kfdemu-tmp";
	int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0444);
	if (fd < 0)
		return false;
	bool ok = ::write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size());
	::close(fd);
	if (!ok || ::rename(tmp.c_str(), p.c_str())) {
		::unlink(tmp.c_str());
		return false;
	}
	return true;
}

// The kernel's queue type numbers (enum kfd_queue_type) for the ioctl's.
uint32_t kernel_queue_type(uint32_t ioctl_type)
{
	switch (ioctl_type) {
	case abi::kfd::QUEUE_SDMA: return 1;
	case abi::kfd::QUEUE_SDMA_XGMI: return 4;
	default: return 0; // compute, compute AQL
	}
}

} // namespace

void ModelImpl::set_sysfs_root(const std::string &root)
{
	Lock lk(mu_);
	sysfs_root_ = root;
	published_.clear();
	for (auto &[pid, p] : procs_)
		publish_process(*p);
	publish_devices();
}

void ModelImpl::publish_file(const std::string &path, const std::string &content)
{
	auto it = published_.find(path);
	if (it != published_.end() && it->second == content)
		return;
	if (put_file(path, content))
		published_[path] = content;
	else
		published_.erase(path);
}

void ModelImpl::unpublish_dir(const std::string &dir)
{
	std::error_code ec;
	fs::remove_all(dir, ec);
	const std::string prefix = dir + "/";
	for (auto it = published_.begin(); it != published_.end();)
		it = it->first.compare(0, prefix.size(), prefix) == 0 ? published_.erase(it) : std::next(it);
}

void ModelImpl::publish_process(const KfdProcess &p)
{
	if (sysfs_root_.empty())
		return;
	const fs::path dir = fs::path(sysfs_root_) / "sys/devices/virtual/kfd/kfd/proc" / std::to_string(p.tgid);
	publish_file(dir / "pasid", std::to_string(p.pasid) + "\n");
	for (const Pdd &pdd : p.pdds) {
		const std::string id = std::to_string(pdd.dev->gpu_id);
		uint64_t vram = 0;
		for (const auto &[bid, bo] : pdd.bos)
			if (bo->type == BoType::Vram && !bo->import_of)
				vram += bo->size;
		publish_file(dir / ("vram_" + id), std::to_string(vram) + "\n");
		publish_file(dir / ("sdma_" + id), "0\n");
		publish_file(dir / ("stats_" + id) / "evicted_ms", "0\n");
		publish_file(dir / ("stats_" + id) / "cu_occupancy", "0\n");
	}
	// queues/: a directory per queue, those of destroyed queues removed.
	std::error_code ec;
	fs::create_directories(dir / "queues", ec);
	std::vector<fs::path> gone;
	for (const auto &e : fs::directory_iterator(dir / "queues", ec)) {
		const std::string name = e.path().filename().string();
		char *end = nullptr;
		const unsigned long qid = std::strtoul(name.c_str(), &end, 10);
		if (*end || !p.queues.count(static_cast<uint32_t>(qid)))
			gone.push_back(e.path());
	}
	for (const auto &g : gone)
		unpublish_dir(g);
	for (const auto &[qid, q] : p.queues) {
		const fs::path qd = dir / "queues" / std::to_string(qid);
		const Pdd *pdd = nullptr;
		for (const Pdd &x : p.pdds)
			if (x.user_gpu_id == q.user_gpu_id)
				pdd = &x;
		publish_file(qd / "size", std::to_string(q.args.ring_size));
		publish_file(qd / "type", std::to_string(kernel_queue_type(q.args.queue_type)));
		publish_file(qd / "gpuid", std::to_string(pdd ? pdd->dev->gpu_id : q.user_gpu_id));
	}
}

void ModelImpl::unpublish_process(pid_t tgid)
{
	if (sysfs_root_.empty())
		return;
	unpublish_dir(fs::path(sysfs_root_) / "sys/devices/virtual/kfd/kfd/proc" / std::to_string(tgid));
}

void ModelImpl::publish_devices()
{
	if (sysfs_root_.empty())
		return;
	for (const auto &d : devices_) {
		if (d->node->pci_slot.empty())
			continue;
		const fs::path dir = fs::path(sysfs_root_) / "sys/devices/pci0000:00" / d->node->pci_slot;
		const std::string used = std::to_string(d->vram_used->load()) + "\n";
		publish_file(dir / "mem_info_vram_used", used);
		if (d->node->large_bar)
			publish_file(dir / "mem_info_vis_vram_used", used);
		publish_file(dir / "mem_info_gtt_used", std::to_string(d->gtt_used->load()) + "\n");
	}
}

} // namespace kfdemu::detail
