// SPDX-License-Identifier: GPL-2.0-only
#include "plugin/restore_fabric.h"

#include <unistd.h>

#include <utility>

#include "base/log.h"
#include "plugin/criu_api.h"
#include "plugin/summary.h"

namespace amdcr {

Result<std::unique_ptr<RestoreFabric>> RestoreFabric::create(const SessionEnv &env, const RestorePlan &plan,
							     ParallelRestore::CopyFn copy, bool with_guardian)
{
	std::unique_ptr<RestoreFabric> f(new RestoreFabric());
	if (const uint32_t max_shared = plan.max_shared_id()) {
		auto table = SharedBoTable::create(max_shared);
		if (!table)
			return std::move(table).error();
		f->shared_bos_.emplace(std::move(*table));
	}
	f->set_up_parallel(env, plan, std::move(copy));
	if (auto copies = SharedMemory<SharedCopies>::create("the restore's copy totals"); copies)
		f->shared_copies_.emplace(std::move(*copies));
	else
		log_debug("no summary line for this restore: %s", copies.error().message().c_str());
	if (with_guardian)
		f->start_guardian(env);
	return f;
}

void RestoreFabric::set_up_parallel(const SessionEnv &env, const RestorePlan &plan, ParallelRestore::CopyFn copy)
{
	const char *why = nullptr;
	if (!env.config.parallel_restore)
		why = "KFD_PARALLEL_RESTORE=0";
	else if (!env.post_forking)
		why = "this CRIU has no POST_FORKING hook (CRIU 4.0/4.1)";
	else if (plan.streamed())
		why = "the images are streamed (criu --stream): only the tasks can read them";
	if (why) {
		log_info("restore: no parallel restore (%s): each task copies its own GPU memory", why);
		return;
	}
	auto p = ParallelRestore::create(std::move(copy));
	if (!p) {
		log_info("restore: no parallel restore: %s; each task copies its own GPU memory",
			 p.error().message().c_str());
		return;
	}
	parallel_ = std::move(*p);
}

void RestoreFabric::finish(int ret, const Config &config)
{
	parallel_.reset(); // a thread still copying stops after its current file
	if (guardian_) {
		if (auto st = guardian_->finish(); !st)
			log_warn("%s", st.error().message().c_str());
		guardian_.reset();
	}
	if (ret == 0 && shared_copies_ && (*shared_copies_)->totals.files > 0)
		log_notice("%s", summary_line((*shared_copies_)->totals, false, config).c_str());
}

// ---- the guardian's restore side ------------------------------------------
// CRIU's main process: start_guardian() in init(RESTORE) before any task
// exists, task_resumed() in RESUME_DEVICES_LATE, finish() in exit(RESTORE).
// Each restored task: report_task() in RESTORE_EXT_FILE, before its first
// GPU file creates state, through the copy of the channel CRIU's fdstore
// keeps (CRIU closes every other fd a task inherits).

void RestoreFabric::start_guardian(const SessionEnv &env)
{
	std::optional<int> dir_fd;
	if (auto dir = session_image_dir(env); dir && !dir->streaming())
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

void RestoreFabric::report_task() const
{
	if (guardian_store_id_ < 0)
		return;
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

void RestoreFabric::task_resumed(int pid) const
{
	if (!guardian_)
		return;
	// EPIPE: it has exited already, every task it knew being resumed.
	if (auto st = guardian_->resumed(pid); !st && st.error().code() != EPIPE)
		log_debug("pid %d: %s", pid, st.error().message().c_str());
}

} // namespace amdcr
