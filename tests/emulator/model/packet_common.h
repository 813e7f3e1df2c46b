// SPDX-License-Identifier: GPL-2.0-only
//
// What the packet engines share: the SDMA user queues (user_queue.cpp), the
// CP compute queues and rings (cp_queue.cpp) and the AQL queues
// (aql_queue.cpp) walk the same number of packets per hold of the model
// lock; the SDMA and CP engines read the same GPU clock and test a polled
// value with the same compare functions (SDMA's POLL_REGMEM and PM4's
// WAIT_REG_MEM both encode func 0-6 as below).
#pragma once

#include <cstdint>
#include <ctime>

namespace kfdemu {

// Packets an engine walks per hold of the model lock: others get the lock
// in between.
inline constexpr int kPacketsPerHold = 64;

// The GPU's timestamp counter: 100 MHz, from CLOCK_MONOTONIC_RAW.
inline uint64_t gpu_clock()
{
	timespec ts{};
	clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
	return (static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec)) / 10;
}

// Whether a polled (masked) `value` passes compare function `func` against
// the (masked) reference: 0 always, 1 <, 2 <=, 3 ==, 4 !=, 5 >=, 6 >.
inline bool poll_satisfied(uint32_t func, uint32_t value, uint32_t ref)
{
	switch (func) {
	case 0: return true;
	case 1: return value < ref;
	case 2: return value <= ref;
	case 3: return value == ref;
	case 4: return value != ref;
	case 5: return value >= ref;
	case 6: return value > ref;
	default: return false;
	}
}

} // namespace kfdemu
