// SPDX-License-Identifier: GPL-2.0-only
// What binds a dump's images together (image/binding.h) and the facts of
// CRIU's own images they are checked against (image/criu_images.h).
#include <criterion/criterion.h>

#include <string>

#include "../common/assert_ok.h"
#include "image/binding.h"
#include "image/criu_images.h"
#include "image/image_names.h"
#include "image/kfd_image.h"
#include "image/render_image.h"
#include "image_test_util.h"

using namespace amdcr;
using amdcr::test::TempDir;

namespace {

bool says(const Error &e, const std::string &what)
{
	return e.message().find(what) != std::string::npos;
}

DumpBinding bound(uint8_t seed, uint32_t file_id)
{
	DumpBinding b;
	for (size_t i = 0; i < b.dump_id.size(); i++)
		b.dump_id[i] = static_cast<uint8_t>(seed + i);
	b.file_id = file_id;
	return b;
}

using Bytes = std::vector<uint8_t>;

void put32(Bytes &out, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

// A CRIU image: common magic, the file's magic, then size-prefixed entries
// of two varint fields (values < 128).
Bytes criu_image(uint32_t magic, const std::vector<std::pair<uint8_t, uint8_t>> &entries, bool common = true)
{
	Bytes out;
	if (common)
		put32(out, 0x54564319);
	put32(out, magic);
	for (auto [f1, f2] : entries) {
		// field 1 varint, field 2 varint, and a field 3 string to skip.
		const Bytes m{0x08, f1, 0x10, f2, 0x1a, 0x02, 'x', 'y'};
		put32(out, static_cast<uint32_t>(m.size()));
		out.insert(out.end(), m.begin(), m.end());
	}
	return out;
}

} // namespace

Test(binding, dump_ids_are_random_and_printable)
{
	auto a = new_dump_id(), b = new_dump_id();
	cr_assert_ok(a);
	cr_assert_ok(b);
	cr_assert(*a != *b);
	cr_assert_eq(dump_id_text(*a).size(), 32u);
}

Test(binding, images_round_trip_their_binding)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	KfdImage kfd = test::sample_kfd_image(16);
	kfd.binding = bound(1, 25);
	cr_assert_ok(write_kfd_image(*dir, 25, kfd));
	auto k = read_kfd_image(*dir, 25);
	cr_assert_ok(k);
	cr_assert(*k == kfd);
	RenderNodeImage r = test::sample_render_image();
	r.id = 27;
	r.binding = bound(1, 27);
	cr_assert_ok(write_render_image(*dir, 27, r));
	auto rr = read_render_image(*dir, 27);
	cr_assert_ok(rr);
	cr_assert(*rr == r);
	DmabufImage d{300, std::nullopt, bound(1, 30)};
	cr_assert_ok(write_dmabuf_image(*dir, 30, d));
	auto dd = read_dmabuf_image(*dir, 30);
	cr_assert_ok(dd);
	cr_assert(*dd == d);
}

// An image copied or renamed over another file's is refused, whatever its
// kind (a KFD image names its file only through the binding).
Test(binding, an_image_read_as_another_file_is_refused)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	KfdImage kfd = test::sample_kfd_image(16);
	kfd.binding = bound(1, 24);
	cr_assert_ok(write_kfd_image(*dir, 24, kfd));
	cr_assert_eq(::rename(tmp.file("amdgpu-kfd-24.img").c_str(), tmp.file("amdgpu-kfd-25.img").c_str()), 0);
	auto k = read_kfd_image(*dir, 25);
	cr_assert_not(k.ok());
	cr_assert(says(k.error(), "amdgpu-kfd-25.img: the image was dumped for CRIU file id 24, not for file 25"),
		  "%s", k.error().message().c_str());
	DmabufImage d{300, std::nullopt, bound(1, 30)};
	cr_assert_ok(write_dmabuf_image(*dir, 31, d));
	auto dd = read_dmabuf_image(*dir, 31);
	cr_assert_not(dd.ok());
	cr_assert(says(dd.error(), "dumped for CRIU file id 30, not for file 31"), "%s", dd.error().message().c_str());
}

Test(binding, one_dump_or_refused_naming_both_files)
{
	cr_assert_ok(check_one_dump({}));
	cr_assert_ok(check_one_dump({{"a", bound(1, 1)}, {"b", bound(1, 2)}, {"c", bound(1, 3)}}));
	cr_assert_ok(check_one_dump({{"a", std::nullopt}, {"b", std::nullopt}}), "upstream's: none bound");
	size_t at = 0;
	auto two = check_one_dump({{"a", bound(1, 1)}, {"b", bound(1, 2)}, {"c", bound(9, 3)}}, &at);
	cr_assert_not(two.ok());
	cr_assert_eq(at, 2u);
	cr_assert(says(two.error(), "a and c come from different dumps (identities 0102"), "%s",
		  two.error().message().c_str());
	auto mixed = check_one_dump({{"a", std::nullopt}, {"b", bound(1, 2)}}, &at);
	cr_assert_not(mixed.ok());
	cr_assert_eq(at, 1u);
	cr_assert(says(mixed.error(), "b carries this plugin's dump identity"), "%s", mixed.error().message().c_str());
	cr_assert(says(mixed.error(), "a none"), "%s", mixed.error().message().c_str());
}

Test(criu_images, ext_file_ids_and_task_pids)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	auto none = read_criu_facts(*dir);
	cr_assert_ok(none);
	cr_assert_not(none->has_value(), "no files.img: no facts");
	// file_entry: type 16 = EXT; 1 = REG.
	cr_assert(test::write_raw(tmp.file("files.img"), criu_image(0x56303138, {{16, 25}, {1, 3}, {16, 27}})));
	cr_assert(test::write_raw(tmp.file("pstree.img"), criu_image(0x50273030, {{42, 1}, {43, 42}}, false)));
	auto facts = read_criu_facts(*dir);
	cr_assert_ok(facts);
	cr_assert(facts->has_value());
	cr_assert((*facts)->ext_file_ids == std::set<uint32_t>({25, 27}));
	cr_assert((*facts)->pids == std::set<uint32_t>({42, 43}));
	// A cut entry is an error naming the file.
	Bytes cut = criu_image(0x56303138, {{16, 25}});
	cut.pop_back();
	cr_assert(test::write_raw(tmp.file("files.img"), cut));
	auto bad = read_criu_facts(*dir);
	cr_assert_not(bad.ok());
	cr_assert(says(bad.error(), "files.img: an entry of 8 bytes at byte 12 runs past the end"), "%s",
		  bad.error().message().c_str());
	cr_assert(test::write_raw(tmp.file("files.img"), criu_image(0x12345678, {})));
	auto wrong = read_criu_facts(*dir);
	cr_assert_not(wrong.ok());
	cr_assert(says(wrong.error(), "files.img: not a CRIU image of magic 0x56303138"), "%s",
		  wrong.error().message().c_str());
}
