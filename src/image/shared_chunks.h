// SPDX-License-Identifier: GPL-2.0-only
//
// Restore of a deduplicated checkpoint: each stored chunk read once.
//
// A deduplicated chunk (image/chunk_index.h) is stored once in one pages
// file and held by several BOs, on several GPUs: the BO whose stream
// stores it and every BO referring to it. At restore each GPU's bytes are
// one stream (ChainPages, image/kfd_chain.h), copied by that GPU's job on
// its own thread. SharedChunkReads is the plan of one copy run (the jobs
// of one process's KFD file, all its GPUs): the chunks that two or more
// segments of the run's streams hold, and how many. The first stream to
// reach such a chunk reads it from its pages file, whole, into memory;
// the others wait for that read and copy it from there; the last holder's
// pass frees it. So each chunk is read from storage once per run, not once
// per BO.
//
// Memory: the chunks held between the first holder's read and the last
// one's pass take at most `budget` bytes (the restore gives it one GPU's
// share of the staging bound, KFD_MAX_BUFFER_SIZE: gpu_copy.h). A chunk
// that would not fit is read by each holder from its pages file, as
// without deduplication (never a wait for memory: the streams advance
// independently, and a wait could close a cycle).
//
// Holders in other processes are not served: a run is one process's
// file, and the chunks a later process holds are read again from storage
// by its own run (each restored task, or each hand-over of the parallel
// restore, is one run).
//
// Thread-safe: the streams of a run read it concurrently. Errors are the
// read's own: a failed read leaves the chunk unread, so the next holder
// reads (and fails) itself, each naming its own BO.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <tuple>

#include "base/result.h"
#include "image/kfd_chain.h"

namespace amdcr {

class SharedChunkReads {
public:
	// The chunks (ChainPages::dedup_chunks) two or more segments of
	// `streams` hold whole.
	explicit SharedChunkReads(std::span<const ChainPages *const> streams);
	// At most `budget` bytes of chunks kept at once (0, until set: none
	// kept, each holder reads its own). Before the first read.
	void set_budget(uint64_t budget) { budget_ = budget; }
	SharedChunkReads(const SharedChunkReads &) = delete;
	SharedChunkReads &operator=(const SharedChunkReads &) = delete;

	// Nothing to share: no chunk held twice.
	bool empty() const { return chunks_.empty(); }
	// Chunks held twice or more, and their bytes.
	size_t chunks() const { return chunks_.size(); }
	uint64_t chunk_bytes() const { return chunk_bytes_; }

	// Reads `len` bytes at payload offset `offset` of pages file `name`
	// in link directory `dir` into `buf`: the parts that are shared
	// chunks from memory (the first holder reading the whole chunk with
	// `from_file`), the rest with `from_file`; passing a shared chunk's
	// last byte counts one holder done.
	using FileRead = std::function<Status(uint64_t offset, void *buf, size_t len)>;
	Status read(const std::string &dir, const std::string &name, uint64_t offset, void *buf, size_t len,
		    const FileRead &from_file);
	// A holder skipped `len` bytes at `offset` of that file: each shared
	// chunk whose last byte is in the range counts one holder done.
	void pass(const std::string &dir, const std::string &name, uint64_t offset, uint64_t len);

	// Bytes handed out from memory (the first holder's later pieces of a
	// chunk it read whole count too); the most bytes of chunks held at
	// once.
	uint64_t memory_bytes() const;
	uint64_t peak_bytes() const;

private:
	using Key = std::tuple<std::string, std::string, uint64_t>;
	enum class State { Unread, Reading, Held };
	struct Chunk {
		uint64_t length = 0;
		unsigned holders = 0; // segments that have not passed its end
		State state = State::Unread;
		std::shared_ptr<const uint8_t[]> bytes;
	};
	using Map = std::map<Key, Chunk>;
	// The chunk of (dir, name) holding `offset`, else the first after it
	// (end(), or another file's: none).
	Map::iterator first_from(const std::string &dir, const std::string &name, uint64_t offset);
	bool same_file(Map::const_iterator it, const std::string &dir, const std::string &name) const;
	// One holder's read of [at, at + n) of chunk `c` (lock held; may
	// release it while reading).
	Status read_chunk(std::unique_lock<std::mutex> &lk, Chunk &c, uint64_t chunk_offset, uint64_t at,
			  uint8_t *out, size_t n, const FileRead &from_file);
	void holder_done(Chunk &c);

	Map chunks_;
	uint64_t chunk_bytes_ = 0;
	uint64_t budget_ = 0;
	mutable std::mutex mu_;
	std::condition_variable cv_;
	uint64_t held_ = 0, peak_ = 0, memory_bytes_ = 0;
};

} // namespace amdcr
