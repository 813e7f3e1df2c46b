// SPDX-License-Identifier: GPL-2.0-only
//
// Checksums of BO contents (this project's addition to the image format;
// upstream's plugin ignores them).
//
// A BO's contents are cut into chunks of `chunk_bytes` counted from the
// BO's first byte (the last chunk may be shorter); each chunk has its
// checksum64 (base/checksum.h), so a damaged byte is located to one chunk of
// one BO. `whole` is checksum64 of the chunk checksums laid out as
// little-endian 64-bit words: one value per BO that also guards the chunk
// list itself.
//
// The checksums are computed on the fly as the bytes pass to the pages file
// (DeltaSink, image/from_parent.h, at dump: without a parent it writes every
// byte) and checked as they come back (VerifyingSource,
// restore): both wrap the copy engine's ByteSink/ByteSource, so every pages
// file written through them gets the same integrity, whatever device kind
// its BOs belong to.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/byte_stream.h"
#include "base/checksum.h"
#include "base/result.h"

namespace amdcr {

// 1 MiB: a damaged byte is located to a MiB, and the list costs 8 bytes per
// MiB of GPU memory in the metadata image (1.5 MiB for 192 GiB).
inline constexpr uint32_t kChecksumChunkBytes = 1u << 20;

struct BoChecksum {
	uint32_t chunk_bytes = kChecksumChunkBytes;
	std::vector<uint64_t> chunks;
	uint64_t whole = 0;

	bool operator==(const BoChecksum &) const = default;
};

// checksum64 of `chunks` as little-endian 64-bit words.
uint64_t whole_checksum(std::span<const uint64_t> chunks);
// Whether `c` describes `bo_size` bytes: chunk size non-zero, one checksum
// per chunk, `whole` matching the list. EBADMSG otherwise (the message
// says which; no name).
Status check_bo_checksum(const BoChecksum &c, uint64_t bo_size);

// Walks a stream that is the concatenation of BOs and reports each chunk
// as it completes. Internal to the sink and the source below; public for
// their tests.
class ChunkWalker {
public:
	struct Bo {
		uint64_t size = 0;
		uint32_t chunk_bytes = kChecksumChunkBytes; // > 0
	};
	struct Chunk {
		size_t bo = 0;		    // index into the BO list
		size_t index = 0;	    // chunk of that BO
		uint64_t bo_offset = 0;	    // its first byte, in the BO
		uint64_t bytes = 0;
		uint64_t stream_offset = 0; // its first byte, in the stream
		uint64_t checksum = 0;
		bool complete = true; // false: part of it was skipped, not hashed
	};

	explicit ChunkWalker(std::vector<Bo> bos);

	// Hashes the next `len` bytes; `done(const Chunk &)` -> Status is called
	// for each chunk they complete. More bytes than the BOs hold is EINVAL.
	// `whole(p, n, stream_offset)` -> uint64_t gives the checksum of a chunk
	// lying whole in these bytes (a caller that hashed them beforehand, on
	// other threads); checksum64 by default.
	template <typename Done>
	Status feed(const uint8_t *p, size_t len, Done &&done)
	{
		return feed(p, len, done, [](const uint8_t *q, size_t n, uint64_t) { return checksum64(q, n); });
	}
	template <typename Done, typename Whole>
	Status feed(const uint8_t *p, size_t len, Done &&done, Whole &&whole);
	// Passes over `len` bytes without hashing: the chunks they touch are
	// reported incomplete.
	template <typename Done>
	Status skip(uint64_t len, Done &&done);

	// All BOs' bytes have passed.
	bool finished();
	uint64_t position() const { return stream_; }

private:
	// Steps over finished (and empty) BOs; false when none is left.
	bool settle();
	uint64_t chunk_end() const;
	Chunk make_chunk(uint64_t end, uint64_t checksum) const;

	std::vector<Bo> bos_;
	size_t bo_ = 0;
	uint64_t off_ = 0;	 // in the current BO
	uint64_t stream_ = 0; // bytes passed in total
	StreamingChecksum partial_;
	bool partial_used_ = false;
	bool tainted_ = false;
};

// Restore: reads from `inner` and checks every chunk of a BO that has a
// checksum as soon as its last byte has been read, before the bytes are
// handed on. A mismatch is EBADMSG naming the BO (its label), the byte range
// in the BO and in the file's payload, and KFD_VERIFY.
class VerifyingSource final : public ByteSource {
public:
	struct Bo {
		uint64_t size = 0;
		const BoChecksum *checksum = nullptr; // nullptr: not checked
		std::string label;		      // "BO 3 at 0x7f0000001000"
		// The stream offset where the payload of the pages file holding
		// it starts (0: one file holds the whole stream; a BO in a file
		// of its own: the stream offset of its first byte).
		uint64_t file_start = 0;
	};
	VerifyingSource(ByteSource &inner, std::vector<Bo> bos);

	Status read(void *buf, size_t len) override;
	Status skip(uint64_t len) override;
	uint64_t remaining() const override { return inner_.remaining(); }

	// Bytes whose chunk was compared and matched.
	uint64_t verified_bytes() const { return verified_; }

private:
	Status check(const ChunkWalker::Chunk &c);

	ByteSource &inner_;
	std::vector<Bo> bos_;
	ChunkWalker walker_;
	uint64_t verified_ = 0;
};

// ---- ChunkWalker's templates ----------------------------------------------

template <typename Done, typename Whole>
Status ChunkWalker::feed(const uint8_t *p, size_t len, Done &&done, Whole &&whole)
{
	while (len > 0) {
		if (!settle())
			return make_error(EINVAL, "%zu bytes past the end of the BOs (at stream offset %llu)",
					  len, static_cast<unsigned long long>(stream_));
		const uint64_t end = chunk_end();
		const size_t take = static_cast<size_t>(std::min<uint64_t>(len, end - off_));
		const uint64_t chunk_start = off_ - off_ % bos_[bo_].chunk_bytes;
		uint64_t sum = 0;
		const bool whole_chunk = !partial_used_ && off_ == chunk_start && off_ + take == end;
		if (whole_chunk) {
			sum = whole(p, take, stream_); // the common case: one call, no state
		} else {
			partial_.update(p, take);
			partial_used_ = true;
		}
		off_ += take;
		stream_ += take;
		p += take;
		len -= take;
		if (off_ == end) {
			if (!whole_chunk)
				sum = partial_.digest();
			const Chunk c = make_chunk(end, sum);
			partial_.reset();
			partial_used_ = false;
			tainted_ = false;
			if (auto st = done(c); !st)
				return st;
		}
	}
	return ok_status();
}

template <typename Done>
Status ChunkWalker::skip(uint64_t len, Done &&done)
{
	while (len > 0) {
		if (!settle())
			return make_error(EINVAL, "skipping %llu bytes past the end of the BOs",
					  static_cast<unsigned long long>(len));
		const uint64_t end = chunk_end();
		const uint64_t take = std::min<uint64_t>(len, end - off_);
		tainted_ = true;
		off_ += take;
		stream_ += take;
		len -= take;
		if (off_ == end) {
			const Chunk c = make_chunk(end, 0);
			partial_.reset();
			partial_used_ = false;
			tainted_ = false;
			if (auto st = done(c); !st)
				return st;
		}
	}
	return ok_status();
}

} // namespace amdcr
