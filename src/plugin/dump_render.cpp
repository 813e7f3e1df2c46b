// SPDX-License-Identifier: GPL-2.0-only
//
// The dump of a render node file (/dev/dri/renderD<N>): its GEM buffer
// objects (handle, creation parameters, GPU VA mappings, CPU mmap offset,
// amdgpu metadata)
// into amdgpu-renderD-<id>.img, and their contents, each BO into its own
// amdgpu-drm-pages file, through the one bounded SDMA copy (src/copy).
#include "plugin/dump.h"

#include <cinttypes>

#include "base/log.h"
#include "copy/gpu_copy.h"
#include "device/gem.h"
#include "device/system.h"
#include "image/image_names.h"
#include "image/render_image.h"
#include "plugin/summary.h"

namespace amdcr {
namespace {

// One BO's entry: its properties, VA mappings, mmap offset and metadata.
Result<DrmBo> describe_bo(int fd, const GemBoInfo &h, uint32_t minor)
{
	if (h.is_import)
		return make_error(ENOTSUP,
				  "renderD%u: GEM handle %u (%" PRIu64 " bytes) is a dma-buf of another device; "
				  "this plugin restores BOs shared between files of one GPU only, so it does "
				  "not dump it",
				  minor, h.handle, h.size);
	DrmBo bo;
	bo.handle = h.handle;
	bo.size = h.size;
	bo.preferred_domains = h.preferred_domains;
	bo.alloc_flags = h.alloc_flags;
	bo.alignment = h.alignment_bytes;
	auto maps = gem_mapping_info(fd, h.handle);
	if (!maps)
		return std::move(maps).error();
	for (const auto &m : *maps) {
		bo.vms.push_back({m.addr, m.size, m.offset, m.flags});
		bo.addr = m.addr; // upstream records the last mapping's address
	}
	auto md = gem_get_metadata(fd, h.handle);
	if (!md)
		return std::move(md).error();
	if (!md->empty())
		bo.metadata = std::move(*md); // a new BO's is not kept
	auto offset = gem_mmap_offset(fd, h.handle);
	if (offset)
		bo.offset = *offset;
	else if (offset.error().code() == EPERM)
		bo.offset = 0; // no CPU access: the process cannot have it mapped
	else
		return std::move(offset).error();
	return bo;
}

} // namespace

Status DumpSession::dump_render(int fd, int id, const TopologyNode &gpu)
{
	ledger_.start_guardian();
	auto images = files_.image_dir();
	if (!images)
		return std::move(images).error();
	const uint32_t minor = gpu.drm_render_minor;
	auto handles = gem_list_handles(fd);
	if (!handles)
		return std::move(handles).error().context(strprintf("renderD%u", minor));
	if (auto st = ensure_fd_room(handles->size()); !st)
		return st;

	RenderNodeImage img;
	img.gpu_id = gpu.gpu_id;
	img.id = static_cast<uint32_t>(id);
	img.drm_render_minor = minor;
	auto binding = files_.binding_for(id);
	if (!binding)
		return std::move(binding).error();
	GpuCopyJob job;
	job.image_gpu_id = gpu.gpu_id;
	job.render_path = env_.paths.render_path(minor);
	job.checksums = env_.config.verify;
	job.pages_seal = binding->dump_id;
	std::vector<size_t> job_bo_index; // for each BO of the job, its index in img.bos
	std::vector<UniqueFd> dmabufs; // open until the copy is done
	for (const GemBoInfo &h : *handles) {
		auto bo = describe_bo(fd, h, minor);
		if (!bo)
			return std::move(bo).error();
		if (bo->has_contents()) {
			auto dmabuf = gem_export_dmabuf(fd, h.handle);
			if (!dmabuf)
				return std::move(dmabuf).error();
			// Other files (of this or another process) may hold the
			// same BO: its contents go with the first one dumped.
			const auto index = static_cast<uint32_t>(img.bos.size());
			bool seen = false;
			auto shared = shared_bos_.share(dmabuf->get(),
					       SharedBo{0, gpu.gpu_id, h.size, h.alignment_bytes, h.preferred_domains,
							h.alloc_flags, static_cast<uint32_t>(id), minor, index,
							std::nullopt, bo->metadata},
					       h.handle, &seen);
			if (!shared)
				return std::move(shared).error().context(strprintf("renderD%u", minor));
			// A streamed restore reads each file once, in its
			// task, and cannot count a BO's holders before it
			// forks them.
			if (seen && images->streaming())
				return make_error(ENOTSUP,
						  "BO of %" PRIu64 " bytes (handle %u) is "
						  "held by several files (a shared dma-buf), "
						  "which this plugin does not checkpoint with --stream",
						  h.size, h.handle)
					.context(strprintf("renderD%u", minor));
			bo->shared = *shared;
			// One BO, one metadata: as its first holder read it.
			bo->metadata = shared->metadata;
			bo->is_import = seen;
			if (!seen) {
				job.bos.push_back({dmabuf->get(), bo->size});
				job.bo_files.push_back(drm_pages_image_name(id, minor, index));
				job_bo_index.push_back(img.bos.size());
				dmabufs.push_back(std::move(*dmabuf));
			}
		}
		img.bos.push_back(std::move(*bo));
	}
	const std::string name = render_image_name(id);
	if (auto st = validate_render_image(img, name); !st)
		return st;

	// Contents first, metadata last: a render image under its final name
	// implies its pages files are complete. The files are the session's
	// once committed (DumpFiles, by inode): a dump that fails later
	// removes them (finish()), and no file it did not write.
	if (!job.bos.empty()) {
		auto copied = run_gpu_copies(Direction::GpuToFile, *images, {job}, copy_settings(env_, shared_copies()));
		if (!copied)
			return std::move(copied).error().context(strprintf("renderD%u", minor));
		if (job.checksums) {
			auto &sums = copied->front().checksums;
			if (sums.size() != job_bo_index.size())
				return make_error(EIO, "renderD%u: %zu checksums for %zu BOs", minor, sums.size(),
						  job_bo_index.size());
			for (size_t k = 0; k < sums.size(); k++) {
				DrmBo &bo = img.bos[job_bo_index[k]];
				// The files that hold the BO after this one
				// carry them in their shared BO entries; this
				// one's are its own entry's.
				if (bo.shared)
					shared_bos_.set_checksum(bo.shared->id, sums[k]);
				bo.checksum = std::move(sums[k]);
			}
		}
	}
	img.binding = *binding;
	if (auto st = write_render_image(*images, id, img); !st)
		return st;
	log_gpu(LogLevel::Debug, gpu.gpu_id, "render node %u: wrote %s (%zu BOs, %zu with contents)", minor,
		name.c_str(), img.bos.size(), job.bos.size());
	if (shared_copies_)
		count_file((*shared_copies_)->totals, img.bos.size(), gpu.gpu_id);
	return ok_status();
}

} // namespace amdcr
