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

// GEM handles are idr ids: 1 .. INT_MAX (drm_gem_handle_create_tail's
// idr_alloc from 1 with no end).
inline constexpr uint32_t kMaxGemHandle = 0x7fffffff;

// The kernel release that added the render-node checkpoint ioctls below
// (DRM_IOCTL_AMDGPU_GEM_LIST_HANDLES, AMDGPU_GEM_OP_GET_MAPPING_INFO).
// Older kernels fail them with EINVAL: an unknown DRM ioctl number or
// GEM_OP op. (It added DRM_IOCTL_GEM_CHANGE_HANDLE too, which upstream
// 1a4f03d22fb6, taken into 6.18.36 and the 7.0 stable series, disables
// again: the restore does not use it, device/gem.h GemHandleSlot.)
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

// struct drm_amdgpu_gem_vm_entry (AMDGPU_GEM_OP_GET_MAPPING_INFO). `flags`
// are the AMDGPU_VM_PAGE_* flags the mapping was made with (DRM_IOCTL_AMDGPU_
// GEM_VA's): Linux 6.18, which added GET_MAPPING_INFO, keeps them in each
// mapping instead of page table entry bits ("drm/amdgpu: rework how PTE
// flags are generated v3"), so that a restore can map with them again.
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

inline constexpr unsigned long kIoctlAmdgpuGemOp =
	_IOWR(kDrmIoctlBase, kDrmCommandBase + 0x10, GemOp);
inline constexpr unsigned long kIoctlAmdgpuGemListHandles =
	_IOWR(kDrmIoctlBase, kDrmCommandBase + 0x19, GemListHandles);

// The hole of the GPU VA space (AMDGPU_GMC_HOLE_START/_END, amdgpu_gmc.h):
// DRM_IOCTL_AMDGPU_GEM_VA refuses a VA inside it and keeps a VA above it
// masked to 48 bits, as GET_MAPPING_INFO then reports it.
inline constexpr uint64_t kGmcHoleStart = 0x0000800000000000ull;
inline constexpr uint64_t kGmcHoleEnd = 0xffff800000000000ull;

// DRM_IOCTL_AMDGPU_GEM_VA's AMDGPU_VM_* flags.
inline constexpr uint32_t kVmDelayUpdate = 1u << 0;
inline constexpr uint32_t kVmPageReadable = 1u << 1;
inline constexpr uint32_t kVmPageWriteable = 1u << 2;
inline constexpr uint32_t kVmPageExecutable = 1u << 3;

} // namespace uapi

// The DRM_IOCTL_AMDGPU_GEM_VA flags that recreate a mapping GET_MAPPING_INFO
// reported with `flags`: the same, less DELAY_UPDATE, so that the restored
// mapping is in the page tables before the task runs (with it, the kernel
// writes them at the next command submission). A flag this kernel does not
// know makes GEM_VA fail (EINVAL) rather than map otherwise.
constexpr uint32_t gem_va_flags_to_restore(uint32_t flags)
{
	return flags & ~uapi::kVmDelayUpdate;
}

// The DRM_IOCTL_AMDGPU_GEM_VA address of a mapping GET_MAPPING_INFO reported
// at `addr`: a VA above the hole is reported masked to 48 bits (0x8000_...),
// which GEM_VA refuses as inside the hole; it is sign-extended back, as
// amdgpu_gmc_sign_extend() does (libdrm's high range, where Mesa maps).
constexpr uint64_t gem_va_address_to_restore(uint64_t addr)
{
	return addr >= uapi::kGmcHoleStart ? addr | uapi::kGmcHoleEnd : addr;
}

} // namespace amdcr
