// SPDX-License-Identifier: GPL-2.0-only
//
// Where the plugin finds the machine: device nodes, sysfs, /dev/shm; and how
// it tells a KFD or AMD render-node file from any other file.
//
// Production uses the real paths. Tests and the emulator can point them
// elsewhere; the plugin itself is tuned only by KFD_* variables.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "base/result.h"
#include "base/unique_fd.h"

namespace amdcr {

class Topology;

struct SystemPaths {
	std::string dev_dir = "/dev";	  // kfd, dri/renderD<N>
	std::string sys_root = "/";	  // sys/class/kfd/kfd/topology
	std::string shm_dir = "/dev/shm"; // hsakmt shared memory

	std::string kfd_path() const { return dev_dir + "/kfd"; }
	std::string render_path(uint32_t minor) const;
};

// Device numbers of this machine's KFD and DRM nodes (from stat of
// /dev/kfd and /dev/dri/renderD128). Absent nodes leave the fields empty:
// then no file can be ours.
struct DeviceNumbers {
	std::optional<dev_t> kfd;		 // st_rdev of /dev/kfd
	std::optional<unsigned int> drm_major;	 // major of /dev/dri/renderD128

	static DeviceNumbers probe(const SystemPaths &paths);
};

enum class DeviceFile { Kfd, Render, Other };

// What a file (by its stat) is. KFD: the KFD node's device number with
// minor 0. Render: the DRM major with a render minor. The topology decides
// later whether a render node belongs to an AMD GPU.
DeviceFile classify_device(const struct stat &st, const DeviceNumbers &devs);

// Whether the KFD driver supports checkpoint/restore (ioctl interface 1.8
// or newer), asked on a /dev/kfd file of our own.
Status check_kfd_criu_support(const SystemPaths &paths);

// Makes room for `more` fds beyond those open now (CHECKPOINT and RESTORE
// install one dma-buf fd per VRAM/GTT BO): raises the soft RLIMIT_NOFILE up
// to the hard one when needed, else EMFILE naming both numbers.
Status ensure_fd_room(uint64_t more);

// Opens /dev/dri/renderD<minor> read-write, close-on-exec.
Result<UniqueFd> open_render_node(const SystemPaths &paths, uint32_t minor);

} // namespace amdcr
