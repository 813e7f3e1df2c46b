// SPDX-License-Identifier: GPL-2.0-only
#include "device/amdgpu.h"

#include <cerrno>

#include <amdgpu_drm.h>
#include <xf86drm.h>
#include <unistd.h>

#include <fcntl.h>

#include <cinttypes>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "base/file_io.h"
#include "base/log.h"

namespace amdcr {

namespace {

uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

} // namespace

Error drm_error(int ret, const std::string &what)
{
	// libdrm_amdgpu returns -errno; a positive or zero value here would be
	// a bug in the caller, reported as EIO rather than as stale errno.
	return errno_error(ret < 0 ? -ret : EIO, what);
}

namespace detail {
void DeviceTraits::free(amdgpu_device_handle h) { amdgpu_device_deinitialize(h); }
void BoTraits::free(amdgpu_bo_handle h) { amdgpu_bo_free(h); }
void ContextTraits::free(amdgpu_context_handle h) { amdgpu_cs_ctx_free(h); }
void BoListTraits::free(amdgpu_bo_list_handle h) { amdgpu_bo_list_destroy(h); }
} // namespace detail

// ---- Device -----------------------------------------------------------

namespace {

// libdrm_amdgpu 2.4.114's amdgpu_device_initialize() dereferences the
// result of drmGetVersion() without checking it: a failing DRM_IOCTL_VERSION
// would crash the caller (CRIU, leaving a dumped process paused). Ask first.
Status check_amdgpu_node(int render_fd)
{
	drmVersionPtr v = drmGetVersion(render_fd);
	if (!v)
		return errno_error(errno ? errno : EIO,
				   strprintf("DRM_IOCTL_VERSION(render fd %d)", render_fd));
	const bool amdgpu = v->name && std::string(v->name, static_cast<size_t>(v->name_len)) == "amdgpu";
	const int major = v->version_major;
	drmFreeVersion(v);
	if (!amdgpu || major != 3)
		return make_error(ENODEV, "render fd %d: not an amdgpu render node (driver version %d)",
				  render_fd, major);
	return ok_status();
}

} // namespace

Result<Device> Device::initialize(int render_fd)
{
	if (auto st = check_amdgpu_node(render_fd); !st)
		return std::move(st).error();
	uint32_t major = 0, minor = 0;
	amdgpu_device_handle h = nullptr;
	int r = amdgpu_device_initialize(render_fd, &major, &minor, &h);
	if (r != 0)
		return drm_error(r, strprintf("amdgpu_device_initialize(render fd %d)", render_fd));
	Scoped<amdgpu_device_handle, detail::DeviceTraits> owner(h);
	amdgpu_gpu_info info = {};
	r = amdgpu_query_gpu_info(h, &info);
	if (r != 0)
		return drm_error(r, strprintf("amdgpu_query_gpu_info(render fd %d)", render_fd));
	return Device(owner.release(), info.family_id);
}

int Device::fd() const { return amdgpu_device_get_fd(dev_.get()); }

// ---- Bo ---------------------------------------------------------------

Result<Bo> Bo::import_dmabuf(const Device &dev, int dmabuf_fd)
{
	std::string name = strprintf("dma-buf fd %d", dmabuf_fd);
	if (dmabuf_fd < 0)
		return make_error(EBADF, "amdgpu_bo_import(%s): invalid fd", name.c_str());
	amdgpu_bo_import_result res = {};
	errno = 0;
	const int r = amdgpu_bo_import(dev.get(), amdgpu_bo_handle_type_dma_buf_fd,
				       static_cast<uint32_t>(dmabuf_fd), &res);
	// libdrm 2.4.114 passes drmPrimeFDToHandle()'s -1 through as is: the
	// cause is in errno then, not in the return value.
	const int err = (r == -1 && errno) ? -errno : r;
	if (r != 0)
		return drm_error(err, "amdgpu_bo_import(" + name + ")");
	return Bo(res.buf_handle, res.alloc_size, std::move(name));
}

Result<Bo> Bo::from_user_mem(const Device &dev, void *ptr, uint64_t size)
{
	std::string name = strprintf("userptr %p+%" PRIu64, ptr, size);
	const uint64_t page = page_size();
	if (size == 0 || size % page != 0 || reinterpret_cast<uintptr_t>(ptr) % page != 0)
		return make_error(EINVAL, "amdgpu_create_bo_from_user_mem(%s): not page aligned",
				  name.c_str());
	amdgpu_bo_handle h = nullptr;
	const int r = amdgpu_create_bo_from_user_mem(dev.get(), ptr, size, &h);
	if (r != 0)
		return drm_error(r, "amdgpu_create_bo_from_user_mem(" + name + ")");
	return Bo(h, size, std::move(name));
}

Result<Bo> Bo::alloc(const Device &dev, uint64_t size, uint32_t domain, uint64_t flags,
		     uint64_t alignment)
{
	const char *where = domain == AMDGPU_GEM_DOMAIN_VRAM ? "VRAM"
			    : domain == AMDGPU_GEM_DOMAIN_GTT ? "GTT"
							      : "domain";
	std::string name = strprintf("%s BO of %" PRIu64 " bytes", where, size);
	amdgpu_bo_alloc_request req = {};
	req.alloc_size = size;
	req.phys_alignment = alignment;
	req.preferred_heap = domain;
	req.flags = flags;
	amdgpu_bo_handle h = nullptr;
	const int r = amdgpu_bo_alloc(dev.get(), &req, &h);
	if (r != 0)
		return drm_error(r, "amdgpu_bo_alloc(" + name + ")");
	return Bo(h, size, std::move(name));
}

Result<UniqueFd> Bo::export_dmabuf() const
{
	uint32_t fd = 0;
	const int r = amdgpu_bo_export(bo_.get(), amdgpu_bo_handle_type_dma_buf_fd, &fd);
	if (r != 0)
		return drm_error(r, "amdgpu_bo_export(" + name_ + " as dma-buf)");
	return UniqueFd(static_cast<int>(fd));
}

// ---- VaMapping ----------------------------------------------------------

Result<VaMapping> VaMapping::map(const Device &dev, const Bo &bo)
{
	VaMapping m;
	m.name_ = bo.name();
	m.size_ = round_up(bo.size(), page_size());
	if (m.size_ == 0)
		return make_error(EINVAL, "GPU VA mapping of %s: empty BO", bo.name().c_str());
	int r = amdgpu_va_range_alloc(dev.get(), amdgpu_gpu_va_range_general, m.size_, page_size(), 0,
				      &m.va_, &m.range_, 0);
	if (r != 0)
		return drm_error(r, strprintf("amdgpu_va_range_alloc(%" PRIu64 " bytes for %s)", m.size_,
					      bo.name().c_str()));
	r = amdgpu_bo_va_op(bo.get(), 0, m.size_, m.va_,
			    AMDGPU_VM_PAGE_READABLE | AMDGPU_VM_PAGE_WRITEABLE | AMDGPU_VM_PAGE_EXECUTABLE,
			    AMDGPU_VA_OP_MAP);
	if (r != 0) {
		Error e = drm_error(r, strprintf("amdgpu_bo_va_op(MAP, %s, %" PRIu64 " bytes at 0x%" PRIx64 ")",
						 bo.name().c_str(), m.size_, m.va_));
		// m's destructor frees the range; nothing is mapped yet.
		return e;
	}
	m.bo_ = bo.get();
	return m;
}

VaMapping::VaMapping(VaMapping &&o) noexcept
	: bo_(std::exchange(o.bo_, nullptr)), range_(std::exchange(o.range_, nullptr)),
	  va_(std::exchange(o.va_, 0)), size_(std::exchange(o.size_, 0)), name_(std::move(o.name_))
{
}

VaMapping &VaMapping::operator=(VaMapping &&o) noexcept
{
	if (this != &o) {
		reset();
		bo_ = std::exchange(o.bo_, nullptr);
		range_ = std::exchange(o.range_, nullptr);
		va_ = std::exchange(o.va_, 0);
		size_ = std::exchange(o.size_, 0);
		name_ = std::move(o.name_);
	}
	return *this;
}

VaMapping::~VaMapping() { reset(); }

void VaMapping::close_with(Bo bo)
{
	bo_ = nullptr; // no UNMAP: the close below drops the mapping
	{
		Bo closed = std::move(bo);
	}
	reset(); // frees the VA range
}

void VaMapping::reset()
{
	if (bo_) {
		const int r = amdgpu_bo_va_op(bo_, 0, size_, va_, 0, AMDGPU_VA_OP_UNMAP);
		if (r != 0)
			log_warn("amdgpu_bo_va_op(UNMAP, %s, %" PRIu64 " bytes at 0x%" PRIx64 ") failed: %d",
				 name_.c_str(), size_, va_, r);
	}
	bo_ = nullptr;
	if (range_) {
		amdgpu_va_range_free(range_);
		range_ = nullptr;
	}
	va_ = 0;
	size_ = 0;
}

// ---- CpuMapping ---------------------------------------------------------

Result<CpuMapping> CpuMapping::map(const Bo &bo)
{
	CpuMapping m;
	const int r = amdgpu_bo_cpu_map(bo.get(), &m.ptr_);
	if (r != 0)
		return drm_error(r, "amdgpu_bo_cpu_map(" + bo.name() + ")");
	m.bo_ = bo.get();
	return m;
}

CpuMapping::CpuMapping(CpuMapping &&o) noexcept
	: bo_(std::exchange(o.bo_, nullptr)), ptr_(std::exchange(o.ptr_, nullptr))
{
}

CpuMapping &CpuMapping::operator=(CpuMapping &&o) noexcept
{
	if (this != &o) {
		reset();
		bo_ = std::exchange(o.bo_, nullptr);
		ptr_ = std::exchange(o.ptr_, nullptr);
	}
	return *this;
}

CpuMapping::~CpuMapping() { reset(); }

void CpuMapping::reset()
{
	if (bo_)
		amdgpu_bo_cpu_unmap(bo_);
	bo_ = nullptr;
	ptr_ = nullptr;
}

// ---- Context, BoList ----------------------------------------------------

Result<Context> Context::create(const Device &dev)
{
	amdgpu_context_handle h = nullptr;
	const int r = amdgpu_cs_ctx_create(dev.get(), &h);
	if (r != 0)
		return drm_error(r, "amdgpu_cs_ctx_create");
	return Context(h);
}

Result<BoList> BoList::create(const Device &dev, std::span<const amdgpu_bo_handle> bos)
{
	if (bos.empty())
		return make_error(EINVAL, "amdgpu_bo_list_create: no BOs");
	std::vector<amdgpu_bo_handle> handles(bos.begin(), bos.end());
	amdgpu_bo_list_handle h = nullptr;
	const int r = amdgpu_bo_list_create(dev.get(), static_cast<uint32_t>(handles.size()),
					    handles.data(), nullptr, &h);
	if (r != 0)
		return drm_error(r, strprintf("amdgpu_bo_list_create(%zu BOs)", handles.size()));
	return BoList(h);
}

// ---- submission ---------------------------------------------------------

Result<DmaFence> submit_dma(const Context &ctx, const BoList &list, uint64_t ib_va,
			    uint32_t ib_dwords)
{
	amdgpu_cs_ib_info ib = {};
	ib.ib_mc_address = ib_va;
	ib.size = ib_dwords;
	amdgpu_cs_request req = {};
	req.ip_type = AMDGPU_HW_IP_DMA;
	req.ip_instance = 0;
	req.ring = 0;
	req.resources = list.get();
	req.number_of_ibs = 1;
	req.ibs = &ib;
	const int r = amdgpu_cs_submit(ctx.get(), 0, &req, 1);
	if (r != 0)
		return drm_error(r, strprintf("amdgpu_cs_submit(SDMA, IB of %u dwords at 0x%" PRIx64 ")",
					      ib_dwords, ib_va));
	DmaFence f;
	f.raw.context = ctx.get();
	f.raw.ip_type = AMDGPU_HW_IP_DMA;
	f.raw.ip_instance = 0;
	f.raw.ring = 0;
	f.raw.fence = req.seq_no;
	return f;
}

int64_t timens_monotonic_offset_ns()
{
	auto text = read_text_file(AT_FDCWD, "/proc/self/timens_offsets", 4096);
	if (!text) // a kernel without time namespaces (before 5.6)
		return 0;
	std::istringstream in(*text);
	std::string clock;
	int64_t sec = 0, nsec = 0;
	while (in >> clock >> sec >> nsec)
		if (clock == "monotonic")
			return sec * 1000000000 + nsec;
	return 0;
}

uint64_t libdrm_timeout_ns(uint64_t timeout_ns, int64_t offset_ns)
{
	if (timeout_ns == AMDGPU_TIMEOUT_INFINITE || offset_ns == 0)
		return timeout_ns;
	if (offset_ns < 0) { // this clock lags the kernel's: wait that much longer
		const uint64_t lag = static_cast<uint64_t>(-(offset_ns + 1)) + 1;
		return timeout_ns > AMDGPU_TIMEOUT_INFINITE - 1 - lag ? AMDGPU_TIMEOUT_INFINITE - 1
								     : timeout_ns + lag;
	}
	const uint64_t lead = static_cast<uint64_t>(offset_ns);
	return timeout_ns > lead ? timeout_ns - lead : 0;
}

Status wait_fence(const DmaFence &fence, uint64_t timeout_ns)
{
	amdgpu_cs_fence raw = fence.raw;
	uint32_t expired = 0;
	const int r = amdgpu_cs_query_fence_status(
		&raw, libdrm_timeout_ns(timeout_ns, timens_monotonic_offset_ns()), 0, &expired);
	if (r != 0)
		return drm_error(r, strprintf("amdgpu_cs_query_fence_status(SDMA seq %" PRIu64 ")",
					      fence.seq()));
	if (!expired)
		return make_error(ETIMEDOUT, "SDMA job seq %" PRIu64 " not done after %" PRIu64 " ms",
				  fence.seq(), timeout_ns / 1000000);
	return ok_status();
}

} // namespace amdcr
