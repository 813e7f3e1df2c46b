// SPDX-License-Identifier: GPL-2.0-only
// Byte compatibility with the upstream plugin's files, checked against
// sequences built here by hand: an 8-byte little-endian payload size, then
// the protobuf wire encoding (written by a minimal encoder below that shares
// nothing with protobuf-c), or the raw pages.
#include <criterion/criterion.h>

#include "../common/assert_ok.h"
#include "base/checksum.h"
#include "image/image_names.h"
#include "image/kfd_image.h"
#include "image/pages_file.h"
#include "image/render_image.h"
#include "image_test_util.h"

using namespace amdcr;
using amdcr::test::TempDir;

namespace {

using Bytes = std::vector<uint8_t>;

void varint(Bytes &out, uint64_t v)
{
	while (v >= 0x80) {
		out.push_back(static_cast<uint8_t>(v | 0x80));
		v >>= 7;
	}
	out.push_back(static_cast<uint8_t>(v));
}

void uint_field(Bytes &out, uint32_t field, uint64_t v)
{
	varint(out, static_cast<uint64_t>(field) << 3 | 0);
	varint(out, v);
}

void bytes_field(Bytes &out, uint32_t field, const Bytes &data)
{
	varint(out, static_cast<uint64_t>(field) << 3 | 2);
	varint(out, data.size());
	out.insert(out.end(), data.begin(), data.end());
}

Bytes device_entry(const KfdDevice &d)
{
	Bytes m;
	const uint64_t f[] = {
		d.node_id,	       d.gpu_id,
		d.cpu_cores_count,     d.simd_count,
		d.mem_banks_count,     d.caches_count,
		d.io_links_count,      d.max_waves_per_simd,
		d.lds_size_in_kb,      d.gds_size_in_kb,
		d.num_gws,	       d.wave_front_size,
		d.array_count,	       d.simd_arrays_per_engine,
		d.cu_per_simd_array,   d.simd_per_cu,
		d.max_slots_scratch_cu, d.vendor_id,
		d.device_id,	       d.domain,
		d.drm_render_minor,    d.hive_id,
		d.num_sdma_engines,    d.num_sdma_xgmi_engines,
		d.num_sdma_queues_per_engine, d.num_cp_queues,
		d.fw_version,	       d.capability,
		d.sdma_fw_version,     d.vram_public,
		d.vram_size,
	};
	for (uint32_t i = 0; i < 31; i++)
		uint_field(m, i + 1, f[i]);
	for (const auto &l : d.iolinks) {
		Bytes link;
		uint_field(link, 1, l.type);
		uint_field(link, 2, l.node_to_id);
		bytes_field(m, 32, link);
	}
	return m;
}

Bytes kfd_message(const KfdImage &img)
{
	Bytes m;
	uint_field(m, 1, img.pid);
	uint_field(m, 2, img.gpu_count());
	uint_field(m, 3, img.cpu_count());
	for (const auto &d : img.devices)
		bytes_field(m, 4, device_entry(d));
	uint_field(m, 5, img.bos.size());
	for (const auto &bo : img.bos) {
		Bytes b;
		uint_field(b, 1, bo.addr);
		uint_field(b, 2, bo.size);
		uint_field(b, 3, bo.offset);
		uint_field(b, 4, bo.alloc_flags);
		uint_field(b, 5, bo.gpu_id);
		uint_field(b, 6, bo.handle);
		bytes_field(m, 6, b);
	}
	uint_field(m, 7, img.num_of_objects);
	uint_field(m, 8, img.shared_mem_size);
	uint_field(m, 9, img.shared_mem_magic);
	bytes_field(m, 10, img.priv_data);
	return m;
}

Bytes render_message(const RenderNodeImage &img)
{
	Bytes m;
	uint_field(m, 1, img.gpu_id);
	uint_field(m, 2, img.id);
	uint_field(m, 3, img.drm_render_minor);
	uint_field(m, 4, img.bos.size());
	for (const auto &bo : img.bos) {
		Bytes b;
		uint_field(b, 1, bo.addr);
		uint_field(b, 2, bo.size);
		uint_field(b, 3, bo.offset);
		uint_field(b, 4, bo.alloc_flags);
		uint_field(b, 5, bo.alignment);
		uint_field(b, 6, bo.preferred_domains);
		uint_field(b, 7, bo.handle);
		uint_field(b, 8, bo.is_import ? 1 : 0);
		uint_field(b, 9, bo.vms.size());
		for (const auto &vm : bo.vms) {
			Bytes v;
			uint_field(v, 1, vm.addr);
			uint_field(v, 2, vm.size);
			uint_field(v, 3, vm.offset);
			uint_field(v, 4, vm.flags);
			bytes_field(b, 10, v);
		}
		bytes_field(m, 5, b);
	}
	return m;
}

// Upstream's framing: size_t (8 bytes, little-endian on x86-64) + payload.
Bytes upstream_file(const Bytes &payload)
{
	Bytes out;
	uint64_t n = payload.size();
	for (int i = 0; i < 8; i++, n >>= 8)
		out.push_back(static_cast<uint8_t>(n));
	out.insert(out.end(), payload.begin(), payload.end());
	return out;
}

// `message` followed by our seal (image/framing.h): field 100, fixed64
// (key a1 06), checksum64 of the message before it.
Bytes sealed(const Bytes &message)
{
	Bytes out = message;
	out.push_back(0xa1);
	out.push_back(0x06);
	const uint64_t sum = checksum64(message.data(), message.size());
	for (int i = 0; i < 8; i++)
		out.push_back(static_cast<uint8_t>(sum >> (8 * i)));
	return out;
}

} // namespace

