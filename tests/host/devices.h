// SPDX-License-Identifier: GPL-2.0-only
//
// Where the host learns which of a task's mappings are device mappings.
//
// On a real kernel: /proc/PID/maps, character-device mappings other than
// /dev/zero, as CRIU's handle_vma() sees them. Under the emulated GPU
// (KFDEMU_SOCKET set) the kernel sees only memfds there, so the host asks
// the emulator's control command, and nothing else here knows its format:
//
//   kfd-emu ctl vmas <pid>  ->  {"pid": N, "vmas": [{"start": N, "end": N,
//                                "pgoff": N, "prot": "rw-", "path": "/dev/kfd"}]}
//
// (a bare array of the entries is accepted too). Numbers may also be strings
// ("0x7f0000000000"); pgoff is a byte offset as in /proc/PID/maps; prot is
// "rwx" text or PROT_* bits; an optional "flags" is "shared"/"private"
// (default: the kernel's view of the range, else shared). The command is
// $CRIU_HOST_KFDEMU, else the build tree's tests/emulator/kfd-emu, else
// "kfd-emu" from PATH.
//
// Device fds need no query: run under kfd-emu, the host's fstat() and
// readlink() of an emulated fd already answer as for the device (the shim
// knows the file by identity), so the dump classifies them as CRIU would.
#pragma once

#include <sys/types.h>

#include <cstdint>
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
	// The previous line of /proc/PID/maps is the same file: CRIU borrows
	// that mapping's file and result (vma_get_mapfile) and does not call
	// HANDLE_DEVICE_VMA again. Under the emulator "the same file" is the
	// same device path, as the real device's inode would be.
	bool borrowed = false;
};

bool emulated();

// The task's device mappings, in address order.
amdcr::Result<std::vector<DeviceVma>> device_vmas(pid_t pid);

// Runs argv, returns its stdout (exit status must be 0).
amdcr::Result<std::string> run_capture(const std::vector<std::string> &argv);

} // namespace host
