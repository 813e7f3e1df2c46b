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

// How open_in_dir opens a file.
enum class InDir {
	Read,	   // O_RDONLY, an existing file
	CreateNew, // O_WRONLY|O_CREAT|O_EXCL, mode 0600: EEXIST if anything has the name
	Append,	   // O_WRONLY|O_APPEND: created as CreateNew, or an existing file
		   // with one link (a hard link to a file elsewhere is refused)
};

// Opens the file `name` (a plain name: no '/', not "." or "..") of the
// directory `dirfd`, a directory that others may write to (an image
// directory): the name is treated as hostile. The file must be a regular
// file: a symbolic link is never followed (O_NOFOLLOW; ELOOP "a symbolic
// link, not followed"), and a FIFO, socket, device or directory is refused
// (EINVAL naming its type) without blocking: an existing name is checked
// with fstatat before it is opened (so no device is opened), opened with
// O_NONBLOCK|O_NOCTTY (a FIFO swapped in between cannot hang the open),
// and the opened file is checked again to be that same regular file (ESTALE
// when the name changed in between). O_NONBLOCK is then cleared, so reads
// and writes behave as usual. Always O_CLOEXEC. Every Error names `name`.
Result<UniqueFd> open_in_dir(int dirfd, const std::string &name, InDir how);

} // namespace amdcr
