// SPDX-License-Identifier: GPL-2.0-only
//
// Deduplicated checkpoints: a chunk of KFD BO contents (the content
// checksums' chunks, image/content_checksum.h) that is byte for byte one
// this checkpoint already wrote, in any GPU's pages file of any of its
// processes, is written once; the BOs holding it again refer to that copy
// (kfd_bo_entry.dedup, proto/criu-amdgpu.proto's top comment has the
// format). A reference is a chunk index of the BO, a pages file of the same
// images directory and the payload offset of the chunk there.
//
// ChunkRefs is the format's side (what an image says); ChunkIndex is the
// dump's: the chunks written so far, keyed by their checksum64 and length.
// The checksum only points at candidates: two chunks are the same only when
// their bytes are, so a checksum collision never merges different
// contents. The index keeps the bytes of the chunks written last in memory,
// within a budget (set_cache_budget: a share of KFD_MAX_BUFFER_SIZE, as
// the GPUs' staging), while it finds duplicates (an equal chunk found
// within the last kKeepAfterMatch published) or when a lookup waits for
// the chunk: a candidate still there is compared byte for byte (memcmp,
// several times faster than a digest), which is what replicas dumped in
// parallel meet, the GPUs reaching the same chunk at about the same time;
// a dump without duplicates copies nothing. The first lookup that finds a
// kept chunk equal also takes its SHA-256 digest (nettle) from the kept
// bytes, so a GPU that reaches it after the cache dropped it compares
// digests (the looked-up chunk's from the copy's own bytes) without
// reading the store. Only a candidate published while nothing was kept
// (before the dump's first duplicate, or long after its last) is read back
// from its pages file, once: the other lookups of it wait for that read's
// digest. Chunks that never repeat cost no digest and no read. A chunk of
// zeros is never indexed (DeltaSink): it costs no space (a hole) and no
// read.
#pragma once

#include <array>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"
#include "image/content_checksum.h"

namespace amdcr {

struct FromParent;

// A chunk of a BO stored elsewhere in the checkpoint.
struct ChunkRef {
	uint64_t chunk = 0;  // chunk index in the BO holding the reference
	std::string file;    // pages file in the same images directory
	uint64_t offset = 0; // the chunk's first byte in that file's payload
	bool operator==(const ChunkRef &) const = default;
};

// The chunks of one BO stored elsewhere (kfd_bo_entry.dedup).
struct ChunkRefs {
	uint32_t chunk_bytes = kChecksumChunkBytes;
	std::vector<ChunkRef> refs; // by chunk, ascending, each chunk once

	// The reference of chunk `k`, or nullptr (binary search).
	const ChunkRef *find(uint64_t k) const;
	// The bytes of a BO of `size` bytes the references stand for.
	uint64_t bytes(uint64_t size) const;
	bool operator==(const ChunkRefs &) const = default;
};

// Whether `r` fits a BO of `size` bytes whose chunks in the parent are `f`
// (nullptr: none):
// chunk size non-zero (and the parent's, with `f`), chunks ascending and in
// the BO, none also in the parent, file names non-empty, offsets not
// overflowing. EINVAL otherwise (no name in the message).
Status check_chunk_refs(const ChunkRefs &r, uint64_t size, const FromParent *f);

// A pages file of this dump, read back to compare candidates: its final
// name and a read-only fd (of its temporary while it is written).
struct IndexedFile {
	std::string name;
	UniqueFd fd;
};

// Reads `n` bytes at `offset` of the payload of `f`; bytes past the end of
// what is on disk read as zeros (the zeros a PagesWriter holds back).
Status read_indexed(const IndexedFile &f, uint64_t offset, void *buf, size_t n);

// The dump's chunks, shared by every copy job (GPU) and process of one
// checkpoint; thread-safe.
class ChunkIndex {
public:
	// The bytes [from, from + n) of the chunk being looked up.
	using ChunkBytes = std::function<Status(uint64_t from, void *buf, size_t n)>;
	struct Place {
		std::string file;
		uint64_t offset = 0;
	};
	using Digest = std::array<uint8_t, 32>; // SHA-256

	// What find() leaves to its caller when it found no equal chunk: to
	// write the chunk and publish() where it went. Until then, a lookup
	// of the same key (another GPU's copy of the chunk, a moment later)
	// waits for it instead of writing the chunk too. Dropped unpublished
	// (the write failed), the claim is withdrawn.
	class Claim {
	public:
		Claim() = default;
		Claim(Claim &&o) noexcept;
		Claim &operator=(Claim &&o) noexcept;
		~Claim();
		// `bytes`, the chunk's whole contents when the caller has them
		// at hand (empty: not kept), are kept for comparisons if the
		// cache budget allows.
		void publish(std::shared_ptr<const IndexedFile> file, uint64_t offset,
			     std::span<const uint8_t> bytes = {});
		explicit operator bool() const { return index_ != nullptr; }

