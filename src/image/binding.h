// SPDX-License-Identifier: GPL-2.0-only
//
// What binds the GPU files of one dump together (this project's
// dump_binding message, field 150 of criu_kfd, criu_render_node and
// criu_dmabuf_node; upstream's plugin ignores it): an identity drawn at
// random once per dump, the same in every image that dump writes, and the
// CRIU file id the image was dumped for. Pages files carry no binding of
// their own (upstream's framing leaves no room for one): each is bound to
// its image by the image's per-MiB checksums of its contents
// (KFD_VERIFY) and by its size.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"

namespace amdcr {

inline constexpr uint32_t kBindingField = 150;

using DumpId = std::array<uint8_t, 16>;

struct DumpBinding {
	DumpId dump_id{};
	uint32_t file_id = 0;
	bool operator==(const DumpBinding &) const = default;
};

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

// An image read as file `id` whose binding names another file is refused:
// renamed, or copied over another file's image.
Status check_binding_file(const std::optional<DumpBinding> &b, int id, const std::string &name);
// The same for an image that names the file it was dumped for otherwise
// (criu-dev's criu_render_node.id).
Status check_file_id(uint32_t dumped_for, int id, const std::string &name);

} // namespace amdcr
