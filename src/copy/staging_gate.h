// SPDX-License-Identifier: GPL-2.0-only
//
// KFD_MAX_BUFFER_SIZE bounds the staging memory of a whole restore, across
// the processes that copy GPU memory at once: CRIU's restored tasks run
// their RESTORE_EXT_FILE hooks concurrently, and with parallel restore
// CRIU's main process copies beside a task that copies its own (a GPU
// mapped again in the task, a shared BO filled by its first holder). Each
// of them bounds its own staging; the gate lets one of them copy at a time,
// so that together they stay within the one bound.
//
// The gate is a futex word in memory that every process of the restore
// shares (the plugin's SharedCopies: an anonymous MAP_SHARED page made
// before CRIU forks the tasks, which inherit it), so it holds only atomics. A
// process that dies holding it is not waited for forever: CRIU ends the
// whole restore when a task dies, and a waiter that is told to stop
// (`cancel`) gives up within kPollNs.
#pragma once

#include <atomic>
#include <cstdint>

#include "base/result.h"

namespace amdcr {

class StagingGate {
public:
	// How often a waiter looks at its cancel flag.
	static constexpr int64_t kPollNs = 100'000'000;

	StagingGate() = default;
	StagingGate(const StagingGate &) = delete;
	StagingGate &operator=(const StagingGate &) = delete;

	// Waits until no other copy holds the gate, then holds it. ECANCELED
	// when `cancel` (may be null) turns true while waiting. `waited`
	// (may be null): set to whether another copy held the gate.
	Status acquire(const std::atomic<bool> *cancel, bool *waited);
	// Lets the next copy in; only the holder calls it.
	void release();

private:
	// 0 free, 1 held, 2 held and someone may be waiting.
	std::atomic<uint32_t> word_{0};
};
static_assert(std::atomic<uint32_t>::is_always_lock_free);

// Holds a gate (or none) for its lifetime.
class StagingGateHold {
public:
	explicit StagingGateHold(StagingGate *gate) : gate_(gate) {}
	StagingGateHold(const StagingGateHold &) = delete;
	StagingGateHold &operator=(const StagingGateHold &) = delete;
	~StagingGateHold()
	{
		if (gate_)
			gate_->release();
	}

private:
	StagingGate *gate_ = nullptr;
};

} // namespace amdcr
