// SPDX-License-Identifier: GPL-2.0-only
//
// CRIU's fd tables as amdgpu-img verify reads them to tell which task CRIU
// restores each EXT file in (image/criu_images.h,
// read_ext_file_restorers): each task's ids-<pid>.img (its fd table's
// files_id) and the tables' fdinfo-<files_id>.img. The input is the
// files, one after the other:
//   u8 T, then T times (T % 4 + 1 tasks): u32 LE pid, u16 LE n, n bytes
//       -> ids-<pid>.img
//   then, while bytes are left (at most 4): u32 LE files_id, u16 LE n,
//       n bytes -> fdinfo-<files_id>.img
// (fewer bytes where the input ends first). Nothing may crash; a reading
// that succeeds gives each EXT file a task of the checkpoint, the same
// the second time; a task without an ids image leaves nothing to tell
// (no answer or an error, never a map).
#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "base/result.h"
#include "fuzz_common.h"
#include "image/criu_images.h"

namespace {

constexpr size_t kMaxTables = 4;

// Reads little-endian numbers and length-prefixed pieces off the input.
class Cursor {
public:
	explicit Cursor(std::span<const uint8_t> in) : in_(in) {}
	bool empty() const { return in_.empty(); }
	uint32_t u32()
	{
		uint32_t v = 0;
		for (int i = 0; i < 4 && !in_.empty(); i++) {
			v |= static_cast<uint32_t>(in_[0]) << (8 * i);
			in_ = in_.subspan(1);
		}
		return v;
	}
	std::span<const uint8_t> piece()
	{
		size_t n = 0;
		for (int i = 0; i < 2 && !in_.empty(); i++) {
			n |= static_cast<size_t>(in_[0]) << (8 * i);
			in_ = in_.subspan(1);
		}
		const auto out = in_.first(std::min(n, in_.size()));
		in_ = in_.subspan(out.size());
		return out;
	}

private:
	std::span<const uint8_t> in_;
};

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	using namespace amdcr;
	if (size == 0)
		return 0;
	Cursor in(std::span<const uint8_t>(data, size).subspan(1));
	const size_t tasks = data[0] % 4 + 1;
	const fuzz::ScratchDir &dir = fuzz::scratch();
	dir.clear();
	std::vector<uint32_t> pids;
	for (size_t i = 0; i < tasks; i++) {
		const uint32_t pid = in.u32();
		pids.push_back(pid);
		dir.put(strprintf("ids-%u.img", pid), in.piece());
	}
	for (size_t i = 0; i < kMaxTables && !in.empty(); i++) {
		const uint32_t files_id = in.u32();
		dir.put(strprintf("fdinfo-%u.img", files_id), in.piece());
	}
	auto images = ImageDir::open(dir.path());
	fuzz::require(images.ok(), "the scratch directory opens");
	const CriuIdSet checkpoint(pids);

	auto first = read_ext_file_restorers(*images, checkpoint);
	if (first.ok() && first->has_value())
		for (const auto &[id, pid] : **first)
			fuzz::require(checkpoint.contains(pid), "an EXT file restored by a task of the checkpoint");
	auto again = read_ext_file_restorers(*images, checkpoint);
	fuzz::require(first.ok() == again.ok() && (!first.ok() || *first == *again),
		      "a second reading gives the same answer");

	// One more task, whose ids image is not there (pids are the input's,
	// so one of them + 1 is not among them when it is the largest).
	const uint32_t absent = checkpoint.sorted().back() + 1;
	if (absent != 0) {
		std::vector<uint32_t> more = checkpoint.sorted();
		more.push_back(absent);
		auto partial = read_ext_file_restorers(*images, CriuIdSet(std::move(more)));
		fuzz::require(!partial.ok() || !partial->has_value(),
			      "a task without an ids image: nothing to tell");
	}
	return 0;
}
