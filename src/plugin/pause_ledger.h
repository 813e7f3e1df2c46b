// SPDX-License-Identifier: GPL-2.0-only
//
// PauseLedger: the processes one dump has paused, and the guardian that
// resumes them if CRIU is killed. "Never left paused" is this class's rule.
//
// pause() is the dump's only PROCESS_INFO: from its answer on, the process
// is in the ledger until unpause_all() resumes it, which runs at
// DUMP_DEVICES_LATE under criu-dev's ABI, right after the file's dump under
// CRIU 4.0-4.2.1 (SessionEnv::dump_devices_late: no later hook would),
// at exit(DUMP) when the dump ended before either (resume_left()), and in
// the destructor, so a ledger never goes away with a process paused. A
// failed UNPAUSE is tried again a few times before it is reported.
//
// A killed CRIU runs none of these: the ledger's Guardian
// (plugin/guardian.h), started by the first GPU file of the dump
// (start_guardian(): a /dev/kfd file before its pause, an AMD render node,
// a dma-buf of an AMD GPU), is told every /dev/kfd file before its pause
// (with the processes that may own it), every paused and unpaused process
// and every temporary file (watch_temp_files()); if CRIU's process ends
// before finish_guardian(), it resumes the processes still paused (or
// perhaps paused) and removes those files. A dump without AMD GPU state
// never starts one. A message the guardian cannot be sent is logged and
// the dump goes on.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "base/result.h"
#include "device/kfd.h"
#include "image/image_dir.h"
#include "plugin/guardian.h"
#include "plugin/session.h"

namespace amdcr {

class PauseLedger {
public:
	explicit PauseLedger(const SessionEnv &env) : env_(env) {}
	~PauseLedger();
	PauseLedger(const PauseLedger &) = delete;
	PauseLedger &operator=(const PauseLedger &) = delete;

	// Starts the guardian unless it runs: called by each GPU file's dump
	// before it pauses anything or creates any file. When it cannot start
	// (logged) the dump goes on without one, and it is not tried again.
	void start_guardian();
	// From now on `dir` tells the guardian (if any) its temporary files.
	void watch_temp_files(ImageDir &dir) const;

	// Pauses the process of /dev/kfd file `target` (CRIU file `id`) by
	// PROCESS_INFO and returns its answer; `holders` are the processes
	// that may own the file (the guardian learns the first
	// Guardian::kMaxCandidates of them before the pause). The file, in
	// the ledger from then on, is paused_kfd() until unpause_all().
	Result<KfdProcessInfo> pause(Kfd target, int id, std::vector<pid_t> holders);
	// The /dev/kfd file pause() paused last.
	const Kfd &paused_kfd() const { return paused_.back().kfd; }
	// Processes whose queues are paused now.
	size_t paused_count() const { return paused_.size(); }
	// Resumes every paused process; the first failure, once all were tried.
	Status unpause_all();
	// The dump ended (exit(DUMP), `ret`): resumes those still paused.
	void resume_left(int ret);
	// The dump is over: the guardian exits (waited for).
	void finish_guardian();

private:
	struct Paused {
		Kfd kfd; // our dup of the target's /dev/kfd file
		uint32_t pid = 0;   // in the target's pid namespace (PROCESS_INFO's)
		pid_t host_pid = 0; // in ours, when known (the guardian watches it)
		int id = 0;
	};

	// Before the pause of `target` (CRIU file `id`): the guardian (if
	// any) learns the file and `holders`, so that a CRIU killed before
	// guard() leaves nothing paused. Not told (logged) when it cannot be.
	void announce(const Kfd &target, int id, std::vector<pid_t> holders) const;
	// Paused process `p` under the guardian's watch (sets p.host_pid).
	// Not watched (logged) when it cannot be.
	void guard(Paused &p);
	// A message to the guardian failed: a warning (once) when the guardian
	// has ended (the rest of the dump is unguarded), else a debug line.
	void guardian_error(const Error &e) const;

	const SessionEnv &env_;
	std::vector<Paused> paused_;
	// Started by the first GPU file (start_guardian); finish_guardian()
	// ends it.
	std::optional<Guardian> guardian_;
	bool guardian_failed_ = false; // start_guardian() does not try again
	mutable std::atomic<bool> guardian_lost_{false}; // guardian_error() warned
};

} // namespace amdcr
