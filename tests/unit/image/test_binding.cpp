// SPDX-License-Identifier: GPL-2.0-only
// What binds a dump's images together (image/binding.h) and the facts of
// CRIU's own images they are checked against (image/criu_images.h).
#include <criterion/criterion.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <string>

#include "../common/assert_ok.h"
#include "image/binding.h"
#include "image/criu_images.h"
#include "image/image_names.h"
#include "image/kfd_image.h"
#include "image/image_set.h"
#include "image/pages_file.h"
#include "image/render_image.h"
#include "image_test_util.h"

using namespace amdcr;
using amdcr::test::TempDir;

namespace {

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
	cr_assert(test::mentions(k.error(), "amdgpu-kfd-25.img: the image was dumped for CRIU file id 24, not for file 25"),
		  "%s", k.error().message().c_str());
	DmabufImage d{300, std::nullopt, bound(1, 30)};
	cr_assert_ok(write_dmabuf_image(*dir, 31, d));
	auto dd = read_dmabuf_image(*dir, 31);
	cr_assert_not(dd.ok());
	cr_assert(test::mentions(dd.error(), "dumped for CRIU file id 30, not for file 31"), "%s", dd.error().message().c_str());
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
	cr_assert(test::mentions(two.error(), "a and c come from different dumps (identities 0102"), "%s",
		  two.error().message().c_str());
	auto mixed = check_one_dump({{"a", std::nullopt}, {"b", bound(1, 2)}}, &at);
	cr_assert_not(mixed.ok());
	cr_assert_eq(at, 1u);
	cr_assert(test::mentions(mixed.error(), "b carries this plugin's dump identity"), "%s", mixed.error().message().c_str());
	cr_assert(test::mentions(mixed.error(), "a none"), "%s", mixed.error().message().c_str());
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
	cr_assert((*facts)->ext_file_ids == CriuIdSet({27, 25, 27}));
	cr_assert((*facts)->pids == CriuIdSet({43, 42}));
	// A cut entry is an error naming the file.
	Bytes cut = criu_image(0x56303138, {{16, 25}});
	cut.pop_back();
	cr_assert(test::write_raw(tmp.file("files.img"), cut));
	auto bad = read_criu_facts(*dir);
	cr_assert_not(bad.ok());
	cr_assert(test::mentions(bad.error(), "files.img: an entry of 8 bytes at byte 12 runs past the end"), "%s",
		  bad.error().message().c_str());
	cr_assert(test::write_raw(tmp.file("files.img"), criu_image(0x12345678, {})));
	auto wrong = read_criu_facts(*dir);
	cr_assert_not(wrong.ok());
	cr_assert(test::mentions(wrong.error(), "files.img: not a CRIU image of magic 0x56303138"), "%s",
		  wrong.error().message().c_str());
}

// CRIU's files are read without blocking and never through a link: a FIFO,
// a device or a symlink planted under CRIU's name is refused, naming it.
Test(criu_images, a_fifo_or_a_symlink_is_refused_without_hanging)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	cr_assert(test::write_raw(tmp.file("pstree.img"), criu_image(0x50273030, {{42, 1}})));
	cr_assert_eq(::mkfifo(tmp.file("files.img").c_str(), 0600), 0);
	auto fifo = read_criu_facts(*dir);
	cr_assert_not(fifo.ok());
	cr_assert(test::mentions(fifo.error(), "files.img: a FIFO, not a regular file"), "%s", fifo.error().message().c_str());
	cr_assert_eq(::unlink(tmp.file("files.img").c_str()), 0);
	// A device under the name is refused by its type, never opened.
	cr_assert_eq(::mknod(tmp.file("files.img").c_str(), S_IFCHR | 0600, makedev(1, 3)), 0);
	auto device = read_criu_facts(*dir);
	cr_assert_not(device.ok());
	cr_assert(test::mentions(device.error(), "files.img: a character device, not a regular file"), "%s",
		  device.error().message().c_str());
	cr_assert_eq(::unlink(tmp.file("files.img").c_str()), 0);
	cr_assert(test::write_raw(tmp.file("elsewhere"), criu_image(0x56303138, {{16, 25}})));
	cr_assert_eq(::symlink("elsewhere", tmp.file("files.img").c_str()), 0);
	auto link = read_criu_facts(*dir);
	cr_assert_not(link.ok());
	cr_assert(test::mentions(link.error(), "files.img: a symbolic link"), "%s", link.error().message().c_str());
}

