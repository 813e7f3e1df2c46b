// SPDX-License-Identifier: GPL-2.0-only
//
// The guardian's channel (plugin/guardian.h): the messages the plugin's
// side (guardian.cpp) and the guardian's process (guardian_process.cpp)
// exchange over their SOCK_SEQPACKET socket pair, what each kind must
// carry, and the pidfds they pass. Private to those two files.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "base/result.h"
#include "plugin/guardian.h"

namespace amdcr::guardian {

enum class Kind : uint32_t { Paused = 1, Unpaused, TempFile, Task, Resumed, Finished, Started, Pausing };

// One message; `name` for TempFile, `pid` for the pid kinds, `file` (the
// CRIU file id) for Pausing and Paused. Paused carries (kfd fd, pidfd),
// Pausing (kfd fd, a pidfd of each candidate), Task (pidfd).
struct Wire {
	uint32_t kind = 0;
	int32_t pid = 0;
	int32_t file = 0;
	char name[256] = {};
};

// The most fds one message carries: Pausing's file and candidates.
inline constexpr size_t kMaxFds = 1 + Guardian::kMaxCandidates;

// Sends `w` with `fds` over channel `chan` (the receiver takes kMaxFds).
Status send_message(int chan, const Wire &w, std::span<const int> fds = {});

// Whether `w`, which came with `fds` file descriptors, carries what its
// kind must (the fds, a pid, a TempFile's plain hidden name) at `stage`.
bool well_formed(const Wire &w, size_t fds, Guardian::Stage stage);

// pidfd_open(2) and pidfd_send_signal(2): -1 and errno on failure.
int pidfd_open(pid_t pid);
int pidfd_send_signal(int pidfd, int sig);

} // namespace amdcr::guardian
