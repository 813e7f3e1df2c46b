// SPDX-License-Identifier: GPL-2.0-only
//
// A series of pages files read or written as one byte stream: a copy job's
// BOs that have a file each (GpuCopyJob::bo_files: a render node's BOs, a
// shared BO, each in its own amdgpu-drm-pages file, upstream's layout),
// copied by one pipelined transfer whose stream is their concatenation.
//
// Each file is a pages file in upstream's framing (pages_file.h), written
// by a PagesWriter and read by a PagesReader. The writer creates a file
// when the stream reaches it and commits it when the stream goes on past
// its end (the last ones, and empty ones, in finish()), so at most one is
// open; the reader opens each in turn and requires its payload to be
// exactly its part's size.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/byte_stream.h"
#include "base/result.h"
#include "image/image_dir.h"
#include "image/pages_file.h"

namespace amdcr {

struct PagesPart {
	std::string name; // file name in the image directory
	uint64_t size = 0; // payload bytes
};

class PagesSeriesWriter final : public ByteSink {
public:
	// `dir` must outlive the writer. Parts of size 0 are written (empty)
	// when the stream passes them; each sealed with `seal` (when given).
	PagesSeriesWriter(const ImageDir &dir, std::vector<PagesPart> parts, std::optional<DumpId> seal = std::nullopt)
		: dir_(&dir), parts_(std::move(parts)), seal_(seal)
	{
	}
	Status write(const void *buf, size_t len) override;
	// Every part written in full and committed (empty trailing parts too).
	Status finish();

private:
	Status open_next();
	const ImageDir *dir_;
	std::vector<PagesPart> parts_;
	std::optional<DumpId> seal_;
	size_t next_ = 0; // the part to open next
	std::optional<PagesWriter> cur_;
};

class PagesSeriesReader final : public ByteSource {
public:
	// With `seal`, each file must be sealed with it (PagesReader::open).
	PagesSeriesReader(const ImageDir &dir, std::vector<PagesPart> parts, std::optional<DumpId> seal = std::nullopt);
	Status read(void *buf, size_t len) override;
	Status skip(uint64_t len) override;
	uint64_t remaining() const override { return remaining_; }

private:
	// Makes cur_ a part with bytes left, opening the next file.
	Status advance();
	const ImageDir *dir_;
	std::vector<PagesPart> parts_;
	std::optional<DumpId> seal_;
	size_t next_ = 0;
	std::optional<PagesReader> cur_;
	uint64_t remaining_ = 0;
};

} // namespace amdcr
