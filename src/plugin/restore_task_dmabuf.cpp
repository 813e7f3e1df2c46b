// SPDX-License-Identifier: GPL-2.0-only
//
// In a restored task, at RESTORE_EXT_FILE: BOs that several files hold
// (image/render_image.h SharedBo, plugin/shared_bos.h). The first holder
// restored, in whichever task, creates the BO and fills it; the others,
// render files and bare dma-buf fds alike, take the same BO from it.
#include <cinttypes>

#include "base/log.h"
#include "device/system.h"
#include "image/image_names.h"
#include "plugin/restore_contents.h"
#include "plugin/restore_task.h"

namespace amdcr {
namespace {

// Shared BO `s`, created in `render_fd` (of local render node `minor`)
// with its metadata and filled from its pages file through the bounded
// copy, before any other holder can take it.
struct FilledBo {
	GemHandle handle;
	UniqueFd dmabuf;
};

Result<FilledBo> create_filled_bo(const SessionEnv &env, const ImageDir &images, const SharedBo &s,
				  uint32_t minor, int render_fd, SharedCopies *copies)
{
	const std::string what = strprintf("shared BO %u", s.id);
	auto h = create_gem_bo(render_fd, s.size, s.alignment, s.preferred_domains, s.alloc_flags, s.metadata);
	if (!h)
		return std::move(h).error().context(what);
	auto dmabuf = gem_export_dmabuf(render_fd, h->get());
	if (!dmabuf)
		return std::move(dmabuf).error().context(what);
	if (s.has_contents())
		if (auto st = fill_from_images(images, {shared_bo_copy_job(env, s, minor, dmabuf->get())},
					       copy_settings(env, copies));
		    !st)
			return std::move(st).error(); // names the pages file and the BO
	return FilledBo{std::move(*h), std::move(*dmabuf)};
}

} // namespace

Result<UniqueFd> TaskRestore::shared_dmabuf(const ImageDir &images, const SharedBo &s, const GpuMapEntry &m,
					    int render_fd, const std::string &holder, std::optional<GemHandle> *created)
{
	auto taken = fabric_.shared_bos()->take(s.id);
	if (!taken)
		return std::move(taken).error();
	if (!taken->claim) {
		log_debug("shared BO %u: taken from the task that restored it first", s.id);
		return std::move(taken->dmabuf);
	}
	auto bo = create_filled_bo(env_, images, s, m.local_render_minor, render_fd, fabric_.shared_copies());
	if (!bo)
		return std::move(bo).error();
	if (auto st = taken->claim->publish(bo->dmabuf.get()); !st)
		return std::move(st).error();
	log_info("shared BO %u (%" PRIu64 " bytes): created by the restore of %s on renderD%u for every file "
		 "holding it",
		 s.id, s.size, holder.c_str(), m.local_render_minor);
	created->emplace(std::move(bo->handle));
	return std::move(bo->dmabuf);
}

Status TaskRestore::restore_dmabuf(const ImageDir &images, int id, const DmabufImage &img, UniqueFd *out)
{
	const std::string name = dmabuf_image_name(id);
	if (!img.shared)
		return make_error(ENOTSUP,
				  "%s names its buffer only by GEM handle %u (an image of upstream's plugin); "
				  "this plugin restores dma-bufs of its own images only",
				  name.c_str(), img.gem_handle);
	if (auto st = own().devices.fit(false); !st)
		return st;
	const SharedBo &s = *img.shared;
	const GpuMapEntry *m = own().devices.map().find_checkpointed(s.gpu_id);
	if (!m)
		return make_error(EINVAL, "%s: gpu 0x%04x of shared BO %u has no local GPU", name.c_str(), s.gpu_id,
				  s.id);
	// A render file of the plugin's own: it makes the BO when this is
	// the first holder, and is closed again; the dma-buf keeps the BO.
	auto render = open_render_node(env_.paths, m->local_render_minor);
	if (!render)
		return std::move(render).error().context(name);
	std::optional<GemHandle> created;
	if (!plan_.shared_among_files(s.id)) {
		// The only holder in the checkpoint.
		auto bo = create_filled_bo(env_, images, s, m->local_render_minor, render->get(), fabric_.shared_copies());
		if (!bo)
			return std::move(bo).error().context(name);
		created.emplace(std::move(bo->handle));
		*out = std::move(bo->dmabuf);
	} else {
		auto dmabuf = shared_dmabuf(images, s, *m, render->get(), name, &created);
		if (!dmabuf)
			return std::move(dmabuf).error().context(name);
		*out = std::move(*dmabuf);
	}
	log_info("%s: dma-buf of shared BO %u restored", name.c_str(), s.id);
	return ok_status();
}

} // namespace amdcr
