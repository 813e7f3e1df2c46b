// SPDX-License-Identifier: GPL-2.0-only
//
// Where the host learns which of a task's mappings and fds are devices.
//
// On a real kernel: /proc/PID/maps (character-device mappings other than
// /dev/zero, as CRIU's handle_vma() sees them) and the fds' own fstat().
// Under the emulated GPU (KFDEMU_SOCKET set) the kernel sees only memfds, so
// the host asks the emulator, through its control command:
//
//   kfd-emu ctl vmas <pid>  ->  [{"start": N, "end": N, "path": "/dev/...",
//                                 "pgoff": N, "prot": N}, ...]
//   kfd-emu ctl fds <pid>   ->  [{"fd": N, "path": "/dev/..."}, ...]
//
// Numbers may be JSON numbers or strings ("0x7f0000000000"); pgoff is a byte
// offset (as in /proc/PID/maps); prot is PROT_* bits (or "rw-" text); an
// optional "flags" is "shared"/"private" (default: the kernel's view of the
// range, else shared). The command is $CRIU_HOST_KFDEMU (default "kfd-emu"
// from PATH). Both queries live only in this file.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/result.h"

namespace host {

struct DeviceVma {
	uint64_t start = 0, end = 0;
	uint64_t pgoff = 0; // bytes
	int prot = 0;
	int flags = 0; // MAP_SHARED / MAP_PRIVATE
	std::string path;
};

bool emulated();

// The task's device mappings, in address order.
amdcr::Result<std::vector<DeviceVma>> device_vmas(pid_t pid);

// Emulated device fds of the task (fd -> device path); empty on a real
// kernel, where fstat() tells.
amdcr::Result<std::map<int, std::string>> emulated_device_fds(pid_t pid);

// Runs argv, returns its stdout (exit status must be 0).
amdcr::Result<std::string> run_capture(const std::vector<std::string> &argv);

} // namespace host
