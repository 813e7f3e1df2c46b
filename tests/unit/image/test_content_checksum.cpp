// SPDX-License-Identifier: GPL-2.0-only
// Integrity of the images: BO content checksums per chunk, the
// seal of metadata images, and their checks at read.
#include <criterion/criterion.h>

#include <string>
#include <vector>

#include "../common/assert_ok.h"
#include "image/content_checksum.h"
#include "image/image_names.h"
#include "image/kfd_image.h"
#include "image_test_util.h"

using namespace amdcr;

namespace {

// A ByteSink/ByteSource over a vector.
class VecSink final : public ByteSink {
public:
	Status write(const void *buf, size_t len) override
	{
		const auto *p = static_cast<const uint8_t *>(buf);
		bytes.insert(bytes.end(), p, p + len);
		return ok_status();
	}
	std::vector<uint8_t> bytes;
};

class VecSource final : public ByteSource {
public:
	explicit VecSource(std::vector<uint8_t> b) : bytes(std::move(b)) {}
	Status read(void *buf, size_t len) override
	{
		if (len > remaining())
			return make_error(EINVAL, "past the end");
		std::copy_n(bytes.begin() + static_cast<ptrdiff_t>(pos), len, static_cast<uint8_t *>(buf));
		pos += len;
		return ok_status();
	}
	Status skip(uint64_t len) override
	{
		if (len > remaining())
			return make_error(EINVAL, "past the end");
		pos += len;
		return ok_status();
	}
	uint64_t remaining() const override { return bytes.size() - pos; }
	std::vector<uint8_t> bytes;
	size_t pos = 0;
};

// The checksums of `sizes` BOs over `data`, written in pieces of `piece`
// through a complete dump's sink.
std::vector<BoChecksum> sums_of(const std::vector<uint8_t> &data, const std::vector<uint64_t> &sizes,
				size_t piece, uint32_t chunk)
{
	VecSink out;
	DeltaSink sink(out, test::complete_bos(sizes), chunk);
	for (size_t off = 0; off < data.size(); off += piece) {
		const size_t n = std::min(piece, data.size() - off);
		cr_assert_ok(sink.write(data.data() + off, n));
	}
	cr_assert(out.bytes == data, "the sink changed the bytes");
	auto sums = sink.take();
	cr_assert_ok(sums);
	return sums->checksums;
}

// Reads all of `data` through a VerifyingSource in pieces of `piece`.
Status read_verified(const std::vector<uint8_t> &data, const std::vector<uint64_t> &sizes,
		     const std::vector<BoChecksum> &sums, size_t piece)
{
	VecSource in(data);
	std::vector<VerifyingSource::Bo> bos;
	for (size_t i = 0; i < sizes.size(); i++)
		bos.push_back({sizes[i], &sums[i], "BO " + std::to_string(i)});
	VerifyingSource src(in, bos);
	std::vector<uint8_t> buf(piece);
	while (src.remaining() > 0) {
		const size_t n = static_cast<size_t>(std::min<uint64_t>(piece, src.remaining()));
		if (auto st = src.read(buf.data(), n); !st)
			return st;
	}
	return ok_status();
}

} // namespace

Test(content_checksum, chunks_are_bo_relative_and_piece_independent)
{
	const std::vector<uint64_t> sizes = {4096, 3 * 4096 + 100, 1, 10000};
	uint64_t total = 0;
	for (auto s : sizes)
		total += s;
	const auto data = testcommon::pattern_bytes(total, 7);
	const uint32_t chunk = 4096;
	const auto a = sums_of(data, sizes, data.size(), chunk);
	// Any cut of the stream gives the same checksums.
	for (size_t piece : {1ul, 7ul, 4095ul, 4096ul, 5000ul})
		cr_assert(sums_of(data, sizes, piece, chunk) == a, "piece %zu", piece);
	// Each is checksum64 of its chunk of its BO.
	cr_assert_eq(a.size(), sizes.size());
	cr_assert_eq(a[1].chunks.size(), 4u);
	cr_assert_eq(a[1].chunks[3], checksum64(data.data() + 4096 + 3 * 4096, 100));
	cr_assert_eq(a[2].chunks.size(), 1u);
	cr_assert_eq(a[0].whole, whole_checksum(a[0].chunks));
	for (size_t i = 0; i < sizes.size(); i++)
		cr_assert_ok(check_bo_checksum(a[i], sizes[i]));
}

