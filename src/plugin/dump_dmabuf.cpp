// SPDX-License-Identifier: GPL-2.0-only
//
// The dump of a bare dma-buf fd (amdgpu-dmabuf_<id>.img): the shared BO
// (image/render_image.h SharedBo) it is a dma-buf of, which the dump's
// registry (plugin/dump_shared_bos.h) knows when a file dumped before held
// it, and its contents when none did.
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
	const std::string name = dmabuf_image_name(id);

	DmabufImage img;
	std::optional<GpuCopyJob> job;
	if (const DumpSharedBos::Seen *held = shared_bos_.find(st)) {
		img.gem_handle = held->handle;
		img.shared = held->bo;
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
		auto shared = shared_bos_.share(fd,
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
	ledger_.start_guardian();
	auto images = files_.image_dir();
	if (!images)
		return std::move(images).error();
	if (images->streaming())
		return make_error(ENOTSUP, "%s: this plugin does not checkpoint bare dma-buf fds with --stream",
				  name.c_str());
	auto binding = files_.binding_for(id);
	if (!binding)
		return std::move(binding).error();
	// Contents first, metadata last, as for render files.
	if (job) {
		job->pages_seal = binding->dump_id;
		auto copied = run_gpu_copies(Direction::GpuToFile, *images, {*job}, copy_settings(env_, shared_copies()));
		if (!copied)
			return std::move(copied).error().context(name);
		if (job->checksums) {
			auto &sums = copied->front().checksums;
			if (sums.size() != 1)
				return make_error(EIO, "%s: %zu checksums for 1 BO", name.c_str(), sums.size());
			img.shared->checksum = std::move(sums.front());
			shared_bos_.set_checksum(img.shared->id, *img.shared->checksum);
		}
	}
	img.binding = *binding;
	if (auto st2 = write_dmabuf_image(*images, id, img); !st2)
		return st2;
	log_info("dma-buf file %d: wrote %s (shared BO %u, %" PRIu64 " bytes%s)", id, name.c_str(),
		 img.shared->id, img.shared->size, job ? ", its contents" : "; contents with another file");
	return ok_status();
}

} // namespace amdcr
