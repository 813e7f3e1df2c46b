// SPDX-License-Identifier: GPL-2.0-only
//
// Whole reads and writes. read()/write() may move fewer bytes than asked and
// be interrupted; these loop until done. /proc and /sys report sizes that are
// lies, so small text files are read until EOF, never by st_size.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"
#include "base/unique_fd.h"

namespace amdcr {

// Reads exactly `len` bytes unless EOF comes first; returns the count read.
// The CPU page size (sysconf; 4096 if it does not say).
size_t page_size();

Result<size_t> read_full(int fd, void *buf, size_t len);
// Writes all `len` bytes (ENOSPC and short writes are errors).
Status write_full(int fd, const void *buf, size_t len);
Result<size_t> pread_full(int fd, void *buf, size_t len, uint64_t off);
Status pwrite_full(int fd, const void *buf, size_t len, uint64_t off);

// Reads a whole (small) file until EOF. `dirfd` may be AT_FDCWD.
Result<std::string> read_text_file(int dirfd, const std::string &path,
				   size_t max_bytes = 1 << 20);

// open()/openat() returning a UniqueFd, with the errno in the Error.
Result<UniqueFd> open_at(int dirfd, const std::string &path, int flags, mode_t mode = 0);

} // namespace amdcr
