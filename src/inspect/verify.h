// SPDX-License-Identifier: GPL-2.0-only
//
// `amdgpu-img verify`: is this checkpoint complete and intact? Checks every
// amdgpu image of a directory without stopping at the first problem:
//  - each metadata image (kfd, renderD, dmabuf): framing, decoding and the
//    image layer's validation (the checks a restore makes before touching a
//    GPU);
//  - the seal of each KFD image (this plugin's; upstream's have none);
//  - each pages file an image implies: present, framed, its payload the
//    size of the BOs it holds, and readable to the end, every chunk of a
//    KFD BO that has checksums matching them (image/content_checksum.h);
//  - across files, as the restore: the images of the files CRIU restores
//    (its files.img) come from one dump (image/binding.h) and their KFD
//    images from tasks of the checkpoint (pstree.img); an image of a file
//    CRIU does not restore is a warning (a restore ignores it);
//  - pages files no image refers to (a metadata image lost?) are problems;
//    temporaries of an interrupted write (".amdgpu-*.tmp-*") and unknown
//    amdgpu-* names are warnings.
// Pages files are read through one bounded buffer (kVerifyReadBytes).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "inspect/checkpoint.h"

namespace amdcr::inspect {

inline constexpr size_t kVerifyReadBytes = 1u << 20;

struct Finding {
	std::string file;
	std::string message;
};

struct VerifyReport {
	std::vector<std::string> good;	 // files that passed every check
	std::vector<Finding> problems; // the checkpoint is damaged
	std::vector<Finding> warnings; // worth a look, not damage
	uint64_t bytes_read = 0;	 // of pages file payloads
	uint64_t bytes_checksummed = 0; // of those, matched against checksums
	size_t sealed = 0;		 // metadata images whose seal was checked
};

// `require_manifest`: as the restore's KFD_REQUIRE_MANIFEST (false: GPU
// images without their manifest are a warning, not a problem).
VerifyReport verify_checkpoint(const Checkpoint &ck, bool require_manifest = true);

// One line per finding ("BAD file: ...", "warning: file: ..."), with
// `verbose` one "ok file" line per good file, then a summary line.
std::string format_verify(const VerifyReport &r, bool verbose);

} // namespace amdcr::inspect
