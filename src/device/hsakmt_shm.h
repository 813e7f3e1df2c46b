// SPDX-License-Identifier: GPL-2.0-only
//
// libhsakmt's shared memory (/dev/shm/hsakmt_shared_mem: a u32 magic and a
// u32 counter) and its named semaphore "hsakmt_semaphore". The KFD image
// records the memory's size and magic; a restore recreates both when the
// memory is missing, as the upstream plugin does.
#pragma once

#include <cstdint>
#include <string>

#include "base/result.h"

namespace amdcr {

struct HsakmtShm {
	uint64_t size = 0; // 0: absent
	uint32_t magic = 0;
};

// The state under `shm_dir` (normally /dev/shm). Absent is not an error.
Result<HsakmtShm> read_hsakmt_shm(const std::string &shm_dir);
// Recreates the memory when it is missing (size != 0), then makes sure the
// semaphore exists.
Status restore_hsakmt_shm(const std::string &shm_dir, const HsakmtShm &state);

} // namespace amdcr
