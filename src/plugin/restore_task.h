// SPDX-License-Identifier: GPL-2.0-only
//
// TaskRestore: the GPU files of one restored task.
//
// Runs in each task CRIU forks to restore a process (CRIU's main process
// makes it at init(RESTORE), empty, and every task inherits its own copy),
// at two hooks:
//   RESTORE_EXT_FILE (restore_ext_file), one call per file:
//     a /dev/kfd file: KFD's RESTORE recreates the process's KFD state
//       (restore_task_kfd.cpp);
//     a render node file: its GEM BOs recreated under their checkpointed
//       handles, at their GPU VAs (restore_task_render.cpp);
//     a bare dma-buf fd: a dma-buf of its shared BO
//       (restore_task_dmabuf.cpp);
//     each buffer's contents are copied in here, or handed over to CRIU's
//     main process (the parallel restore, plugin/restore_main.h); a BO
//     several files share is made and filled by its first holder restored,
//     in whichever task (the fabric's SharedBoTable). Before its first GPU
//     file, the task checks that it can open the plan's GPUs, else maps the
//     checkpoint again onto those it can (restore_task_devices.cpp), and
//     tells the guardian it will hold GPU state.
//   UPDATE_VMA_MAP (update_vma_map), once the task's fds are installed:
//     each CPU mapping of a GPU file moved to its new offset and the file
//     it maps through.
//
// It reads the plan (plugin/restore_plan.h) and uses the fabric
// (plugin/restore_fabric.h). Its own state: the task's GPU map (the plan's,
// unless the task mapped it again), its render node files, and the
// mappings to move. With streamed images (criu --stream) it reads each
// image when CRIU restores its file, and maps the GPUs at the task's first
// /dev/kfd file, which must come before its render node files (as
// upstream's plugin requires in every mode).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/unique_fd.h"
#include "copy/gpu_copy.h"
#include "device/gem.h"
#include "device/kfd.h"
#include "image/image_dir.h"
#include "image/kfd_image.h"
#include "image/render_image.h"
#include "plugin/parallel_restore.h"
#include "plugin/restore_fabric.h"
#include "plugin/restore_plan.h"
#include "plugin/session.h"
#include "topology/mapping.h"

namespace amdcr {

// A GEM BO made afresh for a checkpointed one (DRM_IOCTL_AMDGPU_GEM_CREATE)
// with the checkpointed metadata, if any (GEM_METADATA SET), before anyone
// else can see it (restore_task_render.cpp).
Result<GemHandle> create_gem_bo(int render_fd, uint64_t size, uint64_t alignment, uint32_t domains,
				uint64_t flags, const std::optional<GemMetadata> &metadata);

class TaskRestore {
public:
	TaskRestore(const SessionEnv &env, const RestorePlan &plan, RestoreFabric &fabric)
		: env_(env), plan_(plan), fabric_(fabric), map_(plan.gpu_map())
	{
	}
	TaskRestore(const TaskRestore &) = delete;
	TaskRestore &operator=(const TaskRestore &) = delete;

	// The hooks: an fd, -ENOTSUP when the file or mapping is not ours, or
	// -errno (logged here, once).
	int restore_ext_file(int id);
	int update_vma_map(const char *path, uint64_t old_pgoff, uint64_t *new_pgoff, int *plugin_fd);

	// The GPU map this task restores onto.
	const GpuMap &gpu_map() const { return map_; }

private:
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
		UniqueFd ours;	   // moved above the task's fds
		int borrowed = -1; // the task's own fd of the same open file
		int fd() const { return ours.valid() ? ours.get() : borrowed; }
	};

	// A process may hold several open files of one render node, each with
	// BOs, handles and a VM of its own. The images do not say which of them
	// KFD's VM was bound to (libhsakmt's), so render images go into the
	// node's one file (render_files_), the one KFD's RESTORE binds the GPU's
	// VM to (as upstream's plugin does), as long as their GEM handles and
	// GPU VAs do not clash with those already there; one that would clash
	// gets an open file of its own, as it had (extra_render_files_).
	struct RenderFileUse {
		std::set<int> ids;		  // render images restored into it
		std::set<uint32_t> handles;	  // their GEM handles
		std::map<uint64_t, uint64_t> vas; // their GPU VA ranges: start -> end
	};

	// The file's restore by kind; `*ours` false: no image of ours.
	Status restore_file(const ImageDir &images, int id, UniqueFd *out, bool *ours);
	// The KFD images this task restores from: the plan's, or with streamed
	// images those the task has read.
	const KfdImages &kfd_images() const { return plan_.streamed() ? streamed_kfd_ : plan_.kfd_images(); }
	const GpuMapEntry *mapping_for(const RenderNodeImage &img) const
	{
		return mapping_for_render(img, kfd_images(), map_);
	}

