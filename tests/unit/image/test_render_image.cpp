// SPDX-License-Identifier: GPL-2.0-only
// Render node and dma-buf images: round trip and rejection of corruption.
#include <criterion/criterion.h>

#include <functional>

#include "../common/assert_ok.h"
#include "criu-amdgpu.pb-c.h"
#include "image/image_names.h"
#include "image/render_image.h"
#include "image_test_util.h"

using namespace amdcr;
using amdcr::test::TempDir;

namespace {

constexpr int kRenderId = 17;

void write_mutated(const TempDir &tmp, const std::function<void(CriuRenderNode &)> &mutate)
{
	auto payload = pack_render_image(test::sample_render_image());
	cr_assert(payload.ok());
	CriuRenderNode *msg = criu_render_node__unpack(nullptr, payload->size(), payload->data());
	cr_assert(msg);
	mutate(*msg);
	msg->has_image_checksum = 0; // unsealed (as upstream's), so validation is what refuses it
	std::vector<uint8_t> out(criu_render_node__get_packed_size(msg));
	criu_render_node__pack(msg, out.data());
	criu_render_node__free_unpacked(msg, nullptr);
	cr_assert(test::write_raw(tmp.file(render_image_name(kRenderId)), test::framed(out)));
}

void expect_render_rejected(const TempDir &tmp, const std::string &what)
{
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	auto r = read_render_image(*dir, kRenderId);
	cr_assert_not(r.ok(), "corrupt image accepted (expected: %s)", what.c_str());
	const std::string &m = r.error().message();
	cr_assert(m.find(render_image_name(kRenderId)) != std::string::npos, "no file name in: %s",
		  m.c_str());
	cr_assert(m.find(what) != std::string::npos, "expected \"%s\" in: %s", what.c_str(),
		  m.c_str());
}

// Packs `img` and expects its unpacking (as file `name`) refused with
// `what` in the message.
void expect_unpack_refused(const RenderNodeImage &img, const std::string &name, const std::string &what)
{
	auto payload = pack_render_image(img);
	cr_assert_ok(payload);
	auto r = unpack_render_image(*payload, name);
	cr_assert_not(r.ok(), "accepted (expected: %s)", what.c_str());
	cr_assert(r.error().message().find(what) != std::string::npos, "expected \"%s\" in: %s", what.c_str(),
		  r.error().message().c_str());
}

} // namespace

Test(render_image, round_trip)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	const RenderNodeImage img = test::sample_render_image();
	auto st = write_render_image(*dir, kRenderId, img);
	cr_assert_ok(st);
	cr_assert_eq(test::file_mode(tmp.file(render_image_name(kRenderId))), 0600);
	auto back = read_render_image(*dir, kRenderId);
	cr_assert_ok(back);
	cr_assert(*back == img);
	cr_assert(back->bos[1].is_import);
	cr_assert_eq(back->bos[0].vms.size(), 2u);
}

Test(render_image, empty_bo_list)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	RenderNodeImage img = test::sample_render_image();
	img.bos.clear();
	cr_assert(write_render_image(*dir, kRenderId, img).ok());
	auto back = read_render_image(*dir, kRenderId);
	cr_assert(back.ok());
	cr_assert(*back == img);
}

Test(render_image, num_of_bos_mismatch)
{
	TempDir tmp;
	write_mutated(tmp, [](CriuRenderNode &m) { m.num_of_bos = 1; });
	expect_render_rejected(tmp, "num_of_bos");
}

Test(render_image, num_of_vms_mismatch)
{
	TempDir tmp;
	write_mutated(tmp, [](CriuRenderNode &m) { m.bo_entries[0]->num_of_vms = 3; });
	expect_render_rejected(tmp, "num_of_vms");
}

Test(render_image, empty_or_wrapping_vm_entry)
{
	TempDir tmp;
	write_mutated(tmp, [](CriuRenderNode &m) { m.bo_entries[0]->vm_entries[0]->size = 0; });
	expect_render_rejected(tmp, "VM entry 0");
	TempDir tmp2;
	write_mutated(tmp2, [](CriuRenderNode &m) { m.bo_entries[0]->vm_entries[1]->addr = ~0ull; });
	expect_render_rejected(tmp2, "VM entry 1");
}

