// SPDX-License-Identifier: GPL-2.0-only
//
// Incremental checkpoints, the chunk level (proto/criu-amdgpu.proto's top
// comment has the format): which chunks of a BO are in the parent
// checkpoint (FromParent), and the dump's sink that writes only the chunks
// whose checksum differs from the parent's (DeltaSink).
//
// Chunks are the content checksums' (image/content_checksum.h): the
// per-MiB checksums the images carry anyway are the hashes an incremental
// dump compares. A chunk is taken from the parent when its checksum64 equals
// the parent's for the same chunk of the same BO: a 64-bit hash, so two
// different chunks are taken for one another with a probability of about
// 2^-64 per chunk.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <span>
#include <vector>

#include <map>
#include <memory>

#include "base/byte_stream.h"
#include "base/result.h"
#include "image/chunk_index.h"
#include "image/content_checksum.h"

namespace amdcr {

// The chunks of one BO that are in the parent checkpoint.
struct FromParent {
	uint32_t chunk_bytes = kChecksumChunkBytes;
	std::vector<uint8_t> in_parent; // bit k % 8 of byte k / 8: chunk k

	bool has(size_t k) const { return k / 8 < in_parent.size() && (in_parent[k / 8] >> (k % 8)) & 1; }
	void set(size_t k);
	bool operator==(const FromParent &) const = default;
};

// Chunks of `chunk_bytes` in `size` bytes (the last may be shorter).
uint64_t chunk_count(uint64_t size, uint32_t chunk_bytes);
// Whether `f` describes a BO of `size` bytes: chunk size non-zero, one bit
// per chunk (in whole bytes, the spare bits clear). EINVAL otherwise (no
// name in the message).
Status check_from_parent(const FromParent &f, uint64_t size);
// The bytes of a BO of `size` bytes that its own checkpoint holds (all of
// them without `f`).
uint64_t stored_bytes(uint64_t size, const std::optional<FromParent> &f);

// Up to this many threads hash the chunks of one write (one GPU's staging
// half) of a DeltaSink, and never more than the machine has cores.
inline constexpr unsigned kMaxHashThreads = 8;

// A DeltaSink's deduplication: the checkpoint's index and the file the
// sink's `inner` writes, read back to compare.
struct DeltaDedup {
	ChunkIndex *index = nullptr;		 // nullptr: every chunk written
	std::shared_ptr<const IndexedFile> file; // what `inner` writes
};

// Dump, complete or incremental: hashes every chunk of the BOs passing
// through (in order; content_checksum.h) and forwards to `inner` only the
// chunks of a BO that has no parent checksums (all of a complete dump's),
// or whose checksum differs from the parent's. Holds
// back no bytes (KFD_MAX_BUFFER_SIZE bounds the staging): the part of a
// chunk a write leaves unfinished is forwarded at once, and taken back
// (`inner.retract`, an open-ended PagesWriter's) when the chunk, once
// complete, is found unchanged. The chunks
// lying whole in one write are hashed on up to `hash_threads` threads
// (that write's caller and threads started for it, joined before it
// returns), so that hashing keeps up with the DMA engine.
//
// Deduplicated (with a DeltaDedup index): a chunk to be written that is not all
// zeros is looked up in the checkpoint's ChunkIndex (image/chunk_index.h)
// first; when an equal one was written already (equal bytes: compared in
// memory, or by SHA-256 digests), the chunk is not written (its bytes of
// earlier writes taken back, as for a chunk in the parent) and the BO's
// ChunkRefs name where it is; when none was, it is written and indexed
// (its bytes offered to the index's cache when they lie whole in one
// write). `inner` must then be an
// open-ended PagesWriter whose file is DeltaDedup::file.
class DeltaSink final : public ByteSink {
public:
	struct Bo {
		uint64_t size = 0;
		// The parent checkpoint's checksums of the same BO (nullptr: the
		// BO is written whole). Must outlive the sink.
		const BoChecksum *parent = nullptr;
	};
	struct Out {
		std::vector<BoChecksum> checksums;	     // per BO, its whole contents
		std::vector<std::optional<FromParent>> from_parent; // per BO; nullopt: none
		uint64_t written_bytes = 0;		     // forwarded to `inner`
		uint64_t parent_bytes = 0;		     // left in the parent
		unsigned hash_threads = 1;		     // the most threads one write hashed on
		std::vector<std::optional<ChunkRefs>> dedup; // per BO; nullopt: no chunk stored elsewhere
		uint64_t dedup_bytes = 0;		     // referenced, not written
	};

	// `hash_threads` 0: min(kMaxHashThreads, the machine's cores).
	DeltaSink(ByteSink &inner, std::vector<Bo> bos, uint32_t chunk_bytes = kChecksumChunkBytes,
		  unsigned hash_threads = 0, DeltaDedup dedup = {});
	Status write(const void *buf, size_t len) override;
	// Once every BO byte has passed; EINVAL before.
	Result<Out> take();

private:
	Status chunk_done(const ChunkWalker::Chunk &c, const uint8_t *buf, uint64_t buf_start);
	// Dedup: looks `c` up; a chunk found is referenced (Found::place),
	// one not found is claimed for the caller to write.
	Result<ChunkIndex::Found> look_up(const ChunkWalker::Chunk &c, const uint8_t *buf, uint64_t buf_start);
	// The bytes [from, from + n) of chunk `c`: those of earlier writes read
	// back from the file, the rest from `buf`.
	Status chunk_bytes(const ChunkWalker::Chunk &c, const uint8_t *buf, uint64_t buf_start, uint64_t from,
			   void *dst, size_t n) const;
	// checksum64 of `n` zero bytes (a chunk of zeros is never deduplicated).
	uint64_t zero_checksum(uint64_t n);
	// The chunks lying whole in the stream bytes [start, start + len), as
	// (stream offset, length), in order.
	std::vector<std::pair<uint64_t, uint64_t>> whole_chunks(uint64_t start, uint64_t len);
	// Their checksums, on up to hash_threads_ threads.
	std::vector<uint64_t> hash(const uint8_t *buf, uint64_t start,
				   const std::vector<std::pair<uint64_t, uint64_t>> &chunks);

	ByteSink &inner_;
	std::vector<Bo> bos_;
	uint32_t chunk_bytes_;
	ChunkWalker walker_;
	Out out_;
	uint64_t forwarded_ = 0;     // the unfinished chunk's bytes of earlier writes, forwarded
	uint64_t done_to_ = 0;	     // stream offset: every chunk before it is handled
	std::vector<uint64_t> bo_start_; // stream offset of each BO's first byte
	size_t bo_cursor_ = 0;		 // no BO before it has bytes left
	unsigned hash_threads_ = 1;
	DeltaDedup dedup_;
	std::map<uint64_t, uint64_t> zero_sums_; // length -> checksum64 of that many zeros
};

} // namespace amdcr
