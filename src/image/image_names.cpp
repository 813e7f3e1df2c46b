// SPDX-License-Identifier: GPL-2.0-only
#include "image/image_names.h"

#include "base/result.h"

namespace amdcr {

std::string kfd_image_name(int id)
{
	return strprintf("amdgpu-kfd-%d.img", id);
}

std::string kfd_pages_image_name(int id, uint32_t gpu_id)
{
	return strprintf("amdgpu-pages-%d-%04x.img", id, gpu_id);
}

std::string render_image_name(int id)
{
	return strprintf("amdgpu-renderD-%d.img", id);
}

std::string dmabuf_image_name(int id)
{
	return strprintf("amdgpu-dmabuf_%d.img", id);
}

std::string drm_pages_image_name(int id, uint32_t render_minor, uint32_t bo_index)
{
	// Upstream formats the minor with %d from an int; minors are <= 255.
	return strprintf("amdgpu-drm-pages-%d-%u-%04x.img", id, render_minor, bo_index);
}

} // namespace amdcr