Test(render_image, vm_flags_beyond_32_bits)
{
	// GEM_VA's flags (what GET_MAPPING_INFO reports) are 32 bits; the
	// protobuf field is 64.
	TempDir tmp;
	write_mutated(tmp, [](CriuRenderNode &m) { m.bo_entries[0]->vm_entries[1]->flags = 1ull << 32 | 0xe; });
	expect_render_rejected(tmp, "VM entry 1 has flags 0x10000000e");
}

Test(render_image, minor_out_of_range)
{
	TempDir tmp;
	write_mutated(tmp, [](CriuRenderNode &m) { m.drm_render_minor = 127; });
	expect_render_rejected(tmp, "render minor 127");
}

Test(render_image, zero_size_bo)
{
	TempDir tmp;
	write_mutated(tmp, [](CriuRenderNode &m) { m.bo_entries[2]->size = 0; });
	expect_render_rejected(tmp, "BO 2: size 0");
}

Test(render_image, bo_address_overflow)
{
	TempDir tmp;
	write_mutated(tmp, [](CriuRenderNode &m) { m.bo_entries[0]->addr = UINT64_MAX; });
	expect_render_rejected(tmp, "overflows");
}

Test(render_image, garbage_and_truncation)
{
	TempDir tmp;
	cr_assert(test::write_raw(tmp.file(render_image_name(kRenderId)),
				  test::framed(testcommon::pattern_bytes(300, 1))));
	expect_render_rejected(tmp, "not a valid criu_render_node");
	auto payload = pack_render_image(test::sample_render_image());
	cr_assert(payload.ok());
	auto bytes = test::framed(*payload);
	bytes.pop_back();
	cr_assert(test::write_raw(tmp.file(render_image_name(kRenderId)), bytes));
	expect_render_rejected(tmp, "truncated");
}

Test(dmabuf_image, round_trip)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	cr_assert(write_dmabuf_image(*dir, 3, DmabufImage{0xabcdef, std::nullopt}).ok());
	cr_assert_eq(test::file_mode(tmp.file(dmabuf_image_name(3))), 0600);
	auto back = read_dmabuf_image(*dir, 3);
	cr_assert(back.ok());
	cr_assert_eq(back->gem_handle, 0xabcdefu);
}

Test(dmabuf_image, rejects_garbage_naming_the_file)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	// Field 1 announced as length-delimited with a length past the end.
	cr_assert(test::write_raw(tmp.file(dmabuf_image_name(3)), test::framed({0x0a, 0x7f, 0x01})));
	auto r = read_dmabuf_image(*dir, 3);
	cr_assert_not(r.ok());
	cr_assert(r.error().message().find(dmabuf_image_name(3)) != std::string::npos);
}

// ---- seals and content checksums (as the KFD image's, test_content_checksum) ----

namespace {

// The sample with the checksums a dump gives every BO with contents.
RenderNodeImage checksummed_render_image()
{
	RenderNodeImage img = test::sample_render_image();
	for (auto &bo : img.bos)
		if (bo.has_contents()) {
			amdcr::BoChecksum c;
			for (uint64_t off = 0; off < bo.size; off += c.chunk_bytes)
				c.chunks.push_back(0x5678 + off + bo.handle);
			c.whole = whole_checksum(c.chunks);
			bo.checksum = c;
		}
	return img;
}

} // namespace

