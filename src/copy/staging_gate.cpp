// SPDX-License-Identifier: GPL-2.0-only
#include "copy/staging_gate.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>

namespace amdcr {
namespace {

// The word is shared between processes: no FUTEX_PRIVATE_FLAG.
void futex_wait(std::atomic<uint32_t> &word, uint32_t expected, int64_t ns)
{
	timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
	(void)::syscall(SYS_futex, reinterpret_cast<uint32_t *>(&word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void futex_wake_one(std::atomic<uint32_t> &word)
{
	(void)::syscall(SYS_futex, reinterpret_cast<uint32_t *>(&word), FUTEX_WAKE, 1, nullptr, nullptr, 0);
}

} // namespace

Status StagingGate::acquire(const std::atomic<bool> *cancel, bool *waited)
{
	if (waited)
		*waited = false;
	uint32_t c = 0;
	if (word_.compare_exchange_strong(c, 1, std::memory_order_acquire))
		return ok_status();
	if (waited)
		*waited = true;
	// Held: mark it contended and sleep until the holder lets go.
	if (c != 2)
		c = word_.exchange(2, std::memory_order_acquire);
	while (c != 0) {
		if (cancel && cancel->load())
			return Error(ECANCELED, "stopped while waiting for another process's copy of GPU memory");
		futex_wait(word_, 2, kPollNs);
		c = word_.exchange(2, std::memory_order_acquire);
	}
	return ok_status();
}

void StagingGate::release()
{
	if (word_.exchange(0, std::memory_order_release) == 2)
		futex_wake_one(word_);
}

} // namespace amdcr
