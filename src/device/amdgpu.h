// SPDX-License-Identifier: GPL-2.0-only
//
// RAII over the libdrm_amdgpu calls the plugin's data path needs.
//
// Each object's destructor undoes exactly what its constructor did, with the
// same arguments (a VaMapping unmaps the size it mapped). libdrm_amdgpu
// returns -errno; failures become Errors naming the call and the object
// ("amdgpu_bo_va_op(MAP, dma-buf fd 12, 4096 bytes at 0x...)"), never via
// errno or perror.
//
// Lifetimes: a Device outlives everything made from it; a Bo outlives its
// VaMapping and CpuMapping; a Context and BoList outlive submissions on
// them. Callers order members accordingly (destruction is reverse order).
#pragma once

#include <amdgpu.h>

#include <cstdint>
#include <span>
#include <string>

#include "base/result.h"
#include "base/scoped.h"
#include "base/unique_fd.h"

namespace amdcr {

// libdrm's -errno as an Error: "<what>: <strerror>".
Error drm_error(int ret, const std::string &what);

namespace detail {
struct DeviceTraits {
	static amdgpu_device_handle invalid() { return nullptr; }
	static void free(amdgpu_device_handle h);
};
struct BoTraits {
	static amdgpu_bo_handle invalid() { return nullptr; }
	static void free(amdgpu_bo_handle h);
};
struct ContextTraits {
	static amdgpu_context_handle invalid() { return nullptr; }
	static void free(amdgpu_context_handle h);
};
struct BoListTraits {
	static amdgpu_bo_list_handle invalid() { return nullptr; }
	static void free(amdgpu_bo_list_handle h);
};
} // namespace detail

// amdgpu_device_initialize/deinitialize on a render-node fd. libdrm dups
// the fd (or shares an existing device of the same node); `render_fd`
// stays the caller's.
class Device {
public:
	static Result<Device> initialize(int render_fd);

	amdgpu_device_handle get() const { return dev_.get(); }
	uint32_t family_id() const { return family_id_; }
	// libdrm's own (dup'ed) fd.
	int fd() const;

private:
	Device(amdgpu_device_handle h, uint32_t family) : dev_(h), family_id_(family) {}
	Scoped<amdgpu_device_handle, detail::DeviceTraits> dev_;
	uint32_t family_id_ = 0;
};

// One amdgpu buffer object. `name()` says what it is in error messages.
class Bo {
public:
	// Imports a dma-buf (PRIME). size() is the dma-buf's size.
	static Result<Bo> import_dmabuf(const Device &dev, int dmabuf_fd);
	// Wraps process memory as a userptr BO. `ptr` must be page aligned
	// and `size` a non-zero multiple of the page size.
	static Result<Bo> from_user_mem(const Device &dev, void *ptr, uint64_t size);
	// Allocates a BO in `domain` (AMDGPU_GEM_DOMAIN_GTT/VRAM).
	static Result<Bo> alloc(const Device &dev, uint64_t size, uint32_t domain,
				uint64_t flags = 0, uint64_t alignment = 4096);

	// Exports the BO as a dma-buf (O_RDWR, O_CLOEXEC); the fd is the
	// caller's.
	Result<UniqueFd> export_dmabuf() const;

	amdgpu_bo_handle get() const { return bo_.get(); }
	uint64_t size() const { return size_; }
	const std::string &name() const { return name_; }

private:
	Bo(amdgpu_bo_handle h, uint64_t size, std::string name)
		: bo_(h), size_(size), name_(std::move(name))
	{
	}
	Scoped<amdgpu_bo_handle, detail::BoTraits> bo_;
	uint64_t size_ = 0;
	std::string name_;
};

// A GPU VA range of the device's VA manager with the whole BO mapped at it
// (amdgpu_va_range_alloc + amdgpu_bo_va_op MAP), undone by UNMAP and
// amdgpu_va_range_free with the same size.
class VaMapping {
public:
	static Result<VaMapping> map(const Device &dev, const Bo &bo);
	VaMapping(VaMapping &&o) noexcept;
	VaMapping &operator=(VaMapping &&o) noexcept;
	VaMapping(const VaMapping &) = delete;
	VaMapping &operator=(const VaMapping &) = delete;
	~VaMapping();

