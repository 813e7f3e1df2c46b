// SPDX-License-Identifier: GPL-2.0-only
//
// Incremental checkpoints, the chain level (the format: the top comment of
// proto/criu-amdgpu.proto): finding the parent's KFD image at dump,
// resolving a chain at restore (every link read and checked before any GPU
// state changes), where each byte of a GPU's BOs is (ChainPages), and a
// ByteSource reading them from the checkpoints that hold them (ChainSource),
// so the restore's one pipelined, bounded copy reads a chain as it reads one
// pages file.
//
// A chain's links are reached through the `parent` symlinks of the images
// directories (CRIU's --prev-images-dir), named relative to the newest one:
// "parent", "parent/parent", ...; errors name that path, where the link
// points, and the file.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <string>
#include <vector>

#include "base/byte_stream.h"
#include "base/result.h"
#include "image/image_dir.h"
#include "image/kfd_image.h"
#include "image/pages_file.h"

namespace amdcr {

class SharedChunkReads; // image/shared_chunks.h

// CRIU's name of the link to the parent checkpoint in an images directory.
inline constexpr const char *kParentLink = "parent";
// Links beyond this are refused (a loop of parent links, or a chain no
// one meant to keep: flatten it, amdgpu-img flatten).
inline constexpr size_t kMaxChainDepth = 64;

// "parent/parent" (-> "../ckpt-1"), for messages: the link's path from the
// newest images directory and where it points.
std::string describe_link(const ImageDir &top, const std::string &rel);

// The BO of `parent` that is `bo` across dumps (same addr, size,
// alloc_flags and gpu_id, with contents), or nullptr.
const KfdBo *same_bo(const KfdImage &parent, const KfdBo &bo);

// Dump: the KFD image of process `pid` in the parent checkpoint of `dir`
// (its `parent` link), if there is one written by this plugin (bound to its
// dump, its pages files complete): the one an incremental dump compares
// with. nullopt: no parent link, or no such image (upstream's images, or
// the process was not in the parent checkpoint); `why` then says which.
struct ParentKfdImage {
	int id = 0;
	KfdImage img;
};
Result<std::optional<ParentKfdImage>> find_parent_kfd_image(const ImageDir &dir, uint32_t pid,
							    std::string *why = nullptr);

// One contiguous run of a GPU's BO stream in one pages file (the link's own,
// or one a deduplicated chunk refers to).
struct PagesSegment {
	uint32_t file = 0;   // index into ChainPages::files
	uint64_t offset = 0; // in that file's payload
	uint64_t length = 0;
};

// Where the bytes of one GPU's BOs (the concatenation of its VRAM/GTT BOs in
// BO table order, as in a complete pages file) are in a chain.
struct ChainPages {
	struct File {
		std::string dir;  // relative to the newest images directory ("" = it)
		std::string name; // the pages file in it
		// The dump identity it must be sealed with: its link's
		// (pages_seal() of that image's binding; nullopt: unsealed).
		std::optional<DumpId> seal;
	};
	std::vector<File> files;
	std::vector<PagesSegment> segments; // in stream order
	uint64_t total = 0;		    // bytes of the stream
	// The deduplicated chunks of the chain, by the file (dir, name) and
	// payload offset each is stored at: its length, and the BO chunks
	// that refer to it ("BO 3 at 0x7f0000400000 (gpu 0x2222) chunk 0",
	// for the message of a damaged one; the restore reads such a chunk
	// once for all the streams that hold it, image/shared_chunks.h).
	// Shared by the ChainPages of all GPUs of an image.
	struct DedupChunk {
		uint64_t length = 0;
		std::vector<std::string> users;
	};
	using DedupChunks = std::map<std::tuple<std::string, std::string, uint64_t>, DedupChunk>;
	std::shared_ptr<const DedupChunks> dedup_chunks;
};

class KfdChain {
public:
	struct Link {
		std::string dir; // "" for the newest, then "parent", "parent/parent", ...
		int id = 0;	 // CRIU file id of its KFD image
		KfdImage img;
	};

	// The chain of `img`, read as file `id` of `dir`: every parent link's
	// directory opened, its KFD image read (sealed under Verify::On) and
	// written by the dump the child names, its pages files of the right
	// sizes. Missing or wrong links are refused naming the directory and
	// the file.
	static Result<KfdChain> resolve(const ImageDir &dir, int id, const KfdImage &img,
					Verify verify = Verify::On);

	const std::vector<Link> &links() const { return links_; }
	// Where each byte of gpu_id's BOs of the newest image is; EINVAL when
	// a chunk said to be in a parent is not there (a BO it lacks).
	Result<ChainPages> pages(uint32_t gpu_id) const;

private:
	std::vector<Link> links_;
};

// KfdChain::resolve, then pages() of each of the image's GPUs: what a
// restore needs of a chain, all checked before any GPU state changes. A
// deduplicated chunk (kfd_bo_entry.dedup, image/chunk_index.h) is a segment
// of the pages file it refers to, in its link's directory; every file a
// segment lies in is opened, must hold it and must carry its link's seal
// (ChainPages::File::seal, image/pages_file.h; KFD_VERIFY=0 too): a
// missing, short, unsealed or foreign one is refused naming the file and
// every BO chunk stored there. An image that
// is no link of a chain and has no deduplicated chunk gives an empty map.
Result<std::map<uint32_t, ChainPages>> resolve_chain_pages(const ImageDir &dir, int id, const KfdImage &img,
							   Verify verify = Verify::On);

// Restore: the bytes of a ChainPages in stream order, each read from the
// pages file that holds it (files opened once, when first needed, their
// seals checked again).
class ChainSource final : public ByteSource {
public:
	// `top` (the newest images directory), `pages` and `shared` must
	// outlive it. With `shared` (the copy run's plan of chunks several
	// streams hold), those chunks are read once for all their holders.
	ChainSource(const ImageDir &top, const ChainPages &pages, SharedChunkReads *shared = nullptr)
		: top_(&top), pages_(&pages), shared_(shared)
	{
	}
	Status read(void *buf, size_t len) override;
	Status skip(uint64_t len) override;
	uint64_t remaining() const override { return pages_->total - pos_; }
	// "parent/parent/amdgpu-pages-5-1111.img at payload offset 0x..."
	std::string locate(uint64_t offset) const override;
	// Bytes read from pages files so far (a shared chunk another stream
	// read is not counted here).
	uint64_t file_bytes() const { return file_bytes_; }

private:
	Result<const PagesReader *> reader(uint32_t file);
	// `n` bytes of segment `s` at `seg_off` into `out`.
	Status read_segment(const PagesSegment &s, uint64_t seg_off, uint8_t *out, size_t n);
	const ImageDir *top_;
	const ChainPages *pages_;
	SharedChunkReads *shared_;
	uint64_t file_bytes_ = 0;
	std::vector<std::optional<PagesReader>> readers_;
	size_t seg_ = 0;	  // the segment holding the next byte
	uint64_t seg_off_ = 0; // bytes of it already read
	uint64_t pos_ = 0;
};

} // namespace amdcr
