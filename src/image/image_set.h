// SPDX-License-Identifier: GPL-2.0-only
//
// Restore-time validation of a whole image set, before any GPU state is
// touched: the KFD image must be self-consistent and every pages file it
// implies must exist with the right size. Errors name the file and the
// mismatch. Streamed images (ImageDir::streaming()): only the metadata is
// checked here; a pages file can be read only once, so its size is checked
// when the restore's copy reads it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"
#include "image/criu_images.h"
#include "image/image_dir.h"
#include "image/kfd_image.h"
#include "image/render_image.h"

namespace amdcr {

// For the KFD image `img` (read from amdgpu-kfd-<id>.img):
//  - validate_kfd_image (counts, BO sanity, gpu_ids known, minors in range);
//  - for each GPU: amdgpu-pages-<id>-<gpu>.img exists, is framed correctly,
//    is sealed with the image's dump identity when its binding says its
//    pages files are (pages_file.h, checked with KFD_VERIFY=0 too),
//    and its payload equals the sum of that GPU's VRAM/GTT BO sizes. A GPU
//    without content BOs may lack its pages file (upstream writes an empty
//    one; both are accepted).
Status validate_kfd_image_set(const ImageDir &dir, int id, const KfdImage &img);

// For a render node image (id = its CRIU file id): every BO with contents
// (VRAM/GTT domain, DrmBo::has_contents) has its amdgpu-drm-pages file with
// a payload of exactly the BO size, sealed as a KFD image's.
Status validate_render_image_set(const ImageDir &dir, int id, const RenderNodeImage &img);

// For a dma-buf image (id = its CRIU file id) whose BO's contents it wrote
// itself (its shared BO's contents_id is `id`): that amdgpu-drm-pages file
// has a payload of exactly the BO size, sealed as a KFD image's.
Status validate_dmabuf_image_set(const ImageDir &dir, int id, const DmabufImage &img);

// A render image's BOs imported through another file (DrmBo::is_import)
// must name a BO of the checkpoint that other files hold too (their shared
// BO, held by `holders(shared id)` > 1 files): an import naming none (an
// image of upstream's plugin) cannot be restored; the Error names the
// image and the GEM handle.
Status check_imports_held(const std::string &name, const RenderNodeImage &img,
			  const std::function<uint32_t(uint32_t)> &holders);

// The render node mappings a checkpoint's GPU images give back at restore
// (UPDATE_VMA_MAP moves each to its BO's new mmap offset, matching the
// dumped offset exactly): each KFD BO with contents at its mmap offset on
// its GPU's render node (the minor its KFD image lists), each render
// image's CPU-mappable BO (DrmBo::offset) on its node (a gpu_id-only
// image's node from the KFD images; unknown: any node). A mapping of
// CRIU's (read_render_mappings) that none covers would be mapped at its old
// offset, which no BO has after the restore: the process faults on it.
// The check is over the whole checkpoint, not per task (which task holds a
// render file is CRIU's fdinfo images', not read here).
class RestorableMappings {
public:
	void add(const KfdImage &img);
	void add(const std::string &name, const RenderNodeImage &img);
	// The first mapping none covers, as an Error naming the task's mm
	// image, the mapping and the render images of its node (and in
	// `uncovered`, when given, that mapping).
	Status check(const std::vector<CriuRenderMapping> &mappings,
		     const CriuRenderMapping **uncovered = nullptr) const;

private:
	struct Render {
		std::string name;
		uint32_t gpu_id = 0;
		uint32_t minor = 0;
		size_t bos = 0;
		std::vector<uint64_t> offsets;
	};
	std::set<std::pair<uint32_t, uint64_t>> offsets_; // (render minor, offset) of KFD BOs
	std::map<uint32_t, uint32_t> minors_;		  // gpu_id -> render minor, from the KFD images
	std::vector<Render> renders_;
};

} // namespace amdcr
