// SPDX-License-Identifier: GPL-2.0-only
// Restore-time validation of the whole image set.
#include <criterion/criterion.h>

#include "../common/assert_ok.h"
#include "image/image_names.h"
#include "image/image_set.h"
#include "image/pages_file.h"
#include "image_test_util.h"

using namespace amdcr;
using amdcr::test::TempDir;

namespace {

constexpr int kId = 11;

void write_pages(const ImageDir &dir, const std::string &name, uint64_t size)
{
	auto w = PagesWriter::create(dir, name, size);
	cr_assert(w.ok());
	const auto data = testcommon::pattern_bytes(size, size);
	cr_assert(w->write(data.data(), data.size()).ok());
	cr_assert(w->commit().ok());
}

// A complete, consistent set for the sample image.
void write_good_set(const ImageDir &dir, const KfdImage &img)
{
	cr_assert(write_kfd_image(dir, kId, img).ok());
	for (const auto &d : img.devices)
		if (d.is_gpu())
			write_pages(dir, kfd_pages_image_name(kId, d.gpu_id), img.pages_size(d.gpu_id).value());
}

void expect_invalid(const ImageDir &dir, const KfdImage &img, const std::string &file,
		    const std::string &what)
{
	auto st = validate_kfd_image_set(dir, kId, img);
	cr_assert_not(st.ok(), "inconsistent set accepted (expected: %s)", what.c_str());
	const std::string &m = st.error().message();
	cr_assert(m.find(file) != std::string::npos, "expected file %s in: %s", file.c_str(),
		  m.c_str());
	cr_assert(m.find(what) != std::string::npos, "expected \"%s\" in: %s", what.c_str(),
		  m.c_str());
}

} // namespace

Test(image_set, complete_set_is_valid)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	const KfdImage img = test::sample_kfd_image();
	write_good_set(*dir, img);
	auto back = read_kfd_image(*dir, kId);
	cr_assert(back.ok());
	auto st = validate_kfd_image_set(*dir, kId, *back);
	cr_assert_ok(st);
}

Test(image_set, missing_pages_file)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	const KfdImage img = test::sample_kfd_image();
	write_good_set(*dir, img);
	const std::string name = kfd_pages_image_name(kId, 0x2222);
	cr_assert(dir->remove(name).ok());
	expect_invalid(*dir, img, name, "missing");
}

Test(image_set, pages_file_of_the_wrong_size)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	const KfdImage img = test::sample_kfd_image();
	write_good_set(*dir, img);
	const std::string name = kfd_pages_image_name(kId, 0x1111);
	write_pages(*dir, name, 0x200000);
	expect_invalid(*dir, img, name, "holds 2097152 bytes");
	expect_invalid(*dir, img, name, "2101248");
}

Test(image_set, truncated_pages_file)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	const KfdImage img = test::sample_kfd_image();
	write_good_set(*dir, img);
	const std::string name = kfd_pages_image_name(kId, 0x2222);
	auto bytes = test::read_raw(tmp.file(name));
	cr_assert_gt(bytes.size(), 1u);
	bytes.pop_back();
	cr_assert(test::write_raw(tmp.file(name), bytes));
	expect_invalid(*dir, img, name, "truncated");
}

Test(image_set, unknown_gpu_id_in_bo_table)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	KfdImage img = test::sample_kfd_image();
	write_good_set(*dir, img);
	img.bos[2].gpu_id = 0x4444;
	expect_invalid(*dir, img, kfd_image_name(kId), "0x4444");
}

Test(image_set, render_minor_out_of_range)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	KfdImage img = test::sample_kfd_image();
	write_good_set(*dir, img);
	img.devices[1].drm_render_minor = 300;
	expect_invalid(*dir, img, kfd_image_name(kId), "render minor 300");
}

Test(image_set, gpu_without_contents_may_lack_its_pages_file)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	KfdImage img = test::sample_kfd_image();
	img.bos.pop_back();
	img.bos.pop_back(); // GPU 0x2222 keeps no BO
	write_good_set(*dir, img);
	cr_assert(validate_kfd_image_set(*dir, kId, img).ok());
	cr_assert(dir->remove(kfd_pages_image_name(kId, 0x2222)).ok());
	cr_assert(validate_kfd_image_set(*dir, kId, img).ok());
	// ... but if present, it must be empty.
	write_pages(*dir, kfd_pages_image_name(kId, 0x2222), 16);
	expect_invalid(*dir, img, kfd_pages_image_name(kId, 0x2222), "holds 16 bytes");
}

Test(image_set, render_node_pages)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	const RenderNodeImage img = test::sample_render_image();
	cr_assert(write_render_image(*dir, 17, img).ok());
	// BO 1 has no contents (CPU domain), BOs 0 and 2 have.
	write_pages(*dir, drm_pages_image_name(17, 128, 0), img.bos[0].size);
	auto st = validate_render_image_set(*dir, 17, img);
	cr_assert_not(st.ok());
	cr_assert(st.error().message().find(drm_pages_image_name(17, 128, 2)) != std::string::npos,
		  "%s", st.error().message().c_str());
	write_pages(*dir, drm_pages_image_name(17, 128, 2), img.bos[2].size);
	st = validate_render_image_set(*dir, 17, img);
	cr_assert_ok(st);
	write_pages(*dir, drm_pages_image_name(17, 128, 2), img.bos[2].size + 4096);
	cr_assert_not(validate_render_image_set(*dir, 17, img).ok());
}

Test(image_set, a_sealed_image_needs_its_own_dump_s_seal_on_each_pages_file)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	KfdImage img = test::sample_kfd_image();
	const DumpId ours{0xaa}, earlier{0xbb};
	img.binding = DumpBinding{ours, kId, true};
	cr_assert(write_kfd_image(*dir, kId, img).ok());
	std::string gpu_pages;
	for (const auto &d : img.devices) {
		if (!d.is_gpu())
			continue;
		const std::string name = kfd_pages_image_name(kId, d.gpu_id);
		const uint64_t size = img.pages_size(d.gpu_id).value();
		// The first GPU's pages file: of an earlier dump, the same size.
		auto w = PagesWriter::create(*dir, name, size, gpu_pages.empty() ? earlier : ours);
		cr_assert(w.ok());
		const auto data = testcommon::pattern_bytes(size, size);
		cr_assert(w->write(data.data(), data.size()).ok());
		cr_assert(w->commit().ok());
		if (gpu_pages.empty())
			gpu_pages = name;
	}
	auto back = read_kfd_image(*dir, kId);
	cr_assert(back.ok());
	cr_assert(back->binding->pages_sealed);
	expect_invalid(*dir, *back, gpu_pages, "sealed by dump bb");
	// Without the seal flag (an image of a dump before seals) the same
	// files pass: only sizes are checked.
	back->binding->pages_sealed = false;
	cr_assert_ok(validate_kfd_image_set(*dir, kId, *back));
}
