// SPDX-License-Identifier: GPL-2.0-only
//
// dump_binding <-> DumpBinding, for the image codecs (kfd_image.cpp,
// render_image.cpp) only.
#pragma once

#include <optional>
#include <string>

#include "base/result.h"
#include "criu-amdgpu.pb-c.h"
#include "image/binding.h"

namespace amdcr {

// Fills `e` from `b`; `e` borrows b's dump id.
void to_binding_entry(const DumpBinding &b, ::DumpBinding *e);

// The binding an image carries (nullopt: none, as upstream's); a dump id
// that is not 16 bytes is an Error naming `name`.
Result<std::optional<DumpBinding>> from_binding_entry(const ::DumpBinding *e, const std::string &name);

} // namespace amdcr