Test(upstream_framing, dmabuf_exact_bytes)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	// gem_handle = 300: field 1 varint -> 08 ac 02; header 3.
	const Bytes expected = {3, 0, 0, 0, 0, 0, 0, 0, 0x08, 0xac, 0x02};
	cr_assert(test::write_raw(tmp.file("amdgpu-dmabuf_4.img"), expected));
	auto r = read_dmabuf_image(*dir, 4);
	cr_assert_ok(r);
	cr_assert_eq(r->gem_handle, 300u);

	// Ours: upstream's message, then the seal.
	cr_assert(write_dmabuf_image(*dir, 5, DmabufImage{300, std::nullopt}).ok());
	cr_assert(test::read_raw(tmp.file("amdgpu-dmabuf_5.img")) == upstream_file(sealed({0x08, 0xac, 0x02})));
}

Test(upstream_framing, hand_built_kfd_image_decodes)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	const KfdImage img = test::sample_kfd_image(777);
	cr_assert(test::write_raw(tmp.file("amdgpu-kfd-21.img"), upstream_file(kfd_message(img))));
	auto r = read_kfd_image(*dir, 21);
	cr_assert_ok(r);
	cr_assert(*r == img);
}

Test(upstream_framing, our_kfd_image_matches_hand_built_bytes)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	const KfdImage img = test::sample_kfd_image(100);
	cr_assert(write_kfd_image(*dir, 22, img).ok());
	const Bytes ours = test::read_raw(tmp.file("amdgpu-kfd-22.img"));
	// Upstream's bytes, then our seal.
	const Bytes hand = upstream_file(sealed(kfd_message(img)));
	cr_assert_eq(ours.size(), hand.size());
	cr_assert(ours == hand);
}

Test(upstream_framing, render_image_both_ways)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	RenderNodeImage img = test::sample_render_image();
	img.id = 30; // criu-dev writes the CRIU file id it was dumped for
	const Bytes hand = upstream_file(render_message(img));
	cr_assert(test::write_raw(tmp.file("amdgpu-renderD-30.img"), hand));
	auto r = read_render_image(*dir, 30);
	cr_assert_ok(r);
	cr_assert(*r == img);
	// Ours: upstream's bytes (the sample has no BO checksums), then the seal.
	img.id = 31;
	cr_assert(write_render_image(*dir, 31, img).ok());
	cr_assert(test::read_raw(tmp.file("amdgpu-renderD-31.img")) == upstream_file(sealed(render_message(img))));
}