	uint64_t va() const { return va_; }
	uint64_t size() const { return size_; }

	// Tears the mapping down together with `bo`, the BO it maps, in one
	// kernel round trip instead of two: closing a BO's last GEM handle
	// removes its mappings in this file's VM (amdgpu_gem_object_close),
	// so no UNMAP ioctl is made, and the VA range is freed only after the
	// close. Only for a BO whose handle nothing else in the process holds
	// (libdrm shares one handle among imports of one dma-buf on one
	// device): an import the caller made once, or its own userptr BO.
	void close_with(Bo bo);

private:
	VaMapping() = default;
	void reset();
	amdgpu_bo_handle bo_ = nullptr;
	amdgpu_va_handle range_ = nullptr;
	uint64_t va_ = 0;
	uint64_t size_ = 0;
	std::string name_; // the BO's, for the destructor's log line
};

// amdgpu_bo_cpu_map/unmap.
class CpuMapping {
public:
	static Result<CpuMapping> map(const Bo &bo);
	CpuMapping(CpuMapping &&o) noexcept;
	CpuMapping &operator=(CpuMapping &&o) noexcept;
	CpuMapping(const CpuMapping &) = delete;
	CpuMapping &operator=(const CpuMapping &) = delete;
	~CpuMapping();

	void *ptr() const { return ptr_; }

private:
	CpuMapping() = default;
	void reset();
	amdgpu_bo_handle bo_ = nullptr;
	void *ptr_ = nullptr;
};

// amdgpu_cs_ctx_create/free.
class Context {
public:
	static Result<Context> create(const Device &dev);
	amdgpu_context_handle get() const { return ctx_.get(); }

private:
	explicit Context(amdgpu_context_handle h) : ctx_(h) {}
	Scoped<amdgpu_context_handle, detail::ContextTraits> ctx_;
};

// amdgpu_bo_list_create/destroy over a set of BOs.
class BoList {
public:
	static Result<BoList> create(const Device &dev, std::span<const amdgpu_bo_handle> bos);
	amdgpu_bo_list_handle get() const { return list_.get(); }
	bool valid() const { return list_.valid(); }
	BoList() = default;

private:
	explicit BoList(amdgpu_bo_list_handle h) : list_(h) {}
	Scoped<amdgpu_bo_list_handle, detail::BoListTraits> list_;
};

// A submitted job's fence.
struct DmaFence {
	amdgpu_cs_fence raw{};
	uint64_t seq() const { return raw.fence; }
};

// Submits one IB of `ib_dwords` dwords at `ib_va` on AMDGPU_HW_IP_DMA
// (instance 0, ring 0) with `list` as the job's resources.
Result<DmaFence> submit_dma(const Context &ctx, const BoList &list, uint64_t ib_va,
			    uint32_t ib_dwords);

// Waits up to `timeout_ns` (AMDGPU_TIMEOUT_INFINITE for ever) for `fence`.
// Not signalled in time: ETIMEDOUT. A job that failed: its error.
// libdrm makes the timeout a deadline on this process's CLOCK_MONOTONIC,
// which the kernel reads on its own: in a time namespace (a restored
// container) the two differ by the namespace's offset, so the timeout
// given to libdrm is corrected by it (timens_monotonic_offset_ns).
Status wait_fence(const DmaFence &fence, uint64_t timeout_ns);

// The CLOCK_MONOTONIC offset of this process's time namespace, in ns (its
// clock = the kernel's + offset; /proc/self/timens_offsets), 0 without one.
int64_t timens_monotonic_offset_ns();

// The timeout to give libdrm so that the kernel waits `timeout_ns` of its
// own clock, for a process whose clock is the kernel's + `offset_ns`
// (AMDGPU_TIMEOUT_INFINITE stays; a deadline that would lie in the
// past gives 0, a mere poll).
uint64_t libdrm_timeout_ns(uint64_t timeout_ns, int64_t offset_ns);

} // namespace amdcr
