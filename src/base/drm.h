// SPDX-License-Identifier: GPL-2.0-only
//
// Facts of the DRM subsystem that several layers check against, and the
// parts of the kernel's DRM/amdgpu uapi that Debian's libdrm headers
// (2.4.114) predate: the ioctls the checkpoint of render-node buffer
// objects needs. Layouts and numbers are the kernel's
// (include/uapi/drm/drm.h, amdgpu_drm.h); written here once.
#pragma once

#include <sys/ioctl.h>

#include <cstdint>
#include <vector>

namespace amdcr {

// DRM render node minors (renderD128 .. renderD255).
inline constexpr uint32_t kFirstRenderMinor = 128;
inline constexpr uint32_t kLastRenderMinor = 255;

// AMDGPU_GEM_DOMAIN_* whose BOs have contents.
inline constexpr uint32_t kGemDomainGtt = 0x2;
inline constexpr uint32_t kGemDomainVram = 0x4;

// GEM handles are idr ids: 1 .. INT_MAX (DRM_IOCTL_GEM_CHANGE_HANDLE
// refuses a larger new handle with EINVAL).
inline constexpr uint32_t kMaxGemHandle = 0x7fffffff;

// The kernel release that added the render-node checkpoint ioctls below
// (DRM_IOCTL_AMDGPU_GEM_LIST_HANDLES, AMDGPU_GEM_OP_GET_MAPPING_INFO,
// DRM_IOCTL_GEM_CHANGE_HANDLE). Older kernels (and kernels that disable
// one) fail them with EINVAL: an unknown DRM ioctl number or GEM_OP op.
inline constexpr const char *kGemCriuKernel = "Linux 6.18";

// A BO's amdgpu metadata (DRM_IOCTL_AMDGPU_GEM_METADATA; Mesa keeps DCC
// and modifier state of shared buffers there, KFD's GET_DMABUF_INFO hands
// `data` to an importer). The kernel keeps `data` byte for byte, at most
// kMaxGemMetadataBytes (the ioctl's data[64] dwords; more is EINVAL).
// Setting an empty `data` leaves the BO's metadata flags as they were
// (amdgpu_bo_set_metadata stores flags only with data).
inline constexpr uint32_t kMaxGemMetadataBytes = 256;
struct GemMetadata {
	uint64_t flags = 0;
	uint64_t tiling_info = 0;
	std::vector<uint8_t> data;
	// Whether a BO created afresh (all zero, no data) has other metadata.
	bool empty() const { return flags == 0 && tiling_info == 0 && data.empty(); }
	bool operator==(const GemMetadata &) const = default;
};

namespace uapi {

inline constexpr unsigned kDrmIoctlBase = 'd';
inline constexpr unsigned kDrmCommandBase = 0x40;

// struct drm_gem_change_handle
struct GemChangeHandle {
	uint32_t handle;
	uint32_t new_handle;
};
static_assert(sizeof(GemChangeHandle) == 8);

// struct drm_amdgpu_gem_vm_entry (AMDGPU_GEM_OP_GET_MAPPING_INFO). `flags`
// are the mapping's page table entry flags, not AMDGPU_VM_PAGE_*.
struct GemVmEntry {
	uint64_t addr;
	uint64_t size;
	uint64_t offset;
	uint64_t flags;
};
static_assert(sizeof(GemVmEntry) == 32);

// struct drm_amdgpu_gem_op as extended for GET_MAPPING_INFO (24 bytes; the
// 16-byte form of older headers lacks num_entries).
struct GemOp {
	uint32_t handle;
	uint32_t op;
	uint64_t value;
	uint32_t num_entries;
	uint32_t padding;
};
static_assert(sizeof(GemOp) == 24);

inline constexpr uint32_t kGemOpGetMappingInfo = 2;

// struct drm_amdgpu_gem_list_handles / _entry. `alignment` is TTM's page
// alignment (in pages).
struct GemListHandles {
	uint64_t entries;
	uint32_t num_entries;
	uint32_t padding;
};
static_assert(sizeof(GemListHandles) == 16);

struct GemListHandlesEntry {
	uint32_t gem_handle;
	uint32_t flags;
	uint64_t size;
	uint64_t preferred_domains;
	uint64_t alloc_flags;
	uint64_t alignment;
};
static_assert(sizeof(GemListHandlesEntry) == 40);

inline constexpr uint32_t kGemListHandlesFlagIsImport = 1u << 0;

inline constexpr unsigned long kIoctlGemChangeHandle =
	_IOWR(kDrmIoctlBase, 0xD2, GemChangeHandle);
inline constexpr unsigned long kIoctlAmdgpuGemOp =
	_IOWR(kDrmIoctlBase, kDrmCommandBase + 0x10, GemOp);
inline constexpr unsigned long kIoctlAmdgpuGemListHandles =
	_IOWR(kDrmIoctlBase, kDrmCommandBase + 0x19, GemListHandles);

// GFX9+ page table entry bits (AMDGPU_PTE_*) that GET_MAPPING_INFO reports,
// and the AMDGPU_VM_PAGE_* flag of DRM_IOCTL_AMDGPU_GEM_VA that sets each.
inline constexpr uint64_t kPteExecutable = 1ull << 4;
inline constexpr uint64_t kPteReadable = 1ull << 5;
inline constexpr uint64_t kPteWriteable = 1ull << 6;
inline constexpr uint64_t kPtePrt = 1ull << 51;
inline constexpr uint32_t kVmPageReadable = 1u << 1;
inline constexpr uint32_t kVmPageWriteable = 1u << 2;
inline constexpr uint32_t kVmPageExecutable = 1u << 3;
inline constexpr uint32_t kVmPagePrt = 1u << 4;

} // namespace uapi

// The AMDGPU_VM_PAGE_* flags that recreate a mapping whose page table entry
// flags GET_MAPPING_INFO reported: readable, writeable, executable and PRT.
// The memory type bits are not carried over (the restored mapping gets the
// kernel's default type for the BO).
constexpr uint32_t gem_va_flags_from_pte(uint64_t pte)
{
	uint32_t f = 0;
	if (pte & uapi::kPteReadable)
		f |= uapi::kVmPageReadable;
	if (pte & uapi::kPteWriteable)
		f |= uapi::kVmPageWriteable;
	if (pte & uapi::kPteExecutable)
		f |= uapi::kVmPageExecutable;
	if (pte & uapi::kPtePrt)
		f |= uapi::kVmPagePrt;
	return f;
}

} // namespace amdcr
