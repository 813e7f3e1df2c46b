// SPDX-License-Identifier: GPL-2.0-only
//
// BOs that several files hold (image/render_image.h SharedBo): their
// identity across the files of a dump, and the dump of a bare dma-buf fd
// (amdgpu-dmabuf_<id>.img). The first file of the dump that holds a BO,
// render file or dma-buf, writes its contents; the others name it.
#include "plugin/dump.h"

#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include <cinttypes>

#include "base/log.h"
#include "copy/gpu_copy.h"
#include "device/gem.h"
#include "device/system.h"
#include "image/image_names.h"

namespace amdcr {
namespace {

// The GPU that made the buffer of dma-buf `dmabuf`, and the BO's creation
// parameters and metadata: imported into a render file of our own, the BO
// is that device's own (not IS_IMPORT) on exactly one GPU. nullopt: none
// of ours.
struct DmabufOrigin {
	const TopologyNode *gpu = nullptr;
	GemBoInfo info;
	std::optional<GemMetadata> metadata; // none: a new BO's
};

Result<std::optional<DmabufOrigin>> dmabuf_origin(const SystemPaths &paths, const Topology &topo, int dmabuf)
{
	for (const TopologyNode *gpu : topo.accessible_gpus()) {
		auto render = open_render_node(paths, gpu->drm_render_minor);
		if (!render)
			return std::move(render).error();
		auto h = GemHandle::import(render->get(), dmabuf);
		if (!h)
			continue; // not importable there: not this GPU's
		auto list = gem_list_handles(render->get());
		if (!list)
			return std::move(list).error();
		for (const GemBoInfo &info : *list) {
			if (info.handle != h->get() || info.is_import)
				continue;
			auto md = gem_get_metadata(render->get(), info.handle);
			if (!md)
				return std::move(md).error();
			DmabufOrigin origin{gpu, info, std::nullopt};
			if (!md->empty())
				origin.metadata = std::move(*md);
			return std::optional<DmabufOrigin>(std::move(origin));
		}
	}
	return std::optional<DmabufOrigin>();
}

} // namespace

Result<SharedBo> DumpSession::share_bo(int dmabuf, SharedBo first, uint32_t handle, bool *seen)
{
	struct stat st {};
	if (::fstat(dmabuf, &st) != 0)
		return errno_error(errno, "fstat of a dma-buf");
	const auto key = std::make_pair(static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino));
	if (auto it = shared_bos_.find(key); it != shared_bos_.end()) {
		// A streamed restore reads each file once, in its task, and
		// cannot count a BO's holders before it forks them.
		if (auto images = image_dir(); images && images->streaming())
			return make_error(ENOTSUP,
					  "BO of %" PRIu64 " bytes (handle %u) is "
					  "held by several files (a shared dma-buf), "
					  "which this plugin does not checkpoint with --stream",
					  first.size, handle);
		*seen = true;
		return it->second.bo;
	}
	if (shared_bos_.size() >= kMaxSharedBoId)
		return make_error(E2BIG, "more than %u BOs with contents in one checkpoint", kMaxSharedBoId);
	first.id = static_cast<uint32_t>(shared_bos_.size()) + 1;
	shared_bos_.emplace(key, SeenBo{first, handle});
	*seen = false;
	return first;
}

void DumpSession::set_shared_checksum(uint32_t id, const BoChecksum &checksum)
{
	for (auto &[key, seen] : shared_bos_)
		if (seen.bo.id == id)
			seen.bo.checksum = checksum;
}

Status DumpSession::dump_dmabuf(int fd, int id, bool *ours)
{
	*ours = false;
	struct statfs fs {};
	if (::fstatfs(fd, &fs) != 0 || static_cast<uint64_t>(fs.f_type) != DMA_BUF_MAGIC)
		return ok_status();
	const Topology *topo = topology();
	if (!topo)
		return ok_status();
	struct stat st {};
	if (::fstat(fd, &st) != 0)
		return errno_error(errno, strprintf("dma-buf file %d: fstat", id));
	const auto key = std::make_pair(static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino));
	const std::string name = dmabuf_image_name(id);

	DmabufImage img;
	std::optional<GpuCopyJob> job;
	if (auto it = shared_bos_.find(key); it != shared_bos_.end()) {
		img.gem_handle = it->second.handle;
		img.shared = it->second.bo;
	} else {
		auto origin = dmabuf_origin(env_.paths, *topo, fd);
		if (!origin)
			return std::move(origin).error().context(name);
		if (!*origin)
			return ok_status(); // another device's buffer
		const TopologyNode &gpu = *(*origin)->gpu;
		const GemBoInfo &info = (*origin)->info;
		const uint32_t minor = gpu.drm_render_minor;
		bool seen = false;
		auto shared = share_bo(fd,
				       SharedBo{0, gpu.gpu_id, info.size, info.alignment_bytes, info.preferred_domains,
						info.alloc_flags, static_cast<uint32_t>(id), minor, 0, std::nullopt,
						(*origin)->metadata},
				       0, &seen);
		if (!shared)
			return std::move(shared).error().context(name);
		img.shared = *shared;
		if (shared->has_contents()) {
			job.emplace();
			job->image_gpu_id = gpu.gpu_id;
			job->render_path = env_.paths.render_path(minor);
			job->bos.push_back({fd, info.size});
			job->bo_files.push_back(drm_pages_image_name(id, minor, 0));
			job->checksums = env_.config.verify;
		}
	}
	*ours = true;
	start_guardian();
	auto images = image_dir();
	if (!images)
		return std::move(images).error();
	if (images->streaming())
		return make_error(ENOTSUP, "%s: this plugin does not checkpoint bare dma-buf fds with --stream",
				  name.c_str());
	// Contents first, metadata last, as for render files.
	if (job) {
		auto copied = run_gpu_copies(Direction::GpuToFile, *images, {*job}, copy_settings(env_, stage()));
		if (!copied)
			return std::move(copied).error().context(name);
		if (job->checksums) {
			auto &sums = copied->front().checksums;
			if (sums.size() != 1)
				return make_error(EIO, "%s: %zu checksums for 1 BO", name.c_str(), sums.size());
			img.shared->checksum = std::move(sums.front());
			set_shared_checksum(img.shared->id, *img.shared->checksum);
		}
	}
	auto binding = binding_for(id);
	if (!binding)
		return std::move(binding).error();
	img.binding = *binding;
	if (auto st2 = write_dmabuf_image(*images, id, img); !st2)
		return st2;
	log_info("dma-buf file %d: wrote %s (shared BO %u, %" PRIu64 " bytes%s)", id, name.c_str(),
		 img.shared->id, img.shared->size, job ? ", its contents" : "; contents with another file");
	return ok_status();
}

} // namespace amdcr
