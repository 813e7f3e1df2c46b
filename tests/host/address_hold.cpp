// SPDX-License-Identifier: GPL-2.0-only
#include "address_hold.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>

namespace host {
namespace {

using Range = std::pair<uint64_t, uint64_t>;

// Sorted, with touching or overlapping ranges merged.
std::vector<Range> merged(std::vector<Range> r)
{
	std::sort(r.begin(), r.end());
	std::vector<Range> out;
	for (const Range &x : r) {
		if (x.first >= x.second)
			continue;
		if (!out.empty() && x.first <= out.back().second)
			out.back().second = std::max(out.back().second, x.second);
		else
			out.push_back(x);
	}
	return out;
}

void unmap(uint64_t start, uint64_t end)
{
	if (end > start)
		munmap(reinterpret_cast<void *>(start), end - start);
}

} // namespace

AddressHold &AddressHold::operator=(AddressHold &&o) noexcept
{
	if (this != &o) {
		release();
		ranges_ = std::exchange(o.ranges_, {});
	}
	return *this;
}

amdcr::Result<AddressHold> AddressHold::take(const Inventory &inv)
{
	std::vector<Range> all;
	for (const TaskRecord &t : inv.tasks)
		for (const VmaRecord &v : t.vmas)
			all.emplace_back(v.start, v.end);
	AddressHold hold;
	for (const Range &r : merged(std::move(all))) {
		void *want = reinterpret_cast<void *>(r.first);
		void *got = mmap(want, r.second - r.first, PROT_NONE,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
		if (got == MAP_FAILED || got != want) {
			const int err = got == MAP_FAILED ? errno : EEXIST;
			if (got != MAP_FAILED)
				munmap(got, r.second - r.first);
			return amdcr::make_error(err, "can't hold %#" PRIx64 "-%#" PRIx64 " for the tasks' mappings: %s",
						 r.first, r.second, std::strerror(err));
		}
		hold.ranges_.push_back(r);
	}
	return hold;
}

bool AddressHold::holds(uint64_t start, uint64_t end) const
{
	return std::any_of(ranges_.begin(), ranges_.end(),
			   [&](const Range &r) { return r.first <= start && end <= r.second; });
}

void AddressHold::keep_only(const std::vector<VmaRecord> &own)
{
	std::vector<Range> mine;
	for (const VmaRecord &v : own)
		mine.emplace_back(v.start, v.end);
	mine = merged(std::move(mine));
	std::vector<Range> kept;
	for (const Range &r : ranges_) {
		uint64_t at = r.first;
		for (const Range &m : mine) {
			if (m.second <= at || m.first >= r.second)
				continue;
			unmap(at, std::max(at, m.first));
			const Range k{std::max(at, m.first), std::min(r.second, m.second)};
			kept.push_back(k);
			at = k.second;
		}
		unmap(at, r.second);
	}
	ranges_ = std::move(kept);
}

void AddressHold::release()
{
	for (const Range &r : ranges_)
		unmap(r.first, r.second);
	ranges_.clear();
}

} // namespace host
