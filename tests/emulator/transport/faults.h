// SPDX-License-Identifier: GPL-2.0-only
//
// Fault specifications, as given to --fault, KFDEMU_FAULTS and
// `kfd-emu ctl faults`:  TARGET[:nth=N][:every][:errno=NAME|NUMBER][:hang|:stall|:stall-after]
// several separated by ',' or ';'. TARGET may itself contain ':'
// ("CRIU_OP:CHECKPOINT"). Examples:
//   AMDKFD_IOC_CRIU_OP:nth=1:errno=EIO
//   DRM_IOCTL_GEM_CHANGE_HANDLE:every:errno=EINVAL   (every call, from the first)
//   sdma:nth=2:hang
//   CRIU_OP:UNPAUSE:stall
//   CRIU_OP:PROCESS_INFO:stall-after
#pragma once

#include "../model/interface.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kfdemu {

std::optional<std::vector<FaultRule>> parse_faults(std::string_view spec, std::string *error);

} // namespace kfdemu
