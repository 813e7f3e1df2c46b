// SPDX-License-Identifier: GPL-2.0-only
//
// The dump: one DumpSession from init(DUMP) to exit(DUMP), which the C ABI
// entry file (entry.cpp) drives. It forwards each hook to the dump of the
// file's kind (a /dev/kfd file: dump_kfd.cpp; an AMD render node:
// dump_render.cpp; a bare dma-buf of an AMD GPU: dump_dmabuf.cpp) over
// parts with one role each:
//
//   PauseLedger (pause_ledger.h): the processes paused and the guardian;
//     no process is ever left paused, whatever path the dump takes.
//   DumpFiles (dump_files.h): the image directory, the files this dump
//     created, its identity and inventory entry; at exit(DUMP) the
//     manifest of a dump that succeeded, or the removal of exactly the
//     files of one that failed (and of each hook of ours that fails).
//   DumpSharedBos (dump_shared_bos.h): which BOs several files hold, so
//     that their contents are written once.
//
// The session itself keeps only what the per-kind dumps read: the
// configuration and paths, the machine's topology, and the totals of the
// summary line.
#pragma once

#include <sys/stat.h>

#include <optional>
#include <vector>

#include "base/shared_memory.h"
#include "device/kfd.h"
#include "image/binding.h"
#include "image/chunk_index.h"
#include "image/image_dir.h"
#include "image/kfd_chain.h"
#include "image/kfd_image.h"
#include "image/render_image.h"
#include "plugin/dump_files.h"
#include "plugin/dump_shared_bos.h"
#include "plugin/pause_ledger.h"
#include "plugin/session.h"
#include "topology/topology.h"

namespace amdcr {

class DumpSession {
public:
	explicit DumpSession(SessionEnv env);
	DumpSession(const DumpSession &) = delete;
	DumpSession &operator=(const DumpSession &) = delete;

	// The hooks: 0, -ENOTSUP when the file/mapping is not ours, or -errno
	// (logged here, once).
	int dump_ext_file(int fd, int id);
	int handle_device_vma(int fd, const struct stat &st);
	int dump_devices_late(int root_pid);
	// exit(DUMP, ret).
	void finish(int ret);

	// Processes whose queues are paused now (tests).
	size_t paused_count() const { return ledger_.paused_count(); }

private:
	Status dump_kfd(int fd, int id);
	// An incremental dump: when the images directory has a parent
	// checkpoint with a KFD image of `pid` of ours, each job's BOs are
	// matched with its BOs (image/kfd_chain.h, same_bo), whose checksums
	// the jobs compare with (GpuCopyJob::parent_checksums; `prev` holds
	// them); returns the parent to name in the image. nullopt: a complete
	// dump (no parent, upstream's, KFD_VERIFY=0; a parent that cannot be
	// read is logged as a warning).
	Result<std::optional<ChainParent>> compare_with_parent(const ImageDir &images, uint32_t pid, const KfdImage &img,
							       const std::vector<std::vector<size_t>> &job_bo_index,
							       std::vector<GpuCopyJob> &jobs,
							       std::optional<ParentKfdImage> &prev) const;
	Status dump_render(int fd, int id, const TopologyNode &gpu);
	// A bare dma-buf fd (dump_dmabuf.cpp): amdgpu-dmabuf_<id>.img naming
	// its BO, and the BO's contents when no file dumped before held it.
	// `*ours` = false (nothing written) when no GPU of this machine made
	// the buffer.
	Status dump_dmabuf(int fd, int id, bool *ours);
	// The local topology, parsed on first use. nullptr (not an error) when
	// the machine has no KFD topology.
	const Topology *topology();
	const TopologyNode *amd_render_gpu(const struct stat &st);
	// Where this dump's copies add up (nullptr when it could not be
	// mapped: then there is no summary line).
	SharedCopies *shared_copies() const { return shared_copies_ ? shared_copies_->get() : nullptr; }

	SessionEnv env_;
	std::optional<SharedMemory<SharedCopies>> shared_copies_;
	DeviceNumbers devs_;
	std::optional<Result<Topology>> topo_;
	// Destroyed bottom-up: the files, then the ledger, which resumes any
	// process still paused while its guardian still runs.
	PauseLedger ledger_;
	DumpFiles files_;
	DumpSharedBos shared_bos_;
	// The chunks of KFD BO contents this dump wrote, over all its
	// processes and GPUs (KFD_DEDUP; image/chunk_index.h).
	ChunkIndex chunks_;
};

} // namespace amdcr
