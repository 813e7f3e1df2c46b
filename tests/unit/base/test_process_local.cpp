// SPDX-License-Identifier: GPL-2.0-only
// ProcessLocal<T> (src/base/process_local.h): one T per process; a forked
// child makes its own at its first use and never destroys the one it
// inherited (whose fd numbers may belong to other files in the child by
// then, as in a task CRIU forks).
#include <criterion/criterion.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <memory>

#include "base/process_local.h"
#include "base/shared_memory.h"
#include "base/unique_fd.h"

using namespace amdcr;

namespace {

// How many States were made and destroyed, in every process.
struct Counts {
	std::atomic<int> made{0};
	std::atomic<int> destroyed{0};
};

struct State {
	Counts *counts;
	int value = 0;
	UniqueFd fd;
	explicit State(Counts *c) : counts(c) { counts->made++; }
	State(State &&o) noexcept : counts(o.counts), value(o.value), fd(std::move(o.fd)) { o.counts = nullptr; }
	State(const State &) = delete;
	~State()
	{
		if (counts)
			counts->destroyed++;
	}
};

SharedMemory<Counts> shared_counts()
{
	auto c = SharedMemory<Counts>::create("the test's counts");
	cr_assert(c.ok());
	return std::move(*c);
}

// Runs `child` in a forked process; its exit status (0: its checks held).
template <typename F>
int in_child(F child)
{
	const pid_t pid = ::fork();
	cr_assert_geq(pid, 0);
	if (pid == 0)
		::_exit(child());
	int status = 0;
	cr_assert_eq(::waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status));
	return WEXITSTATUS(status);
}

} // namespace

Test(process_local, made_once_in_a_process)
{
	auto counts = shared_counts();
	ProcessLocal<State> local([&] { return State(counts.get()); });
	cr_expect_null(local.find(), "nothing is made before the first get()");
	local.get().value = 7;
	cr_expect_eq(local.get().value, 7);
	cr_expect_eq(local.find(), &local.get());
	cr_expect_eq(counts->made.load(), 1);
}

Test(process_local, a_forked_child_makes_its_own_and_leaves_the_inherited_one)
{
	auto counts = shared_counts();
	{
		ProcessLocal<State> local([&] { return State(counts.get()); });
		local.get().value = 42;
		const int rc = in_child([&] {
			if (local.find())
				return 1; // the parent's must not be found as the child's
			if (local.get().value != 0)
				return 2; // a new one, not the parent's copy
			local.get().value = 5;
			if (counts->destroyed.load() != 0)
				return 3; // the inherited copy was destroyed
			return 0;
		});
		cr_expect_eq(rc, 0, "child check %d failed", rc);
		// Made: the parent's and the child's (which _exit did not
		// destroy).
		cr_expect_eq(counts->made.load(), 2);
		cr_expect_eq(counts->destroyed.load(), 0);
		cr_expect_eq(local.get().value, 42, "the parent keeps its own");
	}
	cr_expect_eq(counts->destroyed.load(), 1, "the parent's is destroyed with the ProcessLocal, once");
}

// As in a task CRIU forks: the inherited fds are closed and their numbers
// reused before the task's first hook. Neither the child's first get() nor
// the ProcessLocal's end in the child may close the file now at that
// number; the child's own State is destroyed there.
Test(process_local, the_inherited_copy_closes_no_fd_in_the_child)
{
	auto counts = shared_counts();
	auto local = std::make_unique<ProcessLocal<State>>([&] { return State(counts.get()); });
	local->get().fd = UniqueFd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
	const int inherited = local->get().fd.get();
	cr_assert_geq(inherited, 0);
	const int rc = in_child([&] {
		::close(inherited); // as CRIU's close_old_fds, then a file of the task's at that number
		const int zero = ::open("/dev/zero", O_RDONLY | O_CLOEXEC);
		const int other = zero == inherited ? zero : zero >= 0 ? ::dup3(zero, inherited, O_CLOEXEC) : -1;
		if (other != inherited)
			return 10;
		(void)local->get();
		local.reset(); // the child's end of it
		if (::fcntl(other, F_GETFD) < 0)
			return 11; // the inherited copy closed the child's file
		return counts->destroyed.load() == 1 ? 0 : 12; // the child's own, once
	});
	cr_expect_eq(rc, 0, "child check %d failed", rc);
	cr_expect_geq(::fcntl(inherited, F_GETFD), 0, "the parent's fd stays open");
}
