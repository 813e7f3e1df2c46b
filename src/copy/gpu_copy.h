// SPDX-License-Identifier: GPL-2.0-only
//
// Moving the contents of a process's KFD buffers between the GPUs and the
// pages images: one job per GPU, all GPUs in parallel, each through its own
// SDMA engine on that GPU's render node and the one bounded, pipelined
// transfer (src/copy), in the direction of the stage.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/log.h"
#include "base/result.h"
#include "copy/staging_gate.h"
#include "copy/transfer.h"
#include "image/binding.h"
#include "image/chunk_index.h"
#include "image/content_checksum.h"
#include "image/from_parent.h"
#include "image/image_dir.h"
#include "image/kfd_chain.h"

namespace amdcr {

struct GpuCopyBo {
	int dmabuf_fd = -1; // borrowed; the caller keeps it open during the run
	uint64_t size = 0;
	// Restore: the checksums its contents must match (nullptr: not
	// checked), and how an error names it ("BO 3 at 0x7f..."; empty:
	// "BO <index in the job>").
	const BoChecksum *expect{};
	std::string label{};
};

struct GpuCopyJob {
	uint32_t image_gpu_id = 0;  // names the pages file and the log lines
	std::string render_path;    // /dev/dri/renderD<minor>
	std::string pages_file;     // in the image directory
	std::vector<GpuCopyBo> bos; // in BO bucket order = file order
	// When not empty: one pages file per BO (bo_files[i] holds bos[i], as
	// render-node BOs are laid out) instead of all in pages_file.
	std::vector<std::string> bo_files;
	// Dump: compute the BOs' checksums (KFD_VERIFY=0: no).
	bool checksums = true;
	// Dump: the dump identity every pages file is sealed with; restore:
	// the one each must be sealed with (image/pages_file.h; nullopt:
	// unsealed, upstream's).
	std::optional<DumpId> pages_seal{};
	// Dump, incremental (one pages_file, checksums on): per BO, the parent
	// checkpoint's checksums of the same BO (nullptr: written whole). When
	// not empty, the pages file holds only the chunks whose checksum
	// differs from the parent's (image/from_parent.h, DeltaSink).
	std::vector<const BoChecksum *> parent_checksums{};
	// Dump (one pages_file, checksums on, not streamed): the checkpoint's
	// chunk index (KFD_DEDUP). When set, a chunk equal to one already
	// written (by any job of any process) is referenced instead of written
	// (image/chunk_index.h); the pages file holds the others.
	ChunkIndex *dedup = nullptr;
	// Restore of a chain's link: where the job's bytes are (instead of all
	// in pages_file); must outlive the run.
	const ChainPages *chain = nullptr;
};

struct GpuCopyResult {
	uint32_t image_gpu_id = 0;
	TransferStats stats;  // the pipelined DMA + file I/O phase
	double job_seconds = 0; // the whole job: render node, engine, imports, copy
	// Dump: the checksums of the job's BOs, in job order (every dump
	// computes them, image/content_checksum.h).
	std::vector<BoChecksum> checksums{};
	// Restore: bytes whose checksums were compared and matched, and
	// bytes read from pages files (fewer than copied when chunks held by
	// several BOs were read once: image/shared_chunks.h).
	uint64_t verified_bytes = 0;
	uint64_t read_bytes = 0;
	// Dump: bytes written to the pages file, and bytes left in the parent
	// checkpoint (incremental: per BO, its chunks there).
	uint64_t written_bytes = 0;
	uint64_t parent_bytes = 0;
	bool incremental = false; // compared with a parent (GpuCopyJob::parent_checksums)
	unsigned hash_threads = 0; // incremental: the most threads a write's chunks were hashed on
	std::vector<std::optional<FromParent>> from_parent{};
	// Dump, deduplicated (GpuCopyJob::dedup): per BO, its chunks stored
	// elsewhere, and their bytes.
	std::vector<std::optional<ChunkRefs>> dedup{};
	uint64_t dedup_bytes = 0;
};

// What all of a dump's or a restore's copies did, for its one summary line
// (plugin/summary.h). Lock-free atomics only, no pointers: the restore
// keeps it in memory shared by CRIU and the tasks it forks, which restore
// their files themselves.
struct CopyTotals {
	static constexpr size_t kMaxGpus = 64; // distinct GPUs counted

