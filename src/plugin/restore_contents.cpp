// SPDX-License-Identifier: GPL-2.0-only
#include "plugin/restore_contents.h"

#include <algorithm>
#include <cerrno>
#include <string>

#include "image/image_names.h"

namespace amdcr {

Result<std::vector<GpuCopyJob>> kfd_copy_jobs(const SessionEnv &env, int id, const KfdImage &img, const GpuMap &map,
					      const KfdChainPages *chain, std::span<const int> dmabufs)
{
	std::vector<GpuCopyJob> jobs;
	for (const auto &d : img.devices) {
		if (!d.is_gpu())
			continue;
		const GpuMapEntry *m = map.find_checkpointed(d.gpu_id);
		if (!m)
			return make_error(EINVAL, "gpu 0x%04x has no local GPU", d.gpu_id);
		GpuCopyJob job;
		job.image_gpu_id = d.gpu_id;
		job.render_path = env.paths.render_path(m->local_render_minor);
		job.pages_file = kfd_pages_image_name(id, d.gpu_id);
		job.pages_seal = pages_seal(img.binding);
		if (chain)
			job.chain = &chain->at(d.gpu_id);
		jobs.push_back(std::move(job));
	}
	size_t k = 0;
	for (size_t i = 0; i < img.bos.size(); i++) {
		const KfdBo &b = img.bos[i];
		if (!b.has_contents())
			continue;
		auto job = std::find_if(jobs.begin(), jobs.end(),
					[&](const GpuCopyJob &j) { return j.image_gpu_id == b.gpu_id; });
		if (job == jobs.end())
			return make_error(EINVAL, "BO %zu at 0x%llx is on gpu 0x%04x, which the image lists no device for",
					  i, static_cast<unsigned long long>(b.addr), b.gpu_id);
		if (k >= dmabufs.size())
			break;
		job->bos.push_back({dmabufs[k++], b.size, b.checksum ? &*b.checksum : nullptr,
				    strprintf("BO %zu at 0x%llx", i, static_cast<unsigned long long>(b.addr))});
	}
	const size_t want = static_cast<size_t>(
		std::count_if(img.bos.begin(), img.bos.end(), [](const KfdBo &b) { return b.has_contents(); }));
	if (want != dmabufs.size())
		return make_error(EINVAL, "%s: %zu buffers with contents, %zu dma-bufs given",
				  kfd_image_name(id).c_str(), want, dmabufs.size());
	return jobs;
}

Result<GpuCopyJob> render_copy_job(const SessionEnv &env, int id, const RenderNodeImage &img, const GpuMapEntry &m,
				   const RestorePlan &plan, std::span<const int> dmabufs)
{
	GpuCopyJob job;
	job.image_gpu_id = img.gpu_id;
	job.render_path = env.paths.render_path(m.local_render_minor);
	job.pages_seal = pages_seal(img.binding);
	const std::string name = render_image_name(id);
	size_t k = 0;
	for (size_t i = 0; i < img.bos.size(); i++) {
		const DrmBo &bo = img.bos[i];
		// A BO other files hold too is filled by its first holder
		// restored (TaskRestore::attach_shared_bo), not through this file.
		if (!bo.has_contents() || (bo.shared && plan.shared_among_files(bo.shared->id)))
			continue;
		if (k == dmabufs.size())
			return make_error(EINVAL, "%s: more buffers with contents than the %zu dma-bufs given",
					  name.c_str(), dmabufs.size());
		std::string file = drm_pages_image_name(id, img.drm_render_minor, static_cast<uint32_t>(i));
		job.bos.push_back({dmabufs[k++], bo.size, bo.checksum ? &*bo.checksum : nullptr,
				   strprintf("%s: BO %zu (GEM handle %u) of %s", file.c_str(), i, bo.handle,
					     name.c_str())});
		job.bo_files.push_back(std::move(file));
	}
	if (k != dmabufs.size())
		return make_error(EINVAL, "%s: %zu buffers with contents, %zu dma-bufs given", name.c_str(), k,
				  dmabufs.size());
	return job;
}

GpuCopyJob shared_bo_copy_job(const SessionEnv &env, const SharedBo &s, uint32_t minor, int dmabuf)
{
	GpuCopyJob job;
	job.image_gpu_id = s.gpu_id;
	job.render_path = env.paths.render_path(minor);
	// Its checksums, from whichever holder's entry this is (every holder
	// carries them; none with KFD_VERIFY=0 at dump or here).
	std::string file = drm_pages_image_name(static_cast<int>(s.contents_id), s.contents_minor, s.contents_index);
	job.bos.push_back({dmabuf, s.size, s.checksum ? &*s.checksum : nullptr, file + strprintf(": shared BO %u", s.id)});
	job.bo_files.push_back(std::move(file));
	return job;
}

Status fill_from_images(const ImageDir &images, const std::vector<GpuCopyJob> &jobs, const CopySettings &settings)
{
	auto copied = run_gpu_copies(Direction::FileToGpu, images, jobs, settings);
	if (!copied)
		return std::move(copied).error();
	return ok_status();
}

} // namespace amdcr
