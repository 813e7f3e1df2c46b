// SPDX-License-Identifier: GPL-2.0-only
//
// The host's checkpoint description, DIR/inventory.host: a text file, one
// record per line, fields "key=value" separated by spaces, a path always
// last (it runs to the end of the line):
//
//   criu-host-inventory 1
//   root pid=1234
//   plugin name=amdgpu_plugin
//   task pid=1234 ppid=0
//   fd task=1234 fd=5 id=3 kind=ext flags=02 cloexec=1 pos=0 path=/dev/kfd
//   vma task=1234 start=0x7f... end=0x7f... prot=3 flags=0x1 pgoff=0x0 path=/dev/dri/renderD128
//
// "plugin" lines are the plugins the images need (CRIU 4.x's inventory
// plugin list): restore fails with "Missing required plugin" without them.
// fd kinds: ext (a plugin dumped it: RESTORE_EXT_FILE), reg (reopened by
// path at restore), skip (CRIU would restore it itself; the host does not).
// Tasks appear parent first; ppid=0 marks the root.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.h"

namespace host {

struct FdRecord {
	int fd = -1;
	int id = 0;
	std::string kind;
	unsigned flags = 0;
	bool cloexec = false;
	int64_t pos = 0;
	std::string path;
};

struct VmaRecord {
	uint64_t start = 0, end = 0;
	int prot = 0;
	int flags = 0;
	uint64_t pgoff = 0;
	std::string path;
};

struct TaskRecord {
	pid_t pid = 0;
	pid_t ppid = 0; // 0: the root
	std::vector<FdRecord> fds;
	std::vector<VmaRecord> vmas;
};

struct Inventory {
	pid_t root = 0;
	std::vector<std::string> plugins;
	std::vector<TaskRecord> tasks;

	TaskRecord *task(pid_t pid);
};

constexpr const char *kInventoryName = "inventory.host";

amdcr::Status write_inventory(int dirfd, const Inventory &inv);
amdcr::Result<Inventory> read_inventory(int dirfd);

} // namespace host