// Reading is bounded: an entry past kMaxCriuEntryBytes and ids past
// kMaxCriuIds are refused with the limit, after reading the file once
// (memory: the ids kept, 4 bytes each).
Test(criu_images, entries_and_ids_past_the_limits_are_refused, .timeout = 60)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	cr_assert(test::write_raw(tmp.file("pstree.img"), criu_image(0x50273030, {{42, 1}})));
	Bytes huge;
	put32(huge, 0x56303138);
	put32(huge, kMaxCriuEntryBytes + 1);
	cr_assert(test::write_raw(tmp.file("files.img"), huge));
	auto big = read_criu_facts(*dir);
	cr_assert_not(big.ok());
	cr_assert(test::mentions(big.error(), "files.img: an entry of 33554433 bytes at byte 8, more than the 33554432"), "%s",
		  big.error().message().c_str());
	// kMaxCriuIds + 1 EXT entries: type 16, ids counting up (4-byte varints).
	Bytes many;
	many.reserve(4 + (kMaxCriuIds + 1) * 11);
	put32(many, 0x56303138);
	for (uint32_t i = 0; i <= kMaxCriuIds; i++) {
		put32(many, 7);
		const Bytes m{0x08,
			      16,
			      0x10,
			      static_cast<uint8_t>(0x80 | (i & 0x7f)),
			      static_cast<uint8_t>(0x80 | ((i >> 7) & 0x7f)),
			      static_cast<uint8_t>(0x80 | ((i >> 14) & 0x7f)),
			      static_cast<uint8_t>(i >> 21)};
		many.insert(many.end(), m.begin(), m.end());
	}
	cr_assert(test::write_raw(tmp.file("files.img"), many));
	auto lots = read_criu_facts(*dir);
	cr_assert_not(lots.ok());
	cr_assert(test::mentions(lots.error(), "files.img: more than 4194304 EXT files"), "%s", lots.error().message().c_str());
	many.resize(many.size() - 11);
	cr_assert(test::write_raw(tmp.file("files.img"), many));
	auto most = read_criu_facts(*dir);
	cr_assert_ok(most);
	cr_assert_eq((*most)->ext_file_ids.size(), kMaxCriuIds);
	cr_assert((*most)->ext_file_ids.contains(kMaxCriuIds - 1));
	cr_assert_not((*most)->ext_file_ids.contains(kMaxCriuIds));
}

