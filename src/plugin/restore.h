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
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/unique_fd.h"
#include "image/kfd_image.h"
#include "image/render_image.h"
#include "plugin/session.h"
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
	// The render node of local GPU `minor`, opened once per task.
	Result<int> local_render_fd(uint32_t minor);
	// Once the task's fds are installed (first UPDATE_VMA_MAP): each render
	// file of ours that the task holds too is closed and borrowed from it.
	void hand_render_files_to_task();
	// The mapping of the GPU a render image names (by gpu_id, else by its
	// checkpointed minor in the KFD images); nullptr when there is none.
	const GpuMapEntry *mapping_for_render(const RenderNodeImage &img) const;
	// The checkpointed minor a GPU had, from the KFD images.
	uint32_t checkpointed_minor(uint32_t image_gpu_id) const;

	SessionEnv env_;
	State state_ = State::Unprepared;
	std::map<int, KfdImage> kfd_images_; // by CRIU file id
	GpuMap map_;
	std::map<uint32_t, RenderFile> render_files_; // by local minor
	int fitted_pid_ = 0; // the task fit_map_to_task() has checked
	bool handed_over_ = false;
	std::vector<VmaUpdate> vmas_;
	bool streamed_ = false;				      // criu --stream: images read per file
	std::map<int, RenderNodeImage> streamed_renders_; // read by restore_streamed, by file id
};

} // namespace amdcr
