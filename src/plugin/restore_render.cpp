// SPDX-License-Identifier: GPL-2.0-only
//
// The restore of a render node file onto its mapped local GPU.
#include "plugin/restore.h"

#include <fcntl.h>

#include "base/log.h"
#include "image/image_names.h"
#include "image/render_image.h"

namespace amdcr {

Status RestoreSession::restore_render(const ImageDir &images, int id, UniqueFd *out)
{
	auto img = take_render_image(images, id);
	if (!img)
		return std::move(img).error();
	const GpuMapEntry *m = mapping_for_render(*img);
	if (!m)
		return make_error(EINVAL, "%s: gpu 0x%04x (renderD%u) has no local GPU",
				  render_image_name(id).c_str(), img->gpu_id, img->drm_render_minor);
	// The same open file as KFD's RESTORE uses (in either order): the
	// driver lets only that file map the process's BOs.
	auto bound = local_render_fd(m->local_render_minor);
	if (!bound)
		return std::move(bound).error();
	*out = UniqueFd(::fcntl(*bound, F_DUPFD_CLOEXEC, 0));
	if (!out->valid())
		return errno_error(errno, "dup of the render node file");
	log_gpu(LogLevel::Debug, img->gpu_id, "render node %u restored as renderD%u", img->drm_render_minor,
		m->local_render_minor);
	return ok_status();
}

} // namespace amdcr
