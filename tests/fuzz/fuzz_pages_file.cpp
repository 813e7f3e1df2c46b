// SPDX-License-Identifier: GPL-2.0-only
//
// Pages-file and metadata-image framing: the input is a whole file (8-byte
// size header + payload, possibly a pages seal after it, or anything else).
// PagesReader must open it only when the header matches the size, or the
// size less a seal that names the file (read_pages_seal), then read
// exactly its payload, in pieces whose sizes come from the input, and
// refuse every read past the end; read_image_payload must agree with it on
// the payload of a file without a seal and refuse a sealed one.
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "fuzz_common.h"
#include "image/framing.h"
#include "image/pages_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	using namespace amdcr;
	const auto &dir_path = fuzz::scratch();
	dir_path.put("amdgpu-pages-1-0001.img", std::span<const uint8_t>(data, size));
	auto dir = ImageDir::open(dir_path.path());
	fuzz::require(dir.ok(), "opening the scratch directory");

	const std::string name = "amdgpu-pages-1-0001.img";
	const bool framed = size >= kImageHeaderSize && decode_image_header(data) == size - kImageHeaderSize;
	auto seal = read_pages_seal(*dir, name, name);
	const bool sealed = seal.ok() && seal->has_value();
	fuzz::require(!(framed && sealed), "a file framed without a seal has none");
	auto reader = PagesReader::open(*dir, name);
	fuzz::require(reader.ok() == (framed || sealed), "PagesReader opens exactly the well-framed files");
	auto payload = read_image_payload(*dir, name);
	fuzz::require(payload.ok() == framed, "read_image_payload reads exactly the well-framed files");
	if (!framed && !sealed)
		return 0;
	fuzz::require(reader->payload_size() == size - kImageHeaderSize - (sealed ? kPagesSealSize : 0),
		      "the payload is the file after its header (and before its seal)");
	fuzz::require(!framed || (payload->size() == reader->payload_size() &&
				  (payload->empty() ||
				   std::memcmp(payload->data(), data + kImageHeaderSize, payload->size()) == 0)),
		      "the payload is the file after its header");
	fuzz::require(reader->seal() == (sealed ? *seal : std::nullopt), "the reader finds the seal read_pages_seal does");

	// Sequential reads in pieces of 2^0..2^18 bytes, the power taken from
	// the payload byte at the position (a zero byte: the largest piece).
	std::vector<uint8_t> buf(size_t{1} << 18);
	uint64_t pos = 0;
	while (reader->remaining() > 0) {
		const uint8_t b = data[kImageHeaderSize + pos];
		const size_t want = size_t{1} << (18 - b % 19);
		const size_t n = static_cast<size_t>(std::min<uint64_t>(want, reader->remaining()));
		fuzz::require(reader->read(buf.data(), n).ok(), "reading within the payload");
		fuzz::require(std::memcmp(buf.data(), data + kImageHeaderSize + pos, n) == 0,
			      "reads return the payload's bytes");
		pos += n;
	}
	fuzz::require(!reader->read(buf.data(), 1).ok(), "a read past the end is refused");
	fuzz::require(!reader->skip(1).ok(), "a skip past the end is refused");
	fuzz::require(!reader->read_at(reader->payload_size(), buf.data(), 1).ok(),
		      "read_at past the end is refused");
	fuzz::require(!reader->read_at(UINT64_MAX, buf.data(), 2).ok(), "read_at at 2^64-1 is refused");
	return 0;
}
