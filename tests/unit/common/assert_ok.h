// SPDX-License-Identifier: GPL-2.0-only
//
// Assertions on a Result<T> or Status (src/base/result.h) for the unit tests:
//
//   cr_assert_ok(expr);                 // fails the test unless expr.ok()
//   cr_assert_ok(expr, "gpu %u", id);   // with a printf-style context
//   cr_expect_ok(expr ...);             // the same, the test goes on
//
// `expr` is evaluated once. On failure the message names the expression
// and carries its error's message: "[context: ]expr: <error message>".
#pragma once

#include <criterion/criterion.h>

#include <cstdarg>
#include <cstdio>
#include <string>

namespace amdcr::test {

// "" without a context, else the formatted context and ": ".
inline std::string ok_context() { return {}; }

__attribute__((format(printf, 1, 2))) inline std::string ok_context(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	va_start(ap, fmt);
	std::vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return std::string(buf) + ": ";
}

// The message of a failed Result/Status; "" when it is ok.
template <typename R>
std::string error_message(const R &r)
{
	return r.ok() ? std::string() : r.error().message();
}

} // namespace amdcr::test

#define AMDCR_CHECK_OK_(check, expr, context)                                                        \
	do {                                                                                         \
		const auto &amdcr_ok_result_ = (expr);                                               \
		check(amdcr_ok_result_.ok(), "%s%s: %s", (context).c_str(), #expr,                   \
		      ::amdcr::test::error_message(amdcr_ok_result_).c_str());                       \
	} while (0)

#define cr_assert_ok(expr, ...) AMDCR_CHECK_OK_(cr_assert, expr, ::amdcr::test::ok_context(__VA_ARGS__))
#define cr_expect_ok(expr, ...) AMDCR_CHECK_OK_(cr_expect, expr, ::amdcr::test::ok_context(__VA_ARGS__))
