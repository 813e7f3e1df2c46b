// SPDX-License-Identifier: GPL-2.0-only
//
// RestoreFabric: the state the processes of one restore share, as one
// object with one lifetime.
//
// Made once in CRIU's main process at init(RESTORE) (create), after the
// plan (plugin/restore_plan.h) and before CRIU forks any restored task, so
// that every task inherits it; finished once by the main process at
// exit(RESTORE) (finish), then destroyed. The tasks never tear it down
// (CRIU's restorer unmaps every mapping the restored process did not have,
// and closes every fd but those CRIU restores). Its parts:
//   - SharedCopies (session.h, shared memory): the totals of the summary
//     line and the staging gate, which every copy of the restore, in any
//     process, adds to and takes turns through;
//   - the SharedBoTable (shared_bos.h, shared memory), when some BO has
//     several holders: its first holder restored, in whichever task,
//     creates it for the others;
//   - the parallel restore (parallel_restore.h): its channel, whose sending
//     end the tasks take from CRIU's fdstore, and the main process's copying
//     thread (plugin/restore_main.h);
//   - the guardian (guardian.h) and its channel in CRIU's fdstore: each task
//     tells it before it holds GPU state, the main process each task it
//     resumed; if CRIU's process ends before finish(), the guardian kills
//     the tasks not resumed.
// A part that cannot be made is logged and left out (no summary line, each
// task copies its own, no guardian), but for the SharedBoTable: without it
// a shared BO cannot be restored, and create() fails.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>

#include "base/result.h"
#include "base/shared_memory.h"
#include "plugin/guardian.h"
#include "plugin/parallel_restore.h"
#include "plugin/restore_plan.h"
#include "plugin/session.h"
#include "plugin/shared_bos.h"

namespace amdcr {

class RestoreFabric {
public:
	// Main process, init(RESTORE). `copy`: the parallel restore's copy
	// of a hand-over (run on its thread). `with_guardian`: start the
	// guardian (not when the restore is only prepared in a task).
	static Result<std::unique_ptr<RestoreFabric>> create(const SessionEnv &env, const RestorePlan &plan,
							     ParallelRestore::CopyFn copy, bool with_guardian);
	RestoreFabric(const RestoreFabric &) = delete;
	RestoreFabric &operator=(const RestoreFabric &) = delete;

	// Main process, exit(RESTORE): the parallel restore's thread stops
	// (after its current file) and is joined, the guardian ends, and when
	// the restore succeeded (`ret` 0) the summary line is logged.
	void finish(int ret, const Config &config);

	// nullptr: none (no totals, no gate).
	SharedCopies *shared_copies() const { return shared_copies_ ? shared_copies_->get() : nullptr; }
	// nullptr: no BO has several holders.
	SharedBoTable *shared_bos() { return shared_bos_ ? &*shared_bos_ : nullptr; }
	// nullptr: each task copies its own buffers.
	ParallelRestore *parallel() const { return parallel_.get(); }

	// In a restored task, before its first GPU file changes state: the
	// guardian learns the task will hold GPU state.
	void report_task() const;
	// Main process: task `pid` resumed (or has no GPU state).
	void task_resumed(int pid) const;

private:
	RestoreFabric() = default;
	void set_up_parallel(const SessionEnv &env, const RestorePlan &plan, ParallelRestore::CopyFn copy);
	void start_guardian(const SessionEnv &env);

	std::optional<SharedMemory<SharedCopies>> shared_copies_;
	std::optional<SharedBoTable> shared_bos_;
	std::unique_ptr<ParallelRestore> parallel_;
	// Main process only (a task's copy of it is never used).
	std::optional<Guardian> guardian_;
	int guardian_store_id_ = -1; // the guardian's channel in CRIU's fdstore
};

} // namespace amdcr