	// Streamed images (criu --stream): nothing can be listed or read
	// twice, so each file's image is read when CRIU restores it:
	// amdgpu-kfd-<id>.img (validated, its GPUs mapped when it is the task's
	// first), else renderD-<id>.img (its GPU must be mapped by then), else
	// `*ours` = false.
	Status restore_streamed(const ImageDir &images, int id, UniqueFd *out, bool *ours);
	Result<const KfdImage *> load_streamed_kfd(const ImageDir &images, int id, KfdImage img);

	// restore_task_kfd.cpp, restore_task_render.cpp, restore_task_dmabuf.cpp.
	Status restore_kfd(const ImageDir &images, int id, const KfdImage &img, UniqueFd *out);
	// KFD's RESTORE of `img` through `kfd`, on the task's render files.
	Result<KfdRestored> recreate_kfd_state(const Kfd &kfd, const KfdImage &img);
	// The dma-bufs of `img`'s BOs with contents in `restored`, in image
	// order, each BO's CPU mapping recorded to be moved.
	Result<std::vector<int>> note_restored_bos(const KfdImage &img, const KfdRestored &restored);
	Status restore_render(const ImageDir &images, int id, const RenderNodeImage &img, UniqueFd *out);
	Status restore_dmabuf(const ImageDir &images, int id, const DmabufImage &img, UniqueFd *out);
	// `img`'s BOs made in render file `render_fd` at their handles and
	// VAs, in image order (made in handle order).
	Result<std::vector<GemHandle>> make_render_bos(const ImageDir &images, const RenderNodeImage &img,
						       const GpuMapEntry &m, int render_fd, const std::string &name);
	// Shared BO `bo.shared` in render file `render_fd`, made or imported
	// there at the file's lowest free handle (make_render_bos checks it
	// is `bo`'s and maps it).
	Result<GemHandle> attach_shared_bo(const ImageDir &images, const DrmBo &bo, const GpuMapEntry &m,
					   int render_fd, const std::string &holder);
	// The dma-buf of shared BO `s` (on local GPU `m`): when this is its
	// first holder, the BO is created in `render_fd` (`*created` holds its
	// handle there), filled from its pages file and stored for the other
	// holders; else the one the first holder stored. `holder`: the image
	// of the file being restored (for the log).
	Result<UniqueFd> shared_dmabuf(const ImageDir &images, const SharedBo &s, const GpuMapEntry &m,
				       int render_fd, const std::string &holder, std::optional<GemHandle> *created);

	// In the restored task, before its first GPU file changes any state
	// (restore_task_devices.cpp): /dev/kfd (for a KFD file, `kfd_file`)
	// and every mapped GPU's render node must open in the task's mount
	// namespace and device cgroup; if a render node does not, map_ is
	// mapped again onto the GPUs the task can use (map_for_task), and if
	// none fit, the error names each missing node and the --device that
	// passes it in. Once per task.
	Status fit_map_to_task(bool kfd_file);
	Result<GpuMap> map_for_task() const;
	// Once per task, before its first GPU file creates state.
	void report_to_guardian();

	// A new open file of local GPU `minor`'s render node, above the fds
	// CRIU restores.
	Result<UniqueFd> open_render_file(uint32_t minor) const;
	// The render node of local GPU `minor`, opened once per task.
	Result<int> local_render_fd(uint32_t minor);
	// The open file render image `id` (`img`, of local GPU `minor`) is
	// restored into: (fd, -1) for local_render_fd(minor), else (fd, id)
	// for a file of its own when its handles or GPU VAs clash with those of
	// the render images restored into that file already.
	Result<std::pair<int, int>> render_file_for(uint32_t minor, int id, const RenderNodeImage &img);
	// Once the task's fds are installed (first UPDATE_VMA_MAP): each render
	// file of ours that the task holds too is closed and borrowed from it.
	void borrow_task_render_files();

	// A file's contents: copied here (serial restore, or a GPU mapped again
	// in the task) or handed over to CRIU's main process (parallel restore).
	Status copy_contents(const ImageDir &images, HandOverKind kind, int id, const std::vector<GpuCopyJob> &jobs,
			     std::span<const int> dmabufs);

	const SessionEnv &env_;
	const RestorePlan &plan_;
	RestoreFabric &fabric_;
	GpuMap map_;
	KfdImages streamed_kfd_; // criu --stream: the KFD images this task read
	std::map<uint32_t, RenderFile> render_files_; // by local minor
	std::map<uint32_t, RenderFileUse> render_file_use_;		    // by local minor
	std::map<int, std::pair<uint32_t, RenderFile>> extra_render_files_; // CRIU id -> (minor, file)
	int fitted_pid_ = 0; // the task fit_map_to_task() has checked
	// fit_map_to_task() mapped this task's GPUs anew: CRIU's main process
	// holds the other mapping, so the task copies its own buffers.
	bool remapped_in_task_ = false;
	bool borrowed_from_task_ = false;
	std::vector<VmaUpdate> vmas_;
	pid_t reported_to_guardian_ = 0; // the task that told it
};

} // namespace amdcr
