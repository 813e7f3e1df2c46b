// SPDX-License-Identifier: GPL-2.0-only
//
// The one line a dump or a restore prints at CRIU's default log level
// (LogLevel::Notice), from the totals of all its copies (CopyTotals, in
// the shared copy state every process of the dump or restore adds to:
// session.h SharedCopies).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "config/config.h"
#include "copy/gpu_copy.h"

namespace amdcr {

// One GPU file (KFD or render node) whose image holds `bo_entries` BOs;
// `gpu_id`: its GPU, when no copy job names it (a render node without BOs
// to copy).
void count_file(CopyTotals &totals, size_t bo_entries, std::optional<uint32_t> gpu_id = std::nullopt);

// "dump: 1 GPU file, 2 GPUs, 7 BOs (5 with contents), 9437184 bytes
// (9.00 MiB) in 0.021 s, 0.45 GB/s, staging peak 4194304 bytes of 64
// MiB per GPU"; a restore adds the bytes read from pages files and those
// copied from chunks read once for several BOs (when there were any) and
// the bytes whose checksums matched. Empty
// when no file was counted (nothing to say).
std::string summary_line(const CopyTotals &totals, bool dump, const Config &config);

} // namespace amdcr
