// SPDX-License-Identifier: GPL-2.0-only
//
// Parallel restore (KFD_PARALLEL_RESTORE): the contents of a restored
// task's buffers are copied in by a thread of CRIU's main process while
// the task goes on restoring the rest of itself (other files, its memory,
// its threads), instead of inside the task's RESTORE_EXT_FILE.
//
// Where each step runs (CRIU 4.2+; CRIU 4.0/4.1 have no POST_FORKING and
// restore serially):
//
//  init(RESTORE), CRIU's main process, before any task exists: create()
//    makes a SOCK_SEQPACKET socket pair. The main process keeps both ends;
//    a copy of the sending end goes into CRIU's fdstore, a service socket
//    that every restored task inherits whatever its namespaces (CRIU closes
//    every other fd a task inherits). The tasks are forked later and so
//    inherit this object with the fdstore id.
//  RESTORE_EXT_FILE, in the task: once the buffers exist (KFD's RESTORE or
//    the GEM BOs recreated), hand_over() takes the sending end from the
//    fdstore and sends the file's id and the dma-bufs of its buffers with
//    contents, in order, at most kMaxFdsPerMessage per message; the task
//    closes its own copies and does not wait for the copy.
//  POST_FORKING, main process: start() runs serve() on a thread with every
//    signal blocked (CRIU handles SIGCHLD on its main thread) and its own
//    fs_struct (unshare(CLONE_FS): CRIU's main thread must stay able to
//    setns() into the restored mount namespaces). Each complete
//    hand-over goes to the CopyFn, one at a time. The tasks copy nothing in
//    this mode but what the main process cannot (a GPU mapped again in the
//    task, a shared BO its first holder fills); those copies and the
//    thread's take turns (copy/staging_gate.h), so the staging memory of
//    the whole restore stays within KFD_MAX_BUFFER_SIZE.
//  RESUME_DEVICES_LATE, main process, once per task after every task has
//    finished its restore and is held stopped by CRIU: the first call of
//    finish() queues a stop message behind every hand-over (all were sent
//    before: the tasks are done) and waits for the thread (or, if
//    POST_FORKING never reached this plugin, serves the queue itself).
//    The thread's log lines, kept until then (CRIU's print_on_level is not
//    for two threads at once, base/log.h), are printed here, in order.
//    A failed or incomplete copy is an error naming the file and the task;
//    the caller then kills the tasks (see MainRestore::resume_devices_late)
//    because CRIU ignores this hook's result.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include "base/log.h"
#include "base/result.h"
#include "base/unique_fd.h"

namespace amdcr {

enum class HandOverKind : uint32_t { Kfd = 1, Render = 2 };

// One file's buffers, handed over by a task.
struct HandOver {
	HandOverKind kind = HandOverKind::Kfd;
	int file_id = 0;
	pid_t pid = 0;			// the sending task, as the main process sees it
	std::vector<UniqueFd> dmabufs;	// in the file's order of buffers with contents
};

class ParallelRestore {
public:
	// `cancel` turns true when the restore is abandoned (the destructor);
	// `log` keeps the copy's log lines for CRIU's thread (base/log.h):
	// finish() and the destructor print them once the thread is joined.
	using CopyFn = std::function<Status(const HandOver &, const std::atomic<bool> &cancel, DeferredLog &log)>;

	// Dma-bufs per message: the kernel's SCM_MAX_FD.
	static constexpr size_t kMaxFdsPerMessage = 253;

	// Main process, before the tasks are forked. Fails (the caller then
	// restores serially) when CRIU has no fdstore.
	static Result<std::unique_ptr<ParallelRestore>> create(CopyFn copy);
	ParallelRestore(const ParallelRestore &) = delete;
	ParallelRestore &operator=(const ParallelRestore &) = delete;
	// Main process: a running thread is told to stop copying, and joined.
	~ParallelRestore();

	// In a restored task: sends `dmabufs` (borrowed) of file `file_id`.
	Status hand_over(HandOverKind kind, int file_id, std::span<const int> dmabufs) const;

	// Main process (POST_FORKING): starts the thread.
	Status start();
	// Main process: stops and waits for the thread (the first call) and
	// returns the outcome: every hand-over received complete and copied.
	// `senders`: the tasks that handed buffers over.
	Status finish(std::vector<pid_t> *senders);

private:
	ParallelRestore(UniqueFd recv, UniqueFd send, int store_id, CopyFn copy);
	// The receiving loop, until the stop message; records the outcome.
	void serve();
	Status send_stop() const;

	UniqueFd recv_;	 // main process: the receiving end
	UniqueFd send_;	 // main process: the sending end (its stop message)
	int store_id_ = -1; // the sending end in CRIU's fdstore
	CopyFn copy_;
	std::thread thread_;
	std::atomic<bool> cancel_{false};
	DeferredLog log_; // the thread's lines, printed by CRIU's thread
	bool finished_ = false; // finish() has run (main thread only)
	// Written by serve() only, read after it has ended.
	std::optional<Status> outcome_;
	std::vector<pid_t> senders_;
};

} // namespace amdcr
