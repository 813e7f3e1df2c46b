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

constexpr int kId = 17;

void write_mutated(const TempDir &tmp, const std::function<void(CriuRenderNode &)> &mutate)
{
	auto payload = pack_render_image(test::sample_render_image());
	cr_assert(payload.ok());
	CriuRenderNode *msg = criu_render_node__unpack(nullptr, payload->size(), payload->data());
	cr_assert(msg);
	mutate(*msg);
	std::vector<uint8_t> out(criu_render_node__get_packed_size(msg));
	criu_render_node__pack(msg, out.data());
	criu_render_node__free_unpacked(msg, nullptr);
	cr_assert(test::write_raw(tmp.file(render_image_name(kId)), test::framed(out)));
}

void expect_rejected(const TempDir &tmp, const std::string &what)
{
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	auto r = read_render_image(*dir, kId);
	cr_assert_not(r.ok(), "corrupt image accepted (expected: %s)", what.c_str());
	const std::string &m = r.error().message();
	cr_assert(m.find(render_image_name(kId)) != std::string::npos, "no file name in: %s",
		  m.c_str());
	cr_assert(m.find(what) != std::string::npos, "expected \"%s\" in: %s", what.c_str(),
		  m.c_str());
}

} // namespace

Test(render_image, round_trip)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	const RenderNodeImage img = test::sample_render_image();
	auto st = write_render_image(*dir, kId, img);
	cr_assert_ok(st);
	cr_assert_eq(test::file_mode(tmp.file(render_image_name(kId))), 0600);
	auto back = read_render_image(*dir, kId);
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
	cr_assert(write_render_image(*dir, kId, img).ok());
	auto back = read_render_image(*dir, kId);
	cr_assert(back.ok());
	cr_assert(*back == img);
}

Test(render_image, num_of_bos_mismatch)
{
	TempDir tmp;
	write_mutated(tmp, [](CriuRenderNode &m) { m.num_of_bos = 1; });
	expect_rejected(tmp, "num_of_bos");
}

Test(render_image, num_of_vms_mismatch)
{
	TempDir tmp;
	write_mutated(tmp, [](CriuRenderNode &m) { m.bo_entries[0]->num_of_vms = 3; });
	expect_rejected(tmp, "num_of_vms");
}

Test(render_image, empty_or_wrapping_vm_entry)
{
	TempDir tmp;
	write_mutated(tmp, [](CriuRenderNode &m) { m.bo_entries[0]->vm_entries[0]->size = 0; });
	expect_rejected(tmp, "VM entry 0");
	TempDir tmp2;
	write_mutated(tmp2, [](CriuRenderNode &m) { m.bo_entries[0]->vm_entries[1]->addr = ~0ull; });
	expect_rejected(tmp2, "VM entry 1");
}

Test(render_image, minor_out_of_range)
{
	TempDir tmp;
	write_mutated(tmp, [](CriuRenderNode &m) { m.drm_render_minor = 127; });
	expect_rejected(tmp, "render minor 127");
}

Test(render_image, zero_size_bo)
{
	TempDir tmp;
	write_mutated(tmp, [](CriuRenderNode &m) { m.bo_entries[2]->size = 0; });
	expect_rejected(tmp, "BO 2: size 0");
}

Test(render_image, bo_address_overflow)
{
	TempDir tmp;
	write_mutated(tmp, [](CriuRenderNode &m) { m.bo_entries[0]->addr = UINT64_MAX; });
	expect_rejected(tmp, "overflows");
}

Test(render_image, garbage_and_truncation)
{
	TempDir tmp;
	cr_assert(test::write_raw(tmp.file(render_image_name(kId)),
				  test::framed(test::pattern(300, 1))));
	expect_rejected(tmp, "not a valid criu_render_node");
	auto payload = pack_render_image(test::sample_render_image());
	cr_assert(payload.ok());
	auto bytes = test::framed(*payload);
	bytes.pop_back();
	cr_assert(test::write_raw(tmp.file(render_image_name(kId)), bytes));
	expect_rejected(tmp, "truncated");
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
	cr_assert_ok(write_render_image(*dir, kId, img));
	auto back = read_render_image(*dir, kId);
	cr_assert_ok(back);
	cr_assert(*back == img);
	cr_assert(back->bos[0].shared && back->bos[0].shared->contents_minor == 129);
	cr_assert_not(back->bos[1].shared);
}

Test(render_image, shared_bo_rejected)
{
	RenderNodeImage img = test::sample_render_image();
	const std::string name = render_image_name(kId);
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
		auto payload = pack_render_image(img);
		cr_assert_ok(payload);
		auto r = unpack_render_image(*payload, name);
		cr_assert_not(r.ok(), "accepted (expected: %s)", what.c_str());
		cr_assert(r.error().message().find(what) != std::string::npos, "expected \"%s\" in: %s",
			  what.c_str(), r.error().message().c_str());
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
