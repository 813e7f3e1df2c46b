// SPDX-License-Identifier: GPL-2.0-only
// The KFD image: round trip, and every kind of corruption is an Error
// naming the file, never a crash.
#include <criterion/criterion.h>

#include <functional>

#include "../common/assert_ok.h"
#include "criu-amdgpu.pb-c.h"
#include "image/image_names.h"
#include "image/kfd_image.h"
#include "image_test_util.h"

using namespace amdcr;
using amdcr::test::TempDir;

namespace {

constexpr int kId = 7;

// Writes amdgpu-kfd-<kId>.img from the sample image after `mutate` edits its
// protobuf form: how a foreign or corrupt writer would have produced it.
void write_mutated(const TempDir &tmp, const std::function<void(CriuKfd &)> &mutate,
		   KfdImage img = test::sample_kfd_image())
{
	auto payload = pack_kfd_image(img);
	cr_assert(payload.ok());
	CriuKfd *msg = criu_kfd__unpack(nullptr, payload->size(), payload->data());
	cr_assert(msg);
	// A foreign writer: no seal (field 100, image/framing.h), which would
	// no longer match the mutated message.
	msg->has_image_checksum = 0;
	mutate(*msg);
	std::vector<uint8_t> out(criu_kfd__get_packed_size(msg));
	criu_kfd__pack(msg, out.data());
	criu_kfd__free_unpacked(msg, nullptr);
	cr_assert(test::write_raw(tmp.file(kfd_image_name(kId)), test::framed(out)));
}

// Reading must fail with a message naming the file and containing `what`.
void expect_rejected(const TempDir &tmp, const std::string &what)
{
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	auto r = read_kfd_image(*dir, kId);
	cr_assert_not(r.ok(), "corrupt image accepted (expected: %s)", what.c_str());
	cr_assert(test::mentions(r.error(), kfd_image_name(kId)), "no file name in: %s",
		  r.error().message().c_str());
	cr_assert(test::mentions(r.error(), what), "expected \"%s\" in: %s", what.c_str(),
		  r.error().message().c_str());
}

} // namespace

Test(kfd_image, round_trip)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	const KfdImage img = test::sample_kfd_image();
	auto st = write_kfd_image(*dir, kId, img);
	cr_assert_ok(st);
	cr_assert_eq(test::file_mode(tmp.file(kfd_image_name(kId))), 0600);
	auto back = read_kfd_image(*dir, kId);
	cr_assert_ok(back);
	cr_assert(*back == img);
	cr_assert_eq(back->gpu_count(), 2u);
	cr_assert_eq(back->cpu_count(), 1u);
	cr_assert_eq(back->devices[2].iolinks.size(), 2u);
	cr_assert_eq(back->devices[2].iolinks[1].type, 11u);
}

Test(kfd_image, round_trip_large_priv_data)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	const KfdImage img = test::sample_kfd_image(5u << 20);
	cr_assert(write_kfd_image(*dir, kId, img).ok());
	auto back = read_kfd_image(*dir, kId);
	cr_assert(back.ok());
	cr_assert_eq(back->priv_data.size(), 5u << 20);
	cr_assert(back->priv_data == img.priv_data);
}

Test(kfd_image, file_is_header_plus_packed_message)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	const KfdImage img = test::sample_kfd_image();
	cr_assert(write_kfd_image(*dir, kId, img).ok());
	auto payload = pack_kfd_image(img);
	cr_assert(payload.ok());
	auto bytes = test::read_raw(tmp.file(kfd_image_name(kId)));
	cr_assert(bytes == test::framed(*payload));
	// The header is the payload size, little-endian.
	const uint64_t n = payload->size();
	for (size_t i = 0; i < 8; i++)
		cr_assert_eq(bytes[i], static_cast<uint8_t>(n >> (8 * i)));
}

Test(kfd_image, missing_file)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	auto r = read_kfd_image(*dir, kId);
	cr_assert_not(r.ok());
	cr_assert_eq(r.error().code(), ENOENT);
	cr_assert(test::mentions(r.error(), kfd_image_name(kId)));
}

