// SPDX-License-Identifier: GPL-2.0-only
//
// The restore stage: one RestoreSession from init(RESTORE) to exit.
//
// prepare(), from init(RESTORE) in CRIU's main process, does everything
// that can fail without touching GPU state: it finds the plugin's images (none: the
// session stays inactive and every hook returns -ENOTSUP), reads and
// validates every KFD image set (pages files complete), parses the local
// topology and maps the checkpointed GPUs onto local ones. The restored
// tasks are forked from that process afterwards, so each inherits the same
// mapping, and a task's /dev/kfd and render-node files restore consistently
// in whichever order CRIU restores them. With streamed images (criu
// --stream), which can be neither listed nor read twice, prepare() only
// consumes the inventory entry; each image is then read, validated and
// mapped in the restored task when CRIU restores its file, and a task's
// /dev/kfd file must come before its render node files (as upstream's
// plugin requires in every mode).
//
// With KFD_PARALLEL_RESTORE (the default, where CRIU calls POST_FORKING and
// the images are not streamed) the tasks hand their buffers to CRIU's main
// process, which copies them in while the tasks go on; a task's queues are
// resumed only after its copies are done and their checksums matched
// (plugin/parallel_restore.h).
//
// A CRIU killed half-way leaves the tasks it restored running, their GPU
// memory perhaps partly copied: prepare() starts a Guardian
// (plugin/guardian.h; restore_guardian.cpp), every task tells it, through
// CRIU's fdstore, before its first GPU file creates state, and CRIU's main
// process tells it each task it resumed; if CRIU's process ends before
// finish(), the guardian SIGKILLs the tasks not resumed.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "base/unique_fd.h"
#include "device/gem.h"
#include "copy/gpu_copy.h"
#include "image/kfd_image.h"
#include "image/criu_images.h"
#include "image/render_image.h"
#include "plugin/guardian.h"
#include "plugin/parallel_restore.h"
#include "plugin/session.h"
#include "plugin/shared_bos.h"
#include "plugin/summary.h"
#include "topology/mapping.h"

namespace amdcr {

class RestoreSession {
public:
	explicit RestoreSession(SessionEnv env);
	RestoreSession(const RestoreSession &) = delete;
	RestoreSession &operator=(const RestoreSession &) = delete;

	// init(RESTORE)'s work: consumes the plugin's inventory entry and
	// loads, validates and maps the checkpoint. 0: ready to restore;
	// -ENOTSUP: nothing of ours to restore; -errno: refused (logged).
	int prepare();
	int restore_ext_file(int id, bool *retry_needed);
	int update_vma_map(const char *path, uint64_t addr, uint64_t old_pgoff, uint64_t *new_pgoff,
			   int *plugin_fd);
	// Main process: starts the parallel restore's copying thread.
	int post_forking();
	int resume_devices_late(int pid);
	void finish(int ret);

	bool active() const { return state_ == State::Active; }
	const GpuMap &gpu_map() const { return map_; }

private:
	enum class State { Unprepared, Inactive, Active };

	// One CPU mapping to move: checkpointed file and offset -> new offset
	// and the file CRIU must mmap.
	struct VmaUpdate {
		bool kfd = false;	   // /dev/kfd (CRIU opens the path), else a render node
		uint32_t old_minor = 0;	   // render node minor at checkpoint
		uint32_t local_minor = 0;  // the render node it maps through now
		uint64_t old_offset = 0;
		uint64_t new_offset = 0;
		// The render file it maps through: -1 the task's file of
		// local_minor (render_files_), else the CRIU id of a further
		// file of that node (extra_render_files_).
		int file_id = -1;
	};

	// The render node file of one local GPU in this task: the one KFD's
	// RESTORE bound the GPU's VM to, whose BOs only it may map. Ours until
	// CRIU has installed the task's own copy of it, then borrowed from the
	// task, so the restored process keeps no extra fd.
	struct RenderFile {
		UniqueFd ours;	 // moved above the task's fds
		int borrowed = -1; // the task's own fd of the same open file
		int fd() const { return ours.valid() ? ours.get() : borrowed; }
	};