// The dump manifest binds a dump's GPU images to CRIU's images of the
// same dump: CRIU's per-dump files (not its memory pages, not ours) are
// listed; another dump's manifest, a CRIU image changed, missing or added,
// and a missing manifest are refused naming the file.
Test(dump_manifest, binds_the_images_to_crius_images_of_their_dump)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	const Bytes clocks{1, 2, 3, 4};
	cr_assert(test::write_raw(tmp.file("timens-0.img"), clocks));
	cr_assert(test::write_raw(tmp.file("core-42.img"), Bytes{5, 6}));
	cr_assert(test::write_raw(tmp.file("inventory.img"), Bytes{7}));
	cr_assert(test::write_raw(tmp.file("pages-1.img"), Bytes(8192, 9)));
	cr_assert(test::write_raw(tmp.file("amdgpu-kfd-5.img"), Bytes{1}));
	auto criu = digest_criu_images(*dir);
	cr_assert_ok(criu);
	cr_assert_eq(criu->size(), 3u);
	cr_assert_eq((*criu)[0].name, "core-42.img");
	cr_assert_eq((*criu)[1].name, "inventory.img");
	cr_assert_eq((*criu)[2].name, "timens-0.img");
	cr_assert_eq((*criu)[2].size, 4u);
	const DumpId id = bound(1, 5).dump_id, other = bound(2, 5).dump_id;
	cr_assert_ok(check_bound_to_criu(*dir, std::nullopt, "x"), "upstream's, no manifest");
	auto none = check_bound_to_criu(*dir, id, "amdgpu-kfd-5.img");
	cr_assert_not(none.ok());
	cr_assert(test::mentions(none.error(), "amdgpu-binding.img is missing: the GPU images (amdgpu-kfd-5.img) of dump 0102"),
		  "%s", none.error().message().c_str());
	// KFD_REQUIRE_MANIFEST=0: no error, a warning saying what goes unchecked.
	std::string warning;
	cr_assert_ok(check_bound_to_criu(*dir, id, "amdgpu-kfd-5.img", false, &warning));
	cr_assert(warning.find("amdgpu-binding.img is missing and KFD_REQUIRE_MANIFEST=0: the GPU images "
			       "(amdgpu-kfd-5.img) of dump 0102") == 0,
		  "%s", warning.c_str());
	const DumpManifest m{id, *criu, {"amdgpu-kfd-5.img", "amdgpu-pages-5-1111.img"}};
	cr_assert_ok(write_dump_manifest(*dir, m));
	auto back = read_dump_manifest(*dir);
	cr_assert_ok(back);
	cr_assert(*back == m);
	auto deleted = check_bound_to_criu(*dir, id, "amdgpu-kfd-5.img");
	cr_assert_not(deleted.ok());
	cr_assert(test::mentions(deleted.error(), "amdgpu-pages-5-1111.img is missing: dump 0102"), "%s",
		  deleted.error().message().c_str());
	cr_assert(test::write_raw(tmp.file("amdgpu-pages-5-1111.img"), Bytes(8, 0)));
	cr_assert_ok(check_bound_to_criu(*dir, id, "amdgpu-kfd-5.img"));
	auto mine = check_bound_to_criu(*dir, other, "amdgpu-kfd-5.img");
	cr_assert_not(mine.ok());
	cr_assert_not(check_bound_to_criu(*dir, other, "amdgpu-kfd-5.img", false).ok(),
		      "a manifest that is there is checked with KFD_REQUIRE_MANIFEST=0 too");
	cr_assert(test::mentions(mine.error(), "but amdgpu-binding.img is that of dump 0102"), "%s", mine.error().message().c_str());
	auto mixed = check_bound_to_criu(*dir, std::nullopt, "amdgpu-kfd-5.img");
	cr_assert_not(mixed.ok());
	cr_assert(test::mentions(mixed.error(), "GPU images without a dump identity (amdgpu-kfd-5.img)"), "%s",
		  mixed.error().message().c_str());
	// Another dump's clocks: the same size, other bytes.
	cr_assert(test::write_raw(tmp.file("timens-0.img"), Bytes{1, 2, 3, 5}));
	auto later = check_bound_to_criu(*dir, id, "amdgpu-kfd-5.img");
	cr_assert_not(later.ok());
	cr_assert(test::mentions(later.error(), "CRIU's timens-0.img is not the one of that dump (4 bytes, checksum"), "%s",
		  later.error().message().c_str());
	cr_assert(test::write_raw(tmp.file("timens-0.img"), clocks));
	cr_assert_ok(check_bound_to_criu(*dir, id, "amdgpu-kfd-5.img"));
	cr_assert(test::write_raw(tmp.file("core-43.img"), Bytes{5, 6}));
	auto added = check_bound_to_criu(*dir, id, "amdgpu-kfd-5.img");
	cr_assert_not(added.ok());
	cr_assert(test::mentions(added.error(), "CRIU's core-43.img was not part of that dump"), "%s",
		  added.error().message().c_str());
	cr_assert_eq(::unlink(tmp.file("core-43.img").c_str()), 0);
	cr_assert_eq(::unlink(tmp.file("core-42.img").c_str()), 0);
	auto gone = check_bound_to_criu(*dir, id, "amdgpu-kfd-5.img");
	cr_assert_not(gone.ok());
	cr_assert(test::mentions(gone.error(), "CRIU's core-42.img is missing"), "%s", gone.error().message().c_str());
}

namespace {

void put_varint(Bytes &out, uint64_t v)
{
	for (; v >= 0x80; v >>= 7)
		out.push_back(static_cast<uint8_t>(v | 0x80));
	out.push_back(static_cast<uint8_t>(v));
}

void put_field(Bytes &out, uint32_t number, uint64_t v)
{
	put_varint(out, uint64_t{number} << 3);
	put_varint(out, v);
}

void put_bytes(Bytes &out, uint32_t number, const Bytes &m)
{
	put_varint(out, (uint64_t{number} << 3) | 2);
	put_varint(out, m.size());
	out.insert(out.end(), m.begin(), m.end());
}

Bytes framed(uint32_t magic, const std::vector<Bytes> &entries)
{
	Bytes out;
	put32(out, 0x54564319);
	put32(out, magic);
	for (const Bytes &m : entries) {
		put32(out, static_cast<uint32_t>(m.size()));
		out.insert(out.end(), m.begin(), m.end());
	}
	return out;
}

// A file_entry of type REG (1) with its reg_file_entry (id, name).
Bytes reg_file(uint32_t id, const std::string &name)
{
	Bytes reg, e;
	put_field(reg, 1, id);
	put_bytes(reg, 6, Bytes(name.begin(), name.end()));
	put_field(e, 1, 1);
	put_field(e, 2, id);
	put_bytes(e, 3, reg);
	return e;
}

Bytes vma(uint64_t start, uint64_t pgoff, uint32_t shmid, uint32_t status)
{
	Bytes v;
	put_field(v, 1, start);
	put_field(v, 2, start + 0x1000);
	put_field(v, 3, pgoff);
	put_field(v, 4, shmid);
	put_field(v, 7, status);
	return v;
}

} // namespace