Test(render_seal, sealed_with_bo_checksums_round_trips_verified)
{
	const RenderNodeImage img = checksummed_render_image();
	auto payload = pack_render_image(img);
	cr_assert_ok(payload);
	Integrity integrity = Integrity::Unchecked;
	auto back = unpack_render_image(*payload, "r.img", Verify::On, &integrity);
	cr_assert_ok(back);
	cr_assert(*back == img);
	cr_assert(back->bos[0].checksum.has_value());
	cr_assert(integrity == Integrity::Verified);
	// Field 100 (fixed64, key a1 06) last, checksum64 of the rest.
	const size_t n = payload->size();
	cr_assert_eq((*payload)[n - 10], 0xa1);
	cr_assert_eq((*payload)[n - 9], 0x06);
	uint64_t stored = 0;
	for (size_t i = 0; i < 8; i++)
		stored |= uint64_t{(*payload)[n - 8 + i]} << (8 * i);
	cr_assert_eq(stored, checksum64(payload->data(), n - 10));
	// KFD_VERIFY=0: nothing checked, the BO checksums dropped.
	auto off = unpack_render_image(*payload, "r.img", Verify::Off, &integrity);
	cr_assert_ok(off);
	cr_assert(integrity == Integrity::Unchecked);
	cr_assert_not(off->bos[0].checksum.has_value());
}

Test(render_seal, upstream_image_reads_as_unsealed_but_checksums_without_seal_are_refused)
{
	auto bare = pack_render_image(test::sample_render_image());
	cr_assert_ok(bare);
	bare->resize(bare->size() - kSealBytes);
	Integrity integrity = Integrity::Verified;
	cr_assert_ok(unpack_render_image(*bare, "r.img", Verify::On, &integrity));
	cr_assert(integrity == Integrity::Unsealed);

	auto sums = pack_render_image(checksummed_render_image());
	cr_assert_ok(sums);
	sums->resize(sums->size() - kSealBytes);
	auto r = unpack_render_image(*sums, "r.img");
	cr_assert_not(r.ok());
	cr_assert_eq(r.error().code(), EBADMSG);
	cr_assert(test::mentions(r.error(), "r.img: BO 0 has content checksums but the image has no checksum"),
		  "%s", r.error().message().c_str());
	cr_assert(test::mentions(r.error(), "KFD_VERIFY=0"), "%s", r.error().message().c_str());
}

Test(render_seal, every_byte_flip_of_a_sealed_image_is_refused)
{
	const std::string name = render_image_name(kRenderId);
	auto payload = pack_render_image(checksummed_render_image());
	cr_assert_ok(payload);
	for (size_t i = 0; i < payload->size(); i++)
		for (uint8_t bit : {0x01, 0x80, 0xff}) {
			auto bad = *payload;
			bad[i] ^= bit;
			auto r = unpack_render_image(bad, name);
			cr_assert_not(r.ok(), "flip 0x%02x at byte %zu of %zu accepted", bit, i, payload->size());
			cr_assert(test::mentions(r.error(), name), "%s", r.error().message().c_str());
		}
}

Test(render_seal, checksums_must_fit_their_bo)
{
	RenderNodeImage img = checksummed_render_image();
	img.bos[0].checksum->chunks.push_back(1);
	img.bos[0].checksum->whole = whole_checksum(img.bos[0].checksum->chunks);
	auto st = validate_render_image(img, "r.img");
	cr_assert_not(st.ok());
	cr_assert(test::mentions(st.error(), "r.img: BO 0: 2 chunk checksums"), "%s", st.error().message().c_str());
	img = checksummed_render_image();
	img.bos[1].checksum = img.bos[0].checksum; // BO 1 has no contents
	st = validate_render_image(img, "r.img");
	cr_assert_not(st.ok());
	cr_assert(test::mentions(st.error(), "BO 1: content checksums on a BO without contents"), "%s",
		  st.error().message().c_str());
}