Test(content_checksum, take_before_the_end_is_an_error)
{
	VecSink out;
	const std::vector<uint64_t> sizes = {8192};
	DeltaSink sink(out, test::complete_bos(sizes), 4096);
	const auto data = testcommon::pattern_bytes(4096, 1);
	cr_assert_ok(sink.write(data.data(), data.size()));
	cr_assert_not(sink.take().ok());
	// More than the BOs hold is refused too.
	cr_assert_ok(sink.write(data.data(), data.size()));
	cr_assert_not(sink.write(data.data(), 1).ok());
}

Test(content_checksum, a_damaged_list_is_refused)
{
	const std::vector<uint64_t> sizes = {3 * 4096};
	const auto data = testcommon::pattern_bytes(sizes[0], 2);
	auto sums = sums_of(data, sizes, 4096, 4096);
	cr_assert_ok(check_bo_checksum(sums[0], sizes[0]));
	cr_assert_not(check_bo_checksum(sums[0], sizes[0] + 4096).ok(), "chunk count not checked");
	auto bad = sums[0];
	bad.chunks[1] ^= 1;
	cr_assert_not(check_bo_checksum(bad, sizes[0]).ok(), "whole not checked");
	bad = sums[0];
	bad.chunk_bytes = 0;
	cr_assert_not(check_bo_checksum(bad, sizes[0]).ok());
}

Test(content_checksum, every_flipped_byte_is_located)
{
	const std::vector<uint64_t> sizes = {4096, 8192 + 512, 4096};
	const uint32_t chunk = 4096;
	uint64_t total = 0;
	for (auto s : sizes)
		total += s;
	const auto good = testcommon::pattern_bytes(total, 3);
	const auto sums = sums_of(good, sizes, 4096, chunk);
	cr_assert_ok(read_verified(good, sizes, sums, 3000));
	for (uint64_t i = 0; i < total; i += 97) {
		auto bad = good;
		bad[i] ^= 0x10;
		auto st = read_verified(bad, sizes, sums, 3000);
		cr_assert_not(st.ok(), "flip at %llu not detected", static_cast<unsigned long long>(i));
		cr_assert_eq(st.error().code(), EBADMSG);
		// The BO and the byte range in it.
		size_t bo = 0;
		uint64_t off = i;
		while (off >= sizes[bo])
			off -= sizes[bo++];
		const uint64_t first = off / chunk * chunk;
		const std::string where = strprintf("BO %zu: bytes 0x%llx..", bo, static_cast<unsigned long long>(first));
		cr_assert(test::mentions(st.error(), where), "%s not in: %s", where.c_str(), st.error().message().c_str());
		cr_assert(test::mentions(st.error(), "KFD_VERIFY=0"), "%s", st.error().message().c_str());
	}
}

Test(content_checksum, bos_without_checksums_and_skips_pass_unchecked)
{
	const std::vector<uint64_t> sizes = {8192, 8192};
	auto data = testcommon::pattern_bytes(16384, 4);
	const auto sums = sums_of(data, sizes, 4096, 4096);
	data[100] ^= 1; // in BO 0, which has no checksum below
	VecSource in(data);
	VerifyingSource src(in, {{8192, nullptr, "BO 0"}, {8192, &sums[1], "BO 1"}});
	std::vector<uint8_t> buf(8192);
	cr_assert_ok(src.read(buf.data(), 4096));
	cr_assert_ok(src.skip(4096 + 100)); // into BO 1: its first chunk is not checked
	cr_assert_ok(src.read(buf.data(), 8192 - 100));
	cr_assert_eq(src.verified_bytes(), 4096u);
}

