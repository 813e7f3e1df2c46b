// SPDX-License-Identifier: GPL-2.0-only
//
// TaskRestore: the GPU files of one restored task.
//
// Runs in each task CRIU forks to restore a process (CRIU's main process
// makes it at init(RESTORE); what each task keeps of it: below), at two
// hooks:
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
// (plugin/restore_fabric.h). With streamed images (criu --stream) it reads
// each image when CRIU restores its file, and maps the GPUs at the task's
// first /dev/kfd file, which must come before its render node files (as
// upstream's plugin requires in every mode).
//
// What a task inherits across CRIU's fork, and what it does not: CRIU's
// main process makes the TaskRestore at init(RESTORE), and every task CRIU
// forks (from the main process, or from its parent task) gets a copy. The
// configuration, the plan and the fabric are made before the first fork
// for every process of the restore to share (read only, or shared memory
// and fds meant for all). Everything else is the task's own, in one
// TaskState held by pid (base/process_local.h): a task starts with an
// empty one at its first hook, never with what its parent held (its
// parent's render files were closed in the task by CRIU, its GPU map may
// have been fitted to another container's devices). Its parts, each with
// one role:
//   TaskDevices (restore_task_devices.h): the GPUs the task restores onto,
//     fitted to the devices it can open; the KFD images it read, streamed;
//   TaskRenderFiles (restore_task_files.h): the render node files its GPU
//     state goes into, ours until borrowed from the task;
//   TaskMappings (restore_task_mappings.h): the CPU mappings to move;
//   and whether it told the guardian it will hold GPU state.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/process_local.h"
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
#include "plugin/restore_task_devices.h"
#include "plugin/restore_task_files.h"
#include "plugin/restore_task_mappings.h"
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
		: env_(env), plan_(plan), fabric_(fabric), own_([this] { return TaskState(env_, plan_); })
	{
	}
	TaskRestore(const TaskRestore &) = delete;
	TaskRestore &operator=(const TaskRestore &) = delete;

	// The hooks: an fd, -ENOTSUP when the file or mapping is not ours, or
	// -errno (logged here, once).
	int restore_ext_file(int id);
	int update_vma_map(const char *path, uint64_t old_pgoff, uint64_t *new_pgoff, int *plugin_fd);

	// The GPU map this task restores onto (the plan's before its first
	// hook).
	const GpuMap &gpu_map() const
	{
		const TaskState *s = own_.find();
		return s ? s->devices.map() : plan_.gpu_map();
	}

private:
	// What a task holds of its own (see the header): never inherited.
	struct TaskState {
		TaskState(const SessionEnv &env, const RestorePlan &plan) : devices(env, plan), files(env.paths) {}
		TaskDevices devices;
		TaskRenderFiles files;
		TaskMappings mappings;
		bool reported_to_guardian = false;
	};
	TaskState &own() { return own_.get(); }

	// The file's restore by kind; `*ours` false: no image of ours.
	Status restore_file(const ImageDir &images, int id, UniqueFd *out, bool *ours);
	// Once per task, before its first GPU file creates state.
	void report_to_guardian();

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

	// A file's contents: copied here (serial restore, or a GPU mapped again
	// in the task) or handed over to CRIU's main process (parallel restore).
	Status copy_contents(const ImageDir &images, HandOverKind kind, int id, const std::vector<GpuCopyJob> &jobs,
			     std::span<const int> dmabufs);

	// Made before CRIU forks, shared by every process of the restore.
	const SessionEnv &env_;
	const RestorePlan &plan_;
	RestoreFabric &fabric_;
	// The calling task's own.
	ProcessLocal<TaskState> own_;
};

} // namespace amdcr
