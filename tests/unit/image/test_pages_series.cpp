// SPDX-License-Identifier: GPL-2.0-only
// A series of pages files as one stream: the render node's BOs, one
// amdgpu-drm-pages file each, written and read by one transfer.
#include <criterion/criterion.h>

#include <cerrno>
#include <cstring>

#include "../common/assert_ok.h"
#include "image/image_names.h"
#include "image/pages_file.h"
#include "image/pages_series.h"
#include "image_test_util.h"

using namespace amdcr;
using amdcr::test::TempDir;

namespace {

std::vector<PagesPart> three_parts()
{
	// Sizes that make writes of 5000 bytes straddle every boundary; the
	// empty one in the middle is passed over.
	return {{drm_pages_image_name(3, 128, 0), 12288},
		{drm_pages_image_name(3, 128, 1), 0},
		{drm_pages_image_name(3, 128, 2), 7000}};
}

} // namespace

Test(pages_series, writes_each_part_to_its_file_and_reads_back_the_same_stream)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert_ok(dir);
	const auto bytes = testcommon::pattern_bytes(12288 + 7000, 9);
	{
		PagesSeriesWriter w(*dir, three_parts());
		for (size_t off = 0; off < bytes.size(); off += 5000)
			cr_assert_ok(w.write(bytes.data() + off, std::min<size_t>(5000, bytes.size() - off)));
		cr_assert_ok(w.finish());
	}
	// Each file framed on its own: header = its part's size.
	size_t at = 0;
	for (const auto &p : three_parts()) {
		auto r = PagesReader::open(*dir, p.name);
		cr_assert_ok(r, "%s", p.name.c_str());
		cr_assert_eq(r->payload_size(), p.size, "%s", p.name.c_str());
		std::vector<uint8_t> got(p.size);
		if (p.size)
			cr_assert_ok(r->read(got.data(), got.size()));
		cr_assert(std::equal(got.begin(), got.end(), bytes.begin() + long(at)), "%s", p.name.c_str());
		at += p.size;
	}
	PagesSeriesReader r(*dir, three_parts());
	cr_assert_eq(r.remaining(), bytes.size());
	std::vector<uint8_t> back(bytes.size());
	cr_assert_ok(r.read(back.data(), 100));
	cr_assert_ok(r.skip(12288 - 100 + 5));
	cr_assert_ok(r.read(back.data() + 12288 + 5, back.size() - 12288 - 5));
	cr_assert_eq(r.remaining(), 0u);
	cr_assert(std::memcmp(back.data(), bytes.data(), 100) == 0);
	cr_assert(std::memcmp(back.data() + 12293, bytes.data() + 12293, bytes.size() - 12293) == 0);
	cr_assert_not(r.read(back.data(), 1).ok(), "read past the end");
}

Test(pages_series, refuses_bytes_past_the_last_part_and_an_unfinished_part)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert_ok(dir);
	const auto bytes = testcommon::pattern_bytes(20000, 3);
	{
		PagesSeriesWriter w(*dir, three_parts());
		auto st = w.write(bytes.data(), bytes.size());
		cr_assert_not(st.ok());
		cr_assert_eq(st.error().code(), EINVAL);
	}
	TempDir tmp2;
	dir = ImageDir::open(tmp2.path());
	cr_assert_ok(dir);
	{
		PagesSeriesWriter w(*dir, three_parts());
		cr_assert_ok(w.write(bytes.data(), 12288 + 10));
		auto st = w.finish();
		cr_assert_not(st.ok());
		cr_assert(std::strstr(st.error().message().c_str(), drm_pages_image_name(3, 128, 2).c_str()),
			  "%s", st.error().message().c_str());
	}
	// The unfinished last part is not under its name.
	auto present = dir->exists(drm_pages_image_name(3, 128, 2));
	cr_assert_ok(present);
	cr_assert_not(*present);
}

Test(pages_series, reader_names_a_missing_file_and_a_size_that_differs)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert_ok(dir);
	std::vector<uint8_t> buf(12288);
	{
		PagesSeriesReader r(*dir, three_parts());
		auto st = r.read(buf.data(), 1);
		cr_assert_not(st.ok());
		cr_assert_eq(st.error().code(), ENOENT, "%s", st.error().message().c_str());
	}
	{
		auto w = PagesWriter::create(*dir, drm_pages_image_name(3, 128, 0), 4096);
		cr_assert_ok(w);
		cr_assert_ok(w->write(buf.data(), 4096));
		cr_assert_ok(w->commit());
	}
	PagesSeriesReader r(*dir, three_parts());
	auto st = r.read(buf.data(), 1);
	cr_assert_not(st.ok());
	cr_assert_eq(st.error().code(), EINVAL);
	cr_assert(std::strstr(st.error().message().c_str(), "holds 4096 bytes, its BO has 12288"), "%s",
		  st.error().message().c_str());
}

Test(render_image, refuses_missing_and_repeated_gem_handles)
{
	RenderNodeImage img = test::sample_render_image();
	img.bos[1].handle = 0;
	auto st = validate_render_image(img, "r.img");
	cr_assert_not(st.ok());
	cr_assert(std::strstr(st.error().message().c_str(), "GEM handle 0 outside"), "%s", st.error().message().c_str());
	img = test::sample_render_image();
	img.bos[2].handle = img.bos[0].handle;
	st = validate_render_image(img, "r.img");
	cr_assert_not(st.ok());
	cr_assert(std::strstr(st.error().message().c_str(), "appears twice"), "%s", st.error().message().c_str());
	img = test::sample_render_image();
	img.bos[0].handle = kMaxGemHandle + 1u;
	cr_assert_not(validate_render_image(img, "r.img").ok());
}
