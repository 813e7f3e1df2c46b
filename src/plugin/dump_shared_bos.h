// SPDX-License-Identifier: GPL-2.0-only
//
// DumpSharedBos: the dump's registry of BOs that several files may hold
// (image/render_image.h SharedBo), in one or several processes. The first
// file dumped that holds a BO, render file or dma-buf, gives it its shared
// id and writes its contents; every file dumped after it names that entry.
//
// A BO is known by the inode (st_dev, st_ino) of its dma-buf: the kernel
// gives a BO one dma-buf as long as any file holds a handle of it, so
// every file holding the BO exports the same one. (The restore's table of
// the same BOs is plugin/shared_bos.h.)
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <map>
#include <utility>

#include "base/result.h"
#include "image/render_image.h"

namespace amdcr {

class DumpSharedBos {
public:
	// A BO some file dumped before held: its entry, with the GEM handle
	// of that first holder.
	struct Seen {
		SharedBo bo;
		uint32_t handle = 0;
	};

	// The BO behind dma-buf `dmabuf` (an export of a BO the file being
	// dumped holds, or a bare dma-buf): the entry of the first file that
	// held it (*seen = true), else `first` under a new id, remembered with
	// `handle` (*seen = false).
	Result<SharedBo> share(int dmabuf, SharedBo first, uint32_t handle, bool *seen);
	// The entry of the BO whose dma-buf has stat `st`, or nullptr when no
	// file dumped so far held it.
	const Seen *find(const struct stat &st) const;
	// The checksums of shared BO `id`'s contents, once its first holder
	// has written them: the files dumped after it carry them too.
	void set_checksum(uint32_t id, const BoChecksum &checksum);

private:
	using Key = std::pair<uint64_t, uint64_t>; // the dma-buf's (st_dev, st_ino)
	static Key key_of(const struct stat &st)
	{
		return {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
	}
	std::map<Key, Seen> bos_;
};

} // namespace amdcr
