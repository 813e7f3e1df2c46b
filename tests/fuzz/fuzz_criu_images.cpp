// SPDX-License-Identifier: GPL-2.0-only
//
// CRIU's own images as the restore and amdgpu-img read them
// (image/criu_images.h): files.img (EXT ids, the REG files that are render
// nodes), pstree.img (task pids) and mm-<pid>.img (render node mappings),
// and the check that GPU images give each mapping back. The input is cut
// into three files:
//   u16 LE n1, n1 bytes  -> files.img
//   u16 LE n2, n2 bytes  -> pstree.img
//   the rest             -> mm-1.img
// Nothing may crash; every mapping read is of a render node and of a task
// of pstree.img (or task 1), and one no image gives back is refused.
#include <cstdint>
#include <span>

#include "fuzz_common.h"
#include "image/criu_images.h"
#include "image/image_set.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	using namespace amdcr;
	const auto [files, pstree, mm] = fuzz::cut_input<3>(data, size);
	const auto &dir = fuzz::scratch_files({{"files.img", files}, {"pstree.img", pstree}, {"mm-1.img", mm}});
	auto images = ImageDir::open(dir.path());
	fuzz::require(images.ok(), "the scratch directory opens");
	auto facts = read_criu_facts(*images);
	std::vector<uint32_t> pids{1};
	if (facts.ok() && facts->has_value())
		pids.insert(pids.end(), (*facts)->pids.sorted().begin(), (*facts)->pids.sorted().end());
	const CriuIdSet tasks(pids);
	auto maps = read_render_mappings(*images, tasks);
	if (!maps.ok() || maps->empty())
		return 0;
	for (const CriuRenderMapping &m : *maps)
		fuzz::require(tasks.contains(m.pid) && m.minor == render_minor_of_path(m.path) && m.minor != 0,
			      "a mapping of a task, of a render node");
	const RestorableMappings none;
	fuzz::require(!none.check(*maps).ok(), "a mapping no image gives back is refused");
	return 0;
}
