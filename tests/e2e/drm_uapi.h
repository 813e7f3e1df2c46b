// SPDX-License-Identifier: GPL-2.0-only
//
// The kernel's DRM uapi the e2e verifiers call (render_verify.cpp,
// dmabuf_verify.cpp): the layouts of include/uapi/drm/drm.h and
// amdgpu_drm.h written here, so that the checks do not share the plugin's
// definitions.
#pragma once

#include <cstdint>

namespace e2e_drm {

// DRM_IOCTL_AMDGPU_GEM_LIST_HANDLES: drm_amdgpu_gem_list_handles and its
// entries.
struct ListHandles {
	uint64_t entries;
	uint32_t num_entries, padding;
};
struct ListEntry {
	uint32_t gem_handle, flags;
	uint64_t size, preferred_domains, alloc_flags, alignment;
};
constexpr unsigned long kListHandles = 0xC0106459ul; // _IOWR('d', 0x59, 16)

// DRM_IOCTL_AMDGPU_GEM_OP (drm_amdgpu_gem_op) with GET_MAPPING_INFO, whose
// answer is an array of drm_amdgpu_gem_vm_entry.
struct GemOp {
	uint32_t handle, op;
	uint64_t value;
	uint32_t num_entries, padding;
};
struct VmEntry {
	uint64_t addr, size, offset, flags;
};
constexpr unsigned long kGemOp = 0xC0186450ul; // _IOWR('d', 0x50, 24)
constexpr uint32_t kGetMappingInfo = 2;

// DRM_IOCTL_PRIME_HANDLE_TO_FD (drm_prime_handle), DRM_CLOEXEC.
struct PrimeHandle {
	uint32_t handle, flags;
	int32_t fd;
};
constexpr unsigned long kPrimeHandleToFd = 0xC00C642Dul; // _IOWR('d', 0x2d, 12)
constexpr uint32_t kCloexec = 02000000;

} // namespace e2e_drm
