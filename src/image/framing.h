// SPDX-License-Identifier: GPL-2.0-only
//
// The on-disk framing of every amdgpu image file, as the upstream plugin
// writes it (open_img_file/write_img_file): an 8-byte header holding the
// size of what follows, then the payload.
//
//   offset 0: uint64 payload size, little-endian (upstream writes a native
//             size_t; every platform with amdgpu CRIU support is 64-bit LE)
//   offset 8: payload — a packed protobuf message for kfd/renderD/dmabuf
//             images; the raw concatenated BO contents for pages files
//
// The header lets upstream, and this plugin, read images through CRIU's
// image streamer (image_stream.h), where the size of a file is not known up
// front: there a file is read once, header first, and its end is checked
// by reading one byte past the payload. Nothing follows the payload but a
// pages file's seal (pages_file.h, which upstream's reader never reaches:
// it reads what the header announces); any other file longer or shorter
// than 8 + header is corrupt.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"
#include "image/image_dir.h"

namespace amdcr {

inline constexpr size_t kImageHeaderSize = 8;

void encode_image_header(uint64_t payload_size, uint8_t out[kImageHeaderSize]);
uint64_t decode_image_header(const uint8_t in[kImageHeaderSize]);

// Checks that a file of `file_size` bytes whose header says `payload_size`
// is consistent; the Error names `name`.
Status check_image_framing(const std::string &name, uint64_t file_size, uint64_t payload_size);

// A framed image file opened for reading, its header checked against its
// size.
struct FramedFile {
	UniqueFd fd;
	uint64_t payload_size = 0; // the payload starts at kImageHeaderSize
	// The streamer's pipe (stream mode): the header has been read, the
	// payload follows at the current position and must be read in order;
	// its size could not be checked yet (see expect_stream_end).
	bool streamed = false;
	// Bytes after the payload (open_framed_image's `may_trail`, or 0).
	uint64_t trailing = 0;
};

// Opens `name` in `dir` and checks it: a regular file, no larger than
// `max_payload` + header (metadata images; EFBIG), with a header that
// matches its size. Every Error names the file. Streamed (dir.streaming()):
// the header is read from the pipe and checked against `max_payload` only.
// A file exactly `may_trail` bytes longer than header + payload is
// accepted too (FramedFile::trailing; a pages file's seal).
Result<FramedFile> open_framed_image(const ImageDir &dir, const std::string &name,
				     std::optional<uint64_t> max_payload = std::nullopt, uint64_t may_trail = 0);

// Stream mode, after the whole payload of `name` was read from `fd`: the
// pipe must be at its end (trailing bytes are corrupt, as in a file).
Status expect_stream_end(int fd, const std::string &name, uint64_t payload_size);

// Reads and checks a whole framed metadata image; returns the payload.
// Errors: missing file, shorter than the header, size mismatch, above
// dir.max_metadata_size() — each naming the file.
Result<std::vector<uint8_t>> read_image_payload(const ImageDir &dir, const std::string &name);
// Writes header + payload atomically under `name`.
Status write_image_payload(const ImageDir &dir, const std::string &name,
			   std::span<const uint8_t> payload);

// The seal of a metadata image (this project's; upstream skips it as an
// unknown field): the packed message is followed by one more field, of
// wire type fixed64 and number `field` (100 in criu_kfd), holding
// checksum64 (base/checksum.h) of every payload byte before it. A protobuf
// decoder merges a field appended to a message, so the sealed payload
// decodes as the message with that field set, while the checksum never
// covers itself. The seal is checked against the bytes as read, never
// against a re-encoding.
enum class Verify { Off, On }; // KFD_VERIFY
enum class Integrity {
	Verified,  // sealed, and the seal matched
	Unsealed,  // no seal: an image of upstream's plugin
	Unchecked, // Verify::Off
};
// 2 key bytes (fields 16..2047) + 8.
inline constexpr size_t kSealBytes = 10;

// Appends the seal field `field` (16..2047) to `packed`.
void seal_payload(std::vector<uint8_t> &packed, uint32_t field);
// Checks a payload whose decoded message has the seal field `field` with
// value `stored`: it must be the payload's last field and match
// checksum64 of the bytes before it. EBADMSG naming `name` and KFD_VERIFY.
Status check_payload_seal(std::span<const uint8_t> payload, uint32_t field, uint64_t stored,
			  const std::string &name);

// The seal check every sealed image shares, after its message decoded:
// Verify::Off checks nothing (Unchecked); a seal (`stored`) must pass
// check_payload_seal (Verified); without one the image is upstream's
// (Unsealed), unless `checksummed_bo` names a BO that has content checksums:
// only this plugin writes those, and it seals what it writes, so that
// image's seal key is damaged (EBADMSG naming `name`, the BO and KFD_VERIFY).
Result<Integrity> check_message_seal(std::span<const uint8_t> payload, uint32_t field,
				     std::optional<uint64_t> stored, std::optional<size_t> checksummed_bo,
				     Verify verify, const std::string &name);

// One protobuf image: `validate(img, name)` -> Status, then `pack(img)` ->
// Result<bytes>, framed and written atomically under `name`;
// `unpack(payload, name)` -> Result<Image> of the framed file `name`.
template <typename Image, typename Validate, typename Pack>
Status write_message_image(const ImageDir &dir, const std::string &name, const Image &img,
			   Validate validate, Pack pack)
{
	if (auto st = validate(img, name); !st)
		return st;
	auto payload = pack(img);
	if (!payload)
		return std::move(payload).error().context(name);
	return write_image_payload(dir, name, *payload);
}

template <typename Unpack>
auto read_message_image(const ImageDir &dir, const std::string &name, Unpack unpack)
	-> decltype(unpack(std::span<const uint8_t>{}, name))
{
	auto payload = read_image_payload(dir, name);
	if (!payload)
		return std::move(payload).error();
	return unpack(*payload, name);
}

} // namespace amdcr