Test(image_seal, sealed_payload_round_trips_and_is_checked)
{
	const std::string name = kfd_image_name(3);
	const KfdImage img = test::sample_kfd_image(64);
	auto payload = pack_kfd_image(img);
	cr_assert_ok(payload);
	Integrity integrity = Integrity::Unchecked;
	auto back = unpack_kfd_image(*payload, name, Verify::On, &integrity);
	cr_assert_ok(back);
	cr_assert(*back == img);
	cr_assert(integrity == Integrity::Verified);
	// The last 10 bytes are field 100 (fixed64) = checksum64 of the rest.
	const size_t n = payload->size();
	cr_assert_eq((*payload)[n - 10], 0xa1);
	cr_assert_eq((*payload)[n - 9], 0x06);
	uint64_t stored = 0;
	for (size_t i = 0; i < 8; i++)
		stored |= uint64_t{(*payload)[n - 8 + i]} << (8 * i);
	cr_assert_eq(stored, checksum64(payload->data(), n - 10));
}

Test(image_seal, unsealed_images_read_as_unsealed)
{
	const std::string name = kfd_image_name(3);
	auto payload = pack_kfd_image(test::sample_kfd_image(64));
	cr_assert_ok(payload);
	std::vector<uint8_t> bare(payload->begin(), payload->end() - 10);
	Integrity integrity = Integrity::Verified;
	cr_assert_ok(unpack_kfd_image(bare, name, Verify::On, &integrity));
	cr_assert(integrity == Integrity::Unsealed);
	cr_assert_ok(unpack_kfd_image(*payload, name, Verify::Off, &integrity));
	cr_assert(integrity == Integrity::Unchecked);
}

Test(image_seal, every_byte_flip_of_a_sealed_image_is_refused)
{
	// With BO checksums, as the plugin writes it: no single flipped byte
	// may decode as a (different) valid image.
	const std::string name = kfd_image_name(3);
	KfdImage img = test::sample_kfd_image(64);
	for (auto &bo : img.bos)
		if (bo.has_contents()) {
			BoChecksum c;
			c.chunk_bytes = kChecksumChunkBytes;
			for (uint64_t off = 0; off < bo.size; off += c.chunk_bytes)
				c.chunks.push_back(0x1234 + off + bo.addr);
			c.whole = whole_checksum(c.chunks);
			bo.checksum = c;
		}
	auto payload = pack_kfd_image(img);
	cr_assert_ok(payload);
	for (size_t i = 0; i < payload->size(); i++)
		for (uint8_t bit : {0x01, 0x80, 0xff}) {
			auto bad = *payload;
			bad[i] ^= bit;
			auto r = unpack_kfd_image(bad, name);
			cr_assert_not(r.ok(), "flip 0x%02x at byte %zu of %zu accepted", bit, i, payload->size());
			cr_assert(test::mentions(r.error(), name), "%s", r.error().message().c_str());
		}
	// Off: the flipped seal is not looked at.
	auto bad = *payload;
	bad.back() ^= 1;
	cr_assert_ok(unpack_kfd_image(bad, name, Verify::Off));
	auto r = unpack_kfd_image(bad, name);
	cr_assert(test::mentions(r.error(), "KFD_VERIFY=0"), "%s", r.error().message().c_str());
}

Test(image_seal, bo_checksums_survive_the_round_trip)
{
	KfdImage img = test::sample_kfd_image(64);
	BoChecksum c;
	c.chunks = {1, 2};
	c.whole = whole_checksum(c.chunks);
	img.bos[0].checksum = c; // 0x200000 bytes: two 1 MiB chunks
	auto payload = pack_kfd_image(img);
	cr_assert_ok(payload);
	auto back = unpack_kfd_image(*payload, "x");
	cr_assert_ok(back);
	cr_assert(*back == img);
	// A checksum list that does not fit its BO is refused at write and read.
	img.bos[0].checksum->chunks.push_back(3);
	img.bos[0].checksum->whole = whole_checksum(img.bos[0].checksum->chunks);
	cr_assert_not(validate_kfd_image(img, "x").ok());
}
