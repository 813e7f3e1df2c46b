// SPDX-License-Identifier: GPL-2.0-only
//
// The two tiny interfaces between the data path (src/copy) and where the
// bytes live (a pages image file, a buffer in a test, ...).
//
// Both are sequential: each call continues where the previous one ended.
// A call moves the whole range or fails; there are no short counts. Errors
// name the file (or whatever the stream stands for) and what failed.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/result.h"

namespace amdcr {

// Where checkpointed bytes go (dump direction).
class ByteSink {
public:
	virtual ~ByteSink() = default;
	// Appends exactly `len` bytes.
	virtual Status write(const void *buf, size_t len) = 0;
	// Takes back the last `len` bytes appended, as if never written (an
	// incremental dump's chunk found unchanged once its last byte came).
	// ENOTSUP where the sink cannot.
	virtual Status retract(uint64_t len);
};

inline Status ByteSink::retract(uint64_t len)
{
	return make_error(ENOTSUP, "this sink cannot take back the last %llu bytes written",
			  static_cast<unsigned long long>(len));
}

// Where checkpointed bytes come from (restore direction).
class ByteSource {
public:
	virtual ~ByteSource() = default;
	// Reads exactly `len` bytes; fewer left than `len` is an Error.
	virtual Status read(void *buf, size_t len) = 0;
	// Skips `len` bytes without reading them (e.g. a BO that is not
	// restored); past the end is an Error.
	virtual Status skip(uint64_t len) = 0;
	// Bytes not yet read.
	virtual uint64_t remaining() const = 0;
	// Where the byte at `offset` (from the stream's start) is, for
	// messages, when the stream spans several files ("<file> at payload
	// offset 0x..."); empty when it is one file's payload.
	virtual std::string locate(uint64_t /*offset*/) const { return {}; }
};

} // namespace amdcr
