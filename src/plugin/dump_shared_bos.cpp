// SPDX-License-Identifier: GPL-2.0-only
#include "plugin/dump_shared_bos.h"

#include <cerrno>

namespace amdcr {

Result<SharedBo> DumpSharedBos::share(int dmabuf, SharedBo first, uint32_t handle, bool *seen)
{
	struct stat st {};
	if (::fstat(dmabuf, &st) != 0)
		return errno_error(errno, "fstat of a dma-buf");
	if (const Seen *s = find(st)) {
		*seen = true;
		return s->bo;
	}
	if (bos_.size() >= kMaxSharedBoId)
		return make_error(E2BIG, "more than %u BOs with contents in one checkpoint", kMaxSharedBoId);
	first.id = static_cast<uint32_t>(bos_.size()) + 1;
	bos_.emplace(key_of(st), Seen{first, handle});
	*seen = false;
	return first;
}

const DumpSharedBos::Seen *DumpSharedBos::find(const struct stat &st) const
{
	auto it = bos_.find(key_of(st));
	return it == bos_.end() ? nullptr : &it->second;
}

void DumpSharedBos::set_checksum(uint32_t id, const BoChecksum &checksum)
{
	for (auto &[key, seen] : bos_)
		if (seen.bo.id == id)
			seen.bo.checksum = checksum;
}

} // namespace amdcr
