// SPDX-License-Identifier: GPL-2.0-only
//
// What binds the GPU files of one dump together (this project's
// dump_binding message, field 150 of criu_kfd, criu_render_node and
// criu_dmabuf_node; upstream's plugin ignores it): an identity drawn at
// random once per dump, the same in every image that dump writes, and the
// CRIU file id the image was dumped for. Pages files are bound to their
// image by a seal after the payload, which upstream's reader never reaches
// (image/pages_file.h), holding the dump identity and checked always
// (pages_sealed), and by the image's per-MiB checksums of their contents
// (KFD_VERIFY) and their size.
//
// The dump manifest (amdgpu-binding.img, this project's file) binds the
// dump's images to CRIU's images of the same dump: written by the plugin's
// exit hook of a dump that succeeded and wrote GPU images, when CRIU has
// closed its own images, it holds the dump identity and the size and
// checksum of CRIU's images that change with every dump
// (image/criu_images.h, is_bound_criu_image), and the names of the GPU
// files it wrote (a GPU file deleted from the checkpoint is named before
// CRIU asks for it). All GPU files of an earlier
// or later checkpoint of the same process, manifest included, copied into
// a checkpoint, are so refused: CRIU's images are not the ones they were
// dumped with. A checkpoint copied by a post-dump action script (which
// CRIU runs before the plugin's exit hook) has none: KFD_REQUIRE_MANIFEST=0
// restores it with a warning. Streamed checkpoints have no manifest (CRIU's images reach
// the streamer only): their images are bound to each other, not to
// CRIU's.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "image/criu_images.h"
#include "image/image_dir.h"

namespace amdcr {

inline constexpr uint32_t kBindingField = 150;

using DumpId = std::array<uint8_t, 16>;

struct DumpBinding {
	DumpId dump_id{};
	uint32_t file_id = 0;
	// The image's pages files are sealed with dump_id (image/pages_file.h).
	bool pages_sealed = false;
	bool operator==(const DumpBinding &) const = default;
};

// The dump identity an image's pages files must be sealed with (nullopt:
// not sealed, an image of upstream's plugin or of a dump before seals).
std::optional<DumpId> pages_seal(const std::optional<DumpBinding> &b);

// A new dump identity (getrandom).
Result<DumpId> new_dump_id();

// "3f2a…" (32 hex digits), for messages.
std::string dump_id_text(const DumpId &id);

// A checkpoint's GPU images must all come from one dump: all bound with
// the same identity, or (upstream's) none bound. The Error names two files
// that differ and how.
struct BoundImage {
	std::string name;
	std::optional<DumpBinding> binding;
};
// `differing`, when given, receives the index of the image found to
// differ from the first.
Status check_one_dump(const std::vector<BoundImage> &images, size_t *differing = nullptr);

// The identity of images that passed check_one_dump (nullopt: none
// bound, or no images), and their names for messages ("a, b and 3 more").
std::optional<DumpId> bound_dump_id(const std::vector<BoundImage> &images);
std::string bound_names(const std::vector<BoundImage> &images);

// An image read as file `id` whose binding names another file is refused:
// renamed, or copied over another file's image.
Status check_binding_file(const std::optional<DumpBinding> &b, int id, const std::string &name);
// The same for an image that names the file it was dumped for otherwise
// (criu-dev's criu_render_node.id).
Status check_file_id(uint32_t dumped_for, int id, const std::string &name);

struct DumpManifest {
	DumpId dump_id{};
	std::vector<CriuImageDigest> criu_images;
	std::vector<std::string> gpu_files; // sorted
	bool operator==(const DumpManifest &) const = default;
};

// The dump identity the GPU file `file` of `dir` carries as the file `as`
// (a copy of it under another name, e.g. a commit's kept file,
// image/image_dir.h): a metadata image's binding, a pages file's seal
// naming `as`, a manifest's dump_id. nullopt: none (upstream's, a dump's
// before seals, not a file of this plugin's, or one that does not parse).
Result<std::optional<DumpId>> carried_dump_id(const ImageDir &dir, const std::string &file, const std::string &as);

// amdgpu-binding.img of `dir`, written atomically / read (nullopt: none).
Status write_dump_manifest(const ImageDir &dir, const DumpManifest &m);
Result<std::optional<DumpManifest>> read_dump_manifest(const ImageDir &dir);

// The manifest of `dump` (the identity its images carry; nullopt: images
// without one, upstream's) for CRIU's images in `dir` now, or the Error:
// bound images need the manifest of their own dump, and CRIU's images
// must be the ones it lists, and the GPU files it lists there, each file
// named; unbound images must have no
// manifest beside them. `images` names the GPU images checked, for the
// messages. Not when streaming (nothing to check: ok). With
// `require_manifest` false (KFD_REQUIRE_MANIFEST=0) bound images without a
// manifest are no error: `warning` (when given) receives the sentence that
// says what goes unchecked, for the caller to log once.
Status check_bound_to_criu(const ImageDir &dir, const std::optional<DumpId> &dump, const std::string &images,
			   bool require_manifest = true, std::string *warning = nullptr);

} // namespace amdcr
