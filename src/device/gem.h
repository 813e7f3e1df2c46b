// SPDX-License-Identifier: GPL-2.0-only
//
// The GEM buffer objects of one render-node file, through the ioctls their
// checkpoint and restore need: list the file's handles with their creation
// parameters (DRM_IOCTL_AMDGPU_GEM_LIST_HANDLES), a handle's GPU VA
// mappings (AMDGPU_GEM_OP_GET_MAPPING_INFO) and CPU mmap offset, a dma-buf
// of it (PRIME), and the other way: create at a given handle
// (GemHandleSlot), map at a VA; and either way a BO's metadata
// (DRM_IOCTL_AMDGPU_GEM_METADATA).
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

// Gives a new BO a chosen GEM handle without DRM_IOCTL_GEM_CHANGE_HANDLE
// (which Linux 6.18.36, the 7.0 stable series and mainline since June 2026
// disable again, drm_invalid_op's EINVAL): the kernel hands out
// the lowest free handle of the file, from 1 (drm_gem_handle_create_tail's
// idr_alloc(object_idr, .., 1, 0, ..); GEM_CREATE, GEM_USERPTR and the
// PRIME_FD_TO_HANDLE of a new import all go through it). make_next(T)
// fills every free handle below T with a placeholder BO (4 KiB of GTT)
// and keeps it, so that the next BO the file makes gets T; check() then
// verifies that it did. The placeholders are closed when this object is.
// So a file's BOs must be made in ascending handle order, each while the
// placeholders below it are held; each gap of the checkpointed handles
// costs one placeholder until then.
//
// Another party that makes GEM handles in the same file (KFD's restore of
// the process's KFD BOs, before or after) ends the same way as a move with
// CHANGE_HANDLE would: a handle it took first makes make_next fail (as
// CHANGE_HANDLE's ENOSPC did), one it takes later is the lowest free one
// either way.
class GemHandleSlot {
public:
	explicit GemHandleSlot(int render_fd) : fd_(render_fd) {}

	// Makes `target` the lowest free handle of the file. EEXIST, naming
	// the handle, when the file holds it already; EINVAL outside
	// 1..kMaxGemHandle.
	Status make_next(uint32_t target);
	// `h`, made right after make_next(target), if it got `target`;
	// otherwise an error naming both handles (`h` is then closed).
	Result<GemHandle> check(GemHandle h, uint32_t target) const;

	// Placeholders held now (a test's view).
	size_t placeholders() const { return placeholders_.size(); }

private:
	int fd_;
	std::vector<GemHandle> placeholders_;
};

} // namespace amdcr
