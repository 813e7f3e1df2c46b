// SPDX-License-Identifier: GPL-2.0-only
//
// A whole checkpoint directory through amdgpu-img's readers (image set
// validation, show, verify, diff). The input is cut into three files:
//   u32 LE n1, n1 bytes  -> amdgpu-kfd-1.img (a real one can pass 64 KiB)
//   u32 LE n2, n2 bytes  -> amdgpu-renderD-2.img
//   the rest             -> the pages file of the KFD image's first GPU
//                           (amdgpu-pages-1-0001.img when it has none)
// Nothing may crash; a checkpoint that verifies clean differs in nothing
// from itself.
#include <cstdint>
#include <span>

#include "fuzz_common.h"
#include "image/framing.h"
#include "image/image_names.h"
#include "image/kfd_image.h"
#include "inspect/checkpoint.h"
#include "inspect/diff.h"
#include "inspect/show.h"
#include "inspect/verify.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	using namespace amdcr;
	const auto [kfd, render, pages] = fuzz::cut_input<3, 4>(data, size);
	uint32_t gpu = 1;
	if (kfd.size() >= kImageHeaderSize)
		if (auto img = unpack_kfd_image(kfd.subspan(kImageHeaderSize), "fuzz"); img)
			for (const auto &d : img->devices)
				if (d.is_gpu()) {
					gpu = d.gpu_id;
					break;
				}
	const auto &dir = fuzz::scratch_files(
		{{kfd_image_name(1), kfd}, {render_image_name(2), render}, {kfd_pages_image_name(1, gpu), pages}});

	auto ck = inspect::load_checkpoint(dir.path());
	fuzz::require(ck.ok(), "the scratch directory loads");
	const auto report = inspect::verify_checkpoint(*ck);
	(void)inspect::show_text(*ck);
	(void)inspect::show_json(*ck);
	auto same = inspect::diff_checkpoints(*ck, *ck, {4096});
	if (report.problems.empty())
		fuzz::require(same.ok() && same->empty(), "a checkpoint that verifies is the same as itself");
	return 0;
}
