// SPDX-License-Identifier: GPL-2.0-only
#include "plugin/restore.h"

#include <cerrno>
#include <utility>

#include "base/log.h"

namespace amdcr {

RestoreSession::RestoreSession(SessionEnv env) : env_(std::move(env)) {}

int RestoreSession::prepare()
{
	return prepare_checkpoint(true); // the guardian before CRIU forks any task
}

int RestoreSession::prepare_checkpoint(bool with_guardian)
{
	if (state_ != State::Unprepared)
		return active() ? 0 : -ENOTSUP;
	state_ = State::Inactive;
	if (auto st = set_up(with_guardian); !st) {
		log_error("restore refused before any GPU state was changed: %s", st.error().message().c_str());
		return st.error().neg();
	}
	return active() ? 0 : -ENOTSUP;
}

Status RestoreSession::set_up(bool with_guardian)
{
	auto plan = RestorePlan::load(env_);
	if (!plan)
		return std::move(plan).error();
	if (!*plan)
		return ok_status(); // nothing of ours: inactive
	plan_.emplace(std::move(**plan));
	// Before CRIU forks the tasks, which inherit it. The parallel
	// restore's copies run on its thread, which only POST_FORKING starts.
	auto fabric = RestoreFabric::create(
		env_, *plan_,
		[this](const HandOver &h, const std::atomic<bool> &cancel, DeferredLog &log) {
			return main_->copy_handed_over(h, cancel, log);
		},
		with_guardian);
	if (!fabric)
		return std::move(fabric).error();
	fabric_ = std::move(*fabric);
	main_.emplace(env_, *plan_, *fabric_);
	task_.emplace(env_, *plan_, *fabric_);
	state_ = State::Active;
	return ok_status();
}

const GpuMap &RestoreSession::gpu_map() const
{
	static const GpuMap kNone;
	return task_ ? task_->gpu_map() : kNone;
}

int RestoreSession::restore_ext_file(int id, bool *retry_needed)
{
	if (retry_needed)
		*retry_needed = false;
	if (state_ == State::Unprepared)
		(void)prepare_checkpoint(false); // in a task: no guardian from here
	if (!active())
		return -ENOTSUP;
	return task_->restore_ext_file(id);
}

int RestoreSession::update_vma_map(const char *path, uint64_t /*addr*/, uint64_t old_pgoff, uint64_t *new_pgoff,
				   int *plugin_fd)
{
	if (!active())
		return -ENOTSUP;
	return task_->update_vma_map(path, old_pgoff, new_pgoff, plugin_fd);
}

int RestoreSession::post_forking()
{
	return active() ? main_->post_forking() : -ENOTSUP;
}

int RestoreSession::resume_devices_late(int pid)
{
	return active() ? main_->resume_devices_late(pid) : -ENOTSUP;
}

void RestoreSession::finish(int ret)
{
	if (!active())
		return;
	state_ = State::Inactive; // the hooks end here
	task_.reset();		  // this process's render files and mappings
	fabric_->finish(ret, env_.config);
	fabric_.reset();
	main_.reset();
}

} // namespace amdcr