// The render node mappings of CRIU's mm images (the device mappings a
// plugin claimed, VMA_EXT_PLUGIN, whose file is a render node) and whether
// the GPU images give each back.
Test(criu_images, render_mappings_are_given_back_by_an_image_or_refused)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	constexpr uint32_t kPlugin = 1u << 27;
	cr_assert(test::write_raw(tmp.file("files.img"),
				  framed(0x56303138, {reg_file(3, "/dev/dri/renderD129"), reg_file(4, "/usr/lib/libc.so")})));
	Bytes mm;
	put_field(mm, 1, 0x400000);
	put_bytes(mm, 14, vma(0x7f0000000000, 0x10000, 3, kPlugin | 0x80));
	put_bytes(mm, 14, vma(0x7f0000100000, 0x20000, 3, 0x80)); // not claimed by a plugin
	put_bytes(mm, 14, vma(0x7f0000200000, 0x30000, 4, kPlugin)); // not a render node
	cr_assert(test::write_raw(tmp.file("mm-42.img"), framed(0x57492820, {mm})));
	auto maps = read_render_mappings(*dir, CriuIdSet({42, 43}));
	cr_assert_ok(maps);
	cr_assert_eq(maps->size(), 1u);
	const CriuRenderMapping &m = maps->front();
	cr_assert(m.pid == 42 && m.start == 0x7f0000000000 && m.pgoff == 0x10000 && m.file_id == 3 && m.minor == 129);
	cr_assert_eq(m.path, "/dev/dri/renderD129");

	RenderNodeImage empty{};
	empty.gpu_id = 0x1234;
	empty.drm_render_minor = 129;
	RestorableMappings none;
	none.add("amdgpu-renderD-7.img", empty);
	const CriuRenderMapping *uncovered = nullptr;
	auto refused = none.check(*maps, &uncovered);
	cr_assert_not(refused.ok());
	cr_assert_eq(uncovered, &maps->front());
	cr_assert(test::mentions(refused.error(), "mm-42.img: task 42 maps /dev/dri/renderD129 at 0x7f0000000000-0x7f0000001000 "
					"(offset 0x10000, CRIU file 3), which no GPU image of the checkpoint gives "
					"back (amdgpu-renderD-7.img with 0 BOs"),
		  "%s", refused.error().message().c_str());
	RenderNodeImage with = empty;
	with.bos.push_back(DrmBo{});
	with.bos.back().offset = 0x10000;
	RestorableMappings given;
	given.add("amdgpu-renderD-7.img", with);
	cr_assert_ok(given.check(*maps));
	// On another node the offset is not given back.
	with.drm_render_minor = 128;
	RestorableMappings other;
	other.add("amdgpu-renderD-7.img", with);
	cr_assert_not(other.check(*maps).ok());
	cr_assert_eq(render_minor_of_path("/dev/dri/renderD128"), 128u);
	cr_assert_eq(render_minor_of_path("/dev/dri/renderD128x"), 0u);
	cr_assert_eq(render_minor_of_path("/dev/dri/card0"), 0u);
}

