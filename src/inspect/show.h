// SPDX-License-Identifier: GPL-2.0-only
//
// `amdgpu-img show`: what a checkpoint holds, per image file. Text for
// people; JSON (--json) for scripts, in the format that
// src/inspect/amdgpu-img-show.schema.json describes and tests/inspect
// validates. The JSON format is stable: fields are only ever added, and
// "format" changes when one changes meaning.
#pragma once

#include <string>

#include "inspect/checkpoint.h"

namespace amdcr::inspect {

// The value of the JSON document's "format" field.
inline constexpr const char *kShowJsonFormat = "amdgpu-img-show/1";

std::string show_text(const Checkpoint &ck);
std::string show_json(const Checkpoint &ck);

// Whether every image of `ck` decoded (show's exit status).
bool all_decoded(const Checkpoint &ck);

} // namespace amdcr::inspect
