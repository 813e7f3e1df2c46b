// SPDX-License-Identifier: GPL-2.0-only
//
// The runner of the ThreadSanitizer stand-in for Criterion (criterion/
// criterion.h says why and what it offers). Each test runs in a child
// process; the parent only forks, waits and counts, so it starts no thread
// of its own before a fork.
#include <criterion/criterion.h>
#include <criterion/redirect.h>

#include <fcntl.h>
#include <fnmatch.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

namespace amdcr_harness {

// Exit codes of a test child.
constexpr int kPassed = 0;
constexpr int kFailed = 1;
constexpr int kSkipped = 77;

namespace {

std::vector<const TestDesc *> &registry()
{
	static std::vector<const TestDesc *> tests;
	return tests;
}

// State of the one test running in this (child) process.
struct Current {
	bool expectation_failed = false;
	int stderr_file = -1;
};

Current &current()
{
	static Current c;
	return c;
}

void report(const char *kind, const char *file, int line, const char *expr, const std::string &msg)
{
	std::fprintf(stdout, "[----] %s:%d: %s: %s%s%s\n", file, line, kind, expr, msg.empty() ? "" : ": ",
		     msg.c_str());
	std::fflush(stdout);
}

[[noreturn]] void finish(int code)
{
	std::fflush(stdout);
	std::fflush(stderr);
	std::exit(code);
}

[[noreturn]] void run_child(const TestDesc &t)
{
	if (t.init)
		t.init();
	t.fn();
	if (t.fini)
		t.fini();
	finish(current().expectation_failed ? kFailed : kPassed);
}

} // namespace

void register_test(const TestDesc *desc)
{
	registry().push_back(desc);
}

void assert_failed(const char *file, int line, const char *expr, const std::string &msg)
{
	report("Assertion failed", file, line, expr, msg);
	finish(kFailed);
}

void expect_failed(const char *file, int line, const char *expr, const std::string &msg)
{
	report("Expectation failed", file, line, expr, msg);
	current().expectation_failed = true;
}

void skip(const std::string &why)
{
	std::fprintf(stdout, "[SKIP] %s\n", why.c_str());
	finish(kSkipped);
}

std::string message(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *out = nullptr;
	const int n = vasprintf(&out, fmt, ap);
	va_end(ap);
	if (n < 0)
		return fmt;
	std::string s(out, static_cast<size_t>(n));
	std::free(out);
	return s;
}

std::string redirected_stderr()
{
	FILE *f = cr_get_redirected_stderr();
	std::string out;
	char buf[4096];
	size_t n;
	while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0)
		out.append(buf, n);
	std::fclose(f);
	return out;
}

} // namespace amdcr_harness

void cr_redirect_stderr()
{
	auto &c = amdcr_harness::current();
	std::fflush(stderr);
	c.stderr_file = memfd_create("redirected-stderr", MFD_CLOEXEC);
	if (c.stderr_file < 0 || dup2(c.stderr_file, STDERR_FILENO) < 0) {
		std::perror("cr_redirect_stderr");
		std::exit(amdcr_harness::kFailed);
	}
}

// A new open file description of the capture: reading it does not move the
// offset stderr writes at.
FILE *cr_get_redirected_stderr()
{
	auto &c = amdcr_harness::current();
	std::fflush(stderr);
	if (c.stderr_file < 0) {
		std::fprintf(stdout, "cr_get_redirected_stderr: stderr was not redirected\n");
		std::exit(amdcr_harness::kFailed);
	}
	const std::string path = "/proc/self/fd/" + std::to_string(c.stderr_file);
	FILE *f = std::fopen(path.c_str(), "r");
	if (!f) {
		std::perror("cr_get_redirected_stderr");
		std::exit(amdcr_harness::kFailed);
	}
	return f;
}

int main(int argc, char **argv)
{
	using namespace amdcr_harness;
	std::string filter = "*";
	for (int i = 1; i < argc; i++) {
		const std::string a = argv[i];
		if ((a == "--jobs" || a == "-j" || a == "--filter") && i + 1 < argc) {
			if (a == "--filter")
				filter = argv[i + 1];
			i++;
		} else if (a.rfind("--filter=", 0) == 0) {
			filter = a.substr(9);
		} else if (a.rfind("--jobs=", 0) == 0 || a.rfind("-j", 0) == 0) {
		} else {
			std::fprintf(stderr, "%s: unknown option %s (this runner knows --jobs N and --filter GLOB)\n",
				     argv[0], a.c_str());
			return 2;
		}
	}
	auto tests = registry();
	std::sort(tests.begin(), tests.end(), [](const TestDesc *a, const TestDesc *b) {
		const int s = std::strcmp(a->suite, b->suite);
		return s ? s < 0 : std::strcmp(a->name, b->name) < 0;
	});
	int ran = 0, passed = 0, failed = 0, skipped = 0;
	for (const TestDesc *t : tests) {
		const std::string id = std::string(t->suite) + "/" + t->name;
		if (t->disabled || fnmatch(filter.c_str(), id.c_str(), 0) != 0)
			continue;
		std::fflush(stdout);
		std::fflush(stderr);
		const pid_t pid = fork();
		if (pid < 0) {
			std::perror("fork");
			return 1;
		}
		if (pid == 0)
			run_child(*t);
		int status = 0;
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
		}
		ran++;
		if (WIFEXITED(status) && WEXITSTATUS(status) == kPassed) {
			passed++;
		} else if (WIFEXITED(status) && WEXITSTATUS(status) == kSkipped) {
			skipped++;
			std::printf("[SKIP] %s\n", id.c_str());
		} else {
			failed++;
			if (WIFSIGNALED(status))
				std::printf("[FAIL] %s: crashed with signal %d\n", id.c_str(), WTERMSIG(status));
			else
				std::printf("[FAIL] %s: exit %d%s\n", id.c_str(), WEXITSTATUS(status),
					    WEXITSTATUS(status) == 66 ? " (ThreadSanitizer reported)" : "");
		}
	}
	std::printf("[====] Synthesis: Tested: %d | Passing: %d | Failing: %d | Skipped: %d "
		    "(ThreadSanitizer runner, tests/tsan_criterion)\n",
		    ran, passed, failed, skipped);
	if (ran == 0) {
		std::printf("no test matched %s\n", filter.c_str());
		return 1;
	}
	return failed ? 1 : 0;
}
