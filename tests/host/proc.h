// SPDX-License-Identifier: GPL-2.0-only
//
// What the host reads about a live task from /proc, and the freezer: tasks
// are stopped with PTRACE_SEIZE + PTRACE_INTERRUPT (as CRIU's compel does)
// and let go by the Freezer's destructor unless killed first, so that every
// path out of a dump leaves them running.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"

namespace host {

std::vector<pid_t> list_threads(pid_t pid);
// Children of every thread of pid (/proc/PID/task/TID/children).
std::vector<pid_t> list_children(pid_t pid);
amdcr::Result<std::vector<int>> list_fds(pid_t pid);

struct FdParams {
	int fd = -1;
	std::string path; // readlink of /proc/PID/fd/N
	unsigned flags = 0; // open flags (fdinfo "flags:", O_CLOEXEC removed)
	bool cloexec = false;
	int64_t pos = 0;
};
amdcr::Result<FdParams> read_fd_params(pid_t pid, int fd);

struct MapEntry {
	uint64_t start = 0, end = 0;
	uint64_t pgoff = 0; // bytes, as /proc/PID/maps shows it
	int prot = 0;
	int flags = 0; // MAP_SHARED or MAP_PRIVATE
	unsigned dev_major = 0, dev_minor = 0;
	uint64_t ino = 0;
	std::string path;
};
amdcr::Result<std::vector<MapEntry>> read_maps(pid_t pid);

struct TaskStatus {
	char state = '?';
	pid_t tracer = 0;
	pid_t ppid = 0;
};
amdcr::Result<TaskStatus> read_status(pid_t pid);

class Freezer {
public:
	Freezer() = default;
	Freezer(const Freezer &) = delete;
	Freezer &operator=(const Freezer &) = delete;
	~Freezer() { resume_all(); }

	// Seizes and stops every thread of pid.
	amdcr::Status freeze(pid_t pid);
	// Detaches every seized thread: the tasks run again.
	void resume_all();
	// SIGKILLs every frozen task and reaps the trace state.
	void kill_all();

private:
	struct Task {
		pid_t pid;
		std::vector<pid_t> tids;
	};
	amdcr::Status seize_thread(pid_t tid);
	std::vector<Task> tasks_;
};

} // namespace host
