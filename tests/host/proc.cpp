// SPDX-License-Identifier: GPL-2.0-only
#include "proc.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "api.h"
#include "base/file_io.h"

namespace host {
namespace {

std::vector<long> numeric_entries(const std::string &dir)
{
	std::vector<long> out;
	DIR *d = opendir(dir.c_str());
	if (!d)
		return out;
	while (struct dirent *de = readdir(d)) {
		char *end = nullptr;
		const long v = std::strtol(de->d_name, &end, 10);
		if (end != de->d_name && *end == '\0')
			out.push_back(v);
	}
	closedir(d);
	std::sort(out.begin(), out.end());
	return out;
}

std::string proc_path(pid_t pid, const char *what)
{
	return "/proc/" + std::to_string(pid) + "/" + what;
}

} // namespace

std::vector<pid_t> list_threads(pid_t pid)
{
	std::vector<pid_t> out;
	for (long v : numeric_entries(proc_path(pid, "task")))
		out.push_back(static_cast<pid_t>(v));
	return out;
}

std::vector<pid_t> list_children(pid_t pid)
{
	std::vector<pid_t> out;
	for (pid_t tid : list_threads(pid)) {
		auto text = amdcr::read_text_file(AT_FDCWD, proc_path(pid, "task/") +
								std::to_string(tid) + "/children");
		if (!text)
			continue;
		std::istringstream in(*text);
		long v;
		while (in >> v)
			if (std::find(out.begin(), out.end(), v) == out.end())
				out.push_back(static_cast<pid_t>(v));
	}
	return out;
}

amdcr::Result<std::vector<int>> list_fds(pid_t pid)
{
	const std::string dir = proc_path(pid, "fd");
	DIR *d = opendir(dir.c_str());
	if (!d)
		return amdcr::errno_error(errno, "opendir " + dir);
	closedir(d);
	std::vector<int> out;
	for (long v : numeric_entries(dir))
		out.push_back(static_cast<int>(v));
	return out;
}

amdcr::Result<FdParams> read_fd_params(pid_t pid, int fd)
{
	FdParams p;
	p.fd = fd;
	const std::string link = proc_path(pid, "fd/") + std::to_string(fd);
	char buf[4096];
	const ssize_t n = readlink(link.c_str(), buf, sizeof(buf) - 1);
	if (n < 0)
		return amdcr::errno_error(errno, "readlink " + link);
	p.path.assign(buf, static_cast<size_t>(n));

	auto info = amdcr::read_text_file(AT_FDCWD, proc_path(pid, "fdinfo/") + std::to_string(fd));
	if (!info)
		return std::move(info).error();
	std::istringstream in(*info);
	std::string line;
	while (std::getline(in, line)) {
		if (line.rfind("pos:", 0) == 0)
			p.pos = std::strtoll(line.c_str() + 4, nullptr, 10);
		else if (line.rfind("flags:", 0) == 0)
			p.flags = static_cast<unsigned>(std::strtoul(line.c_str() + 6, nullptr, 8));
	}
	p.cloexec = (p.flags & O_CLOEXEC) != 0;
	p.flags &= ~static_cast<unsigned>(O_CLOEXEC);
	return p;
}

amdcr::Result<std::vector<MapEntry>> read_maps(pid_t pid)
{
	auto text = amdcr::read_text_file(AT_FDCWD, proc_path(pid, "maps"), 64 << 20);
	if (!text)
		return std::move(text).error();
	std::vector<MapEntry> out;
	std::istringstream in(*text);
	std::string line;
	while (std::getline(in, line)) {
		MapEntry e;
		char perms[5] = {};
		unsigned long long start, end, off, ino;
		unsigned maj, min;
		int path_off = 0;
		if (std::sscanf(line.c_str(), "%llx-%llx %4s %llx %x:%x %llu %n", &start, &end, perms,
				&off, &maj, &min, &ino, &path_off) < 7)
			return amdcr::make_error(EINVAL, "can't parse maps line: %s", line.c_str());
		e.start = start;
		e.end = end;
		e.pgoff = off;
		e.dev_major = maj;
		e.dev_minor = min;
		e.ino = ino;
		e.prot = (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) |
			 (perms[2] == 'x' ? PROT_EXEC : 0);
		e.flags = perms[3] == 's' ? MAP_SHARED : MAP_PRIVATE;
		if (path_off > 0 && static_cast<size_t>(path_off) <= line.size())
			e.path = line.substr(static_cast<size_t>(path_off));
		out.push_back(std::move(e));
	}
	return out;
}

amdcr::Result<TaskStatus> read_status(pid_t pid)
{
	auto text = amdcr::read_text_file(AT_FDCWD, proc_path(pid, "status"));
	if (!text)
		return std::move(text).error();
	TaskStatus s;
	std::istringstream in(*text);
	std::string line;
	while (std::getline(in, line)) {
		if (line.rfind("State:", 0) == 0) {
			const size_t p = line.find_first_not_of(" \t", 6);
			if (p != std::string::npos)
				s.state = line[p];
		} else if (line.rfind("TracerPid:", 0) == 0) {
			s.tracer = static_cast<pid_t>(std::atoi(line.c_str() + 10));
		} else if (line.rfind("PPid:", 0) == 0) {
			s.ppid = static_cast<pid_t>(std::atoi(line.c_str() + 5));
		}
	}
	return s;
}

amdcr::Status Freezer::seize_thread(pid_t tid)
{
	if (ptrace(PTRACE_SEIZE, tid, nullptr, nullptr) < 0)
		return amdcr::errno_error(errno, "PTRACE_SEIZE " + std::to_string(tid));
	if (ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr) < 0) {
		const int err = errno;
		ptrace(PTRACE_DETACH, tid, nullptr, nullptr);
		return amdcr::errno_error(err, "PTRACE_INTERRUPT " + std::to_string(tid));
	}
	for (;;) {
		int status = 0;
		const pid_t r = waitpid(tid, &status, __WALL);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return amdcr::errno_error(errno, "waitpid " + std::to_string(tid));
		}
		if (WIFEXITED(status) || WIFSIGNALED(status))
			return amdcr::make_error(ESRCH, "task %d exited while being seized", tid);
		if (!WIFSTOPPED(status))
			continue;
		if ((status >> 16) == PTRACE_EVENT_STOP)
			return amdcr::ok_status();
		// A signal arrived before the interrupt trap: deliver it and wait
		// for the (still pending) interrupt stop.
		const int sig = WSTOPSIG(status);
		ptrace(PTRACE_CONT, tid, nullptr, reinterpret_cast<void *>(static_cast<long>(sig)));
	}
}

