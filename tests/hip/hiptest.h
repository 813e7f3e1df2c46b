// SPDX-License-Identifier: GPL-2.0-only
//
// testkit.h for HIP programs, and HIPTEST_CHECK: a HIP call that does not
// return hipSuccess fails the program naming the call, the error and where.
#pragma once

#include <hip/hip_runtime.h>

#include "testkit.h"

#define HIPTEST_CHECK(expr)                                                                        \
	do {                                                                                       \
		hipError_t e_ = (expr);                                                            \
		if (e_ != hipSuccess)                                                              \
			::hiptest::fail("%s:%d: %s -> %d %s", __FILE__, __LINE__, #expr, int(e_),  \
					hipGetErrorString(e_));                                    \
	} while (0)

namespace hiptest {

// The HIP runtime's start: NOT RUN when it finds no device.
inline void hip_init()
{
	step("hipGetDeviceCount (the runtime's initialisation)", kInitSeconds);
	int count = 0;
	hipError_t e = hipGetDeviceCount(&count);
	if (e == hipErrorNoDevice || (e == hipSuccess && count < 1))
		not_run("no HIP device");
	HIPTEST_CHECK(e);
}

} // namespace hiptest
