// SPDX-License-Identifier: GPL-2.0-only
//
// The render-node ioctls for checkpointing GEM buffer objects that Debian's
// libdrm 2.4.114 headers predate, for test clients that call drmIoctl()
// with them. Layouts and numbers are those of the kernel uAPI:
//   include/uapi/drm/amdgpu_drm.h  DRM_AMDGPU_GEM_OP (0x10, the 24-byte
//       struct drm_amdgpu_gem_op with num_entries/padding),
//       AMDGPU_GEM_OP_GET_MAPPING_INFO, struct drm_amdgpu_gem_vm_entry,
//       DRM_AMDGPU_GEM_LIST_HANDLES (0x19) and its structs,
//       AMDGPU_GEM_CREATE_* flags newer than 2.4.114;
//   include/uapi/drm/drm.h  DRM_IOCTL_GEM_CHANGE_HANDLE (0xD2).
// (Linux 6.18+; the same as criu-dev's plugins/amdgpu/{amdgpu_drm,drm}.h.)
//
// The names live in kfdemu::uapi so they do not collide with libdrm's
// (its struct drm_amdgpu_gem_op is the older 16-byte one); the ioctl
// numbers are constants, not macros, for the same reason. The device model
// has its own definitions (model/abi.h) on purpose: a test that used the
// implementation's layouts could not catch a mistake in them.
#pragma once

#include <drm.h>

#include <cstdint>

namespace kfdemu::uapi {

// struct drm_amdgpu_gem_op (24 bytes since the MAPPING_INFO op)
struct drm_amdgpu_gem_op {
	uint32_t handle;
	uint32_t op;
	uint64_t value;		// in/out value; MAPPING_INFO: array of drm_amdgpu_gem_vm_entry
	uint32_t num_entries;	// MAPPING_INFO: capacity in, number of mappings out
	uint32_t padding;	// must be 0
};

struct drm_amdgpu_gem_vm_entry {
	uint64_t addr;		// start of the mapping, bytes
	uint64_t size;		// bytes
	uint64_t offset;	// offset in the BO
	uint64_t flags;		// the PTE flags the kernel stored
};

struct drm_amdgpu_gem_list_handles {
	uint64_t entries;	// array of drm_amdgpu_gem_list_handles_entry
	uint32_t num_entries;	// capacity in, number of handles out
	uint32_t padding;
};

struct drm_amdgpu_gem_list_handles_entry {
	uint32_t gem_handle;
	uint32_t flags;		// GEM_LIST_HANDLES_FLAG_IS_IMPORT
	uint64_t size;
	uint64_t preferred_domains;
	uint64_t alloc_flags;
	uint64_t alignment;	// TTM's page_alignment: pages
};

struct drm_gem_change_handle {
	uint32_t handle;
	uint32_t new_handle;
};

// struct drm_amdgpu_gem_create_in: what GET_GEM_CREATE_INFO writes at value.
struct drm_amdgpu_gem_create_in {
	uint64_t bo_size;
	uint64_t alignment;	// bytes
	uint64_t domains;
	uint64_t domain_flags;
};

static_assert(sizeof(drm_amdgpu_gem_op) == 24 && sizeof(drm_amdgpu_gem_vm_entry) == 32);
static_assert(sizeof(drm_amdgpu_gem_list_handles) == 16 && sizeof(drm_amdgpu_gem_list_handles_entry) == 40);
static_assert(sizeof(drm_gem_change_handle) == 8 && sizeof(drm_amdgpu_gem_create_in) == 32);

constexpr uint32_t GEM_OP_GET_GEM_CREATE_INFO = 0, GEM_OP_SET_PLACEMENT = 1, GEM_OP_GET_MAPPING_INFO = 2;
constexpr uint32_t GEM_LIST_HANDLES_FLAG_IS_IMPORT = 1u << 0;
constexpr uint64_t GEM_CREATE_DISCARDABLE = 1u << 12, GEM_CREATE_COHERENT = 1u << 13,
		   GEM_CREATE_UNCACHED = 1u << 14, GEM_CREATE_EXT_COHERENT = 1u << 15,
		   GEM_CREATE_GFX12_DCC = 1u << 16;

constexpr unsigned long IOCTL_AMDGPU_GEM_OP = DRM_IOWR(DRM_COMMAND_BASE + 0x10, drm_amdgpu_gem_op);
constexpr unsigned long IOCTL_AMDGPU_GEM_LIST_HANDLES =
	DRM_IOWR(DRM_COMMAND_BASE + 0x19, drm_amdgpu_gem_list_handles);
constexpr unsigned long IOCTL_GEM_CHANGE_HANDLE = DRM_IOWR(0xD2, drm_gem_change_handle);

} // namespace kfdemu::uapi
