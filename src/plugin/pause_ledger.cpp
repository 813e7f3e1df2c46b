// SPDX-License-Identifier: GPL-2.0-only
#include "plugin/pause_ledger.h"

#include <unistd.h>

#include <string>
#include <utility>

#include "base/log.h"
#include "device/processes.h"

namespace amdcr {

PauseLedger::~PauseLedger()
{
	if (!paused_.empty())
		(void)unpause_all();
}

void PauseLedger::start_guardian()
{
	if (guardian_ || guardian_failed_)
		return;
	std::optional<int> dir_fd;
	if (auto dir = session_image_dir(env_); dir && !dir->streaming())
		dir_fd = dir->fd();
	auto g = Guardian::start(Guardian::Stage::Dump, dir_fd.value_or(-1));
	if (!g) {
		guardian_failed_ = true;
		log_warn("no guardian: if CRIU is killed during this dump, paused GPU queues stay paused and "
			 "temporary files stay: %s",
			 g.error().message().c_str());
		return;
	}
	guardian_.emplace(std::move(*g));
	log_debug("guardian started (pid %d)", static_cast<int>(guardian_->pid()));
}

void PauseLedger::watch_temp_files(ImageDir &dir) const
{
	if (!guardian_ || dir.streaming())
		return;
	const Guardian *g = &*guardian_;
	dir.set_temp_observer([this, g](const std::string &temp) {
		if (auto st = g->temp_file(temp); !st)
			guardian_error(st.error());
	});
}

void PauseLedger::guardian_error(const Error &e) const
{
	if (!guardian_ || !guardian_->ended()) {
		log_debug("%s", e.message().c_str());
		return;
	}
	if (guardian_lost_.exchange(true))
		return;
	log_warn("the guardian (pid %d) ended during the dump (killed?): if CRIU is killed now, paused GPU "
		 "queues stay paused and temporary image files stay (%s)",
		 static_cast<int>(guardian_->pid()), e.message().c_str());
}

void PauseLedger::announce(const Kfd &target, int id, std::vector<pid_t> holders) const
{
	if (!guardian_)
		return;
	if (holders.empty()) {
		log_debug("file %d: no process traced by us holds it; the guardian learns of it after its pause",
			  id);
		return;
	}
	if (holders.size() > Guardian::kMaxCandidates)
		holders.resize(Guardian::kMaxCandidates);
	if (auto st = guardian_->pausing(target, id, holders); !st) {
		log_warn("file %d: if CRIU is killed during its pause, the GPU queues it pauses stay paused: %s", id,
			 st.error().message().c_str());
		return;
	}
	log_debug("file %d: the guardian knows it before its pause (%zu candidate processes)", id,
		  holders.size());
}

void PauseLedger::guard(Paused &p)
{
	const uint32_t pid = p.pid;
	if (!guardian_) {
		log_debug("pid %u: no guardian watches it", pid);
		return;
	}
	const auto host = traced_process_with_ns_pid(pid);
	if (!host) {
		log_debug("pid %u: no process traced by us has that pid; no guardian watches it", pid);
		return;
	}
	if (auto st = guardian_->paused(p.kfd, *host, p.id); !st) {
		log_warn("pid %u: if CRIU is killed now its GPU queues stay paused: %s", pid,
			 st.error().message().c_str());
		return;
	}
	p.host_pid = *host;
	log_debug("pid %u: the guardian watches it (pid %d here)", pid, static_cast<int>(*host));
}

Result<KfdProcessInfo> PauseLedger::pause(Kfd target, int id, std::vector<pid_t> holders)
{
	announce(target, id, std::move(holders));
	auto info = target.process_info();
	if (!info)
		return std::move(info).error();
	paused_.push_back({std::move(target), info->pid, 0, id});
	log_debug("pid %u: GPU queues paused (%u GPUs, %u BOs, %u objects)", info->pid, info->num_devices,
		  info->num_bos, info->num_objects);
	guard(paused_.back());
	return info;
}

Status PauseLedger::unpause_all()
{
	// A process left paused is the worst outcome of a dump, so a failed
	// UNPAUSE is tried again a few times before it is reported.
	constexpr int kAttempts = 3;
	Status first;
	for (auto &p : paused_) {
		Status st;
		for (int attempt = 1; attempt <= kAttempts; attempt++) {
			st = p.kfd.unpause();
			if (st)
				break;
			log_warn("pid %u: GPU queues not resumed, attempt %d/%d: %s", p.pid, attempt, kAttempts,
				 st.error().message().c_str());
			if (attempt < kAttempts)
				::usleep(10000u << attempt);
		}
		if (!st) {
			log_error("pid %u: GPU queues could not be resumed: %s", p.pid, st.error().message().c_str());
			if (first)
				first = std::move(st);
		} else {
			log_debug("pid %u: GPU queues resumed", p.pid);
		}
		if (guardian_ && p.host_pid > 0)
			if (auto g = guardian_->unpaused(p.host_pid); !g)
				guardian_error(g.error().context(strprintf("pid %u", p.pid)));
	}
	paused_.clear();
	return first;
}

void PauseLedger::resume_left(int ret)
{
	if (paused_.empty())
		return;
	log_debug("dump ended (%d) before DUMP_DEVICES_LATE: resuming %zu paused processes", ret, paused_.size());
	(void)unpause_all();
}

void PauseLedger::finish_guardian()
{
	if (!guardian_)
		return;
	if (guardian_->ended())
		guardian_error(Error(ESRCH, "found at the end of the dump"));
	if (auto st = guardian_->finish(); !st)
		log_warn("%s", st.error().message().c_str());
	guardian_.reset();
}

} // namespace amdcr
