// SPDX-License-Identifier: GPL-2.0-only
//
// The guardian: a process outside CRIU's process tree that repairs what a
// CRIU killed half-way (SIGKILL, OOM kill, a crash, a timeout's SIGTERM,
// exit() from elsewhere) would leave behind. KFD undoes nothing when the
// dumper dies: a process whose queues PROCESS_INFO paused stays paused for
// good, and a restored process whose GPU memory was only partly copied runs
// on. No code of the plugin runs after CRIU's SIGKILL, so this has to live
// in another process.
//
// One Guardian per session (the dump's PauseLedger and the restore's
// RestoreFabric own it), started on first need: by a dump at its first GPU
// file (a /dev/kfd file before its pause, an AMD render node, an AMD GPU's
// dma-buf; never on a machine or dump without AMD GPU state), by a restore
// in init(RESTORE) when the checkpoint has GPU state to restore. It is told, over a SOCK_SEQPACKET socket pair:
//   dump:    before each /dev/kfd file's pausing PROCESS_INFO, the file (an
//            fd of it) and a pidfd of each process that may be the one KFD
//            pauses (the processes CRIU dumps that hold the file: KFD
//            pauses the file's owner, the process that opened it, which
//            the plugin learns only from PROCESS_INFO's answer); then each
//            paused process (the file again and a pidfd of the owner: it
//            replaces the file's candidates), each process unpaused again,
//            and the name of every temporary image file before it is
//            created;
//   restore: each restored task that is about to hold GPU state (a pidfd,
//            sent by the task itself through CRIU's fdstore), and each task
//            whose queues CRIU's main process resumed.
// finish() tells it the plugin ended normally: it exits at once, and
// finish() waits until its process has ended (a pidfd of it), so after a
// normal dump or restore no process or fd of it is left (its zombie goes to
// the nearest subreaper or init, which reaps it).
//
// When a pidfd of CRIU's process turns readable before finish(), it reads
// what is still queued on the channel and then:
//   dump:    for each process still paused: PTRACE_SEIZE of its leader
//            thread (CRIU's ptrace ended with CRIU), UNPAUSE through the
//            target's file from that same thread (KFD allows CRIU_OP on
//            another process's file only to the tracer of its leader
//            thread, with CAP_CHECKPOINT_RESTORE or CAP_SYS_ADMIN, which
//            the guardian has from CRIU), then PTRACE_INTERRUPT and
//            PTRACE_DETACH; for each file announced but not confirmed
//            (CRIU ended in or right after its PROCESS_INFO), the same
//            with each candidate in turn until KFD answers for the owner:
//            resumed, or EINVAL (it was not paused: logged as nothing to
//            resume); EBADF means the candidate only shares the file (it
//            is not the owner: logged) and the next is tried; and it
//            unlinks the temporary files;
//   restore: SIGKILL of every reported task not yet resumed (its GPU memory
//            may be incomplete; letting it run would be silent corruption).
// Each action is logged to syslog (LOG_DAEMON, ident "amdgpu_plugin") and
// appended to amdgpu-guardian.log in the image directory (not with
// --stream), opened with open_in_dir (base/file_io.h): created 0600, never
// through a symbolic link, never a FIFO or a file with other links (then
// syslog alone says why); then it exits. A restore's guardian also exits
// once every reported task has been resumed: nothing is left to guard.
// A message that is not what its kind must carry (fds, stage, a temporary
// file's plain hidden name) is logged and dropped. After PTRACE_SEIZE of a
// pid it checks through the pidfd that the target has not ended (its pid
// could have gone to another process while the seize was retried); if it
// has, it detaches at once. A stopped CRIU (SIGSTOP) is not an ended one:
// the guardian waits (see the man page, WHEN CRIU IS KILLED).
//
// How it is started, given what CRIU does with a plugin's children (it
// waits for every child at the end of a dump, and its SIGCHLD handlers end
// the dump or restore on any child that exits): a middle process forks the
// guardian and exits at once, and is reaped here synchronously with SIGCHLD
// blocked; the guardian calls setsid() (a process-group kill of CRIU, as
// coreutils timeout sends, spares it), closes every fd it inherited but its
// own (never CRIU's parasite socket; start() moves its own above 2 first,
// as CRIU may run with 0-2 closed), points 0-2 at /dev/null, resets every
// signal disposition and mask, and names itself "amdgpu-guard" (comm).
// A kill of CRIU's whole cgroup kills it too; then nothing is repaired.
//
// This class, the plugin's side, is guardian.cpp; the guardian's process
// is guardian_process.cpp; the messages between them, guardian_protocol.h.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <span>
#include <string_view>

#include "base/result.h"
#include "base/unique_fd.h"
#include "device/kfd.h"

namespace amdcr {

class Guardian {
public:
	enum class Stage { Dump, Restore };
	// The guardian's name in /proc/<pid>/comm.
	static constexpr const char *kComm = "amdgpu-guard";
	// Its log file, in the image directory.
	static constexpr const char *kLogName = "amdgpu-guardian.log";

	// Starts the guardian of CRIU's process (the caller's). `image_dir_fd`
	// (borrowed; -1: none) is where temporary files are removed and the
	// log is written.
	static Result<Guardian> start(Stage stage, int image_dir_fd);

	Guardian(Guardian &&) noexcept = default;
	Guardian &operator=(Guardian &&) noexcept = default;
	Guardian(const Guardian &) = delete;
	Guardian &operator=(const Guardian &) = delete;
	// Without finish(): closes the channel; the guardian then acts when
	// CRIU's process ends (the plugin is going away without finishing).
	~Guardian() = default;

	// At most this many candidates per announced file.
	static constexpr size_t kMaxCandidates = 8;
	// Dump: CRIU file `file`, `target` an fd of a /dev/kfd file, is about
	// to be paused; one of `candidates` (in CRIU's pid namespace, 1 to
	// kMaxCandidates) is its owner, the process KFD pauses.
	Status pausing(const Kfd &target, int file, std::span<const pid_t> candidates) const;
	// Dump: process `pid` (in CRIU's pid namespace) is paused; `target`
	// is an fd of its own /dev/kfd file, CRIU file `file` (announced by
	// pausing(), or not).
	Status paused(const Kfd &target, pid_t pid, int file) const;
	Status unpaused(pid_t pid) const;
	// Dump: image file `name` (in the image directory) is about to be
	// created; removed if CRIU dies.
	Status temp_file(std::string_view name) const;
	// Restore: CRIU's main process resumed task `pid`'s queues.
	Status resumed(pid_t pid) const;
	// The guardian's process, in CRIU's pid namespace.
	pid_t pid() const { return pid_; }
	// The plugin-side end of the channel (restore: CRIU's fdstore keeps a
	// copy for the tasks).
	int channel() const { return chan_.get(); }
	// In a restored task, through a copy of channel(): this task will
	// hold GPU state.
	static Status report_task(int channel);

	// Whether the guardian's process has ended (killed: nothing guards the
	// rest of the session).
	bool ended() const;

	// The plugin ended normally: the guardian exits; waits until it has
	// (kFinishTimeoutMs at most, guardian.cpp).
	Status finish();

private:
	Guardian(UniqueFd chan, UniqueFd pidfd, pid_t pid) : chan_(std::move(chan)), pidfd_(std::move(pidfd)), pid_(pid)
	{
	}
	UniqueFd chan_;
	UniqueFd pidfd_; // the guardian's process
	pid_t pid_ = 0;
};

} // namespace amdcr