Test(dmabuf_seal, sealed_unsealed_and_every_flip)
{
	const std::string name = dmabuf_image_name(3);
	auto payload = pack_dmabuf_image(DmabufImage{0xabcdef, std::nullopt});
	cr_assert_ok(payload);
	Integrity integrity = Integrity::Unchecked;
	cr_assert_ok(unpack_dmabuf_image(*payload, name, Verify::On, &integrity));
	cr_assert(integrity == Integrity::Verified);
	std::vector<uint8_t> bare(payload->begin(), payload->end() - kSealBytes);
	cr_assert_ok(unpack_dmabuf_image(bare, name, Verify::On, &integrity));
	cr_assert(integrity == Integrity::Unsealed);
	// Every flip is refused, except that one in the seal's key may leave a
	// message whose own bytes are intact followed by an unknown field: it
	// reads as upstream's unsealed image, with the same contents. (Images
	// with BO checksums refuse that too: render_seal above, image_seal.)
	size_t as_unsealed = 0;
	for (size_t i = 0; i < payload->size(); i++)
		for (uint8_t bit : {0x01, 0x80, 0xff}) {
			auto bad = *payload;
			bad[i] ^= bit;
			auto r = unpack_dmabuf_image(bad, name, Verify::On, &integrity);
			if (r.ok()) {
				cr_assert(i >= payload->size() - kSealBytes && i < payload->size() - 8,
					  "flip 0x%02x at byte %zu of %zu accepted", bit, i, payload->size());
				cr_assert(integrity == Integrity::Unsealed && r->gem_handle == 0xabcdefu);
				as_unsealed++;
				continue;
			}
			cr_assert(test::mentions(r.error(), name), "%s", r.error().message().c_str());
		}
	cr_assert_leq(as_unsealed, 6u);
	auto bad = *payload;
	bad.back() ^= 1;
	auto r = unpack_dmabuf_image(bad, name);
	cr_assert_eq(r.error().code(), EBADMSG);
	cr_assert(test::mentions(r.error(), "KFD_VERIFY=0"), "%s", r.error().message().c_str());
	cr_assert_ok(unpack_dmabuf_image(bad, name, Verify::Off));
}

// Shared BOs (shared_bo_entry, field 140): kept exactly, checked on read.
namespace {

SharedBo sample_shared(uint64_t size)
{
	return SharedBo{3, 0x1a2b, size, 4096, kGemDomainVram, 0x40, 9, 129, 2};
}

} // namespace

Test(render_image, shared_bo_round_trip)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	RenderNodeImage img = test::sample_render_image();
	img.bos[0].shared = sample_shared(img.bos[0].size);
	cr_assert_ok(write_render_image(*dir, kRenderId, img));
	auto back = read_render_image(*dir, kRenderId);
	cr_assert_ok(back);
	cr_assert(*back == img);
	cr_assert(back->bos[0].shared && back->bos[0].shared->contents_minor == 129);
	cr_assert_not(back->bos[1].shared);
}

Test(render_image, shared_bo_rejected)
{
	RenderNodeImage img = test::sample_render_image();
	const std::string name = render_image_name(kRenderId);
	const std::pair<std::function<void(SharedBo &)>, std::string> cases[] = {
		{[](SharedBo &s) { s.id = 0; }, "shared BO id 0 outside"},
		{[](SharedBo &s) { s.id = kMaxSharedBoId + 1; }, "outside 1.."},
		{[](SharedBo &s) { s.gpu_id = 0; }, "gpu_id 0"},
		{[](SharedBo &s) { s.contents_minor = 7; }, "contents file's render minor 7"},
		{[](SharedBo &s) { s.size += 4096; }, "but its shared BO 3 has"},
	};
	for (const auto &[mutate, what] : cases) {
		img.bos[0].shared = sample_shared(img.bos[0].size);
		mutate(*img.bos[0].shared);
		expect_unpack_refused(img, name, what);
	}
}

Test(dmabuf_image, shared_bo_round_trip_and_rejection)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	const DmabufImage img{5, sample_shared(1 << 20)};
	cr_assert_ok(write_dmabuf_image(*dir, 3, img));
	auto back = read_dmabuf_image(*dir, 3);
	cr_assert_ok(back);
	cr_assert(*back == img);
	DmabufImage bad = img;
	bad.shared->size = 0;
	cr_assert_not(write_dmabuf_image(*dir, 4, bad).ok());
	auto payload = pack_dmabuf_image(bad);
	cr_assert_ok(payload);
	auto r = unpack_dmabuf_image(*payload, dmabuf_image_name(4));
	cr_assert_not(r.ok());
	cr_assert(r.error().message().find("size 0") != std::string::npos, "%s", r.error().message().c_str());
}

