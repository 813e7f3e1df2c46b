// SPDX-License-Identifier: GPL-2.0-only
//
// A checkpoint directory as the inspector (amdgpu-img) sees it: every amdgpu
// image file in it, each decoded through the image layer's readers (the one
// parser of every image file), and where each BO keeps its contents.
//
// Loading never stops at a bad file: each image holds its Result, so `show`
// prints what it can and `verify` reports every problem, not the first.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "image/framing.h"
#include "image/image_dir.h"
#include "image/criu_images.h"
#include "image/kfd_image.h"
#include "image/render_image.h"

namespace amdcr::inspect {

// One metadata image: its CRIU file id, file name and what decoding it gave.
// Every image is read with its seal checked (Verify::On): `integrity` says
// whether there was one (this plugin's images) or not (upstream's).
template <typename Image>
struct Loaded {
	int id = 0;
	std::string file;
	Result<Image> image;
	Integrity integrity = Integrity::Unchecked;
};

// Where a BO's contents are: a pages file and the byte offset in its payload.
struct PagesLocation {
	std::string file;
	uint64_t offset = 0;
};

struct Checkpoint {
	std::string path;
	ImageDir dir;
	std::vector<Loaded<KfdImage>> kfd;
	std::vector<Loaded<RenderNodeImage>> render;
	std::vector<Loaded<DmabufImage>> dmabuf;
	// Every entry of the directory whose name starts with "amdgpu-" or
	// ".amdgpu-" (a temporary left by an interrupted dump), sorted.
	std::vector<std::string> amdgpu_files;
	// CRIU's files.img and pstree.img facts (image/criu_images.h): nullopt
	// without them, or (criu_error) when they could not be read.
	std::optional<CriuCheckpointFacts> criu;
	std::optional<std::string> criu_error;

	bool has_images() const { return !kfd.empty() || !render.empty() || !dmabuf.empty(); }
};

// Opens `path` and decodes every amdgpu metadata image in it. Errors only
// when the directory itself cannot be opened or listed.
Result<Checkpoint> load_checkpoint(const std::string &path);

// For each BO of `img` (the KFD image of file id `id`), in BO-table order:
// where its contents are, or nullopt for a BO without contents (doorbell,
// MMIO, userptr). A GPU's VRAM/GTT BOs follow each other in its pages file
// (in a chain's link, only their chunks not in the parent: the offset is
// that of the BO's first chunk stored in this checkpoint).
std::vector<std::optional<PagesLocation>> kfd_pages_layout(const KfdImage &img, int id);

// For each BO of the render node image `img` of file id `id`: its
// amdgpu-drm-pages file (offset 0), or nullopt for a BO without contents
// (DrmBo::has_contents).
std::vector<std::optional<PagesLocation>> render_pages_layout(const RenderNodeImage &img, int id);

// "4 KiB", "1028 KiB", "3 GiB" when exact in that unit, else "<n> bytes".
std::string format_size(uint64_t bytes);

} // namespace amdcr::inspect