	private:
		friend class ChunkIndex;
		Claim(ChunkIndex *index, uint64_t key, uint64_t len, size_t slot)
			: index_(index), key_(key), len_(len), slot_(slot)
		{
		}
		ChunkIndex *index_ = nullptr;
		uint64_t key_ = 0, len_ = 0;
		size_t slot_ = 0;
	};
	struct Found {
		std::optional<Place> place; // an equal chunk already written
		Claim claim;		    // none equal: write it, then publish
	};

	// Looks a chunk of `len` bytes with checksum `key` up: each entry of
	// the same key and length is compared with `bytes`, byte for byte
	// when the cache holds it, else by SHA-256.
	Result<Found> find(uint64_t key, uint64_t len, const ChunkBytes &bytes);

	// The most bytes of published chunks kept in memory from now on (0:
	// none); the oldest are dropped first. Resets cache_peak().
	void set_cache_budget(uint64_t bytes);
	// The most bytes the cache held since set_cache_budget.
	uint64_t cache_peak() const;

	// Entries published; comparisons that found different bytes under
	// one key (checksum collisions); comparisons made byte for byte (the
	// others by digest); stored chunks read back for their digest.
	size_t size() const;
	uint64_t collisions() const;
	uint64_t byte_compares() const;
	uint64_t read_backs() const;

private:
	struct Entry {
		std::shared_ptr<const IndexedFile> file; // nullptr: claimed, not published yet
		uint64_t offset = 0;
		bool withdrawn = false;
		std::optional<Digest> digest; // once taken from the kept bytes or read back
		std::shared_ptr<const std::vector<uint8_t>> bytes; // cached contents, or nullptr
		unsigned waiters = 0; // lookups waiting for it to be published
		bool reading = false; // a lookup takes its digest now
	};
	using Key = std::pair<uint64_t, uint64_t>; // checksum, length
	// How a lookup compares a published entry.
	enum class Compare {
		Skip,		// withdrawn
		Bytes,		// with its kept bytes
		BytesAndDigest, // with its kept bytes, and takes their digest
		Digest,		// by digests, its known
		ReadBack,	// by digests, its read back from its pages file
	};
	struct Outcome {
		bool equal = false;
		std::optional<Digest> theirs; // the entry's digest, when taken
	};
	// With mu_ held (through `lk`): waits until entry (k, i) is published
	// or withdrawn and, when its bytes are not kept, no other lookup takes
	// its digest; then says how to compare with it (marking it `reading` for BytesAndDigest and
	// ReadBack: the caller clears that).
	Compare wait_for_entry(std::unique_lock<std::mutex> &lk, const Key &k, size_t i);
	// Without mu_: compares `e` with the chunk `bytes` gives; `mine`, its
	// digest, is computed once when needed.
	static Result<Outcome> compare(const Entry &e, Compare how, uint64_t len, const ChunkBytes &bytes,
				       std::optional<Digest> &mine);
	// Publishes (with `file`) or withdraws entry (k, slot); `kept`, its
	// bytes from cache_buffer(), are cached with it.
	void settle(const Key &k, size_t slot, std::shared_ptr<const IndexedFile> file, uint64_t offset,
		    std::shared_ptr<std::vector<uint8_t>> kept);
	// A buffer for the `n` bytes of entry (k, slot), counted in the
	// cache, when it is worth keeping (a lookup waits for it, or an equal
	// chunk was found within the last kKeepAfterMatch published) and the
	// budget allows (the oldest kept chunks dropped for it); nullptr
	// otherwise.
	std::shared_ptr<std::vector<uint8_t>> cache_buffer(const Key &k, size_t slot, size_t n);
	// With mu_ held: drops kept chunks, then spare buffers, down to the budget.
	void trim();

	mutable std::mutex mu_;
	std::condition_variable cv_;
	std::map<Key, std::vector<Entry>> entries_;
	size_t published_ = 0;
	uint64_t collisions_ = 0, byte_compares_ = 0, read_backs_ = 0;
	// The cache: entries whose bytes are kept, oldest first, and buffers
	// of dropped ones to reuse (a fresh 1 MiB allocation faults its pages
	// in again); held_ counts both, and buffers being filled.
	std::deque<std::pair<Key, size_t>> cached_;
	// Chunks are kept only while the dump finds duplicates: a dump that
	// finds none copies nothing into the cache.
	static constexpr uint64_t kKeepAfterMatch = 256;
	bool matched_ = false;
	uint64_t match_mark_ = 0; // published_ at the last equal chunk found
	std::vector<std::shared_ptr<std::vector<uint8_t>>> spare_;
	uint64_t budget_ = 0, held_ = 0, peak_ = 0;
};

} // namespace amdcr