// shared_bo_entry.checksum (field 100): the contents' checksums travel with
// every holder's entry; read only with Verify::On, checked against the size.
namespace {

amdcr::BoChecksum checksum_of_zeros(uint64_t size)
{
	amdcr::BoChecksum c;
	const std::vector<uint8_t> chunk(c.chunk_bytes, 0);
	for (uint64_t off = 0; off < size; off += c.chunk_bytes)
		c.chunks.push_back(checksum64(chunk.data(), std::min<uint64_t>(c.chunk_bytes, size - off)));
	c.whole = whole_checksum(c.chunks);
	return c;
}

} // namespace

Test(dmabuf_image, shared_bo_checksum_round_trip_and_checks)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	DmabufImage img{0, sample_shared(3 << 20)};
	img.shared->checksum = checksum_of_zeros(3 << 20);
	cr_assert_eq(img.shared->checksum->chunks.size(), 3u);
	cr_assert_ok(write_dmabuf_image(*dir, 3, img));
	auto back = read_dmabuf_image(*dir, 3);
	cr_assert_ok(back);
	cr_assert(*back == img);
	// KFD_VERIFY=0 at restore: not read.
	auto off = read_dmabuf_image(*dir, 3, Verify::Off);
	cr_assert_ok(off);
	cr_assert_not(off->shared->checksum);

	// A list that does not fit the BO, or a BO without contents.
	const std::string name = dmabuf_image_name(4);
	const std::pair<std::function<void(SharedBo &)>, std::string> cases[] = {
		{[](SharedBo &b) {
			 b.checksum->chunks.pop_back();
			 b.checksum->whole = whole_checksum(b.checksum->chunks);
		 },
		 "shared BO 3"},
		{[](SharedBo &b) { b.preferred_domains = 0; }, "content checksums on a BO without contents"},
	};
	for (const auto &[mutate, what] : cases) {
		SharedBo bad = sample_shared(3 << 20);
		bad.checksum = checksum_of_zeros(3 << 20);
		mutate(bad);
		auto payload = pack_dmabuf_image(DmabufImage{0, bad});
		cr_assert_ok(payload);
		auto r = unpack_dmabuf_image(*payload, name);
		cr_assert_not(r.ok(), "accepted (expected: %s)", what.c_str());
		cr_assert(r.error().message().find(what) != std::string::npos, "expected \"%s\" in: %s",
			  what.c_str(), r.error().message().c_str());
	}
}

Test(render_image, shared_bo_checksum_round_trip)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	RenderNodeImage img = test::sample_render_image();
	img.bos[0].shared = sample_shared(img.bos[0].size);
	img.bos[0].shared->checksum = checksum_of_zeros(img.bos[0].size);
	cr_assert_ok(write_render_image(*dir, kRenderId, img));
	auto back = read_render_image(*dir, kRenderId);
	cr_assert_ok(back);
	cr_assert(*back == img);
	auto off = read_render_image(*dir, kRenderId, Verify::Off);
	cr_assert_ok(off);
	cr_assert_not(off->bos[0].shared->checksum);
}

// bo_metadata (field 180 of drm_bo_entry and shared_bo_entry): a BO's amdgpu
// metadata kept byte for byte (any size up to 256, odd ones too), absent
// when it has none; more than amdgpu keeps, or a BO's and its shared BO's
// that differ, are refused.
namespace {

GemMetadata sample_metadata(size_t bytes)
{
	GemMetadata m{0x8000000000000123ull, 0x3a0000004c05ull, std::vector<uint8_t>(bytes)};
	for (size_t i = 0; i < bytes; i++)
		m.data[i] = static_cast<uint8_t>(0xa5 ^ (i * 29));
	return m;
}

} // namespace

