// SPDX-License-Identifier: GPL-2.0-only
//
// device/processes.h: which fds refer to one open file (kcmp KCMP_FILE), in
// this process and in another, and which processes traced by the caller
// hold a file, as the dump finds a /dev/kfd file's holders and the restore
// a task's own render node file. A child holds the files here, traced
// (PTRACE_SEIZE) as CRIU traces the processes it dumps.
#include <criterion/criterion.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include "device/processes.h"

using namespace amdcr;

namespace {

// A child that holds every fd of ours until it is killed.
struct Child {
	pid_t pid = -1;
	Child()
	{
		pid = ::fork();
		cr_assert_geq(pid, 0);
		if (pid == 0) {
			for (;;)
				::pause();
		}
	}
	~Child()
	{
		::kill(pid, SIGKILL);
		::waitpid(pid, nullptr, __WALL);
	}
};

int open_null()
{
	const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	return fd;
}

} // namespace

Test(processes, finds_another_fd_of_the_same_open_file_in_this_process)
{
	const int a = open_null(), other = open_null();
	cr_expect_eq(fd_on_same_file(0, a), std::nullopt, "no other fd of it yet");
	const int dup = ::fcntl(a, F_DUPFD_CLOEXEC, 100);
	cr_assert_geq(dup, 0);
	cr_expect_eq(fd_on_same_file(0, a), std::optional<int>(dup));
	cr_expect_eq(fd_on_same_file(::getpid(), a), std::optional<int>(dup), "our pid is this process too");
	cr_expect_eq(fd_on_same_file(0, other), std::nullopt, "another open of the same path is another file");
}

Test(processes, finds_the_fd_of_another_process_that_holds_the_file)
{
	const int a = open_null();
	Child child;
	cr_expect_eq(fd_on_same_file(child.pid, a), std::optional<int>(a), "inherited at the same number");
	const int later = open_null(); // opened after the fork: the child does not hold it
	cr_expect_eq(fd_on_same_file(child.pid, later), std::nullopt);
}

Test(processes, lists_only_the_traced_holders)
{
	const int a = open_null();
	Child traced, untraced;
	cr_assert_eq(::ptrace(PTRACE_SEIZE, traced.pid, nullptr, nullptr), 0, "PTRACE_SEIZE");
	cr_expect(traced_processes_holding(a) == std::vector<pid_t>{traced.pid},
		  "the traced child holds it; the untraced one is not CRIU's");
	const int later = open_null();
	cr_expect(traced_processes_holding(later).empty());
	// No pid namespace here: its pid in its own namespace is its pid.
	cr_expect_eq(traced_process_with_ns_pid(static_cast<uint32_t>(traced.pid)), std::optional<pid_t>(traced.pid));
	cr_expect_eq(traced_process_with_ns_pid(static_cast<uint32_t>(untraced.pid)), std::nullopt);
}

Test(processes, reads_the_status_of_this_process)
{
	const auto st = read_proc_status(::getpid());
	cr_assert(st.has_value());
	cr_expect_eq(st->tgid, ::getpid());
	cr_expect_eq(st->innermost, ::getpid(), "no pid namespace of its own");
	cr_expect_eq(read_proc_status(0), std::nullopt, "no process 0 in /proc");
}
