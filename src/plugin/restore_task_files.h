// SPDX-License-Identifier: GPL-2.0-only
//
// TaskRenderFiles: the render node files one restored task restores its
// GPU state into (a part of TaskRestore, plugin/restore_task.h;
// restore_task_files.cpp).
//
// The render node file of one local GPU is the one KFD's RESTORE binds the
// GPU's VM to, whose BOs only it may map; the task's render images go into
// it too (node_file). A process may hold several open files of one render
// node, each with BOs, handles and a VM of its own, and the images do not
// say which of them KFD's VM was bound to (libhsakmt's): so render images
// go into the node's one file (as upstream's plugin does) as long as their
// GEM handles and GPU VAs do not clash with those already there; one that
// would clash gets an open file of its own, as it had (file_for).
//
// The files are the plugin's, above the fds CRIU restores, until CRIU has
// installed the task's own copy of them (the first UPDATE_VMA_MAP); then
// they are borrowed from the task (borrow_from_task), so the restored
// process keeps no extra fd.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <utility>

#include "base/result.h"
#include "base/unique_fd.h"
#include "device/system.h"
#include "image/render_image.h"

namespace amdcr {

class TaskRenderFiles {
public:
	explicit TaskRenderFiles(const SystemPaths &paths) : paths_(paths) {}

	// The render node file of local GPU `minor`, opened at its first use.
	Result<int> node_file(uint32_t minor);
	// The open file render image `id` (`img`, of local GPU `minor`) is
	// restored into: (fd, -1) for node_file(minor), else (fd, id) for a
	// file of its own when its handles or GPU VAs clash with those of the
	// render images restored into that file already.
	Result<std::pair<int, int>> file_for(uint32_t minor, int id, const RenderNodeImage &img);
	// The fd of a file given before: `file_id` -1 the node file of
	// `minor`, else render image `file_id`'s own file.
	int fd(uint32_t minor, int file_id) const;
	// Once the task's fds are installed (first UPDATE_VMA_MAP): each file
	// of ours that the task holds too is closed and borrowed from it. Once.
	void borrow_from_task();

private:
	// One render node file: ours until the task's own copy of it is
	// borrowed.
	struct File {
		UniqueFd ours;	   // moved above the task's fds
		int borrowed = -1; // the task's own fd of the same open file
		int fd() const { return ours.valid() ? ours.get() : borrowed; }
	};
	// What the render images restored into a node file took there.
	struct Use {
		std::set<int> ids;		  // render images restored into it
		std::set<uint32_t> handles;	  // their GEM handles
		std::map<uint64_t, uint64_t> vas; // their GPU VA ranges: start -> end
		bool clashes(const RenderNodeImage &img) const;
		void add(int id, const RenderNodeImage &img);
	};

	// A new open file of local GPU `minor`'s render node, above the fds
	// CRIU restores.
	Result<UniqueFd> open_file(uint32_t minor) const;

	const SystemPaths &paths_;
	std::map<uint32_t, File> node_files_;		     // by local minor
	std::map<uint32_t, Use> node_use_;		     // by local minor
	std::map<int, std::pair<uint32_t, File>> own_files_; // CRIU id -> (minor, file)
	bool borrowed_ = false;
};

} // namespace amdcr