amdcr::Status Freezer::freeze(pid_t pid)
{
	Task t{pid, {}};
	// Threads may be created while we seize: repeat until no new ones.
	for (int pass = 0; pass < 10; pass++) {
		bool added = false;
		for (pid_t tid : list_threads(pid)) {
			if (std::find(t.tids.begin(), t.tids.end(), tid) != t.tids.end())
				continue;
			auto st = seize_thread(tid);
			if (!st) {
				if (tid == pid) {
					tasks_.push_back(std::move(t));
					return st;
				}
				// A thread that exited meanwhile.
				logf(kDebug, "thread %d of %d not seized: %s\n", tid, pid,
				     st.error().message().c_str());
				continue;
			}
			t.tids.push_back(tid);
			added = true;
		}
		if (!added)
			break;
	}
	logf(kInfo, "Seized task %d (%zu threads)\n", pid, t.tids.size());
	tasks_.push_back(std::move(t));
	return amdcr::ok_status();
}

void Freezer::resume_all()
{
	for (const Task &t : tasks_)
		for (pid_t tid : t.tids)
			if (ptrace(PTRACE_DETACH, tid, nullptr, nullptr) < 0 && errno != ESRCH)
				log_perror("Unable to detach from %d", tid);
	tasks_.clear();
}

void Freezer::kill_all()
{
	for (const Task &t : tasks_)
		kill(t.pid, SIGKILL);
	for (const Task &t : tasks_) {
		// Collect each traced thread's exit: the other threads first, as
		// the leader's exit is reported only after theirs are collected.
		// The real parent reaps the process.
		std::vector<pid_t> order;
		for (pid_t tid : t.tids)
			if (tid != t.pid)
				order.push_back(tid);
		order.push_back(t.pid);
		for (pid_t tid : order) {
			int status;
			while (waitpid(tid, &status, __WALL) < 0 && errno == EINTR)
				;
		}
	}
	tasks_.clear();
}

} // namespace host
