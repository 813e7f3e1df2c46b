// SPDX-License-Identifier: GPL-2.0-only
//
// What /proc says of processes and their open files: the one scan of the
// processes a dump traces, and the one comparison of open files
// (kcmp KCMP_FILE), which the dump (who holds a /dev/kfd file) and the
// restore (which other fd of a task is the same render node file) share.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace amdcr {

// The fields of /proc/<pid>/status a dumped process is found by.
struct ProcStatus {
	pid_t tgid = 0;
	pid_t tracer = 0;
	pid_t innermost = 0; // NSpid's last: the pid in its own namespace
};

// /proc/<pid>/status of `pid` (a thread's too); nullopt when it cannot be
// read (the process has ended, or /proc does not show it).
std::optional<ProcStatus> read_proc_status(pid_t pid);

// The process traced by the calling thread or process (CRIU's thread
// running a dump hook ptraces every process it dumps) whose pid in its own
// namespace is `ns_pid` (PROCESS_INFO's), as a pid of ours: tried at
// `ns_pid` first (no pid namespace), then among all processes.
std::optional<pid_t> traced_process_with_ns_pid(uint32_t ns_pid);

// The processes traced by the calling thread or process that hold an fd
// on the same open file as our fd `fd`, in /proc's order.
std::vector<pid_t> traced_processes_holding(int fd);

// An fd of process `pid` (0: this process) that refers to the same open
// file as our fd `fd` (kcmp KCMP_FILE), other than `fd` itself in this
// process; nullopt when there is none or its fds cannot be listed.
std::optional<int> fd_on_same_file(pid_t pid, int fd);

} // namespace amdcr
