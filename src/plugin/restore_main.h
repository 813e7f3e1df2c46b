// SPDX-License-Identifier: GPL-2.0-only
//
// MainRestore: CRIU's main process after it has forked the restored tasks.
//
//   POST_FORKING (post_forking): the parallel restore's thread starts
//     (plugin/parallel_restore.h).
//   On that thread (copy_handed_over): each task's hand-over, a file's
//     dma-bufs, becomes copy jobs from the plan's images and is filled from
//     the pages files (plugin/restore_contents.h), while the task goes on.
//   RESUME_DEVICES_LATE (resume_devices_late), once per task, after every
//     task has restored its files: the parallel restore's outcome (a failed
//     or incomplete copy kills the tasks, because CRIU ignores this hook's
//     result), then the task's GPU queues resumed and the guardian told.
//
// It reads the plan (plugin/restore_plan.h) and uses the fabric
// (plugin/restore_fabric.h); exit(RESTORE) is the session's
// (plugin/restore.h).
#pragma once

#include <sys/types.h>

#include <atomic>

#include "base/log.h"
#include "base/result.h"
#include "plugin/parallel_restore.h"
#include "plugin/restore_fabric.h"
#include "plugin/restore_plan.h"
#include "plugin/session.h"

namespace amdcr {

class MainRestore {
public:
	MainRestore(const SessionEnv &env, const RestorePlan &plan, RestoreFabric &fabric)
		: env_(env), plan_(plan), fabric_(fabric)
	{
	}
	MainRestore(const MainRestore &) = delete;
	MainRestore &operator=(const MainRestore &) = delete;

	// The hooks (-ENOTSUP unless something failed; see restore.cpp).
	int post_forking();
	int resume_devices_late(int pid);

	// On the parallel restore's thread: a task's hand-over copied in.
	Status copy_handed_over(const HandOver &h, const std::atomic<bool> &cancel, DeferredLog &log) const;

private:
	// The parallel restore's outcome; on failure the tasks are killed.
	Status check_parallel(pid_t pid);

	const SessionEnv &env_;
	const RestorePlan &plan_;
	RestoreFabric &fabric_;
	bool parallel_checked_ = false; // its outcome was checked (and logged)
};

} // namespace amdcr
