// SPDX-License-Identifier: GPL-2.0-only
//
// In a restored task, at RESTORE_EXT_FILE: a /dev/kfd file. KFD state
// recreated (CRIU_OP RESTORE), buffer contents copied in (or handed over
// to CRIU's main process), and the CPU mappings to move recorded.
#include <fcntl.h>
#include <unistd.h>

#include "base/log.h"
#include "device/hsakmt_shm.h"
#include "device/kfd.h"
#include "device/system.h"
#include "image/image_names.h"
#include "plugin/restore_contents.h"
#include "plugin/restore_task.h"
#include "plugin/summary.h"

namespace amdcr {

Result<KfdRestored> TaskRestore::recreate_kfd_state(const Kfd &kfd, const KfdImage &img)
{
	TaskState &task = own();
	std::vector<KfdDeviceBucket> devices;
	for (const auto &d : img.devices) {
		if (!d.is_gpu())
			continue;
		const GpuMapEntry *m = task.devices.map().find_checkpointed(d.gpu_id);
		if (!m)
			return make_error(EINVAL, "gpu 0x%04x has no local GPU", d.gpu_id);
		auto fd = task.files.node_file(m->local_render_minor);
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
		return std::move(st).error();
	KfdRestoreRequest req{devices, bos, img.priv_data, img.num_of_objects};
	auto restored = kfd.restore(req);
	if (!restored)
		return std::move(restored).error();
	log_debug("pid %u: KFD state recreated (%zu GPUs, %zu BOs)", img.pid, devices.size(), bos.size());
	return restored;
}

Result<std::vector<int>> TaskRestore::note_restored_bos(const KfdImage &img, const KfdRestored &restored)
{
	TaskState &task = own();
	std::vector<int> dmabufs;
	for (size_t i = 0; i < img.bos.size(); i++) {
		const KfdBo &b = img.bos[i];
		const KfdBoBucket &r = restored.bos[i];
		const GpuMapEntry *m = task.devices.map().find_checkpointed(b.gpu_id);
		if (b.has_contents()) {
			if (!m)
				return make_error(EINVAL, "BO %zu at 0x%llx is on gpu 0x%04x, which the image lists no device for",
						  i, static_cast<unsigned long long>(b.addr), b.gpu_id);
			if (!r.dmabuf.valid())
				return make_error(EIO, "BO %zu at 0x%llx: RESTORE returned no dma-buf", i,
						  static_cast<unsigned long long>(b.addr));
			dmabufs.push_back(r.dmabuf.get());
			task.mappings.add({false, checkpointed_minor(task.devices.kfd_images(), b.gpu_id),
					   m->local_render_minor, b.offset, r.restored_offset});
		} else if (b.maps_through_kfd()) {
			// Any /dev/kfd file maps these (the driver finds the
			// process by its mm): CRIU opens the path itself.
			task.mappings.add({true, 0, 0, b.offset, r.restored_offset});
		}
	}
	return dmabufs;
}

Status TaskRestore::restore_kfd(const ImageDir &images, int id, const KfdImage &img, UniqueFd *out)
{
	// CRIU restores each task under its dumped pid (pstree.img's, as the
	// task sees itself): the KFD state goes to the task it was dumped from.
	if (plan_.bound_to_criu() && img.pid != static_cast<uint32_t>(::getpid()))
		return make_error(EINVAL,
				  "%s: dumped from pid %u, but CRIU restores the file in task %d: the image comes "
				  "from another task or checkpoint",
				  kfd_image_name(id).c_str(), img.pid, static_cast<int>(::getpid()));
	if (auto st = own().devices.fit(true); !st)
		return st;
	if (auto st = check_kfd_criu_support(env_.paths); !st)
		return st;
	auto kfd = Kfd::open(env_.paths.kfd_path());
	if (!kfd)
		return std::move(kfd).error();
	auto restored = recreate_kfd_state(*kfd, img);
	if (!restored)
		return std::move(restored).error();
	auto dmabufs = note_restored_bos(img, *restored); // of the BOs with contents, in image order
	if (!dmabufs)
		return std::move(dmabufs).error();
	auto jobs = kfd_copy_jobs(env_, id, img, own().devices.map(), plan_.kfd_chain(id), *dmabufs);
	if (!jobs)
		return std::move(jobs).error();
	if (auto st = copy_contents(images, HandOverKind::Kfd, id, *jobs, *dmabufs); !st)
		return st;
	if (SharedCopies *copies = fabric_.shared_copies())
		count_file(copies->totals, img.bos.size());

	if (auto st = restore_hsakmt_shm(env_.paths.shm_dir, {img.shared_mem_size, img.shared_mem_magic}); !st)
		return std::move(st).error().context("hsakmt shared memory");
	*out = UniqueFd(::fcntl(kfd->fd(), F_DUPFD_CLOEXEC, 0));
	if (!out->valid())
		return errno_error(errno, "dup of the restored /dev/kfd file");
	return ok_status();
}

} // namespace amdcr