// CRIU 4.0-4.2.1's plugin writes criu_render_node { gpu_id } alone.
Test(upstream_framing, criu_4_2_render_image_is_gpu_id_only_of_its_file)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	Bytes m;
	uint_field(m, 1, 0x3c6f);
	cr_assert(test::write_raw(tmp.file("amdgpu-renderD-25.img"), upstream_file(m)));
	auto r = read_render_image(*dir, 25);
	cr_assert_ok(r);
	cr_assert(r->gpu_id_only);
	cr_assert_eq(r->gpu_id, 0x3c6fu);
	cr_assert_eq(r->id, 25u);
	cr_assert_eq(r->drm_render_minor, 0u);
	cr_assert(r->bos.empty());
	cr_assert_eq(render_node_label(*r), std::string("render minor unknown"));
	// Its render minor is its GPU's in a KFD image of the checkpoint.
	KfdImage kfd = test::sample_kfd_image(1);
	cr_assert_not(resolve_render_minor(*r, kfd), "resolved from a KFD image without gpu 0x3c6f");
	kfd.devices.back().gpu_id = 0x3c6f;
	kfd.devices.back().drm_render_minor = 129;
	cr_assert(resolve_render_minor(*r, kfd));
	cr_assert_eq(r->drm_render_minor, 129u);
	cr_assert_eq(render_node_label(*r), std::string("renderD129"));
	// Written back as it was: gpu_id alone (the seal aside).
	RenderNodeImage back = *r;
	back.drm_render_minor = 0;
	cr_assert(write_render_image(*dir, 26, back).ok());
	cr_assert(test::read_raw(tmp.file("amdgpu-renderD-26.img")) == upstream_file(sealed(m)));
}

Test(upstream_framing, render_image_with_some_of_criu_dev_fields_is_refused)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	Bytes m;
	uint_field(m, 1, 0x3c6f);
	uint_field(m, 3, 129); // drm_render_minor without id and num_of_bos
	cr_assert(test::write_raw(tmp.file("amdgpu-renderD-25.img"), upstream_file(m)));
	auto r = read_render_image(*dir, 25);
	cr_assert_not(r.ok());
	cr_assert(test::mentions(r.error(), "amdgpu-renderD-25.img: has drm_render_minor but not all of id"), "%s",
		  r.error().message().c_str());
}

// An image is read for the CRIU file it was dumped for: one renamed or
// copied over another file's (two render images swapped) is refused.
Test(upstream_framing, render_image_of_another_file_id_is_refused)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	RenderNodeImage img = test::sample_render_image();
	img.id = 28;
	cr_assert(test::write_raw(tmp.file("amdgpu-renderD-29.img"), upstream_file(render_message(img))));
	auto r = read_render_image(*dir, 29);
	cr_assert_not(r.ok());
	cr_assert(test::mentions(r.error(), "amdgpu-renderD-29.img: the image was dumped for CRIU file id 28, not for "
				      "file 29"),
		  "%s", r.error().message().c_str());
}

Test(upstream_framing, pages_file_is_header_then_raw_bos_in_table_order)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	// Upstream writes the VRAM/GTT BOs of one GPU back to back.
	const Bytes bo0 = testcommon::pattern_bytes(0x2000, 10), bo1 = testcommon::pattern_bytes(0x1000, 11);
	Bytes payload = bo0;
	payload.insert(payload.end(), bo1.begin(), bo1.end());
	cr_assert(test::write_raw(tmp.file("amdgpu-pages-3-00ab.img"), upstream_file(payload)));
	auto r = PagesReader::open_kfd(*dir, 3, 0xab);
	cr_assert_ok(r);
	cr_assert_eq(r->payload_size(), 0x3000u);
	Bytes got(0x2000);
	cr_assert(r->read(got.data(), got.size()).ok());
	cr_assert(got == bo0);
	got.assign(0x1000, 0);
	cr_assert(r->read(got.data(), got.size()).ok());
	cr_assert(got == bo1);

	auto w = PagesWriter::create(*dir, kfd_pages_image_name(4, 0xab), payload.size());
	cr_assert(w.ok());
	cr_assert(w->write(bo0.data(), bo0.size()).ok());
	cr_assert(w->write(bo1.data(), bo1.size()).ok());
	cr_assert(w->commit().ok());
	cr_assert(test::read_raw(tmp.file("amdgpu-pages-4-00ab.img")) == upstream_file(payload));
}
