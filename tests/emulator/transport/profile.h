// SPDX-License-Identifier: GPL-2.0-only
//
// Machine profiles: named machines (files in tests/emulator/profiles/) and
// custom machine files, parsed into the model's MachineDesc; launcher
// overrides (--gpu-ids, --minors, --vram, ...) applied on top. The file
// format is documented in tests/emulator/README.md.
#pragma once

#include "../model/interface.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kfdemu {

// The KFD character device major the emulator reports (the kernel allocates
// it dynamically; it only has to differ from DRM's 226).
inline constexpr unsigned kKfdMajor = 510;
inline constexpr unsigned kDrmMajor = 226;

struct Overrides {
	std::vector<uint32_t> gpu_ids;	// by GPU order
	std::vector<uint32_t> minors;	// render minors by GPU order
	std::vector<uint64_t> vram;	// bytes; one value = every GPU
	std::optional<uint32_t> fw_version, sdma_fw_version;
	std::optional<double> sdma_gbps;
	bool vram_resident = false;	// --vram-resident: every GPU's
	std::vector<uint32_t> cgroup_minors; // --device-cgroup: render minors allowed
};

// Parses machine-file text. On error returns nullopt and sets *error to
// "line N: what".
std::optional<MachineDesc> parse_machine(std::string_view text, std::string *error);

// `name_or_path`: a profile name (looked up as <profile_dir>/<name>.machine)
// or a path to a machine file (contains '/' or ends in ".machine").
std::optional<MachineDesc> load_machine(std::string_view name_or_path,
					std::string_view profile_dir,
					std::string *error);

// Applies launcher overrides; returns an error message or "".
std::string apply_overrides(MachineDesc &m, const Overrides &o);

// The topology node directories of the GPUs m.cgroup_minors denies (none
// when it is empty): their files read as EPERM, as the kernel's device
// cgroup check makes them.
std::vector<std::string> cgroup_denied_paths(const MachineDesc &m);

// Re-derives the count properties (mem_banks_count, caches_count,
// io_links_count, p2p_links_count) from the vectors.
void sync_counts(NodeDesc &n);

// Parsers shared by the launcher: "0x1a2b,15", "130,131", "32G,64G".
bool parse_u32_list(std::string_view s, std::vector<uint32_t> *out);
bool parse_size_list(std::string_view s, std::vector<uint64_t> *out);
bool parse_size(std::string_view s, uint64_t *out);

std::vector<const NodeDesc *> gpu_nodes(const MachineDesc &m);

} // namespace kfdemu
