// SPDX-License-Identifier: GPL-2.0-only
//
// The SDMA fence timeout given to libdrm in a time namespace: libdrm turns
// it into a deadline on the process's CLOCK_MONOTONIC, the kernel reads that
// deadline on its own clock, so a restored container's lagging clock must
// lengthen it by the lag (and a leading one shorten it).
#include <criterion/criterion.h>

#include <amdgpu.h>

#include <cstdint>

#include "device/amdgpu.h"

using namespace amdcr;

namespace {
constexpr uint64_t kSec = 1000000000ull;
}

Test(fence_timeout, unchanged_without_a_time_namespace_offset)
{
	cr_assert_eq(libdrm_timeout_ns(60 * kSec, 0), 60 * kSec);
	cr_assert_eq(libdrm_timeout_ns(0, 0), 0u);
}

Test(fence_timeout, a_lagging_clock_waits_longer_by_the_lag)
{
	// The container was down 75 s: its clock is the kernel's - 75 s.
	const int64_t offset = -75 * static_cast<int64_t>(kSec) - 5;
	cr_assert_eq(libdrm_timeout_ns(60 * kSec, offset), 135 * kSec + 5);
	cr_assert_eq(libdrm_timeout_ns(0, offset), 75 * kSec + 5);
}

Test(fence_timeout, a_leading_clock_waits_shorter_and_never_below_a_poll)
{
	cr_assert_eq(libdrm_timeout_ns(60 * kSec, 20 * static_cast<int64_t>(kSec)), 40 * kSec);
	cr_assert_eq(libdrm_timeout_ns(60 * kSec, 90 * static_cast<int64_t>(kSec)), 0u);
}

Test(fence_timeout, infinite_stays_infinite_and_huge_values_do_not_wrap)
{
	cr_assert_eq(libdrm_timeout_ns(AMDGPU_TIMEOUT_INFINITE, -5 * static_cast<int64_t>(kSec)),
		     AMDGPU_TIMEOUT_INFINITE);
	const uint64_t big = AMDGPU_TIMEOUT_INFINITE - 10;
	const uint64_t got = libdrm_timeout_ns(big, -5 * static_cast<int64_t>(kSec));
	cr_assert(got >= big && got < AMDGPU_TIMEOUT_INFINITE, "got %llu", static_cast<unsigned long long>(got));
	cr_assert_eq(libdrm_timeout_ns(1, INT64_MIN), static_cast<uint64_t>(INT64_MAX) + 2);
}
