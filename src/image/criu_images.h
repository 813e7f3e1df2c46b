// SPDX-License-Identifier: GPL-2.0-only
//
// Facts from CRIU's own images in the checkpoint directory that bind the
// GPU images to their checkpoint, read without CRIU's protobuf definitions
// (the few fields named below):
//   files.img   file_entry (field 1 type, field 2 id): the ids of the EXT
//               files (type 16) CRIU restores: the ids it will ask the
//               plugins for;
//   pstree.img  pstree_entry (field 1 pid): the checkpoint's tasks, by the
//               pid each has in its own pid namespace (the pid KFD's
//               PROCESS_INFO reports and a restored task has again);
//   files.img   the REG files (type 1) that are render nodes: reg_file_entry
//               (file_entry field 3; its field 1 id, field 6 name);
//   ids-<pid>.img, fdinfo-<files_id>.img  which task holds which EXT
//               file (read_ext_file_restorers);
//   mm-<pid>.img  mm_entry's VMAs (field 14, vma_entry: 1 start, 2 end,
//               3 pgoff, 4 shmid, 7 status): those a plugin claimed
//               (status VMA_EXT_PLUGIN, 1 << 27) whose file (shmid, a REG
//               id of files.img) is a render node: the mappings CRIU hands
//               the plugins at restore (UPDATE_VMA_MAP).
// Each file starts with CRIU's image magic (IMG_COMMON_MAGIC 0x54564319,
// then the file's own: FILES_MAGIC 0x56303138, PSTREE_MAGIC 0x50273030,
// MM_MAGIC 0x57492820, IDS_MAGIC 0x54432030, FDINFO_MAGIC 0x56213732;
// images of CRIUs writing no common magic start with the file's own), then
// entries of a 4-byte little-endian size and a packed message.
//
// Bounded in memory and time: each file is opened as base/file_io.h's
// open_in_dir opens a file of a hostile directory (never through a
// symlink, a regular file only, its type checked before it is opened, so
// a FIFO neither hangs the reader nor is a device opened) and must be of
// at most kMaxCriuImageBytes; it is read as a stream (one entry at a time, each at
// most kMaxCriuEntryBytes), and only the ids are kept, as sorted arrays of
// at most kMaxCriuIds each. Past a limit the reading stops with an Error
// naming the file and the limit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "image/image_dir.h"

namespace amdcr {

// CRIU's files.img or pstree.img larger than this is refused unread.
inline constexpr uint64_t kMaxCriuImageBytes = uint64_t{256} << 20;
// One entry (a pstree_entry lists its task's threads) larger than this is
// refused.
inline constexpr uint32_t kMaxCriuEntryBytes = 32u << 20;
// Ids kept per kind: the kernel's PID_MAX_LIMIT (2^22), the most tasks a
// checkpoint can hold; EXT files (one per GPU device file opened) past it
// are refused too.
inline constexpr size_t kMaxCriuIds = size_t{1} << 22;

// A set of CRIU ids (file ids, pids), 4 bytes each.
class CriuIdSet {
public:
	CriuIdSet() = default;
	// From any ids, in any order, duplicates allowed.
	explicit CriuIdSet(std::vector<uint32_t> ids);
	bool contains(uint32_t id) const;
	size_t size() const { return ids_.size(); }
	const std::vector<uint32_t> &sorted() const { return ids_; }
	bool operator==(const CriuIdSet &) const = default;

private:
	std::vector<uint32_t> ids_; // sorted, unique
};

struct CriuCheckpointFacts {
	CriuIdSet ext_file_ids;
	CriuIdSet pids;
};

// nullopt when the directory has no files.img or no pstree.img (a
// checkpoint of another CRIU stand-in, or streamed images: the streamer
// serves CRIU's files to CRIU alone). A file that is there but unreadable,
// malformed, not a regular file or past a limit above is an Error naming
// it.
Result<std::optional<CriuCheckpointFacts>> read_criu_facts(const ImageDir &dir);

// A task's mapping of a render node, which the restore must give back
// (UPDATE_VMA_MAP: moved to the mmap offset its BO has then).
struct CriuRenderMapping {
	uint32_t pid = 0;	// the task (mm-<pid>.img)
	uint64_t start = 0;	// its addresses
	uint64_t end = 0;
	uint64_t pgoff = 0;	// the render node offset it maps, in bytes
	uint32_t file_id = 0;	// its file: a REG id of files.img
	std::string path;	// that file's path ("/dev/dri/renderD128")
	uint32_t minor = 0;	// its render minor (128)
};

// Every render node mapping of the tasks `pids` (from pstree.img), read
// from their mm-<pid>.img (a task without one, a zombie, has none) as
// read_criu_facts() reads, at most kMaxCriuIds in all. Not when streaming
// (ENOTSUP).
Result<std::vector<CriuRenderMapping>> read_render_mappings(const ImageDir &dir, const CriuIdSet &pids);

// The task CRIU restores each EXT file of the checkpoint in, by file id:
// the lowest pid among the tasks `pids` (pstree.img's) whose fd table
// holds it (CRIU gives a shared file to the task of lower pid to restore,
// pid_rst_prio). A task's table is fdinfo-<files_id>.img (fdinfo_entry: 1
// id, 3 type), its files_id that of ids-<pid>.img (task_kobj_ids_entry,
// its field 2; where CRIU's restore reads it). nullopt: a task's ids
// image or its fd table missing (nothing to tell then). Read as
// read_criu_facts() reads, at most kMaxCriuIds files. Not when streaming
// (ENOTSUP).
Result<std::optional<std::map<uint32_t, uint32_t>>> read_ext_file_restorers(const ImageDir &dir,
									    const CriuIdSet &pids);

// KFD file `id`, dumped from task `pid`, must be restored in that task (its
// KFD state goes to the process that calls RESTORE): an Error naming both
// when `restorers` (read_ext_file_restorers) give the file to another task,
// which means the image comes from another task or checkpoint. The restore
// checks this before any GPU state exists, verify offline.
Status check_kfd_file_restorer(const std::map<uint32_t, uint32_t> &restorers, uint32_t id, uint32_t pid);

// "/dev/dri/renderD<N>" (a path whose last part is renderD and a number)
// -> N; 0 when the path is not a render node's.
uint32_t render_minor_of_path(std::string_view path);

// CRIU's images that a dump's GPU files are bound to (image/binding.h,
// the dump manifest): those CRIU writes anew at every dump and closes
// before the plugins' exit hook: timens-*.img (CLOCK_MONOTONIC and
// CLOCK_BOOTTIME read at the dump, so no two dumps of a machine write the
// same), inventory.img, pstree.img, files.img and the tasks' core-*.img.
// Memory pages (pages-*.img) are not: they can be gigabytes.
bool is_bound_criu_image(const std::string &name);

// The size and checksum64 (base/checksum.h) of one of CRIU's images.
struct CriuImageDigest {
	std::string name;
	uint64_t size = 0;
	uint64_t checksum = 0;
	bool operator==(const CriuImageDigest &) const = default;
};

// Every file of the directory is_bound_criu_image() names, sorted by name,
// each read as read_criu_facts() reads (regular, non-blocking, no link,
// within kMaxCriuImageBytes). Not when streaming (ENOTSUP).
Result<std::vector<CriuImageDigest>> digest_criu_images(const ImageDir &dir);

} // namespace amdcr
