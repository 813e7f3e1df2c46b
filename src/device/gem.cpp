// SPDX-License-Identifier: GPL-2.0-only
#include "device/gem.h"

#include <fcntl.h>

#include <amdgpu_drm.h>
#include <xf86drm.h>

#include <cerrno>
#include <cstring>
#include <cinttypes>
#include <span>
#include <utility>

#include "base/drm.h"
#include "base/file_io.h"
#include "base/log.h"

namespace amdcr {
namespace {

// The one ioctl call of this file: 0 or -errno, as Kfd::ioctl (drmIoctl
// retries EINTR and EAGAIN). Does not log.
int gem_ioctl(int fd, unsigned long request, void *arg)
{
	return drmIoctl(fd, request, arg) == 0 ? 0 : -(errno ? errno : EIO);
}

// The error of a checkpoint ioctl that failed with `ret` (-errno): on a
// kernel without it (EINVAL: unknown DRM ioctl number or GEM_OP op; ENOTTY)
// it says so and names the kernel that added it.
Error checkpoint_ioctl_error(int ret, const std::string &what)
{
	const int err = -ret;
	if (err == EINVAL || err == ENOTTY)
		return make_error(err,
				  "%s: %s; the running kernel appears not to provide this ioctl (added in "
				  "%s), without which render-node buffer objects cannot be checkpointed "
				  "or restored",
				  what.c_str(), std::strerror(err), kGemCriuKernel);
	return errno_error(err, what);
}

// A retrying count-then-fetch: the kernel reports how many entries there are
// when the array is too small, and fills it only when all fit. The count of
// a frozen process does not change, so two calls are enough; a few more
// absorb a concurrent change anyway.
constexpr int kFetchAttempts = 4;

} // namespace

Result<std::vector<GemBoInfo>> gem_list_handles(int render_fd)
{
	const std::string what = strprintf("DRM_IOCTL_AMDGPU_GEM_LIST_HANDLES(render fd %d)", render_fd);
	std::vector<uapi::GemListHandlesEntry> entries;
	for (int attempt = 0; attempt < kFetchAttempts; attempt++) {
		uapi::GemListHandles args{};
		args.entries = reinterpret_cast<uintptr_t>(entries.data());
		args.num_entries = static_cast<uint32_t>(entries.size());
		if (int err = gem_ioctl(render_fd, uapi::kIoctlAmdgpuGemListHandles, &args))
			return checkpoint_ioctl_error(err, what);
		if (args.num_entries > entries.size()) {
			entries.assign(args.num_entries, uapi::GemListHandlesEntry{});
			continue;
		}
		entries.resize(args.num_entries);
		const uint64_t page = page_size();
		std::vector<GemBoInfo> out;
		out.reserve(entries.size());
		for (const auto &e : entries)
			out.push_back({e.gem_handle, (e.flags & uapi::kGemListHandlesFlagIsImport) != 0, e.size,
				       static_cast<uint32_t>(e.preferred_domains), e.alloc_flags,
				       e.alignment * page});
		return out;
	}
	return make_error(EAGAIN, "%s: the number of handles kept changing", what.c_str());
}

Result<std::vector<GemVaMapping>> gem_mapping_info(int render_fd, uint32_t handle)
{
	const std::string what = strprintf(
		"DRM_IOCTL_AMDGPU_GEM_OP(GET_MAPPING_INFO, render fd %d, handle %u)", render_fd, handle);
	std::vector<uapi::GemVmEntry> entries;
	for (int attempt = 0; attempt < kFetchAttempts; attempt++) {
		uapi::GemOp args{};
		args.handle = handle;
		args.op = uapi::kGemOpGetMappingInfo;
		args.value = reinterpret_cast<uintptr_t>(entries.data());
		args.num_entries = static_cast<uint32_t>(entries.size());
		if (int err = gem_ioctl(render_fd, uapi::kIoctlAmdgpuGemOp, &args))
			return checkpoint_ioctl_error(err, what);
		if (args.num_entries > entries.size()) {
			entries.assign(args.num_entries, uapi::GemVmEntry{});
			continue;
		}
		std::vector<GemVaMapping> out;
		out.reserve(args.num_entries);
		for (uint32_t i = 0; i < args.num_entries; i++)
			out.push_back({entries[i].addr, entries[i].size, entries[i].offset, entries[i].flags});
		return out;
	}
	return make_error(EAGAIN, "%s: the number of mappings kept changing", what.c_str());
}

Result<uint64_t> gem_mmap_offset(int render_fd, uint32_t handle)
{
	drm_amdgpu_gem_mmap args{};
	args.in.handle = handle;
	if (int err = gem_ioctl(render_fd, DRM_IOCTL_AMDGPU_GEM_MMAP, &args))
		return errno_error(err, strprintf("DRM_IOCTL_AMDGPU_GEM_MMAP(render fd %d, handle %u)",
						  render_fd, handle));
	return static_cast<uint64_t>(args.out.addr_ptr);
}

Result<UniqueFd> gem_export_dmabuf(int render_fd, uint32_t handle)
{
	drm_prime_handle args{};
	args.handle = handle;
	args.flags = DRM_CLOEXEC | DRM_RDWR;
	args.fd = -1;
	if (int err = gem_ioctl(render_fd, DRM_IOCTL_PRIME_HANDLE_TO_FD, &args))
		return errno_error(err, strprintf("DRM_IOCTL_PRIME_HANDLE_TO_FD(render fd %d, handle %u)",
						  render_fd, handle));
	return UniqueFd(args.fd);
}

Status gem_va_map(int render_fd, uint32_t handle, uint64_t va, uint64_t size, uint64_t offset,
		  uint32_t flags)
{
	drm_amdgpu_gem_va args{};
	args.handle = handle;
	args.operation = AMDGPU_VA_OP_MAP;
	args.flags = flags;
	args.va_address = va;
	args.offset_in_bo = offset;
	args.map_size = size;
	if (int err = gem_ioctl(render_fd, DRM_IOCTL_AMDGPU_GEM_VA, &args))
		return errno_error(err, strprintf("DRM_IOCTL_AMDGPU_GEM_VA(MAP, render fd %d, handle %u, "
						  "0x%" PRIx64 " bytes from offset 0x%" PRIx64
						  " at 0x%" PRIx64 ", flags 0x%x)",
						  render_fd, handle, size, offset, va, flags));
	return ok_status();
}

Result<GemMetadata> gem_get_metadata(int render_fd, uint32_t handle)
{
	drm_amdgpu_gem_metadata args{};
	args.handle = handle;
	args.op = AMDGPU_GEM_METADATA_OP_GET_METADATA;
	if (int err = gem_ioctl(render_fd, DRM_IOCTL_AMDGPU_GEM_METADATA, &args))
		return errno_error(err, strprintf("DRM_IOCTL_AMDGPU_GEM_METADATA(GET, render fd %d, handle %u)",
						  render_fd, handle));
	if (args.data.data_size_bytes > sizeof args.data.data)
		return make_error(EIO,
				  "DRM_IOCTL_AMDGPU_GEM_METADATA(GET, render fd %d, handle %u): %u bytes of "
				  "metadata, more than the %zu the ioctl carries",
				  render_fd, handle, args.data.data_size_bytes, sizeof args.data.data);
	const auto *bytes = reinterpret_cast<const uint8_t *>(args.data.data);
	return GemMetadata{args.data.flags, args.data.tiling_info,
			   std::vector<uint8_t>(bytes, bytes + args.data.data_size_bytes)};
}

namespace {

Status set_metadata_once(int render_fd, uint32_t handle, uint64_t flags, uint64_t tiling,
			 std::span<const uint8_t> data)
{
	drm_amdgpu_gem_metadata args{};
	static_assert(sizeof args.data.data == kMaxGemMetadataBytes);
	if (data.size() > sizeof args.data.data)
		return make_error(EINVAL,
				  "DRM_IOCTL_AMDGPU_GEM_METADATA(SET, render fd %d, handle %u): %zu bytes of "
				  "metadata, more than the %u the kernel keeps",
				  render_fd, handle, data.size(), kMaxGemMetadataBytes);
	args.handle = handle;
	args.op = AMDGPU_GEM_METADATA_OP_SET_METADATA;
	args.data.flags = flags;
	args.data.tiling_info = tiling;
	args.data.data_size_bytes = static_cast<uint32_t>(data.size());
	if (!data.empty())
		std::memcpy(args.data.data, data.data(), data.size());
	if (int err = gem_ioctl(render_fd, DRM_IOCTL_AMDGPU_GEM_METADATA, &args))
		return errno_error(err, strprintf("DRM_IOCTL_AMDGPU_GEM_METADATA(SET, render fd %d, handle %u, "
						  "flags 0x%" PRIx64 ", tiling 0x%" PRIx64 ", %zu bytes)",
						  render_fd, handle, flags, tiling, data.size()));
	return ok_status();
}

} // namespace

Status gem_set_metadata(int render_fd, uint32_t handle, const GemMetadata &md)
{
	// The kernel stores flags only with data: flags without data take a
	// byte of data first, which the second call drops again.
	if (md.data.empty() && md.flags != 0) {
		const uint8_t one = 0;
		if (auto st = set_metadata_once(render_fd, handle, md.flags, md.tiling_info, {&one, 1}); !st)
			return st;
	}
	return set_metadata_once(render_fd, handle, md.flags, md.tiling_info, md.data);
}

// ---- GemHandle ----------------------------------------------------------

Result<GemHandle> GemHandle::create(int render_fd, uint64_t size, uint64_t alignment,
				    uint32_t domains, uint64_t flags)
{
	drm_amdgpu_gem_create args{};
	args.in.bo_size = size;
	args.in.alignment = alignment;
	args.in.domains = domains;
	args.in.domain_flags = flags;
	if (int err = gem_ioctl(render_fd, DRM_IOCTL_AMDGPU_GEM_CREATE, &args))
		return errno_error(err, strprintf("DRM_IOCTL_AMDGPU_GEM_CREATE(render fd %d, %" PRIu64
						  " bytes, alignment %" PRIu64 ", domains 0x%x, flags 0x%" PRIx64
						  ")",
						  render_fd, size, alignment, domains, flags));
	return GemHandle(render_fd, args.out.handle);
}

Result<GemHandle> GemHandle::import(int render_fd, int dmabuf_fd)
{
	drm_prime_handle args{};
	args.fd = dmabuf_fd;
	if (int err = gem_ioctl(render_fd, DRM_IOCTL_PRIME_FD_TO_HANDLE, &args))
		return errno_error(err, strprintf("DRM_IOCTL_PRIME_FD_TO_HANDLE(render fd %d, dma-buf fd %d)",
						  render_fd, dmabuf_fd));
	return GemHandle(render_fd, args.handle);
}

GemHandle::GemHandle(GemHandle &&o) noexcept
	: fd_(std::exchange(o.fd_, -1)), handle_(std::exchange(o.handle_, 0))
{
}

GemHandle &GemHandle::operator=(GemHandle &&o) noexcept
{
	if (this != &o) {
		reset();
		fd_ = std::exchange(o.fd_, -1);
		handle_ = std::exchange(o.handle_, 0);
	}
	return *this;
}

GemHandle::~GemHandle() { reset(); }

void GemHandle::reset()
{
	if (fd_ >= 0 && handle_ != 0) {
		drm_gem_close args{};
		args.handle = handle_;
		if (int err = gem_ioctl(fd_, DRM_IOCTL_GEM_CLOSE, &args))
			log_warn("DRM_IOCTL_GEM_CLOSE(render fd %d, handle %u) failed: %s", fd_, handle_,
				 std::strerror(-err));
	}
	fd_ = -1;
	handle_ = 0;
}

uint32_t GemHandle::release()
{
	fd_ = -1;
	return std::exchange(handle_, 0);
}

// ---- GemHandleSlot ------------------------------------------------------

namespace {
// A placeholder: the smallest BO the kernel makes, in system memory.
constexpr uint64_t kPlaceholderBytes = 4096;
} // namespace

Status GemHandleSlot::make_next(uint32_t target)
{
	if (target == 0 || target > kMaxGemHandle)
		return make_error(EINVAL, "render fd %d: GEM handle %u: not a GEM handle (1 to %u)", fd_, target,
				  kMaxGemHandle);
	for (;;) {
		auto p = GemHandle::create(fd_, kPlaceholderBytes, kPlaceholderBytes, kGemDomainGtt, 0);
		if (!p)
			return std::move(p).error().context(
				strprintf("a placeholder below GEM handle %u (%zu held)", target, placeholders_.size()));
		if (p->get() == target)
			return ok_status(); // closed here: now the lowest free handle
		if (p->get() > target)
			return make_error(EEXIST,
					  "render fd %d: GEM handle %u is taken already (the lowest free handle "
					  "is %u), so no buffer object can be restored at it",
					  fd_, target, p->get());
		placeholders_.push_back(std::move(*p));
	}
}

Result<GemHandle> GemHandleSlot::check(GemHandle h, uint32_t target) const
{
	if (h.get() != target)
		return make_error(EIO,
				  "render fd %d: the buffer object restored for GEM handle %u got handle %u "
				  "instead (the kernel did not hand out its lowest free handle)",
				  fd_, target, h.get());
	return h;
}

} // namespace amdcr
