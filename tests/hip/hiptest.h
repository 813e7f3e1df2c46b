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

// Owners of what the programs allocate (released on every path): device
// memory of the current device, pinned host memory, a stream of the current
// device, an event.
struct Device {
	void *p = nullptr;
	explicit Device(size_t n) { HIPTEST_CHECK(hipMalloc(&p, n)); }
	~Device() { (void)hipFree(p); }
	Device(const Device &) = delete;
	Device &operator=(const Device &) = delete;
	uint8_t *b() const { return static_cast<uint8_t *>(p); }
};
struct Pinned {
	void *p = nullptr;
	explicit Pinned(size_t n) { HIPTEST_CHECK(hipHostMalloc(&p, n, hipHostMallocDefault)); }
	~Pinned() { (void)hipHostFree(p); }
	Pinned(const Pinned &) = delete;
	Pinned &operator=(const Pinned &) = delete;
	uint8_t *b() const { return static_cast<uint8_t *>(p); }
};
struct Stream {
	hipStream_t s = nullptr;
	Stream() { HIPTEST_CHECK(hipStreamCreate(&s)); }
	explicit Stream(int priority) { HIPTEST_CHECK(hipStreamCreateWithPriority(&s, hipStreamDefault, priority)); }
	~Stream() { (void)hipStreamDestroy(s); }
	Stream(const Stream &) = delete;
	Stream &operator=(const Stream &) = delete;
};
struct Event {
	hipEvent_t e = nullptr;
	Event() { HIPTEST_CHECK(hipEventCreate(&e)); }
	~Event() { (void)hipEventDestroy(e); }
	Event(const Event &) = delete;
	Event &operator=(const Event &) = delete;
};

} // namespace hiptest