Test(render_image, metadata_round_trip)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	RenderNodeImage img = test::sample_render_image();
	const auto plain = pack_render_image(img);
	cr_assert_ok(plain);
	img.bos[0].metadata = sample_metadata(37);
	img.bos[0].shared = sample_shared(img.bos[0].size);
	img.bos[0].shared->metadata = img.bos[0].metadata;
	img.bos[1].metadata = GemMetadata{0, 0, sample_metadata(kMaxGemMetadataBytes).data};
	cr_assert_ok(write_render_image(*dir, kRenderId, img));
	auto back = read_render_image(*dir, kRenderId, Verify::Off);
	cr_assert_ok(back);
	cr_assert(*back == img);
	cr_assert_eq(back->bos[0].metadata->data.size(), 37u);
	cr_assert_eq(back->bos[0].metadata->data[36], static_cast<uint8_t>(0xa5 ^ (36 * 29)));
	cr_assert_eq(back->bos[1].metadata->data.size(), kMaxGemMetadataBytes);

	// Flags alone (no data) are metadata too; none at all: no field.
	img.bos[1].metadata = GemMetadata{0x10, 0, {}};
	auto flags_only = unpack_render_image(*pack_render_image(img), render_image_name(kRenderId));
	cr_assert_ok(flags_only);
	cr_assert(flags_only->bos[1].metadata && flags_only->bos[1].metadata->flags == 0x10);
	img.bos[1].metadata.reset();
	auto none = unpack_render_image(*pack_render_image(img), render_image_name(kRenderId));
	cr_assert_ok(none);
	cr_assert_not(none->bos[1].metadata);
	cr_assert_not(none->bos[2].metadata);
	CriuRenderNode *msg = criu_render_node__unpack(nullptr, plain->size(), plain->data());
	cr_assert(msg);
	for (size_t i = 0; i < msg->n_bo_entries; i++)
		cr_assert_null(msg->bo_entries[i]->metadata, "BO %zu of an image without metadata has some", i);
	criu_render_node__free_unpacked(msg, nullptr);
}

Test(render_image, metadata_rejected)
{
	const std::string name = render_image_name(kRenderId);
	const std::pair<std::function<void(DrmBo &)>, std::string> cases[] = {
		{[](DrmBo &b) { b.metadata = sample_metadata(kMaxGemMetadataBytes + 1); },
		 "BO 0: 257 bytes of metadata, more than the 256 amdgpu keeps"},
		{[](DrmBo &b) {
			 b.shared = sample_shared(b.size);
			 b.metadata = sample_metadata(37);
		 },
		 "BO 0: its metadata and its shared BO 3's differ"},
		{[](DrmBo &b) {
			 b.shared = sample_shared(b.size);
			 b.metadata = sample_metadata(37);
			 b.shared->metadata = sample_metadata(36);
		 },
		 "its metadata and its shared BO 3's differ"},
		{[](DrmBo &b) {
			 b.shared = sample_shared(b.size);
			 b.shared->metadata = b.metadata = sample_metadata(300);
		 },
		 "shared BO 3: 300 bytes of metadata"},
	};
	for (const auto &[mutate, what] : cases) {
		RenderNodeImage img = test::sample_render_image();
		mutate(img.bos[0]);
		expect_unpack_refused(img, name, what);
	}
}

Test(dmabuf_image, metadata_round_trip_and_rejection)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	DmabufImage img{5, sample_shared(1 << 20)};
	img.shared->metadata = sample_metadata(37);
	cr_assert_ok(write_dmabuf_image(*dir, 3, img));
	auto back = read_dmabuf_image(*dir, 3);
	cr_assert_ok(back);
	cr_assert(*back == img);
	img.shared->metadata = sample_metadata(kMaxGemMetadataBytes + 1);
	auto payload = pack_dmabuf_image(img);
	cr_assert_ok(payload);
	auto r = unpack_dmabuf_image(*payload, dmabuf_image_name(4));
	cr_assert_not(r.ok());
	cr_assert(r.error().message().find("257 bytes of metadata") != std::string::npos, "%s",
		  r.error().message().c_str());
}
