// SPDX-License-Identifier: GPL-2.0-only
//
// The GEM buffer objects of one render-node file, through the ioctls their
// checkpoint and restore need: list the file's handles with their creation
// parameters (DRM_IOCTL_AMDGPU_GEM_LIST_HANDLES), a handle's GPU VA
// mappings (AMDGPU_GEM_OP_GET_MAPPING_INFO) and CPU mmap offset, a dma-buf
// of it (PRIME), and the other way: create, move to a given handle
// (DRM_IOCTL_GEM_CHANGE_HANDLE), map at a VA; and either way a BO's
// metadata (DRM_IOCTL_AMDGPU_GEM_METADATA).
//
// The fd is always the caller's (the target's render file at dump, the
// restored task's at restore). Errors name the ioctl, the fd and the handle;
// an ioctl that the running kernel lacks (EINVAL/ENOTTY from a kernel older
// than kGemCriuKernel) says so and names the kernel that has it.
#pragma once

#include <cstdint>
#include <vector>

#include "base/drm.h"
#include "base/result.h"
#include "base/unique_fd.h"

namespace amdcr {

// One entry of DRM_IOCTL_AMDGPU_GEM_LIST_HANDLES.
struct GemBoInfo {
	uint32_t handle = 0;
	bool is_import = false; // a dma-buf imported into this file
	uint64_t size = 0;
	uint32_t preferred_domains = 0;
	uint64_t alloc_flags = 0;     // AMDGPU_GEM_CREATE_* that GEM_CREATE accepts
	uint64_t alignment_bytes = 0; // the kernel's page alignment, in bytes
};

// One GPU VA mapping of a BO (AMDGPU_GEM_OP_GET_MAPPING_INFO).
struct GemVaMapping {
	uint64_t addr = 0;
	uint64_t size = 0;
	uint64_t offset = 0;	// in the BO
	uint64_t flags = 0;	// GEM_VA's AMDGPU_VM_PAGE_* flags it was made with
};

// Every GEM handle of `render_fd`, in the kernel's (handle) order.
Result<std::vector<GemBoInfo>> gem_list_handles(int render_fd);
// The GPU VA mappings of `handle` in the file's VM.
Result<std::vector<GemVaMapping>> gem_mapping_info(int render_fd, uint32_t handle);
// The fake offset at which `handle` is mmap'ed through `render_fd`
// (DRM_IOCTL_AMDGPU_GEM_MMAP). EPERM for BOs the CPU cannot map.
Result<uint64_t> gem_mmap_offset(int render_fd, uint32_t handle);
// A dma-buf of `handle` (PRIME_HANDLE_TO_FD, O_RDWR | O_CLOEXEC).
Result<UniqueFd> gem_export_dmabuf(int render_fd, uint32_t handle);
// Maps [offset, offset + size) of `handle` at GPU VA `va`
// (DRM_IOCTL_AMDGPU_GEM_VA MAP with AMDGPU_VM_PAGE_* `flags`). The mapping
// lives as long as the handle.
Status gem_va_map(int render_fd, uint32_t handle, uint64_t va, uint64_t size, uint64_t offset,
		  uint32_t flags);

// The metadata of the BO behind `handle` (GET_METADATA).
Result<GemMetadata> gem_get_metadata(int render_fd, uint32_t handle);
// Gives the BO behind `handle` metadata `md` (SET_METADATA): its tiling
// info, flags and data as they were, also flags without data (set with one
// byte of data first, then none). EINVAL for data over kMaxGemMetadataBytes.
Status gem_set_metadata(int render_fd, uint32_t handle, const GemMetadata &md);

// A GEM handle of a render file that this process created: closed
// (DRM_IOCTL_GEM_CLOSE, which also removes its VA mappings) on destruction
// unless released. The render fd must outlive it.
class GemHandle {
public:
	// DRM_IOCTL_AMDGPU_GEM_CREATE.
	static Result<GemHandle> create(int render_fd, uint64_t size, uint64_t alignment,
					uint32_t domains, uint64_t flags);
	// DRM_IOCTL_PRIME_FD_TO_HANDLE: the handle of the BO behind dma-buf
	// `dmabuf_fd` in `render_fd` (a new import BO when the dma-buf is of
	// another device). The file must not hold that BO yet: the kernel
	// answers an existing handle, which this object would then close.
	static Result<GemHandle> import(int render_fd, int dmabuf_fd);

	GemHandle(GemHandle &&o) noexcept;
	GemHandle &operator=(GemHandle &&o) noexcept;
	GemHandle(const GemHandle &) = delete;
	GemHandle &operator=(const GemHandle &) = delete;
	~GemHandle();

	// DRM_IOCTL_GEM_CHANGE_HANDLE: the object moves to `new_handle` (which
	// must be free in the file; 0 or over kMaxGemHandle is EINVAL without
	// the ioctl; the handle it has already is no call). Unchanged on
	// failure. A kernel without the ioctl, or one that disabled it again
	// (kGemChangeHandleDisabledIn), answers EINVAL; the error says so.
	Status change_to(uint32_t new_handle);

	uint32_t get() const { return handle_; }
	int fd() const { return fd_; }
	// The handle stays open; it is the file's (the restored process's) now.
	[[nodiscard]] uint32_t release();

private:
	GemHandle(int fd, uint32_t handle) : fd_(fd), handle_(handle) {}
	void reset();
	int fd_ = -1;
	uint32_t handle_ = 0;
};

} // namespace amdcr