Test(kfd_image, truncated_file)
{
	TempDir tmp;
	auto payload = pack_kfd_image(test::sample_kfd_image());
	cr_assert(payload.ok());
	auto bytes = test::framed(*payload);
	cr_assert_gt(bytes.size(), 10u);
	bytes.erase(bytes.end() - 10, bytes.end());
	cr_assert(test::write_raw(tmp.file(kfd_image_name(kId)), bytes));
	expect_rejected(tmp, "truncated");
}

Test(kfd_image, shorter_than_header)
{
	TempDir tmp;
	cr_assert(test::write_raw(tmp.file(kfd_image_name(kId)), {1, 0, 0}));
	expect_rejected(tmp, "truncated");
}

Test(kfd_image, empty_file)
{
	TempDir tmp;
	cr_assert(test::write_raw(tmp.file(kfd_image_name(kId)), {}));
	expect_rejected(tmp, "truncated");
}

Test(kfd_image, trailing_garbage)
{
	TempDir tmp;
	auto payload = pack_kfd_image(test::sample_kfd_image());
	cr_assert(payload.ok());
	auto bytes = test::framed(*payload);
	bytes.push_back(0);
	cr_assert(test::write_raw(tmp.file(kfd_image_name(kId)), bytes));
	expect_rejected(tmp, "trailing");
}

Test(kfd_image, garbage_bytes)
{
	TempDir tmp;
	// A correctly framed payload that is no criu_kfd message.
	cr_assert(test::write_raw(tmp.file(kfd_image_name(kId)),
				  test::framed(testcommon::pattern_bytes(1000, 5))));
	expect_rejected(tmp, "not a valid criu_kfd");
}

Test(kfd_image, huge_header_value)
{
	TempDir tmp;
	std::vector<uint8_t> bytes = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 1, 2, 3};
	cr_assert(test::write_raw(tmp.file(kfd_image_name(kId)), bytes));
	expect_rejected(tmp, "truncated");
}

Test(kfd_image, above_size_limit)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	cr_assert(write_kfd_image(*dir, kId, test::sample_kfd_image(8192)).ok());
	dir->set_max_metadata_size(4096);
	auto r = read_kfd_image(*dir, kId);
	cr_assert_not(r.ok());
	cr_assert(test::mentions(r.error(), kfd_image_name(kId)));
	cr_assert(test::mentions(r.error(), "limit"), "%s", r.error().message().c_str());
}

Test(kfd_image, missing_required_field)
{
	TempDir tmp;
	// Only field 1 (pid = 3): every other required field is absent.
	cr_assert(test::write_raw(tmp.file(kfd_image_name(kId)), test::framed({0x08, 0x03})));
	expect_rejected(tmp, "not a valid criu_kfd");
}

Test(kfd_image, num_of_bos_mismatch)
{
	TempDir tmp;
	write_mutated(tmp, [](CriuKfd &m) { m.num_of_bos = m.n_bo_entries + 1; });
	expect_rejected(tmp, "num_of_bos");
}

Test(kfd_image, num_of_gpus_mismatch)
{
	TempDir tmp;
	write_mutated(tmp, [](CriuKfd &m) {
		m.num_of_gpus = 1;
		m.num_of_cpus = 2;
	});
	expect_rejected(tmp, "num_of_gpus");
}

Test(kfd_image, device_count_mismatch)
{
	TempDir tmp;
	write_mutated(tmp, [](CriuKfd &m) { m.num_of_cpus = 5; });
	expect_rejected(tmp, "device entries");
}

Test(kfd_image, zero_size_bo)
{
	TempDir tmp;
	write_mutated(tmp, [](CriuKfd &m) { m.bo_entries[3]->size = 0; });
	expect_rejected(tmp, "BO 3: size 0");
}

Test(kfd_image, bo_address_overflow)
{
	TempDir tmp;
	write_mutated(tmp, [](CriuKfd &m) { m.bo_entries[1]->addr = UINT64_MAX - 0x10; });
	expect_rejected(tmp, "overflows");
}

Test(kfd_image, unknown_gpu_id_in_bo_table)
{
	TempDir tmp;
	write_mutated(tmp, [](CriuKfd &m) { m.bo_entries[4]->gpu_id = 0x3333; });
	expect_rejected(tmp, "0x3333");
}

