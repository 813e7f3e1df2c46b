// SPDX-License-Identifier: GPL-2.0-only
//
// Moving the contents of a process's KFD buffers between the GPUs and the
// pages images: one job per GPU, all GPUs in parallel, each through its own
// SDMA engine on that GPU's render node and the one bounded, pipelined
// transfer (src/copy), in the direction of the stage.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"
#include "copy/transfer.h"
#include "image/image_dir.h"

namespace amdcr {

struct GpuCopyBo {
	int dmabuf_fd = -1; // borrowed; the caller keeps it open during the run
	uint64_t size = 0;
};

struct GpuCopyJob {
	uint32_t image_gpu_id = 0;  // names the pages file and the log lines
	std::string render_path;    // /dev/dri/renderD<minor>
	std::string pages_file;     // in the image directory
	std::vector<GpuCopyBo> bos; // in BO bucket order = file order
	// When not empty: one pages file per BO (bo_files[i] holds bos[i], as
	// render-node BOs are laid out) instead of all in pages_file.
	std::vector<std::string> bo_files;
};

struct GpuCopyResult {
	uint32_t image_gpu_id = 0;
	TransferStats stats;  // the pipelined DMA + file I/O phase
	double job_seconds = 0; // the whole job: render node, engine, imports, copy
};

// Staging memory (per_gpu_staging_bound, for both directions): with
// KFD_MAX_BUFFER_SIZE set, that many bytes for the whole process, shared
// evenly by the GPUs that have buffers to copy (so the process never pins
// more than the user allowed); unset, the built-in bound per GPU
// (kDefaultStagingBound). A GPU without buffers uses none.
//
// Runs every job on its own thread and waits for all of them. Dump:
// each pages file is written atomically (nothing visible under its name on
// failure), an empty one for a GPU without buffers. Restore: each pages
// file must hold exactly the jobs' bytes; a GPU without buffers reads none.
// Returns the per-GPU stats, or the first job's error (by job order) after
// all jobs have stopped. Logs one summary line per GPU on success.
Result<std::vector<GpuCopyResult>> run_gpu_copies(Direction dir, const ImageDir &images,
						  const std::vector<GpuCopyJob> &jobs,
						  uint64_t max_buffer_size);

// The staging bound of one GPU's job when `gpus` GPUs with buffers copy in
// parallel; EINVAL when KFD_MAX_BUFFER_SIZE leaves a GPU less than two
// pages.
Result<uint64_t> per_gpu_staging_bound(uint64_t max_buffer_size, size_t gpus);

} // namespace amdcr
