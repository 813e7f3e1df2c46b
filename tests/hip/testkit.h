// SPDX-License-Identifier: GPL-2.0-only
//
// What the test programs of tests/hip share (HIP or not): one way to fail (a
// line naming the call or the first mismatching element, exit 1), a
// watchdog that names the step that hung (SIGALRM after a step's deadline,
// exit 3), NOT RUN (exit 77) and the cases a program runs, chosen with
// --case NAME (repeatable; all when none is given), and the gates a
// checkpoint harness dumps a program at (Gates). Header-only: hipcc
// compiles each program as one file.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "testcommon/pattern.h"

namespace hiptest {

// Exit codes (CTest: 77 is SKIP_RETURN_CODE).
constexpr int kFail = 1;
constexpr int kUsage = 2;
constexpr int kHung = 3;
constexpr int kNotRun = 77;

[[noreturn]] inline void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
inline void fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	std::fputs("FAIL ", stderr);
	std::vfprintf(stderr, fmt, ap);
	std::fputc('\n', stderr);
	va_end(ap);
	// No exit handlers: a runtime's teardown may wait for a GPU that failed.
	std::fflush(nullptr);
	std::_Exit(kFail);
}

// The watchdog's step name lives in a fixed buffer: the SIGALRM handler may
// only read memory and write(2). The one piece of mutable static state of a
// test program, as a signal handler needs it.
struct WatchdogState {
	char step[160] = "start";
};
inline WatchdogState &watchdog_state()
{
	static WatchdogState s;
	return s;
}

inline void on_alarm(int)
{
	const char head[] = "FAIL hung: no progress within the step's deadline in step: ";
	(void)!write(2, head, sizeof(head) - 1);
	const char *s = watchdog_state().step;
	(void)!write(2, s, std::strlen(s));
	(void)!write(2, "\n", 1);
	_exit(kHung);
}

// A fatal signal (the runtime's abort on a GPU memory fault, a crash)
// names the step it ended, then takes its default action.
inline void on_fatal(int sig)
{
	const char head[] = "FAIL fatal signal in step: ";
	(void)!write(2, head, sizeof(head) - 1);
	const char *s = watchdog_state().step;
	(void)!write(2, s, std::strlen(s));
	(void)!write(2, "\n", 1);
	std::signal(sig, SIG_DFL);
	raise(sig);
}

// The watchdog's deadlines: a step (a copy, a kernel), and the runtime's
// initialisation (ROCr and HIP reading the topology and creating their
// queues take 20-40 s on the emulator of a machine loaded by two parallel
// builds).
constexpr unsigned kStepSeconds = 60;
constexpr unsigned kInitSeconds = 120;
// The last step: the runtime's teardown after main returns.
constexpr const char *kTeardown = "the runtime's teardown at exit";

// step(name, seconds): names what runs next and arms the watchdog for it.
inline void step(const std::string &name, unsigned seconds = kStepSeconds)
{
	std::signal(SIGALRM, on_alarm);
	for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL})
		std::signal(sig, on_fatal);
	alarm(0);
	std::snprintf(watchdog_state().step, sizeof(watchdog_state().step), "%s", name.c_str());
	alarm(seconds);
}

// Element-wise comparison; the first mismatch fails naming what, where,
// the expected and the received value (floats bit for bit, as hex floats).
template <typename T> inline std::string show(T v)
{
	char buf[64];
	if constexpr (std::is_floating_point_v<T>)
		std::snprintf(buf, sizeof(buf), "%a", double(v));
	else if constexpr (std::is_signed_v<T>)
		std::snprintf(buf, sizeof(buf), "%lld", (long long)v);
	else
		std::snprintf(buf, sizeof(buf), "0x%llx", (unsigned long long)v);
	return buf;
}

template <typename T>
inline void expect_equal(const char *what, const T *expected, const T *got, size_t n)
{
	for (size_t i = 0; i < n; ++i)
		if (std::memcmp(&expected[i], &got[i], sizeof(T)) != 0)
			fail("%s: element %zu: expected %s, got %s", what, i, show(expected[i]).c_str(),
			     show(got[i]).c_str());
}

// Byte i of the project's one data pattern (tests/common/testcommon), for
// values derived from it; whole buffers use testcommon::fill_pattern.
inline uint8_t pattern_byte(uint64_t seed, size_t i)
{
	return uint8_t(testcommon::pattern_word(seed, i / 8) >> (8 * (i % 8)));
}

// The gates a checkpoint harness dumps a program at (--gate-after K,
// repeatable, and --gate FILE; tests/hip/hip_criu_test.py): after its step
// K the program prints "gate K", waits until FILE exists (at most 10
// minutes) and removes it, so that the next gate waits for a new one; the
// harness dumps it while it waits, then creates the file.
struct Gates {
	std::vector<int> after; // the steps after which the program waits
	std::string file;

