// SPDX-License-Identifier: GPL-2.0-only
//
// The render node and dma-buf image decoders (amdgpu-renderD-<id>.img,
// amdgpu-dmabuf_<id>.img payloads; the first input byte picks which): no
// crash on any bytes; what is accepted validates and survives pack + unpack.
#include <cstdint>
#include <span>

#include "fuzz_common.h"
#include "image/render_image.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	using namespace amdcr;
	if (size == 0)
		return 0;
	const std::span<const uint8_t> payload(data + 1, size - 1);
	if (data[0] & 1) {
		auto img = unpack_dmabuf_image(payload, "fuzz.img");
		if (!img)
			return 0;
		auto packed = pack_dmabuf_image(*img);
		fuzz::require(packed.ok(), "an accepted dma-buf image packs");
		auto again = unpack_dmabuf_image(*packed, "fuzz.img");
		fuzz::require(again.ok() && *again == *img, "dma-buf image: pack + unpack gives the same");
		return 0;
	}
	auto img = unpack_render_image(payload, "fuzz.img");
	if (!img)
		return 0;
	fuzz::require(validate_render_image(*img, "fuzz.img").ok(), "an accepted render image validates");
	auto packed = pack_render_image(*img);
	fuzz::require(packed.ok(), "an accepted render image packs");
	auto again = unpack_render_image(*packed, "fuzz.img");
	fuzz::require(again.ok() && *again == *img, "render image: pack + unpack gives the same");
	return 0;
}
