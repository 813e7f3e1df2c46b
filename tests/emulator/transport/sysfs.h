// SPDX-License-Identifier: GPL-2.0-only
//
// Writes the emulated machine's sysfs (KFD topology, DRM/PCI device
// directories, CPUs and NUMA nodes), /proc/cpuinfo and /dev entries into a
// private root directory. The shim redirects the real paths into it (see
// README.md "What a program sees").
#pragma once

#include "../model/interface.h"

#include <string>
#include <vector>

namespace kfdemu {

// Control files under <root>/.kfdemu/ that the shim reads at start-up.
inline constexpr const char *kRedirectsFile = ".kfdemu/redirects";
inline constexpr const char *kUnreadableFile = ".kfdemu/unreadable";
// The launcher's mount namespace (its inode number, decimal): the machine's
// host view. A process in another mount namespace (a container) sees only
// the device nodes its own /dev holds (README.md, "In a container").
inline constexpr const char *kHostMntnsFile = ".kfdemu/host-mntns";

// Writes the whole tree; returns an error message or "".
std::string write_sysfs(const MachineDesc &m, const std::string &root);

// Records the paths whose read() must fail with EPERM (device cgroup).
std::string write_unreadable(const std::string &root, const std::vector<std::string> &paths);
// Writes kHostMntnsFile: the calling process's mount namespace.
std::string write_host_mntns(const std::string &root);

// Removes a directory tree (the root at exit).
void remove_tree(const std::string &root);

// The text of nodes/N/properties for one node (kernel format).
std::string properties_text(const NodeDesc &n);

} // namespace kfdemu