Test(kfd_image, bo_on_cpu_node)
{
	TempDir tmp;
	write_mutated(tmp, [](CriuKfd &m) { m.bo_entries[0]->gpu_id = 0; });
	expect_rejected(tmp, "not in the device list");
}

Test(kfd_image, duplicate_gpu_id)
{
	TempDir tmp;
	write_mutated(tmp, [](CriuKfd &m) { m.device_entries[2]->gpu_id = 0x1111; });
	expect_rejected(tmp, "duplicate gpu 0x");
}

Test(kfd_image, duplicate_node_id)
{
	TempDir tmp;
	write_mutated(tmp, [](CriuKfd &m) { m.device_entries[2]->node_id = 1; });
	expect_rejected(tmp, "duplicate node_id");
}

Test(kfd_image, render_minor_out_of_range)
{
	TempDir tmp;
	write_mutated(tmp, [](CriuKfd &m) { m.device_entries[1]->drm_render_minor = 0; });
	expect_rejected(tmp, "render minor 0");
	write_mutated(tmp, [](CriuKfd &m) { m.device_entries[2]->drm_render_minor = 256; });
	expect_rejected(tmp, "render minor 256");
}

Test(kfd_image, empty_priv_data)
{
	TempDir tmp;
	write_mutated(tmp, [](CriuKfd &m) { m.priv_data.len = 0; });
	expect_rejected(tmp, "private data");
}

Test(kfd_image, pages_size_overflow)
{
	TempDir tmp;
	write_mutated(tmp, [](CriuKfd &m) {
		m.bo_entries[0]->addr = 0;
		m.bo_entries[0]->size = UINT64_MAX - 0x1000;
		m.bo_entries[1]->addr = 0;
		m.bo_entries[1]->size = 0x2000;
	});
	expect_rejected(tmp, "overflow");
}

Test(kfd_image, write_refuses_what_read_would_refuse)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	KfdImage img = test::sample_kfd_image();
	img.bos[0].size = 0;
	auto st = write_kfd_image(*dir, kId, img);
	cr_assert_not(st.ok());
	cr_assert(test::mentions(st.error(), kfd_image_name(kId)));
	cr_assert(tmp.names().empty(), "a refused image left a file behind");
}

Test(kfd_image, pages_size_counts_only_vram_and_gtt_of_that_gpu)
{
	const KfdImage img = test::sample_kfd_image();
	auto a = img.pages_size(0x1111);
	auto b = img.pages_size(0x2222);
	auto none = img.pages_size(0x9999);
	cr_assert(a.ok() && b.ok() && none.ok());
	cr_assert_eq(*a, 0x200000u + 0x1000u);
	cr_assert_eq(*b, 0x3000u);
	cr_assert_eq(*none, 0u);
	cr_assert_not_null(img.find_gpu(0x2222));
	cr_assert_null(img.find_gpu(0));
	cr_assert_null(img.find_gpu(0x9999));
}

Test(kfd_image, every_truncation_and_byte_flip_is_handled)
{
	// Each damaged payload is either still a valid image or an Error naming
	// the file; none may crash (ASan builds check the "no overrun" part).
	const std::string name = kfd_image_name(kId);
	auto payload = pack_kfd_image(test::sample_kfd_image(64));
	cr_assert(payload.ok());
	const std::vector<uint8_t> good = *payload;
	size_t rejected = 0;
	for (size_t len = 0; len < good.size(); len++) {
		std::span<const uint8_t> cut(good.data(), len);
		auto r = unpack_kfd_image(cut, name);
		if (!r.ok()) {
			rejected++;
			cr_assert(test::mentions(r.error(), name), "%s", r.error().message().c_str());
		}
	}
	cr_assert_gt(rejected, good.size() / 2, "truncations mostly accepted: %zu of %zu", rejected,
		     good.size());
	for (size_t i = 0; i < good.size(); i++) {
		std::vector<uint8_t> bad = good;
		bad[i] ^= 0xff;
		auto r = unpack_kfd_image(bad, name);
		if (!r.ok())
			cr_assert(test::mentions(r.error(), name), "%s", r.error().message().c_str());
	}
}
