// SPDX-License-Identifier: GPL-2.0-only
//
// Names for the bit fields images store, from the kernel's own headers:
// KFD_IOC_ALLOC_MEM_FLAGS_* (kfd_bo_entry.alloc_flags),
// AMDGPU_GEM_DOMAIN_* (drm_bo_entry.preferred_domains) and
// AMDGPU_GEM_CREATE_* (drm_bo_entry.alloc_flags). Names are the macro's
// suffix in lower case ("vram", "writable"); a set bit without a name
// shows as "0x<bit>".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace amdcr::inspect {

std::vector<std::string> kfd_alloc_flag_names(uint32_t flags);
std::vector<std::string> gem_domain_names(uint64_t domains);
std::vector<std::string> gem_create_flag_names(uint64_t flags);

// The kind of a KFD BO from its flags: "vram", "gtt", "userptr",
// "doorbell", "mmio_remap" or "other".
const char *kfd_bo_type(uint32_t flags);

// Names joined with '|', or "0" when none.
std::string join_flags(const std::vector<std::string> &names);

} // namespace amdcr::inspect