	// Takes argv[i] (and its value) when it is a gate option.
	bool take(int argc, char **argv, int &i)
	{
		if (i + 1 >= argc)
			return false;
		if (std::strcmp(argv[i], "--gate-after") == 0)
			after.push_back(std::atoi(argv[++i]));
		else if (std::strcmp(argv[i], "--gate") == 0)
			file = argv[++i];
		else
			return false;
		return true;
	}
	// Both options or neither.
	bool complete() const { return after.empty() == file.empty(); }
	bool after_step(int k) const
	{
		for (int a : after)
			if (a == k)
				return true;
		return false;
	}
	void wait(int k) const
	{
		std::printf("gate %d\n", k);
		std::fflush(stdout);
		step("waiting for the gate file " + file, 600);
		struct stat st;
		while (stat(file.c_str(), &st) != 0)
			std::this_thread::sleep_for(std::chrono::milliseconds(50));
		if (unlink(file.c_str()) != 0)
			fail("gate %d: unlink %s: %s", k, file.c_str(), std::strerror(errno));
	}
};

// A HIP program's command line: its count (`count_option` N, at least 1),
// its flags (each sets its bool) and the gates, whose --gate-after values
// must also pass `gate_ok` where the program has one (`gate_values` says
// which in the messages: "K" for any). Anything else: the usage, exit
// kUsage.
struct Flag {
	const char *option;
	bool *value;
	bool set_to;
};

struct GateRule {
	const char *values = "K", *said = "";
	bool (*ok)(int) = nullptr;
};

inline void parse_command_line(int argc, char **argv, const char *count_option, int &count,
			       std::initializer_list<Flag> flags, Gates &gates, GateRule rule = {})
{
	for (int i = 1; i < argc; ++i) {
		const std::string a = argv[i];
		const Flag *flag = std::find_if(flags.begin(), flags.end(), [&](const Flag &f) { return a == f.option; });
		if (a == count_option && i + 1 < argc) {
			count = std::atoi(argv[++i]);
		} else if (flag != flags.end()) {
			*flag->value = flag->set_to;
		} else if (!gates.take(argc, argv, i)) {
			std::string usage = std::string("[") + count_option + " N]";
			for (const Flag &f : flags)
				usage += std::string(" [") + f.option + "]";
			std::fprintf(stderr, "usage: %s %s [--gate-after %s]... [--gate FILE]\n", argv[0], usage.c_str(),
				     rule.values);
			std::exit(kUsage);
		}
	}
	const bool known = !rule.ok || std::all_of(gates.after.begin(), gates.after.end(), rule.ok);
	if (count < 1 || !gates.complete() || !known) {
		std::fprintf(stderr, "%s: %s must be >= 1; --gate-after%s and --gate go together\n", argv[0],
			     count_option, rule.said);
		std::exit(kUsage);
	}
}

struct Case {
	const char *name;
	std::function<void()> run;
};

[[noreturn]] inline void not_run(const char *why)
{
	std::printf("NOT RUN: %s\n", why);
	std::fflush(nullptr);
	std::_Exit(kNotRun);
}

// run_cases(argc, argv, init, cases): checks the arguments (--list prints
// the case names, --case NAME picks cases, all when none), then runs
// init() (the runtime's start; it may call not_run()) and the cases,
// printing "ok NAME" after each and "PASS n cases" at the end.
inline int run_cases(int argc, char **argv, const std::function<void()> &init, const std::vector<Case> &cases)
{
	std::vector<std::string> wanted;
	for (int i = 1; i < argc; ++i) {
		if (std::strcmp(argv[i], "--case") == 0 && i + 1 < argc) {
			wanted.emplace_back(argv[++i]);
		} else if (std::strcmp(argv[i], "--list") == 0) {
			for (const Case &c : cases)
				std::printf("%s\n", c.name);
			return 0;
		} else {
			std::fprintf(stderr, "usage: %s [--list] [--case NAME]...\n", argv[0]);
			return kUsage;
		}
	}
	for (const std::string &w : wanted) {
		bool known = false;
		for (const Case &c : cases)
			known = known || w == c.name;
		if (!known) {
			std::fprintf(stderr, "unknown case '%s' (--list names them)\n", w.c_str());
			return kUsage;
		}
	}
	init();
	int ran = 0;
	for (const Case &c : cases) {
		bool want = wanted.empty();
		for (const std::string &w : wanted)
			want = want || w == c.name;
		if (!want)
			continue;
		c.run();
		alarm(0);
		std::printf("ok %s\n", c.name);
		std::fflush(stdout);
		++ran;
	}
	std::printf("PASS %d cases\n", ran);
	std::fflush(stdout);
	step(kTeardown);
	return 0;
}

} // namespace hiptest