	// prepare() without starting the guardian.
	int prepare_checkpoint();
	// prepare()'s work; Active, Inactive or an error.
	Status load_and_map();
	// The GPU mapping of the checkpointed `devices` (by node id; `held`:
	// the GPUs with state) onto this machine, into map_.
	Status map_loaded_images(const std::map<uint32_t, KfdDevice> &devices,
				 const std::set<uint32_t> &held,
				 const std::vector<std::pair<int, RenderNodeImage>> &renders);
	// Streamed images (criu --stream): nothing can be listed or read twice,
	// so each file's image is read when CRIU restores it, in the task:
	// amdgpu-kfd-<id>.img (validated, its GPUs mapped when it is the task's
	// first), else renderD-<id>.img (its GPU must be mapped by then), else
	// `*ours` = false.
	Status restore_streamed(const ImageDir &images, int id, UniqueFd *out, bool *ours);
	Status load_streamed_kfd(const ImageDir &images, int id, const KfdImage &img);
	// The render image of file `id`: the one restore_streamed read, else
	// read from `images`.
	Result<RenderNodeImage> take_render_image(const ImageDir &images, int id);
	Status restore_kfd(const ImageDir &images, int id, UniqueFd *out);
	Status restore_render(const ImageDir &images, int id, UniqueFd *out);
	// In the restored task, before its first GPU file changes any state
	// (restore_task_devices.cpp): /dev/kfd (for a KFD file, `kfd_file`)
	// and every mapped GPU's render node must open in the task's mount
	// namespace and device cgroup; if a render node does not, map_ is
	// mapped again onto the GPUs the task can use (map_for_task), and if
	// none fit, the error names each missing node and the --device that
	// passes it in. Once per task.
	Status fit_map_to_task(bool kfd_file);
	Result<GpuMap> map_for_task() const;
	// The checkpointed GPUs `held` (described by `devices`) mapped onto
	// `local`, a local GPU being usable when its render node opens.
	Result<GpuMap> map_held_gpus(const std::map<uint32_t, KfdDevice> &devices, const std::set<uint32_t> &held,
				     const Topology &local) const;
	// A bare dma-buf fd (restore_dmabuf.cpp): a dma-buf of its shared BO.
	Status restore_dmabuf(const ImageDir &images, int id, UniqueFd *out);
	// Whether shared BO `id` has several holders in the checkpoint, so
	// its holders get it through shared_table_ (else a render file
	// recreates it as its own, as before sharing existed).
	bool shared_among_files(uint32_t id) const;
	// Shared BO `bo.shared` in render file `render_fd` under `bo`'s handle
	// and VAs (restore_render.cpp).
	Result<GemHandle> attach_shared_bo(const ImageDir &images, const DrmBo &bo, const GpuMapEntry &m,
					   int render_fd, const std::string &holder);
	// The dma-buf of shared BO `s` (on local GPU `m`): when this is its
	// first holder, the BO is created in `render_fd` (`*created` holds its
	// handle there), filled from its pages file and stored for the other
	// holders; else the one the first holder stored. `holder`: the image
	// of the file being restored (for the log).
	Result<UniqueFd> shared_dmabuf(const ImageDir &images, const SharedBo &s, const GpuMapEntry &m,
				       int render_fd, const std::string &holder, std::optional<GemHandle> *created);
	// A new open file of local GPU `minor`'s render node, above the fds
	// CRIU restores.
	Result<UniqueFd> open_render_file(uint32_t minor) const;
	// The render node of local GPU `minor`, opened once per task.
	Result<int> local_render_fd(uint32_t minor);
	// The open file render image `id` (`img`, of local GPU `minor`) is
	// restored into: (fd, -1) for local_render_fd(minor), else (fd, id)
	// for a file of its own when its handles or GPU VAs clash with those of
	// the render images restored into that file already (see
	// extra_render_files_).
	Result<std::pair<int, int>> render_file_for(uint32_t minor, int id, const RenderNodeImage &img);
	// Once the task's fds are installed (first UPDATE_VMA_MAP): each render
	// file of ours that the task holds too is closed and borrowed from it.
	void hand_render_files_to_task();
	// The mapping of the GPU a render image names (by gpu_id, else by its
	// checkpointed minor in the KFD images); nullptr when there is none.
	const GpuMapEntry *mapping_for_render(const RenderNodeImage &img) const;
	// The checkpointed minor a GPU had, from the KFD images.
	uint32_t checkpointed_minor(uint32_t image_gpu_id) const;
	// A gpu_id-only render image (CRIU 4.0-4.2.1's) gets its render minor
	// from the loaded KFD images that list its GPU.
	void resolve_render_minor(RenderNodeImage &img) const;

	// Where the copies of every restored task add up, for finish()'s
	// summary line, and the gate they take turns through; nullptr when
	// it could not be mapped.
	const StageTotals *stage() const { return totals_ ? &*totals_ : nullptr; }

