// SPDX-License-Identifier: GPL-2.0-only
//
// The ThreadSanitizer runner's own test (run by selftest.sh under TSan
// builds): one test of each outcome, so the runner's verdicts are checked,
// including a data race that TSan must report.
#include <criterion/criterion.h>
#include <criterion/redirect.h>

#include <atomic>
#include <thread>

static int init_ran;
static void set_init() { init_ran = 1; }

Test(selftest, passes, .init = set_init)
{
	cr_assert_eq(init_ran, 1, "the .init function did not run");
	cr_expect_str_eq("a", "a");
}

Test(selftest, assertion_fails)
{
	cr_assert_eq(1, 2, "expected failure %d", 42);
}

Test(selftest, expectation_fails)
{
	cr_expect(false);
	cr_assert(true);
}

Test(selftest, skips)
{
	cr_skip_test("expected skip");
}

Test(selftest, stderr_is_captured, .init = cr_redirect_stderr)
{
	std::fprintf(stderr, "captured");
	cr_assert_stderr_eq_str("captured");
}

static int racy;

// Both writes happen while both threads run (relaxed atomics order them
// without a happens-before edge that TSan would see): when the thread's
// write came first and the thread had ended before the main thread's
// write, TSan missed the race about once in 30 runs.
Test(selftest, data_race_is_reported)
{
	std::atomic<bool> written{false}, done{false};
	std::thread t([&] {
		racy++;
		written.store(true, std::memory_order_relaxed);
		while (!done.load(std::memory_order_relaxed))
			std::this_thread::yield();
	});
	while (!written.load(std::memory_order_relaxed))
		std::this_thread::yield();
	racy++;
	done.store(true, std::memory_order_relaxed);
	t.join();
}
