// SPDX-License-Identifier: GPL-2.0-only
//
// The dump of a render node file (/dev/dri/renderD<N>).
#include "plugin/dump.h"

#include "base/log.h"
#include "image/image_names.h"
#include "image/render_image.h"

namespace amdcr {

Status DumpSession::dump_render(int id, const TopologyNode &gpu)
{
	auto images = session_image_dir(env_);
	if (!images)
		return std::move(images).error();
	RenderNodeImage img;
	img.gpu_id = gpu.gpu_id;
	img.id = static_cast<uint32_t>(id);
	img.drm_render_minor = gpu.drm_render_minor;
	if (auto st = write_render_image(*images, id, img); !st)
		return st;
	log_gpu(LogLevel::Debug, gpu.gpu_id, "render node %u: wrote %s", gpu.drm_render_minor,
		render_image_name(id).c_str());
	return ok_status();
}

} // namespace amdcr