// What a commit's kept file (".<name>.old-<random>") carries, read as the
// file it kept: each kind of this plugin's GPU file gives its dump
// identity, anything else none.
Test(binding, a_kept_file_gives_the_dump_identity_of_the_file_it_kept)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	const DumpBinding b = bound(7, 25);
	KfdImage kfd = test::sample_kfd_image(16);
	kfd.binding = b;
	cr_assert_ok(write_kfd_image(*dir, 25, kfd));
	RenderNodeImage r = test::sample_render_image();
	r.id = 27;
	r.binding = bound(7, 27);
	cr_assert_ok(write_render_image(*dir, 27, r));
	const std::string pages = kfd_pages_image_name(25, 0x1234);
	auto w = PagesWriter::create(*dir, pages, 3, b.dump_id);
	cr_assert_ok(w);
	cr_assert_ok(w->write("abc", 3));
	cr_assert_ok(w->commit());
	for (const std::string &name : {kfd_image_name(25), render_image_name(27), pages}) {
		const std::string kept = kept_name(name, "0000abcd");
		cr_assert(kept_original(kept) == name, "%s", kept.c_str());
		cr_assert_eq(::linkat(dir->fd(), name.c_str(), dir->fd(), kept.c_str(), 0), 0);
		auto id = carried_dump_id(*dir, kept, name);
		cr_assert_ok(id);
		cr_assert(*id == b.dump_id, "%s carries no identity", kept.c_str());
	}
	// A pages file's seal names its file: kept as another name, none.
	auto other = carried_dump_id(*dir, kept_name(pages, "0000abcd"), kfd_pages_image_name(25, 0x5678));
	cr_assert_ok(other);
	cr_assert_not(other->has_value());
	// Upstream's image (no binding) and a file that is no image: none.
	kfd.binding.reset();
	cr_assert_ok(write_kfd_image(*dir, 26, kfd));
	auto bare = carried_dump_id(*dir, kfd_image_name(26), kfd_image_name(26));
	cr_assert_ok(bare);
	cr_assert_not(bare->has_value());
	const int fd = ::openat(dir->fd(), ".amdgpu-kfd-9.img.old-planted", O_CREAT | O_WRONLY, 0600);
	cr_assert_geq(fd, 0);
	cr_assert_eq(::write(fd, "no image\n", 9), 9);
	::close(fd);
	auto junk = carried_dump_id(*dir, ".amdgpu-kfd-9.img.old-planted", "amdgpu-kfd-9.img");
	cr_assert(!junk.ok() || !junk->has_value());
	cr_assert_not(kept_original("amdgpu-kfd-9.img").has_value());
	cr_assert_not(kept_original(".amdgpu-kfd-9.img.tmp-0000abcd").has_value());
	cr_assert_not(kept_original(".amdgpu-kfd-9.img.old-").has_value());
}

// Which task CRIU restores each EXT file in: the lowest pid of the tasks
// whose fd table (ids-<pid>.img's files_id, fdinfo-<files_id>.img) holds it.
Test(criu_images, the_lowest_pid_holding_an_ext_file_restores_it)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	// ids-<pid>.img: task_kobj_ids_entry (1 vm_id, 2 files_id, 3 fs_id).
	auto ids = [](uint8_t files_id) {
		Bytes out;
		put32(out, 0x54564319);
		put32(out, 0x54432030);
		const Bytes m{0x08, 0x07, 0x10, files_id, 0x18, 0x09};
		put32(out, static_cast<uint32_t>(m.size()));
		out.insert(out.end(), m.begin(), m.end());
		return out;
	};
	// fdinfo_entry: 1 id, 3 type (16 EXT, 1 REG).
	auto fdinfo = [](const std::vector<std::pair<uint8_t, uint8_t>> &fds) {
		Bytes out;
		put32(out, 0x54564319);
		put32(out, 0x56213732);
		for (auto [id, type] : fds) {
			const Bytes m{0x08, id, 0x10, 0x02, 0x18, type, 0x20, 0x05};
			put32(out, static_cast<uint32_t>(m.size()));
			out.insert(out.end(), m.begin(), m.end());
		}
		return out;
	};
	const CriuIdSet pids({42, 43, 44});
	cr_assert(test::write_raw(tmp.file("ids-42.img"), ids(1)));
	cr_assert(test::write_raw(tmp.file("ids-43.img"), ids(2)));
	auto missing = read_ext_file_restorers(*dir, pids);
	cr_assert_ok(missing);
	cr_assert_not(missing->has_value(), "ids-44.img missing: nothing to tell");
	cr_assert(test::write_raw(tmp.file("ids-44.img"), ids(2))); // shares 43's table
	cr_assert(test::write_raw(tmp.file("fdinfo-1.img"), fdinfo({{25, 16}, {3, 1}, {26, 16}})));
	cr_assert(test::write_raw(tmp.file("fdinfo-2.img"), fdinfo({{26, 16}, {27, 16}})));
	auto r = read_ext_file_restorers(*dir, pids);
	cr_assert_ok(r);
	cr_assert(r->has_value());
	const std::map<uint32_t, uint32_t> want{{25, 42}, {26, 42}, {27, 43}};
	cr_assert(**r == want);
}
