// SPDX-License-Identifier: GPL-2.0-only
//
// Facts from CRIU's own images in the checkpoint directory that bind the
// GPU images to their checkpoint, read without CRIU's protobuf definitions
// (two fields of two messages):
//   files.img   file_entry (field 1 type, field 2 id): the ids of the EXT
//               files (type 16) CRIU restores: the ids it will ask the
//               plugins for;
//   pstree.img  pstree_entry (field 1 pid): the checkpoint's tasks, by the
//               pid each has in its own pid namespace (the pid KFD's
//               PROCESS_INFO reports and a restored task has again).
// Each file starts with CRIU's image magic (IMG_COMMON_MAGIC 0x54564319,
// then the file's own: FILES_MAGIC 0x56303138, PSTREE_MAGIC 0x50273030;
// images of CRIUs writing no common magic start with the file's own), then
// entries of a 4-byte little-endian size and a packed message.
#pragma once

#include <cstdint>
#include <optional>
#include <set>

#include "base/result.h"
#include "image/image_dir.h"

namespace amdcr {

struct CriuCheckpointFacts {
	std::set<uint32_t> ext_file_ids;
	std::set<uint32_t> pids;
};

// nullopt when the directory has no files.img or no pstree.img (a
// checkpoint of another CRIU stand-in, or streamed images: the streamer
// serves CRIU's files to CRIU alone). A file that is there but unreadable
// or malformed is an Error naming it.
Result<std::optional<CriuCheckpointFacts>> read_criu_facts(const ImageDir &dir);

} // namespace amdcr