	// The parallel restore (prepare()), when it is on and possible.
	void set_up_parallel();
	// restore_guardian.cpp. Main process, in prepare(): the guardian and
	// its channel in CRIU's fdstore (neither when CRIU has no fdstore).
	void start_guardian();
	// In a restored task, before its first GPU file: the guardian learns
	// it will hold GPU state (once per task).
	void report_task_to_guardian();
	// Main process: task `pid` resumed (or has no GPU state).
	void tell_guardian_resumed(int pid);
	// Main process, finish(): the guardian exits.
	void finish_guardian();
	// The copy jobs of KFD file `id`, one per GPU, the buffers with
	// contents taking `dmabufs` (borrowed) in image order.
	Result<std::vector<GpuCopyJob>> kfd_copy_jobs(int id, std::span<const int> dmabufs) const;
	// The copy job of render file `id` (image `img`, on local GPU `m`).
	Result<GpuCopyJob> render_copy_job(int id, const RenderNodeImage &img, const GpuMapEntry &m,
					   std::span<const int> dmabufs) const;
	// A file's contents: copied here (serial restore) or handed over to
	// CRIU's main process (parallel restore).
	Status copy_contents(const ImageDir &images, HandOverKind kind, int id, const std::vector<GpuCopyJob> &jobs,
			     std::span<const int> dmabufs);
	// Main process, on the parallel restore's thread: a task's hand-over.
	Status copy_handed_over(const HandOver &h, const std::atomic<bool> &cancel, DeferredLog &log) const;
	// RESUME_DEVICES_LATE with the parallel restore: its outcome; on
	// failure the tasks are killed.
	Status check_parallel(pid_t pid);

	SessionEnv env_;
	// Shared with the tasks CRIU forks (plugin/summary.h): created by
	// prepare() when there is something to restore.
	std::optional<StageTotals> totals_;
	State state_ = State::Unprepared;
	std::map<int, KfdImage> kfd_images_; // by CRIU file id
	// The KFD images that are links of a chain: where each GPU's bytes are
	// (image/kfd_chain.h), resolved with the images.
	std::map<int, std::map<uint32_t, ChainPages>> kfd_chains_;
	// CRIU's files.img and pstree.img facts (init); none for streamed
	// images and checkpoints without them.
	std::optional<CriuCheckpointFacts> criu_facts_;
	GpuMap map_;
	std::map<uint32_t, RenderFile> render_files_; // by local minor
	// A process may hold several open files of one render node, each with
	// BOs, handles and a VM of its own. The images do not say which of them
	// KFD's VM was bound to (libhsakmt's), so render images go into the
	// node's one file above, the one KFD's RESTORE binds the GPU's VM to
	// (as upstream's plugin does), as long as their GEM handles and GPU VAs
	// do not clash with those already there; one that would clash gets an
	// open file of its own, as it had (by CRIU id).
	struct RenderFileUse {
		std::set<int> ids;			      // render images restored into it
		std::set<uint32_t> handles;		      // their GEM handles
		std::map<uint64_t, uint64_t> vas;	      // their GPU VA ranges: start -> end
	};
	std::map<uint32_t, RenderFileUse> render_file_use_;		       // by local minor
	std::map<int, std::pair<uint32_t, RenderFile>> extra_render_files_; // CRIU id -> (minor, file)
	int fitted_pid_ = 0; // the task fit_map_to_task() has checked
	// fit_map_to_task() mapped this task's GPUs anew: CRIU's main process
	// holds the other mapping, so the task copies its own buffers.
	bool remapped_in_task_ = false;
	bool handed_over_ = false;
	std::vector<VmaUpdate> vmas_;
	bool streamed_ = false;				      // criu --stream: images read per file
	std::map<int, RenderNodeImage> streamed_renders_; // read by restore_streamed, by file id
	std::set<int> dmabuf_ids_;			  // files with an amdgpu-dmabuf image
	std::map<uint32_t, uint32_t> shared_holders_;	  // shared BO id -> files holding it
	std::optional<SharedBoTable> shared_table_;	  // when some shared BO has several holders
	std::map<int, RenderNodeImage> render_images_;	// loaded by prepare(), by file id
	std::unique_ptr<ParallelRestore> parallel_;	// null: each task copies its own
	bool parallel_checked_ = false;			// its outcome was checked (and logged)
	// Main process only (a task's copy of it is never used): see
	// restore_guardian.cpp.
	std::optional<Guardian> guardian_;
	int guardian_store_id_ = -1;	// the guardian's channel in CRIU's fdstore
	pid_t reported_to_guardian_ = 0; // the task that told it (restored tasks)
};

} // namespace amdcr
