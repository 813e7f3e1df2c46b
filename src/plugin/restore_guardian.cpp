// SPDX-License-Identifier: GPL-2.0-only
//
// The restore's guardian (plugin/guardian.h): which process does what.
//   CRIU's main process: start_guardian() in init(RESTORE) before any task
//     exists, tell_guardian_resumed() in RESUME_DEVICES_LATE,
//     finish_guardian() in exit(RESTORE).
//   Each restored task: report_task_to_guardian() in RESTORE_EXT_FILE,
//     before its first GPU file creates state, through the copy of the
//     channel CRIU's fdstore keeps (CRIU closes every other fd a task
//     inherits).
#include <unistd.h>

#include "base/log.h"
#include "plugin/criu_api.h"
#include "plugin/restore.h"

namespace amdcr {

void RestoreSession::start_guardian()
{
	std::optional<int> dir_fd;
	if (auto dir = session_image_dir(env_); dir && !dir->streaming())
		dir_fd = dir->fd();
	auto g = Guardian::start(Guardian::Stage::Restore, dir_fd.value_or(-1));
	if (!g) {
		log_warn("restore: if CRIU is killed half-way, its tasks run on: %s", g.error().message().c_str());
		return;
	}
	const auto id = criu::fdstore_add(g->channel());
	if (!id) {
		log_debug("restore: no guardian: CRIU offers no fdstore (fdstore_add) to reach the tasks");
		(void)g->finish();
		return;
	}
	guardian_.emplace(std::move(*g));
	guardian_store_id_ = *id;
	log_debug("guardian started (pid %d)", static_cast<int>(guardian_->pid()));
}

void RestoreSession::report_task_to_guardian()
{
	const pid_t me = ::getpid();
	if (guardian_store_id_ < 0 || reported_to_guardian_ == me)
		return;
	reported_to_guardian_ = me;
	const auto fd = criu::fdstore_get(guardian_store_id_);
	if (!fd) {
		log_warn("restore: the guardian cannot be told of this task: CRIU's fdstore has no channel %d",
			 guardian_store_id_);
		return;
	}
	UniqueFd channel(*fd);
	if (auto st = Guardian::report_task(channel.get()); !st)
		log_warn("restore: the guardian cannot be told of this task: %s", st.error().message().c_str());
}

void RestoreSession::tell_guardian_resumed(int pid)
{
	if (!guardian_)
		return;
	// EPIPE: it has exited already, every task it knew being resumed.
	if (auto st = guardian_->resumed(pid); !st && st.error().code() != EPIPE)
		log_debug("pid %d: %s", pid, st.error().message().c_str());
}

void RestoreSession::finish_guardian()
{
	if (!guardian_)
		return;
	if (auto st = guardian_->finish(); !st)
		log_warn("%s", st.error().message().c_str());
	guardian_.reset();
}

} // namespace amdcr
