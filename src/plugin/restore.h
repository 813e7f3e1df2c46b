// SPDX-License-Identifier: GPL-2.0-only
//
// The restore stage: one RestoreSession from init(RESTORE) to exit, which
// the C ABI entry file (entry.cpp) drives. A restore runs in three places,
// each with its own type:
//
//   CRIU's main process, init(RESTORE) (prepare): the RestorePlan
//     (restore_plan.h) reads and validates every image and maps the
//     checkpointed GPUs onto local ones, all before any GPU state changes;
//     then the RestoreFabric (restore_fabric.h), the state the processes
//     share: copy totals and staging gate, shared BO table, the parallel
//     restore's channel, the guardian. Nothing of ours in the checkpoint:
//     the session stays inactive and every hook returns -ENOTSUP.
//   Each task CRIU forks to restore a process, RESTORE_EXT_FILE and
//     UPDATE_VMA_MAP: the TaskRestore (restore_task.h) recreates the
//     task's KFD state, render node BOs and dma-bufs, and moves their CPU
//     mappings.
//   CRIU's main process again, POST_FORKING to RESUME_DEVICES_LATE: the
//     MainRestore (restore_main.h) copies the buffers the tasks hand over
//     on the parallel restore's thread (KFD_PARALLEL_RESTORE), then resumes
//     each task's GPU queues. exit(RESTORE) (finish) ends the fabric once.
//
// The tasks inherit the plan, the fabric and the TaskRestore when CRIU
// forks them, each task with state of its own in the TaskRestore (made at
// its first hook, never its parent's), so a task's /dev/kfd and render node
// files restore consistently in whichever order CRIU restores them.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "plugin/restore_fabric.h"
#include "plugin/restore_main.h"
#include "plugin/restore_plan.h"
#include "plugin/restore_task.h"
#include "plugin/session.h"
#include "topology/mapping.h"

namespace amdcr {

class RestoreSession {
public:
	explicit RestoreSession(SessionEnv env);
	RestoreSession(const RestoreSession &) = delete;
	RestoreSession &operator=(const RestoreSession &) = delete;

	// init(RESTORE)'s work: consumes the plugin's inventory entry and
	// loads, validates and maps the checkpoint, and makes the fabric. 0:
	// ready to restore; -ENOTSUP: nothing of ours to restore; -errno:
	// refused (logged).
	int prepare();
	// The hooks, forwarded to the part that runs them.
	int restore_ext_file(int id, bool *retry_needed);
	int update_vma_map(const char *path, uint64_t addr, uint64_t old_pgoff, uint64_t *new_pgoff,
			   int *plugin_fd);
	int post_forking();
	int resume_devices_late(int pid);
	void finish(int ret);

	bool active() const { return state_ == State::Active; }
	// The GPU map this process restores onto (the plan's, unless a task
	// mapped it again); empty when inactive.
	const GpuMap &gpu_map() const;

private:
	enum class State { Unprepared, Inactive, Active };
	// prepare(), a guardian started only `with_guardian`: 0, -ENOTSUP or
	// -errno (logged), as prepare().
	int prepare_checkpoint(bool with_guardian);
	// The plan, then the fabric and the parts that use them: Active, or
	// Inactive with nothing of ours to restore; an error: refused.
	Status set_up(bool with_guardian);

	SessionEnv env_;
	State state_ = State::Unprepared;
	// Destroyed bottom-up: the task side, then the fabric (its parallel
	// restore's thread, joined, calls main_), then the main side, and
	// the plan that all of them read last.
	std::optional<RestorePlan> plan_;
	std::optional<MainRestore> main_;
	std::unique_ptr<RestoreFabric> fabric_;
	std::optional<TaskRestore> task_;
};

} // namespace amdcr
