// SPDX-License-Identifier: GPL-2.0-only
//
// The KFD image decoder and validator (amdgpu-kfd-<id>.img payloads):
// unpack_kfd_image must refuse or accept any bytes without a crash, and
// what it accepts must pass validate_kfd_image and survive pack + unpack
// unchanged; the pages layout derived from it must fit pages_size.
#include <cstdint>
#include <span>

#include "fuzz_common.h"
#include "image/kfd_image.h"
#include "inspect/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	using namespace amdcr;
	auto img = unpack_kfd_image(std::span<const uint8_t>(data, size), "fuzz.img");
	if (!img)
		return 0;
	fuzz::require(validate_kfd_image(*img, "fuzz.img").ok(), "an accepted image validates");
	auto packed = pack_kfd_image(*img);
	fuzz::require(packed.ok(), "an accepted image packs");
	auto again = unpack_kfd_image(*packed, "fuzz.img");
	fuzz::require(again.ok(), "a packed image unpacks");
	fuzz::require(*again == *img, "pack + unpack gives the same image");
	const auto layout = inspect::kfd_pages_layout(*img, 1);
	for (size_t i = 0; i < img->bos.size(); i++) {
		if (!layout[i])
			continue;
		auto total = img->pages_size(img->bos[i].gpu_id);
		fuzz::require(total.ok() && layout[i]->offset + img->bos[i].size <= *total,
			      "every BO lies within its GPU's pages payload");
	}
	return 0;
}
