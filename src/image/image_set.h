// SPDX-License-Identifier: GPL-2.0-only
//
// Restore-time validation of a whole image set, before any GPU state is
// touched: the KFD image must be self-consistent and every pages file it
// implies must exist with the right size. Errors name the file and the
// mismatch. Streamed images (ImageDir::streaming()): only the metadata is
// checked here; a pages file can be read only once, so its size is checked
// when the restore's copy reads it.
#pragma once

#include "base/result.h"
#include "image/image_dir.h"
#include "image/kfd_image.h"
#include "image/render_image.h"

namespace amdcr {

// For the KFD image `img` (read from amdgpu-kfd-<id>.img):
//  - validate_kfd_image (counts, BO sanity, gpu_ids known, minors in range);
//  - for each GPU: amdgpu-pages-<id>-<gpu>.img exists, is framed correctly,
//    and its payload equals the sum of that GPU's VRAM/GTT BO sizes. A GPU
//    without content BOs may lack its pages file (upstream writes an empty
//    one; both are accepted).
Status validate_kfd_image_set(const ImageDir &dir, int id, const KfdImage &img);

// For a render node image (id = its CRIU file id): every BO with contents
// (VRAM/GTT domain, DrmBo::has_contents) has its amdgpu-drm-pages file with
// a payload of exactly the BO size.
Status validate_render_image_set(const ImageDir &dir, int id, const RenderNodeImage &img);

// For a dma-buf image (id = its CRIU file id) whose BO's contents it wrote
// itself (its shared BO's contents_id is `id`): that amdgpu-drm-pages file
// has a payload of exactly the BO size.
Status validate_dmabuf_image_set(const ImageDir &dir, int id, const DmabufImage &img);

} // namespace amdcr
