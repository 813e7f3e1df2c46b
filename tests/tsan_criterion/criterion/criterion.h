// SPDX-License-Identifier: GPL-2.0-only
//
// A stand-in for the part of Criterion's API the project's tests use, for
// ThreadSanitizer builds only (AMDCR_SANITIZE=thread): Criterion 2.4's runner
// cannot start under TSan ("Could not initialize inheritable arena",
// Snaipe/Criterion#274), so tests/CMakeLists.txt links the tests against this
// harness instead (target amdcr_criterion). Same test sources, same
// semantics where the tests depend on them:
//
//   Test(suite, name[, .init = f][, .fini = f][, .disabled = b]) { ... }
//   cr_assert*(...)  failure ends the test;  cr_expect*(...)  it goes on and
//   fails at the end;  cr_skip_test(...)  ends it as skipped;
//   every test runs in a child process of its own (as Criterion's do), so a
//   crash or a TSan report (exit 66) fails that test only.
//
// The runner (runner.cpp) accepts Criterion's --jobs N (ignored: one test
// at a time) and --filter SUITE/NAME (shell glob); it exits 0 when every
// test that ran passed.
#pragma once
// Criterion's own header is a system header, so the tests' comparisons of
// mixed signedness compile without warnings there; the same here.
#pragma GCC system_header

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>

namespace amdcr_harness {

struct TestDesc {
	const char *suite;
	const char *name;
	void (*fn)();
	void (*init)() = nullptr;
	void (*fini)() = nullptr;
	bool disabled = false;
	// Criterion's per-test limit in seconds: accepted and not enforced
	// here (the tests run one after another in one process; ctest's
	// --timeout bounds the whole program).
	double timeout = 0;
};

void register_test(const TestDesc *desc);
[[noreturn]] void assert_failed(const char *file, int line, const char *expr, const std::string &msg);
void expect_failed(const char *file, int line, const char *expr, const std::string &msg);
[[noreturn]] void skip(const std::string &why);

inline std::string message()
{
	return {};
}
std::string message(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

} // namespace amdcr_harness

#define AMDCR_HARNESS_JOIN(a, b, c) a##_##b##_##c

#define Test(S_, N_, ...)                                                                              \
	static void AMDCR_HARNESS_JOIN(amdcr_test, S_, N_)();                                          \
	static const amdcr_harness::TestDesc AMDCR_HARNESS_JOIN(amdcr_desc, S_, N_) = {                \
		.suite = #S_, .name = #N_, .fn = AMDCR_HARNESS_JOIN(amdcr_test, S_, N_)                 \
		__VA_OPT__(, ) __VA_ARGS__};                                                           \
	__attribute__((constructor)) static void AMDCR_HARNESS_JOIN(amdcr_reg, S_, N_)()               \
	{                                                                                              \
		amdcr_harness::register_test(&AMDCR_HARNESS_JOIN(amdcr_desc, S_, N_));                 \
	}                                                                                              \
	static void AMDCR_HARNESS_JOIN(amdcr_test, S_, N_)()

// One check: `fail` is assert_failed or expect_failed.
#define AMDCR_HARNESS_CHECK(fail, ok, expr, ...)                                                       \
	do {                                                                                           \
		if (!(ok))                                                                             \
			amdcr_harness::fail(__FILE__, __LINE__, expr,                                  \
					    amdcr_harness::message(__VA_ARGS__));                      \
	} while (0)

// A comparison evaluates each operand once, as Criterion's do.
#define AMDCR_HARNESS_CMP(fail, op, a, b, ...)                                                         \
	do {                                                                                           \
		auto &&amdcr_a_ = (a);                                                                 \
		auto &&amdcr_b_ = (b);                                                                 \
		AMDCR_HARNESS_CHECK(fail, amdcr_a_ op amdcr_b_, #a " " #op " " #b, __VA_ARGS__);       \
	} while (0)

#define AMDCR_HARNESS_STR(fail, op, a, b, ...)                                                         \
	AMDCR_HARNESS_CHECK(fail, std::strcmp((a), (b)) op 0, #a " " #op " " #b, __VA_ARGS__)

#define cr_assert(c, ...) AMDCR_HARNESS_CHECK(assert_failed, c, #c, __VA_ARGS__)
#define cr_expect(c, ...) AMDCR_HARNESS_CHECK(expect_failed, c, #c, __VA_ARGS__)
#define cr_assert_not(c, ...) AMDCR_HARNESS_CHECK(assert_failed, !(c), "!(" #c ")", __VA_ARGS__)
#define cr_expect_not(c, ...) AMDCR_HARNESS_CHECK(expect_failed, !(c), "!(" #c ")", __VA_ARGS__)
#define cr_assert_null(p, ...) AMDCR_HARNESS_CHECK(assert_failed, (p) == nullptr, #p " == NULL", __VA_ARGS__)
#define cr_expect_null(p, ...) AMDCR_HARNESS_CHECK(expect_failed, (p) == nullptr, #p " == NULL", __VA_ARGS__)
#define cr_assert_not_null(p, ...) AMDCR_HARNESS_CHECK(assert_failed, (p) != nullptr, #p " != NULL", __VA_ARGS__)
#define cr_expect_not_null(p, ...) AMDCR_HARNESS_CHECK(expect_failed, (p) != nullptr, #p " != NULL", __VA_ARGS__)
#define cr_assert_fail(...) amdcr_harness::assert_failed(__FILE__, __LINE__, "cr_assert_fail", amdcr_harness::message(__VA_ARGS__))
#define cr_skip_test(...) amdcr_harness::skip(amdcr_harness::message(__VA_ARGS__))

#define cr_assert_eq(a, b, ...) AMDCR_HARNESS_CMP(assert_failed, ==, a, b, __VA_ARGS__)
#define cr_expect_eq(a, b, ...) AMDCR_HARNESS_CMP(expect_failed, ==, a, b, __VA_ARGS__)
#define cr_assert_neq(a, b, ...) AMDCR_HARNESS_CMP(assert_failed, !=, a, b, __VA_ARGS__)
#define cr_expect_neq(a, b, ...) AMDCR_HARNESS_CMP(expect_failed, !=, a, b, __VA_ARGS__)
#define cr_assert_lt(a, b, ...) AMDCR_HARNESS_CMP(assert_failed, <, a, b, __VA_ARGS__)
#define cr_expect_lt(a, b, ...) AMDCR_HARNESS_CMP(expect_failed, <, a, b, __VA_ARGS__)
#define cr_assert_leq(a, b, ...) AMDCR_HARNESS_CMP(assert_failed, <=, a, b, __VA_ARGS__)
#define cr_expect_leq(a, b, ...) AMDCR_HARNESS_CMP(expect_failed, <=, a, b, __VA_ARGS__)
#define cr_assert_gt(a, b, ...) AMDCR_HARNESS_CMP(assert_failed, >, a, b, __VA_ARGS__)
#define cr_expect_gt(a, b, ...) AMDCR_HARNESS_CMP(expect_failed, >, a, b, __VA_ARGS__)
#define cr_assert_geq(a, b, ...) AMDCR_HARNESS_CMP(assert_failed, >=, a, b, __VA_ARGS__)
#define cr_expect_geq(a, b, ...) AMDCR_HARNESS_CMP(expect_failed, >=, a, b, __VA_ARGS__)
#define cr_assert_str_eq(a, b, ...) AMDCR_HARNESS_STR(assert_failed, ==, a, b, __VA_ARGS__)
#define cr_expect_str_eq(a, b, ...) AMDCR_HARNESS_STR(expect_failed, ==, a, b, __VA_ARGS__)