	std::atomic<uint64_t> files{0};	      // KFD and render files (the plugin counts)
	std::atomic<uint64_t> bo_entries{0};  // BOs in their images (the plugin counts)
	std::atomic<uint64_t> copied_bos{0};  // BOs whose contents were copied
	std::atomic<uint64_t> bytes{0};	      // their bytes
	std::atomic<uint64_t> verified_bytes{0}; // restore: bytes whose checksums matched
	std::atomic<uint64_t> read_bytes{0};	 // restore: bytes read from pages files
	std::atomic<uint64_t> written_bytes{0};	 // dump: bytes written to pages files
	std::atomic<uint64_t> parent_bytes{0};	 // dump: bytes left in the parent checkpoint
	std::atomic<uint64_t> dedup_bytes{0};	 // dump: bytes of chunks stored once for several BOs
	std::atomic<uint64_t> incremental_gpus{0}; // dump: copy jobs compared with a parent
	std::atomic<uint64_t> hash_threads{0};	    // dump: the most threads one GPU's chunks were hashed on
	std::atomic<uint64_t> peak_staging{0};	 // the most staging one run_gpu_copies used
	std::atomic<uint64_t> first_ns{UINT64_MAX}; // CLOCK_MONOTONIC: first copy began
	std::atomic<uint64_t> last_ns{0};	    // last copy ended
	std::atomic<uint64_t> gpu_keys[kMaxGpus]{}; // gpu_id + 1 of each GPU copied, 0 = free

	// Records the GPU (checkpointed gpu_id) of a copy job.
	void add_gpu(uint32_t gpu_id);
	// Distinct GPUs recorded.
	size_t gpus() const;
	// Seconds from the first copy's start to the last one's end.
	double seconds() const;
};
static_assert(std::atomic<uint64_t>::is_always_lock_free);

// How long copies take before a progress line (Info), and how often.
inline constexpr double kProgressIntervalSeconds = 5.0;

struct CopySettings {
	uint64_t max_buffer_size = 0;			     // KFD_MAX_BUFFER_SIZE
	uint64_t sdma_timeout_s = kDefaultSdmaTimeoutSeconds; // KFD_SDMA_TIMEOUT
	double progress_interval_s = kProgressIntervalSeconds;  // 0: no progress lines
	CopyTotals *totals = nullptr; // when set, the run's results are added
	// When set, held for the whole run (copy/staging_gate.h): the runs of
	// all the processes sharing it take turns. `cancel` stops a wait.
	StagingGate *gate = nullptr;
	const std::atomic<bool> *cancel = nullptr;
	// When set, the run's log lines are kept there, not printed (a thread
	// beside CRIU's own, base/log.h).
	DeferredLog *log = nullptr;
};

// Staging memory (per_gpu_staging_bound, for both directions): with
// KFD_MAX_BUFFER_SIZE set, that many bytes for the whole process, shared
// evenly by the GPUs that have buffers to copy (so the process never pins
// more than the user allowed); unset, the built-in bound per GPU
// (kDefaultStagingBound). A GPU without buffers uses none. A restore
// whose jobs' streams hold a deduplicated chunk more than once
// (image/shared_chunks.h) reads each such chunk once per run and keeps it
// for its other holders: those chunks take one more GPU's share (the
// bound is split among the GPUs and them), and count in the staging peak;
// when that share would be under one chunk, each holder reads its own.
// Likewise a deduplicated dump (GpuCopyJob::dedup): the chunks its index
// keeps in memory to compare candidates with (image/chunk_index.h) take
// one more share, set as the index's cache budget for the run, and count
// in the staging peak; under one chunk, the index keeps none.
//
// Runs every job on its own thread and waits for all of them, holding
// settings.gate (if any) from before the first staging buffer is made until
// the last one is gone. Dump:
// each pages file is written atomically (nothing visible under its name on
// failure), an empty one for a GPU without buffers, and every BO's
// checksums are computed on the way (GpuCopyResult::checksums) unless
// the job says not to. Restore:
// each pages file must hold exactly the jobs' bytes; a GPU without buffers
// reads none; a BO with `expect` is checked chunk by chunk as it is read,
// and a mismatch stops the job with EBADMSG naming the file, the BO and
// the byte range (run_gpu_copies adds the GPU).
// Each SDMA submission may take KFD_SDMA_TIMEOUT seconds (ETIMEDOUT).
// While copies run longer than progress_interval_s, a progress line (Info)
// every progress_interval_s gives the bytes copied so far.
// Returns the per-GPU stats, or the first job's error (by job order) after
// all jobs have stopped. Logs one line per GPU (Debug) on success and adds
// the run to `totals`. A GpuToFile job that failed leaves no file; those of
// the jobs that finished stay, for the caller to remove (a dump's
// CreatedFiles: by inode, so never an older file of the same name).
Result<std::vector<GpuCopyResult>> run_gpu_copies(Direction dir, const ImageDir &images,
						  const std::vector<GpuCopyJob> &jobs,
						  const CopySettings &settings);

// The staging bound of one GPU's job when `gpus` GPUs with buffers copy in
// parallel; EINVAL when KFD_MAX_BUFFER_SIZE leaves a GPU less than two
// pages.
Result<uint64_t> per_gpu_staging_bound(uint64_t max_buffer_size, size_t gpus);

} // namespace amdcr
