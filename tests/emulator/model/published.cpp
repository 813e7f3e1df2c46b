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
//
// They are rewritten after the ioctls that change them (ACQUIRE_VM, ALLOC
// and FREE_MEMORY_OF_GPU, CREATE/DESTROY_QUEUE, IMPORT_DMABUF, CRIU_OP,
// GEM_CREATE, GEM_CLOSE), each file replaced by a rename so a reader never
// sees a partial one. Without a root (in-process tests) nothing is written.
#include "model/state.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

namespace kfdemu::detail {

namespace {

namespace fs = std::filesystem;

void put_file(const fs::path &p, const std::string &content)
{
	std::error_code ec;
	fs::create_directories(p.parent_path(), ec);
	const fs::path tmp = p.string() + ".kfdemu-tmp";
	int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0444);
	if (fd < 0)
		return;
	bool ok = ::write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size());
	::close(fd);
	if (!ok || ::rename(tmp.c_str(), p.c_str()))
		::unlink(tmp.c_str());
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
	for (auto &[pid, p] : procs_)
		publish_process(*p);
	publish_devices();
}

void ModelImpl::publish_process(const KfdProcess &p)
{
	if (sysfs_root_.empty())
		return;
	const fs::path dir = fs::path(sysfs_root_) / "sys/devices/virtual/kfd/kfd/proc" / std::to_string(p.tgid);
	put_file(dir / "pasid", std::to_string(p.pasid) + "\n");
	for (const Pdd &pdd : p.pdds) {
		const std::string id = std::to_string(pdd.dev->gpu_id);
		uint64_t vram = 0;
		for (const auto &[bid, bo] : pdd.bos)
			if (bo->type == BoType::Vram && !bo->import_of)
				vram += bo->size;
		put_file(dir / ("vram_" + id), std::to_string(vram) + "\n");
		put_file(dir / ("sdma_" + id), "0\n");
		put_file(dir / ("stats_" + id) / "evicted_ms", "0\n");
		put_file(dir / ("stats_" + id) / "cu_occupancy", "0\n");
	}
	std::error_code ec;
	fs::remove_all(dir / "queues", ec);
	fs::create_directories(dir / "queues", ec);
	for (const auto &[qid, q] : p.queues) {
		const fs::path qd = dir / "queues" / std::to_string(qid);
		const Pdd *pdd = nullptr;
		for (const Pdd &x : p.pdds)
			if (x.user_gpu_id == q.user_gpu_id)
				pdd = &x;
		put_file(qd / "size", std::to_string(q.args.ring_size));
		put_file(qd / "type", std::to_string(kernel_queue_type(q.args.queue_type)));
		put_file(qd / "gpuid", std::to_string(pdd ? pdd->dev->gpu_id : q.user_gpu_id));
	}
}

void ModelImpl::unpublish_process(pid_t tgid)
{
	if (sysfs_root_.empty())
		return;
	std::error_code ec;
	fs::remove_all(fs::path(sysfs_root_) / "sys/devices/virtual/kfd/kfd/proc" / std::to_string(tgid), ec);
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
		put_file(dir / "mem_info_vram_used", used);
		if (d->node->large_bar)
			put_file(dir / "mem_info_vis_vram_used", used);
	}
}

} // namespace kfdemu::detail
