// SPDX-License-Identifier: GPL-2.0-only
#include "image/framing.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>

#include "base/checksum.h"
#include "base/file_io.h"

namespace amdcr {

void encode_image_header(uint64_t payload_size, uint8_t out[kImageHeaderSize])
{
	for (size_t i = 0; i < kImageHeaderSize; i++)
		out[i] = static_cast<uint8_t>(payload_size >> (8 * i));
}

uint64_t decode_image_header(const uint8_t in[kImageHeaderSize])
{
	uint64_t v = 0;
	for (size_t i = 0; i < kImageHeaderSize; i++)
		v |= static_cast<uint64_t>(in[i]) << (8 * i);
	return v;
}

Status check_image_framing(const std::string &name, uint64_t file_size, uint64_t payload_size)
{
	if (file_size < kImageHeaderSize)
		return make_error(EINVAL, "%s: truncated: %" PRIu64 " bytes, shorter than the %zu-byte header",
				  name.c_str(), file_size, kImageHeaderSize);
	const uint64_t have = file_size - kImageHeaderSize;
	if (have < payload_size)
		return make_error(EINVAL, "%s: truncated: header says %" PRIu64 " bytes, file has %" PRIu64,
				  name.c_str(), payload_size, have);
	if (have > payload_size)
		return make_error(EINVAL,
				  "%s: %" PRIu64 " bytes of trailing garbage after the %" PRIu64
				  "-byte payload the header announces",
				  name.c_str(), have - payload_size, payload_size);
	return ok_status();
}

namespace {

// The streamed form of open_framed_image: the header from the pipe.
Result<FramedFile> open_streamed_image(UniqueFd fd, const std::string &name,
				       std::optional<uint64_t> max_payload)
{
	uint8_t header[kImageHeaderSize];
	auto n = read_full(fd.get(), header, sizeof(header));
	if (!n)
		return std::move(n).error().context(name);
	if (*n < sizeof(header)) {
		auto chk = check_image_framing(name, *n, 0);
		return std::move(chk).error();
	}
	const uint64_t payload_size = decode_image_header(header);
	if (max_payload && payload_size > *max_payload)
		return make_error(EFBIG, "%s: header announces %" PRIu64 " bytes, above the %" PRIu64
				  "-byte limit for metadata images",
				  name.c_str(), payload_size, *max_payload);
	return FramedFile{std::move(fd), payload_size, true};
}

} // namespace

Status expect_stream_end(int fd, const std::string &name, uint64_t payload_size)
{
	uint8_t extra[4096];
	auto n = read_full(fd, extra, sizeof(extra));
	if (!n)
		return std::move(n).error().context(name);
	if (*n == 0)
		return ok_status();
	uint64_t more = *n;
	while (*n == sizeof(extra)) { // count (and drain) the rest, for the message
		n = read_full(fd, extra, sizeof(extra));
		if (!n)
			break;
		more += *n;
	}
	return make_error(EINVAL,
			  "%s: %" PRIu64 " bytes of trailing garbage after the %" PRIu64
			  "-byte payload the header announces",
			  name.c_str(), more, payload_size);
}

Result<FramedFile> open_framed_image(const ImageDir &dir, const std::string &name,
				     std::optional<uint64_t> max_payload, uint64_t may_trail)
{
	auto fd = dir.open_read(name);
	if (!fd)
		return std::move(fd).error();
	if (dir.streaming())
		return open_streamed_image(std::move(*fd), name, max_payload);
	struct stat st = {};
	if (::fstat(fd->get(), &st) != 0)
		return errno_error(errno, "stat " + name);
	if (!S_ISREG(st.st_mode))
		return make_error(EINVAL, "%s: not a regular file", name.c_str());
	const auto file_size = static_cast<uint64_t>(st.st_size);
	if (max_payload && file_size > *max_payload + kImageHeaderSize)
		return make_error(EFBIG, "%s: %" PRIu64 " bytes, above the %" PRIu64 "-byte limit for metadata images",
				  name.c_str(), file_size, *max_payload);

	uint8_t header[kImageHeaderSize];
	auto n = pread_full(fd->get(), header, sizeof(header), 0);
	if (!n)
		return std::move(n).error().context(name);
	if (*n < sizeof(header)) {
		auto chk = check_image_framing(name, *n, 0);
		return std::move(chk).error();
	}
	const uint64_t payload_size = decode_image_header(header);
	const uint64_t trailing = may_trail > 0 && file_size >= kImageHeaderSize + may_trail &&
						  file_size - kImageHeaderSize - may_trail == payload_size
					  ? may_trail
					  : 0;
	auto chk = check_image_framing(name, file_size - trailing, payload_size);
	if (!chk)
		return std::move(chk).error();
	return FramedFile{std::move(*fd), payload_size, false, trailing};
}

Result<std::vector<uint8_t>> read_image_payload(const ImageDir &dir, const std::string &name)
{
	auto file = open_framed_image(dir, name, dir.max_metadata_size());
	if (!file)
		return std::move(file).error();
	std::vector<uint8_t> payload(file->payload_size);
	auto n = file->streamed ? read_full(file->fd.get(), payload.data(), payload.size())
				: pread_full(file->fd.get(), payload.data(), payload.size(), kImageHeaderSize);
	if (!n)
		return std::move(n).error().context(name);
	if (*n != payload.size())
		return make_error(EINVAL, "%s: truncated while reading: %zu of %" PRIu64 " payload bytes",
				  name.c_str(), *n, file->payload_size);
	if (file->streamed)
		if (auto st = expect_stream_end(file->fd.get(), name, file->payload_size); !st)
			return std::move(st).error();
	return payload;
}

namespace {

// The key of a fixed64 field (wire type 1) as a 2-byte varint.
void seal_key(uint32_t field, uint8_t out[2])
{
	const uint32_t key = (field << 3) | 1;
	out[0] = static_cast<uint8_t>(0x80 | (key & 0x7f));
	out[1] = static_cast<uint8_t>(key >> 7);
}

} // namespace

void seal_payload(std::vector<uint8_t> &packed, uint32_t field)
{
	const uint64_t sum = checksum64(packed);
	uint8_t key[2];
	seal_key(field, key);
	packed.insert(packed.end(), key, key + 2);
	for (size_t i = 0; i < 8; i++)
		packed.push_back(static_cast<uint8_t>(sum >> (8 * i)));
}

Status check_payload_seal(std::span<const uint8_t> payload, uint32_t field, uint64_t stored,
			  const std::string &name)
{
	uint8_t key[2];
	seal_key(field, key);
	const size_t n = payload.size();
	bool last = n >= kSealBytes && payload[n - kSealBytes] == key[0] &&
		    payload[n - kSealBytes + 1] == key[1];
	for (size_t i = 0; last && i < 8; i++)
		last = payload[n - 8 + i] == static_cast<uint8_t>(stored >> (8 * i));
	if (!last)
		return make_error(EBADMSG,
				  "%s: its checksum (field %u) is not the payload's last field: the image is "
				  "damaged (KFD_VERIFY=0 restores it unchecked)",
				  name.c_str(), field);
	const uint64_t sum = checksum64(payload.first(n - kSealBytes));
	if (sum != stored)
		return make_error(EBADMSG,
				  "%s: checksum mismatch (image 0x%016" PRIx64 ", computed 0x%016" PRIx64
				  "): the image is damaged (KFD_VERIFY=0 restores it unchecked)",
				  name.c_str(), stored, sum);
	return ok_status();
}

Result<Integrity> check_message_seal(std::span<const uint8_t> payload, uint32_t field,
				     std::optional<uint64_t> stored, std::optional<size_t> checksummed_bo,
				     Verify verify, const std::string &name)
{
	if (verify == Verify::Off)
		return Integrity::Unchecked;
	if (stored) {
		if (auto st = check_payload_seal(payload, field, *stored, name); !st)
			return std::move(st).error();
		return Integrity::Verified;
	}
	if (checksummed_bo)
		return make_error(EBADMSG,
				  "%s: BO %zu has content checksums but the image has no checksum of its "
				  "own: the image is damaged (KFD_VERIFY=0 restores it unchecked)",
				  name.c_str(), *checksummed_bo);
	return Integrity::Unsealed;
}

Status write_image_payload(const ImageDir &dir, const std::string &name,
			   std::span<const uint8_t> payload)
{
	auto file = dir.create(name);
	if (!file)
		return std::move(file).error();
	// One write: header and payload together.
	std::vector<uint8_t> buf(kImageHeaderSize + payload.size());
	encode_image_header(payload.size(), buf.data());
	std::copy(payload.begin(), payload.end(), buf.begin() + kImageHeaderSize);
	auto st = file->write(buf.data(), buf.size());
	if (!st)
		return st;
	return file->commit();
}

} // namespace amdcr
