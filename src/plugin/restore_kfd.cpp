// SPDX-License-Identifier: GPL-2.0-only
//
// The restore of a /dev/kfd file: KFD state recreated (CRIU_OP RESTORE),
// buffer contents streamed back, and the CPU mappings to move recorded.
#include "plugin/restore.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>

#include "base/log.h"
#include "copy/gpu_copy.h"
#include "device/kfd.h"
#include "image/image_names.h"
#include "plugin/hsakmt_shm.h"

namespace amdcr {

Status RestoreSession::restore_kfd(const ImageDir &images, int id, UniqueFd *out)
{
	const KfdImage &img = kfd_images_.at(id);
	// CRIU restores each task under its dumped pid (pstree.img's, as the
	// task sees itself): the KFD state goes to the task it was dumped from.
	if (criu_facts_ && img.pid != static_cast<uint32_t>(::getpid()))
		return make_error(EINVAL,
				  "%s: dumped from pid %u, but CRIU restores the file in task %d: the image comes "
				  "from another task or checkpoint",
				  kfd_image_name(id).c_str(), img.pid, static_cast<int>(::getpid()));
	if (auto st = fit_map_to_task(true); !st)
		return st;
	if (auto st = check_kfd_criu_support(env_.paths); !st)
		return st;
	auto kfd = Kfd::open(env_.paths.kfd_path());
	if (!kfd)
		return std::move(kfd).error();

	std::vector<KfdDeviceBucket> devices;
	for (const auto &d : img.devices) {
		if (!d.is_gpu())
			continue;
		const GpuMapEntry *m = map_.find_checkpointed(d.gpu_id);
		if (!m)
			return make_error(EINVAL, "gpu 0x%04x has no local GPU", d.gpu_id);
		auto fd = local_render_fd(m->local_render_minor);
		if (!fd)
			return std::move(fd).error();
		devices.push_back({d.gpu_id, m->local_gpu_id, *fd});
	}
	std::vector<KfdBoBucket> bos(img.bos.size());
	for (size_t i = 0; i < img.bos.size(); i++) {
		const KfdBo &b = img.bos[i];
		bos[i].addr = b.addr;
		bos[i].size = b.size;
		bos[i].offset = b.offset;
		bos[i].gpu_id = b.gpu_id;
		bos[i].alloc_flags = b.alloc_flags;
	}
	if (auto st = ensure_fd_room(bos.size()); !st)
		return st;
	KfdRestoreRequest req{devices, bos, img.priv_data, img.num_of_objects};
	auto restored = kfd->restore(req);
	if (!restored)
		return std::move(restored).error();
	log_debug("pid %u: KFD state recreated (%zu GPUs, %zu BOs)", img.pid, devices.size(), bos.size());

	std::vector<int> dmabufs; // of the BOs with contents, in image order
	for (size_t i = 0; i < img.bos.size(); i++) {
		const KfdBo &b = img.bos[i];
		const KfdBoBucket &r = restored->bos[i];
		const GpuMapEntry *m = map_.find_checkpointed(b.gpu_id);
		if (b.has_contents()) {
			if (!m)
				return make_error(EINVAL, "BO %zu at 0x%llx is on gpu 0x%04x, which the image lists no device for",
						  i, static_cast<unsigned long long>(b.addr), b.gpu_id);
			if (!r.dmabuf.valid())
				return make_error(EIO, "BO %zu at 0x%llx: RESTORE returned no dma-buf", i,
						  static_cast<unsigned long long>(b.addr));
			dmabufs.push_back(r.dmabuf.get());
			vmas_.push_back({false, checkpointed_minor(b.gpu_id), m->local_render_minor, b.offset,
					 r.restored_offset});
		} else if (b.maps_through_kfd()) {
			// Any /dev/kfd file maps these (the driver finds the
			// process by its mm): CRIU opens the path itself.
			vmas_.push_back({true, 0, 0, b.offset, r.restored_offset});
		}
	}
	auto jobs = kfd_copy_jobs(id, dmabufs);
	if (!jobs)
		return std::move(jobs).error();
	if (auto st = copy_contents(images, HandOverKind::Kfd, id, *jobs, dmabufs); !st)
		return st;
	if (totals_)
		totals_->add_file(img.bos.size());

	if (auto st = restore_hsakmt_shm(env_.paths.shm_dir, {img.shared_mem_size, img.shared_mem_magic});
	    !st)
		return std::move(st).error().context("hsakmt shared memory");
	*out = UniqueFd(::fcntl(kfd->fd(), F_DUPFD_CLOEXEC, 0));
	if (!out->valid())
		return errno_error(errno, "dup of the restored /dev/kfd file");
	return ok_status();
}

} // namespace amdcr
