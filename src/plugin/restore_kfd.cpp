// SPDX-License-Identifier: GPL-2.0-only
//
// The restore of a /dev/kfd file: KFD state recreated (CRIU_OP RESTORE),
// buffer contents streamed back, and the CPU mappings to move recorded.
#include "plugin/restore.h"

#include <fcntl.h>

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
	if (auto st = fit_map_to_task(true); !st)
		return st;
	if (auto st = check_kfd_criu_support(env_.paths); !st)
		return st;
	auto kfd = Kfd::open(env_.paths.kfd_path());
	if (!kfd)
		return std::move(kfd).error();

	std::vector<KfdDeviceBucket> devices;
	std::vector<GpuCopyJob> jobs;
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
		GpuCopyJob job;
		job.image_gpu_id = d.gpu_id;
		job.render_path = env_.paths.render_path(m->local_render_minor);
		job.pages_file = kfd_pages_image_name(id, d.gpu_id);
		jobs.push_back(std::move(job));
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
		return std::move(restored).error().context("CRIU_OP RESTORE");
	log_info("pid %u: KFD state recreated (%zu GPUs, %zu BOs)", img.pid, devices.size(), bos.size());

	for (size_t i = 0; i < img.bos.size(); i++) {
		const KfdBo &b = img.bos[i];
		const KfdBoBucket &r = restored->bos[i];
		const GpuMapEntry *m = map_.find_checkpointed(b.gpu_id);
		if (b.has_contents()) {
			auto job = std::find_if(jobs.begin(), jobs.end(), [&](const GpuCopyJob &j) {
				return j.image_gpu_id == b.gpu_id;
			});
			if (job == jobs.end())
				return make_error(EINVAL, "BO %zu at 0x%llx is on gpu 0x%04x, which the image lists no device for",
						  i, static_cast<unsigned long long>(b.addr), b.gpu_id);
			if (!r.dmabuf.valid())
				return make_error(EIO, "BO %zu at 0x%llx: RESTORE returned no dma-buf", i,
						  static_cast<unsigned long long>(b.addr));
			job->bos.push_back({r.dmabuf.get(), b.size, b.checksum ? &*b.checksum : nullptr,
					    strprintf("BO %zu at 0x%llx", i, static_cast<unsigned long long>(b.addr))});
			vmas_.push_back({false, checkpointed_minor(b.gpu_id), m->local_render_minor, b.offset,
					 r.restored_offset});
		} else if (b.maps_through_kfd()) {
			// Any /dev/kfd file maps these (the driver finds the
			// process by its mm): CRIU opens the path itself.
			vmas_.push_back({true, 0, 0, b.offset, r.restored_offset});
		}
	}
	auto copied = run_gpu_copies(Direction::FileToGpu, images, jobs, env_.config.max_buffer_size);
	if (!copied)
		return std::move(copied).error();

	if (auto st = restore_hsakmt_shm(env_.paths.shm_dir, {img.shared_mem_size, img.shared_mem_magic});
	    !st)
		return std::move(st).error().context("hsakmt shared memory");
	*out = UniqueFd(::fcntl(kfd->fd(), F_DUPFD_CLOEXEC, 0));
	if (!out->valid())
		return errno_error(errno, "dup of the restored /dev/kfd file");
	return ok_status();
}

} // namespace amdcr
