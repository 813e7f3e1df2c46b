// SPDX-License-Identifier: GPL-2.0-only
#include "device/processes.h"

#include <dirent.h>
#include <linux/kcmp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

namespace amdcr {
namespace {

using DirPtr = std::unique_ptr<DIR, int (*)(DIR *)>;

DirPtr open_dir(const std::string &path)
{
	return DirPtr(::opendir(path.c_str()), ::closedir);
}

// The number a /proc directory entry names (a pid, an fd), or nullopt for
// any other entry ("." and "..", "self", ...).
std::optional<long> entry_number(const dirent &e)
{
	if (e.d_name[0] < '0' || e.d_name[0] > '9')
		return std::nullopt;
	char *end = nullptr;
	const long n = std::strtol(e.d_name, &end, 10);
	if (*end)
		return std::nullopt;
	return n;
}

// Whether process `pid` is traced by the calling thread or process.
bool traced_by_us(const ProcStatus &st, pid_t pid)
{
	return st.tgid == pid && (st.tracer == ::gettid() || st.tracer == ::getpid());
}

// Calls `visit(pid)` for each process /proc lists, in its order, until it
// returns true.
template <typename Fn>
void visit_processes(Fn visit)
{
	DirPtr proc = open_dir("/proc");
	if (!proc)
		return;
	while (const dirent *e = ::readdir(proc.get())) {
		const auto n = entry_number(*e);
		if (n && *n > 0 && visit(static_cast<pid_t>(*n)))
			return;
	}
}

} // namespace

std::optional<ProcStatus> read_proc_status(pid_t pid)
{
	FILE *f = std::fopen(("/proc/" + std::to_string(pid) + "/status").c_str(), "re");
	if (!f)
		return std::nullopt;
	ProcStatus st;
	char line[512];
	while (std::fgets(line, sizeof(line), f)) {
		long v = 0;
		if (std::sscanf(line, "Tgid: %ld", &v) == 1) {
			st.tgid = static_cast<pid_t>(v);
		} else if (std::sscanf(line, "TracerPid: %ld", &v) == 1) {
			st.tracer = static_cast<pid_t>(v);
		} else if (std::strncmp(line, "NSpid:", 6) == 0) {
			char *save = nullptr;
			for (char *tok = strtok_r(line + 6, " \t\n", &save); tok; tok = strtok_r(nullptr, " \t\n", &save))
				st.innermost = static_cast<pid_t>(std::atol(tok));
		}
	}
	std::fclose(f);
	return st;
}

std::optional<pid_t> traced_process_with_ns_pid(uint32_t ns_pid)
{
	const auto want = static_cast<pid_t>(ns_pid);
	auto traced = [want](pid_t pid) {
		auto st = read_proc_status(pid);
		return st && traced_by_us(*st, pid) && st->innermost == want;
	};
	if (want > 0 && traced(want))
		return want;
	std::optional<pid_t> found;
	visit_processes([&](pid_t pid) {
		if (pid != want && traced(pid))
			found = pid;
		return found.has_value();
	});
	return found;
}

std::vector<pid_t> traced_processes_holding(int fd)
{
	std::vector<pid_t> found;
	visit_processes([&](pid_t pid) {
		auto st = read_proc_status(pid);
		if (st && traced_by_us(*st, pid) && fd_on_same_file(pid, fd))
			found.push_back(pid);
		return false;
	});
	return found;
}

std::optional<int> fd_on_same_file(pid_t pid, int fd)
{
	const pid_t us = ::getpid();
	const bool self = pid == 0 || pid == us;
	DirPtr fds = open_dir(self ? std::string("/proc/self/fd") : "/proc/" + std::to_string(pid) + "/fd");
	if (!fds)
		return std::nullopt;
	const pid_t holder = self ? us : pid;
	while (const dirent *e = ::readdir(fds.get())) {
		const auto n = entry_number(*e);
		if (!n || (self && (*n == fd || *n == ::dirfd(fds.get()))))
			continue;
		if (::syscall(SYS_kcmp, us, holder, KCMP_FILE, fd, *n) == 0)
			return static_cast<int>(*n);
	}
	return std::nullopt;
}

} // namespace amdcr
