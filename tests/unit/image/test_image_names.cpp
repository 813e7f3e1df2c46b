// SPDX-License-Identifier: GPL-2.0-only
// Image file names are upstream's, byte for byte.
#include <criterion/criterion.h>

#include "image/image_names.h"

using namespace amdcr;

namespace {

// Holds the name in a named string: Criterion's string macros keep the
// pointer they were given past the end of the full expression.
void expect_name(const std::string &got, const char *want)
{
	cr_assert(got == want, "got \"%s\", want \"%s\"", got.c_str(), want);
}

} // namespace

Test(image_names, kfd)
{
	expect_name(kfd_image_name(0), "amdgpu-kfd-0.img");
	expect_name(kfd_image_name(1234), "amdgpu-kfd-1234.img");
}

Test(image_names, kfd_pages_gpu_id_is_4_hex_digits_at_least)
{
	expect_name(kfd_pages_image_name(5, 0xb1c2), "amdgpu-pages-5-b1c2.img");
	expect_name(kfd_pages_image_name(5, 0x12), "amdgpu-pages-5-0012.img");
	expect_name(kfd_pages_image_name(5, 0x12345), "amdgpu-pages-5-12345.img");
}

Test(image_names, render_and_dmabuf)
{
	expect_name(render_image_name(9), "amdgpu-renderD-9.img");
	expect_name(dmabuf_image_name(9), "amdgpu-dmabuf_9.img");
}

Test(image_names, drm_pages)
{
	expect_name(drm_pages_image_name(7, 129, 3), "amdgpu-drm-pages-7-129-0003.img");
	expect_name(drm_pages_image_name(7, 128, 0x1ab), "amdgpu-drm-pages-7-128-01ab.img");
}

Test(image_names, prefixes_match_names)
{
	cr_assert(kfd_image_name(3).starts_with(kKfdImagePrefix));
	cr_assert(render_image_name(3).starts_with(kRenderImagePrefix));
	cr_assert_not(kfd_pages_image_name(3, 1).starts_with(kKfdImagePrefix));
}
