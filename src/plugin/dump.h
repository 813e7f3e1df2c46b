// SPDX-License-Identifier: GPL-2.0-only
//
// The dump stage: one DumpSession from init(DUMP) to exit(DUMP).
//
// A process's GPU queues are paused by PROCESS_INFO when its /dev/kfd file
// is dumped. Under criu-dev's ABI they stay paused until DUMP_DEVICES_LATE,
// when every paused process is unpaused; CRIU 4.0-4.2.1 have no such hook,
// so there a process is unpaused as soon as its /dev/kfd file is dumped
// (SessionEnv::dump_devices_late). If the dump fails before that, finish()
// (exit) unpauses them; the destructor does too, so a session can never
// leave a process paused.
//
// A killed CRIU (no exit hook runs): the first GPU file of the dump (a
// /dev/kfd file before its pause, an AMD render node, a dma-buf of an AMD
// GPU) starts a Guardian (plugin/guardian.h), which is told every /dev/kfd
// file before its pause (with the processes that may own it), every paused
// and unpaused process and every temporary file; if CRIU's process ends
// before finish(), it unpauses the processes still paused (or perhaps
// paused) and removes those files. A dump without AMD GPU state never starts one.
//
// Nothing half-written: every image file is written under a temporary name
// and renamed onto its final name when complete (image/image_dir.h), and
// created_ records each such file by name and inode (plugin/created_files.h);
// when a hook of ours fails, and when the dump ends with an error
// (finish(ret != 0), whichever part of CRIU failed), exactly those files are
// removed, so no restore or inspector finds a checkpoint that looks complete
// but is not. A file of the directory that this dump did not write (an older
// checkpoint's file of another name, or of a name this dump had not reached
// yet) is never removed; one of the same name that this dump did write was
// replaced by it, as CRIU replaces its own images.
#pragma once

#include <sys/stat.h>

#include <atomic>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/shared_memory.h"
#include "device/kfd.h"
#include "image/binding.h"
#include "image/image_dir.h"
#include "image/kfd_chain.h"
#include "image/kfd_image.h"
#include "image/render_image.h"
#include "plugin/created_files.h"
#include "plugin/guardian.h"
#include "plugin/session.h"
#include "topology/topology.h"

namespace amdcr {

class DumpSession {
public:
	explicit DumpSession(SessionEnv env);
	~DumpSession();
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
	size_t paused_count() const { return paused_.size(); }

private:
	struct Paused {
		Kfd kfd; // our dup of the target's /dev/kfd file
		uint32_t pid = 0;   // in the target's pid namespace (PROCESS_INFO's)
		pid_t host_pid = 0; // in ours, when known (the guardian watches it)
		int id = 0;
	};

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
	// The checkpoint's shared BO behind dma-buf `dmabuf` (an export of a
	// BO the file being dumped holds, or a bare dma-buf): the entry of the
	// first file that held it (*seen = true), else `first` under a new id,
	// remembered with `handle` (*seen = false).
	Result<SharedBo> share_bo(int dmabuf, SharedBo first, uint32_t handle, bool *seen);
	// The checksums of shared BO `id`'s contents, once its first holder
	// has written them: the files dumped after it carry them too.
	void set_shared_checksum(uint32_t id, const BoChecksum &checksum);
	// The local topology, parsed on first use. nullptr (not an error) when
	// the machine has no KFD topology.
	const Topology *topology();
	const TopologyNode *amd_render_gpu(const struct stat &st);
	Status unpause_all();
	// The image directory of this hook (session_image_dir), telling the
	// guardian (when there is one) each temporary file it creates.
	Result<ImageDir> image_dir();
	// From now on `dir` tells the guardian (if any) its temporary files.
	void tell_guardian_temp_files(ImageDir &dir) const;
	// A message to the guardian failed: a warning (once) when the guardian
	// has ended (the rest of the dump is unguarded), else a debug line.
	void guardian_error(const Error &e) const;
	// Starts the guardian unless it runs: called by each GPU file's dump
	// before it pauses anything or creates any file. When it cannot start
	// (logged) the dump goes on without one.
	void start_guardian();
	// Before the pause of `target` (CRIU file `id`): the guardian (if
	// any) learns the file and `holders`, the processes that may own it
	// (the first Guardian::kMaxCandidates of them), so that a
	// CRIU killed before guard() leaves nothing paused. Not told (logged)
	// when it cannot be: the dump goes on.
	void announce(const Kfd &target, int id, std::vector<pid_t> holders) const;
	// Paused process `p` under the guardian's watch (sets p.host_pid).
	// Not watched (logged) when it cannot be: the dump goes on.
	void guard(Paused &p);
	void claim();
	// The binding of this dump's image for CRIU file `id`: the dump's
	// identity (drawn with its first GPU file) and the file id.
	Result<DumpBinding> binding_for(int id);
	// A dump that succeeded and wrote GPU images: its manifest
	// (image/binding.h), once CRIU has closed its own images (exit(DUMP)).
	// Failing, it logs an error: CRIU's dump is over.
	void write_manifest();
	// Removes every file in created_ (the dump failed: `why`) that is
	// still the file this dump wrote, and puts back the older files they
	// had replaced.
	void discard_created(const char *why);
	// The dump succeeded: removes the older files its own replaced, kept
	// until now (CreatedFiles::drop_kept).
	void drop_replaced();

	// Where this dump's copies add up (nullptr when it could not be
	// mapped: then there is no summary line).
	CopyStage *stage() const { return stage_ ? stage_->get() : nullptr; }

	SessionEnv env_;
	std::optional<SharedMemory<CopyStage>> stage_;
	DeviceNumbers devs_;
	std::optional<Result<Topology>> topo_;
	std::vector<Paused> paused_;
	CreatedFiles created_; // image files of this dump, by name and inode
	std::optional<DumpId> dump_id_;	   // the same in every image of this dump
	// The BOs dumped so far that other files may hold too, by the inode
	// (st_dev, st_ino) of their dma-buf: the kernel gives a BO one dma-buf
	// as long as any file holds a handle of it, so every file holding the
	// BO exports the same one. With the handle of the first holder.
	struct SeenBo {
		SharedBo bo;
		uint32_t handle = 0;
	};
	std::map<std::pair<uint64_t, uint64_t>, SeenBo> shared_bos_;
	bool claimed_ = false;
	// Started by the first GPU file (start_guardian); finish() ends it.
	std::optional<Guardian> guardian_;
	bool guardian_failed_ = false; // start_guardian() does not try again
	mutable std::atomic<bool> guardian_lost_{false}; // guardian_error() warned
};

} // namespace amdcr
