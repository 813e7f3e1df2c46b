// SPDX-License-Identifier: GPL-2.0-only
//
// The gate through which the processes of a restore take turns copying
// (copy/staging_gate.h), in an anonymous MAP_SHARED page as the plugin
// keeps it, between forked processes as CRIU's tasks are.
#include <criterion/criterion.h>

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <new>

#include "../common/assert_ok.h"
#include "copy/staging_gate.h"

using namespace amdcr;

namespace {

struct Page {
	StagingGate gate;
	std::atomic<bool> cancel{false};
	std::atomic<int> inside{0};	// processes between acquire and release
	std::atomic<int> most_inside{0};
	std::atomic<int> child_rc{-1};	// what the child's acquire returned (errno, 0)
	std::atomic<bool> child_waited{false};
};

Page *shared_page()
{
	void *p = ::mmap(nullptr, sizeof(Page), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert(p != MAP_FAILED);
	return new (p) Page();
}

int wait_child(pid_t pid)
{
	int status = 0;
	cr_assert_eq(::waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status), "child ended by a signal");
	return WEXITSTATUS(status);
}

} // namespace

Test(staging_gate, free_gate_is_taken_without_waiting)
{
	Page *p = shared_page();
	bool waited = true;
	cr_assert_ok(p->gate.acquire(nullptr, &waited));
	cr_expect_not(waited);
	p->gate.release();
	cr_assert_ok(p->gate.acquire(nullptr, &waited));
	cr_expect_not(waited);
	p->gate.release();
}

Test(staging_gate, another_process_waits_until_cancelled_while_it_is_held)
{
	Page *p = shared_page();
	cr_assert_ok(p->gate.acquire(nullptr, nullptr));
	const pid_t pid = ::fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		bool waited = false;
		auto st = p->gate.acquire(&p->cancel, &waited);
		p->child_waited = waited;
		p->child_rc = st ? 0 : st.error().code();
		_exit(0);
	}
	// Whenever the child looks, the gate is held: it must wait, and
	// give up (ECANCELED) once told to, not take the gate.
	p->cancel = true;
	cr_assert_eq(wait_child(pid), 0);
	cr_expect_eq(p->child_rc.load(), ECANCELED);
	cr_expect(p->child_waited.load());
	p->gate.release();

	// Released: the next process takes it at once.
	p->cancel = false;
	const pid_t next = ::fork();
	cr_assert(next >= 0);
	if (next == 0) {
		bool waited = true;
		auto st = p->gate.acquire(&p->cancel, &waited);
		p->child_waited = waited;
		p->child_rc = st ? 0 : st.error().code();
		if (st)
			p->gate.release();
		_exit(0);
	}
	cr_assert_eq(wait_child(next), 0);
	cr_expect_eq(p->child_rc.load(), 0);
	cr_expect_not(p->child_waited.load());
}

Test(staging_gate, processes_hold_it_one_at_a_time)
{
	Page *p = shared_page();
	constexpr int kProcs = 4, kRounds = 2000;
	pid_t pids[kProcs];
	for (pid_t &pid : pids) {
		pid = ::fork();
		cr_assert(pid >= 0);
		if (pid == 0) {
			for (int i = 0; i < kRounds; i++) {
				if (!p->gate.acquire(nullptr, nullptr))
					_exit(1);
				const int now = ++p->inside;
				int most = p->most_inside.load();
				while (now > most && !p->most_inside.compare_exchange_weak(most, now)) {
				}
				if (i % 64 == 0)
					::sched_yield(); // let the others pile up at the gate
				--p->inside;
				p->gate.release();
			}
			_exit(0);
		}
	}
	for (pid_t pid : pids)
		cr_expect_eq(wait_child(pid), 0);
	cr_expect_eq(p->most_inside.load(), 1, "%d processes held the gate at once", p->most_inside.load());
	cr_expect_eq(p->inside.load(), 0);
}
