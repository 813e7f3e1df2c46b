// SPDX-License-Identifier: GPL-2.0-only
//
// The stderr capture of the ThreadSanitizer stand-in for Criterion (see
// criterion.h beside it): cr_redirect_stderr() sends the test's stderr to a
// memory file; cr_get_redirected_stderr() reads it from the start.
#pragma once

#include <criterion/criterion.h>

#include <cstdio>

void cr_redirect_stderr();
FILE *cr_get_redirected_stderr();

namespace amdcr_harness {
std::string redirected_stderr();
}

#define cr_assert_stderr_eq_str(s, ...)                                                                \
	AMDCR_HARNESS_CHECK(assert_failed, amdcr_harness::redirected_stderr() == (s), "stderr == " #s, \
			    __VA_ARGS__)
#define cr_expect_stderr_eq_str(s, ...)                                                                \
	AMDCR_HARNESS_CHECK(expect_failed, amdcr_harness::redirected_stderr() == (s), "stderr == " #s, \
			    __VA_ARGS__)
