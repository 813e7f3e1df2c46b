// SPDX-License-Identifier: GPL-2.0-only
//
// TaskMappings: the CPU mappings of one restored task's GPU files that
// CRIU must move (a part of TaskRestore, plugin/restore_task.h). Each BO a
// file restores records where its mapping was and where it is now; at
// UPDATE_VMA_MAP, once the task's fds are installed, CRIU asks for each
// mapping of a GPU file by path and checkpointed offset.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace amdcr {

// One CPU mapping to move: checkpointed file and offset -> new offset and
// the file CRIU must mmap.
struct VmaMove {
	bool kfd = false;	   // /dev/kfd (CRIU opens the path), else a render node
	uint32_t old_minor = 0;	   // render node minor at checkpoint
	uint32_t local_minor = 0;  // the render node it maps through now
	uint64_t old_offset = 0;
	uint64_t new_offset = 0;
	// The render file it maps through (TaskRenderFiles::fd): -1 the task's
	// file of local_minor, else the CRIU id of a further file of that node.
	int file_id = -1;
};

// A mapping's file as CRIU names it in UPDATE_VMA_MAP.
struct MappedGpuFile {
	bool kfd = false;	// /dev/kfd
	uint32_t minor = 0;	// else the render node's minor at checkpoint
	// The GPU file `path` names; nullopt when it is neither /dev/kfd nor
	// a render node.
	static std::optional<MappedGpuFile> of_path(const char *path);
};

class TaskMappings {
public:
	void add(const VmaMove &m) { moves_.push_back(m); }
	void add(const std::vector<VmaMove> &ms) { moves_.insert(moves_.end(), ms.begin(), ms.end()); }
	// The move of `file`'s mapping at checkpointed offset `old_offset`;
	// nullptr when no BO of this task was mapped there.
	const VmaMove *find(const MappedGpuFile &file, uint64_t old_offset) const;

private:
	std::vector<VmaMove> moves_;
};

} // namespace amdcr
