// SPDX-License-Identifier: GPL-2.0-only
//
// Where the restore reads a BO's pages: which pages file of the checkpoint
// holds each buffer's contents (the copy jobs), and the one call that
// reads them into the GPU (fill_from_images: the bounded SDMA copy of
// src/copy, direction FileToGpu).
//
// Every buffer the restore fills goes through here, whoever fills it: a
// restored task at RESTORE_EXT_FILE (serial restore; a GPU mapped again in
// the task; a shared BO, by its first holder) or the parallel restore's
// thread in CRIU's main process (plugin/restore_main.h).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/result.h"
#include "copy/gpu_copy.h"
#include "image/image_dir.h"
#include "image/kfd_image.h"
#include "image/render_image.h"
#include "plugin/restore_plan.h"
#include "plugin/session.h"
#include "topology/mapping.h"

namespace amdcr {

// The copy jobs of KFD image `img` (CRIU file `id`) onto the GPUs `map`
// gives, one per GPU: the buffers with contents take `dmabufs` (borrowed),
// in image order, and are read from the GPU's pages file, or where `chain`
// (not null for a link of an incremental checkpoint) says each chunk is.
Result<std::vector<GpuCopyJob>> kfd_copy_jobs(const SessionEnv &env, int id, const KfdImage &img, const GpuMap &map,
					      const KfdChainPages *chain, std::span<const int> dmabufs);
// The copy job of render image `img` (CRIU file `id`, on local GPU `m`):
// its buffers with contents, each from its own DRM pages file, but those
// `plan` says several files share (their first holder fills them).
Result<GpuCopyJob> render_copy_job(const SessionEnv &env, int id, const RenderNodeImage &img, const GpuMapEntry &m,
				   const RestorePlan &plan, std::span<const int> dmabufs);
// The copy job of shared BO `s` into `dmabuf` (borrowed) on local render
// node `minor`, from the pages file of the holder that was dumped with its
// contents.
GpuCopyJob shared_bo_copy_job(const SessionEnv &env, const SharedBo &s, uint32_t minor, int dmabuf);

// Reads the pages of `jobs` from `images` into their buffers.
Status fill_from_images(const ImageDir &images, const std::vector<GpuCopyJob> &jobs, const CopySettings &settings);

} // namespace amdcr
