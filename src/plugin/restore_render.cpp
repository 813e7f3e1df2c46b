// SPDX-License-Identifier: GPL-2.0-only
//
// The restore of a render node file onto its mapped local GPU: each GEM
// buffer object recreated under its checkpointed handle, mapped at its GPU
// VAs, its contents streamed back (the one bounded SDMA copy, src/copy),
// and its CPU mappings moved to the new mmap offsets (UPDATE_VMA_MAP).
#include "plugin/restore.h"

#include <fcntl.h>

#include <cinttypes>

#include "base/drm.h"
#include "base/log.h"
#include "copy/gpu_copy.h"
#include "device/gem.h"
#include "device/system.h"
#include "image/image_names.h"
#include "image/render_image.h"

namespace amdcr {

namespace {

// Creates `bo` in `fd` under its checkpointed handle and maps it at its
// VAs. The handle is closed again (with its mappings) if anything fails.
Result<GemHandle> recreate_bo(int fd, const DrmBo &bo)
{
	auto h = GemHandle::create(fd, bo.size, bo.alignment, bo.preferred_domains, bo.alloc_flags);
	if (!h)
		return std::move(h).error();
	if (auto st = h->change_to(bo.handle); !st)
		return std::move(st).error();
	for (const DrmVm &vm : bo.vms)
		if (auto st = gem_va_map(fd, bo.handle, vm.addr, vm.size, vm.offset,
					 gem_va_flags_from_pte(vm.flags));
		    !st)
			return std::move(st).error();
	return h;
}

} // namespace

Status RestoreSession::restore_render(const ImageDir &images, int id, UniqueFd *out)
{
	if (auto st = fit_map_to_task(false); !st)
		return st;
	// Not read_render_image: with streamed images (criu --stream)
	// restore_streamed has read it already, and a file is served once.
	auto img = take_render_image(images, id);
	if (!img)
		return std::move(img).error();
	const std::string name = render_image_name(id);
	const GpuMapEntry *m = mapping_for_render(*img);
	if (!m)
		return make_error(EINVAL, "%s: gpu 0x%04x (renderD%u) has no local GPU", name.c_str(),
				  img->gpu_id, img->drm_render_minor);
	for (const DrmBo &bo : img->bos)
		if (bo.is_import)
			return make_error(ENOTSUP,
					  "%s: GEM handle %u is an imported dma-buf; this plugin cannot "
					  "restore imported buffers yet",
					  name.c_str(), bo.handle);
	// The same open file as KFD's RESTORE uses (in either order): the
	// driver lets only that file map the process's BOs.
	auto bound = local_render_fd(m->local_render_minor);
	if (!bound)
		return std::move(bound).error();
	if (auto st = ensure_fd_room(img->bos.size()); !st)
		return st;

	std::vector<GemHandle> created;
	std::vector<UniqueFd> dmabufs; // open until the copy is done
	std::vector<VmaUpdate> updates;
	GpuCopyJob job;
	job.image_gpu_id = img->gpu_id;
	job.render_path = env_.paths.render_path(m->local_render_minor);
	for (size_t i = 0; i < img->bos.size(); i++) {
		const DrmBo &bo = img->bos[i];
		auto h = recreate_bo(*bound, bo);
		if (!h)
			return std::move(h).error().context(strprintf("%s: BO %zu", name.c_str(), i));
		if (bo.offset != 0) {
			auto offset = gem_mmap_offset(*bound, bo.handle);
			if (!offset)
				return std::move(offset).error().context(name);
			updates.push_back({false, img->drm_render_minor, m->local_render_minor, bo.offset, *offset});
		}
		if (bo.has_contents()) {
			auto dmabuf = gem_export_dmabuf(*bound, bo.handle);
			if (!dmabuf)
				return std::move(dmabuf).error().context(name);
			job.bos.push_back({dmabuf->get(), bo.size});
			job.bo_files.push_back(
				drm_pages_image_name(id, img->drm_render_minor, static_cast<uint32_t>(i)));
			dmabufs.push_back(std::move(*dmabuf));
		}
		created.push_back(std::move(*h));
	}
	if (!job.bos.empty()) {
		auto copied = run_gpu_copies(Direction::FileToGpu, images, {job}, env_.config.max_buffer_size);
		if (!copied)
			return std::move(copied).error().context(name);
	}

	*out = UniqueFd(::fcntl(*bound, F_DUPFD_CLOEXEC, 0));
	if (!out->valid())
		return errno_error(errno, "dup of the render node file");
	// The BOs are the restored process's now.
	for (auto &h : created)
		(void)h.release();
	vmas_.insert(vmas_.end(), updates.begin(), updates.end());
	log_gpu(LogLevel::Info, img->gpu_id, "render node %u restored as renderD%u (%zu BOs, %zu with contents)",
		img->drm_render_minor, m->local_render_minor, img->bos.size(), job.bos.size());
	return ok_status();
}

} // namespace amdcr
