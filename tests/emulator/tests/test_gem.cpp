// SPDX-License-Identifier: GPL-2.0-only
//
// The render-node ioctls a checkpoint of GEM buffer objects needs, driven
// the way a client of the kernel drives them: BOs, VA mappings, CPU maps,
// dma-bufs and SDMA copies through libdrm_amdgpu 2.4.114, the ioctls it has
// no wrapper for through drmIoctl with the uAPI structs of gem_uapi.h.
//   GEM_LIST_HANDLES    two-pass size protocol, the kernel's entries
//   GEM_OP              GET_GEM_CREATE_INFO (also libdrm's 16-byte form),
//                       GET_MAPPING_INFO (two-pass), argument errnos
//   GEM_VA / GEM_MMAP   caller-chosen VAs and flags; fake offsets
//   GEM_CHANGE_HANDLE   errnos; a moved BO keeps contents, mappings, offset
//   PRIME               errnos; a dma-buf shared with another process (its
//                       own handle to the same BO, one handle per file);
//                       the fd as a dumper (CRIU) sees it
//
// Usage (under kfd-emu): test_gem --machine NAME [overrides]
// (the program re-executes itself as `test_gem --child ...` for the
// second process of the sharing case).
#include "gem_uapi.h"
#include "libdrm_client.h"
#include "testcommon/pattern.h"
#include "testcommon/scm_rights.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xf86drm.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <string>
#include <vector>

using namespace kfdemu;
using namespace kfdemu::test;
namespace u = kfdemu::uapi;

namespace {

constexpr uint64_t kPage = 4096;
constexpr uint32_t kDmaBufMagic = 0x444d4142;	// DMA_BUF_MAGIC, include/uapi/linux/magic.h
// Caller-chosen GPU VAs, far above what libdrm's VA manager hands out from
// the bottom of the general range and below the 48-bit hole.
constexpr uint64_t kVaBase = 0x0000700000000000ull;
// Flags the kernel gives BOs beyond the requested ones: amdgpu_bo_create()
// sets VRAM_WIPE_ON_RELEASE on every BO (since Linux 6.10), GEM_CREATE
// also VRAM_CLEARED ("always clear VRAM").
constexpr uint64_t kEveryBo = AMDGPU_GEM_CREATE_VRAM_WIPE_ON_RELEASE;
constexpr uint64_t kEveryGemCreate = kEveryBo | AMDGPU_GEM_CREATE_VRAM_CLEARED;

// drmIoctl's answer as 0 or -errno.
int ioc(int fd, unsigned long req, void *arg)
{
	return drmIoctl(fd, req, arg) ? -errno : 0;
}

uint32_t kms_handle(amdgpu_bo_handle bo)
{
	uint32_t h = 0;
	CHECK_EQ(amdgpu_bo_export(bo, amdgpu_bo_handle_type_kms, &h), 0);
	return h;
}

int list_handles(int fd, u::drm_amdgpu_gem_list_handles_entry *e, uint32_t *n)
{
	u::drm_amdgpu_gem_list_handles a{reinterpret_cast<uint64_t>(e), *n, 0};
	int r = ioc(fd, u::IOCTL_AMDGPU_GEM_LIST_HANDLES, &a);
	*n = a.num_entries;
	return r;
}

std::vector<u::drm_amdgpu_gem_list_handles_entry> all_handles(int fd)
{
	uint32_t n = 0;
	if (!CHECK_EQ(list_handles(fd, nullptr, &n), 0))
		return {};
	std::vector<u::drm_amdgpu_gem_list_handles_entry> e(n);
	if (!CHECK_EQ(list_handles(fd, e.data(), &n), 0) || !CHECK_EQ(size_t(n), e.size()))
		return {};
	return e;
}

const u::drm_amdgpu_gem_list_handles_entry *find_entry(const std::vector<u::drm_amdgpu_gem_list_handles_entry> &v,
						       uint32_t h)
{
	for (const auto &e : v)
		if (e.gem_handle == h)
			return &e;
	return nullptr;
}

int gem_op(int fd, uint32_t handle, uint32_t op, void *value, uint32_t *num = nullptr, uint32_t padding = 0)
{
	u::drm_amdgpu_gem_op a{handle, op, reinterpret_cast<uint64_t>(value), num ? *num : 0, padding};
	int r = ioc(fd, u::IOCTL_AMDGPU_GEM_OP, &a);
	if (num)
		*num = a.num_entries;
	return r;
}

std::vector<u::drm_amdgpu_gem_vm_entry> mappings(int fd, uint32_t handle)
{
	uint32_t n = 0;
	if (!CHECK_EQ(gem_op(fd, handle, u::GEM_OP_GET_MAPPING_INFO, nullptr, &n), 0))
		return {};
	std::vector<u::drm_amdgpu_gem_vm_entry> e(n);
	if (n && !CHECK_EQ(gem_op(fd, handle, u::GEM_OP_GET_MAPPING_INFO, e.data(), &n), 0))
		return {};
	CHECK_EQ(size_t(n), e.size());
	return e;
}

const u::drm_amdgpu_gem_vm_entry *find_mapping(const std::vector<u::drm_amdgpu_gem_vm_entry> &v, uint64_t addr)
{
	for (const auto &e : v)
		if (e.addr == addr)
			return &e;
	return nullptr;
}

// DRM_IOCTL_AMDGPU_GEM_MMAP: the fake offset, or -errno.
int64_t mmap_offset(int fd, uint32_t handle)
{
	drm_amdgpu_gem_mmap a{};
	a.in.handle = handle;
	int r = ioc(fd, DRM_IOCTL_AMDGPU_GEM_MMAP, &a);
	return r ? r : int64_t(a.out.addr_ptr);
}

int change_handle(int fd, uint32_t handle, uint32_t new_handle)
{
	u::drm_gem_change_handle a{handle, new_handle};
	return ioc(fd, u::IOCTL_GEM_CHANGE_HANDLE, &a);
}

int prime_to_fd(int fd, uint32_t handle, uint32_t flags, int *out)
{
	drm_prime_handle a{};
	a.handle = handle;
	a.flags = flags;
	a.fd = -1;
	int r = ioc(fd, DRM_IOCTL_PRIME_HANDLE_TO_FD, &a);
	*out = a.fd;
	return r;
}

int fd_to_handle(int fd, int dmabuf, uint32_t *out)
{
	drm_prime_handle a{};
	a.fd = dmabuf;
	int r = ioc(fd, DRM_IOCTL_PRIME_FD_TO_HANDLE, &a);
	*out = a.handle;
	return r;
}

amdgpu_bo_handle alloc(amdgpu_device_handle dev, uint64_t size, uint64_t align, uint32_t heap, uint64_t flags)
{
	amdgpu_bo_alloc_request req{};
	req.alloc_size = size;
	req.phys_alignment = align;
	req.preferred_heap = heap;
	req.flags = flags;
	amdgpu_bo_handle bo = nullptr;
	CHECK_EQ(amdgpu_bo_alloc(dev, &req, &bo), 0);
	return bo;
}

// A read-only view of `len` bytes of a render-node BO through the file's
// mmap at its fake offset (what the CPU sees of the BO).
struct View {
	void *p = MAP_FAILED;
	size_t len = 0;
	View(int fd, int64_t offset, size_t n) : len(n)
	{
		if (offset > 0)
			p = ::mmap(nullptr, n, PROT_READ, MAP_SHARED, fd, offset);
	}
	~View()
	{
		if (p != MAP_FAILED)
			::munmap(p, len);
	}
	View(const View &) = delete;
	View &operator=(const View &) = delete;
	bool ok() const { return p != MAP_FAILED; }
	const unsigned char *bytes() const { return static_cast<const unsigned char *>(p); }
};

bool same_bytes(const void *a, const void *b, size_t n) { return std::memcmp(a, b, n) == 0; }

// --- GEM_LIST_HANDLES ---------------------------------------------------------

void test_list_handles(Dev &d)
{
	amdgpu_bo_handle vram = alloc(d.dev, 3 * kPage + 1, 16 * kPage, AMDGPU_GEM_DOMAIN_VRAM,
				      AMDGPU_GEM_CREATE_CPU_ACCESS_REQUIRED);
	amdgpu_bo_handle gtt = alloc(d.dev, 2 * kPage, kPage, AMDGPU_GEM_DOMAIN_GTT, AMDGPU_GEM_CREATE_CPU_GTT_USWC);
	void *host = pages(kPage);
	amdgpu_bo_handle up = nullptr;
	CHECK_EQ(amdgpu_create_bo_from_user_mem(d.dev, host, kPage, &up), 0);
	if (!vram || !gtt || !up)
		return;

	// Pass 1: the count, nothing written (entries may be NULL).
	uint32_t n = 0;
	CHECK_EQ(list_handles(d.fd, nullptr, &n), 0);
	if (!CHECK(n >= 3))
		return;
	const uint32_t count = n;
	// Too small: the count again, the array untouched.
	std::vector<u::drm_amdgpu_gem_list_handles_entry> small(count - 1);
	std::memset(small.data(), 0xa5, small.size() * sizeof small[0]);
	n = count - 1;
	CHECK_EQ(list_handles(d.fd, small.data(), &n), 0);
	CHECK_EQ(n, count);
	CHECK(small[0].gem_handle == 0xa5a5a5a5u && small[count - 2].size == 0xa5a5a5a5a5a5a5a5ull);
	// Large enough but NULL: EFAULT, with the count copied back.
	n = count;
	CHECK_EQ(list_handles(d.fd, nullptr, &n), -EFAULT);
	CHECK_EQ(n, count);
	// Larger than needed: exactly `count` entries, the rest untouched.
	std::vector<u::drm_amdgpu_gem_list_handles_entry> e(count + 2);
	std::memset(e.data(), 0xa5, e.size() * sizeof e[0]);
	n = count + 2;
	CHECK_EQ(list_handles(d.fd, e.data(), &n), 0);
	CHECK_EQ(n, count);
	CHECK_EQ(e[count].gem_handle, 0xa5a5a5a5u);
	e.resize(count);
	for (size_t i = 1; i < e.size(); i++)
		CHECK(e[i - 1].gem_handle < e[i].gem_handle);	// idr order

	const auto *ev = find_entry(e, kms_handle(vram));
	const auto *eg = find_entry(e, kms_handle(gtt));
	const auto *eu = find_entry(e, kms_handle(up));
	if (CHECK(ev && eg && eu)) {
		// VRAM: page-aligned size, alignment in pages, GEM_CREATE's
		// flags plus what the kernel adds to every one (kEveryGemCreate).
		CHECK_EQ(ev->size, 4 * kPage);
		CHECK_EQ(ev->preferred_domains, uint64_t(AMDGPU_GEM_DOMAIN_VRAM));
		CHECK_EQ(ev->alloc_flags, AMDGPU_GEM_CREATE_CPU_ACCESS_REQUIRED | kEveryGemCreate);
		CHECK_EQ(ev->alignment, 16u);
		CHECK_EQ(ev->flags, 0u);
		CHECK_EQ(eg->size, 2 * kPage);
		CHECK_EQ(eg->preferred_domains, uint64_t(AMDGPU_GEM_DOMAIN_GTT));
		CHECK_EQ(eg->alloc_flags, AMDGPU_GEM_CREATE_CPU_GTT_USWC | kEveryGemCreate);
		CHECK_EQ(eg->alignment, 1u);
		// userptr: a GTT BO without creation flags or alignment.
		CHECK_EQ(eu->size, kPage);
		CHECK_EQ(eu->preferred_domains, uint64_t(AMDGPU_GEM_DOMAIN_GTT));
		CHECK_EQ(eu->alloc_flags, kEveryBo);
		CHECK_EQ(eu->alignment, 0u);
	}
	// A closed handle is gone from the list.
	const uint32_t hg = kms_handle(gtt);
	CHECK_EQ(amdgpu_bo_free(gtt), 0);
	CHECK(!find_entry(all_handles(d.fd), hg));
	CHECK_EQ(amdgpu_bo_free(up), 0);
	CHECK_EQ(amdgpu_bo_free(vram), 0);
	std::free(host);
}

// --- GEM_OP GET_GEM_CREATE_INFO --------------------------------------------------

void test_create_info(Dev &d)
{
	amdgpu_bo_handle bo = alloc(d.dev, 5 * kPage, 4 * kPage, AMDGPU_GEM_DOMAIN_VRAM,
				    AMDGPU_GEM_CREATE_NO_CPU_ACCESS | AMDGPU_GEM_CREATE_VRAM_WIPE_ON_RELEASE);
	if (!bo)
		return;
	const uint32_t h = kms_handle(bo);
	u::drm_amdgpu_gem_create_in info{};
	CHECK_EQ(gem_op(d.fd, h, u::GEM_OP_GET_GEM_CREATE_INFO, &info), 0);
	CHECK_EQ(info.bo_size, 5 * kPage);
	CHECK_EQ(info.alignment, 4 * kPage);	// bytes here, pages in GEM_LIST_HANDLES
	CHECK_EQ(info.domains, uint64_t(AMDGPU_GEM_DOMAIN_VRAM));
	CHECK_EQ(info.domain_flags, AMDGPU_GEM_CREATE_NO_CPU_ACCESS | kEveryGemCreate);
	// libdrm 2.4.114 asks the same through the older 16-byte struct.
	amdgpu_bo_info bi{};
	CHECK_EQ(amdgpu_bo_query_info(bo, &bi), 0);
	CHECK_EQ(bi.alloc_size, 5 * kPage);
	CHECK_EQ(bi.phys_alignment, 4 * kPage);
	CHECK_EQ(bi.preferred_heap, uint32_t(AMDGPU_GEM_DOMAIN_VRAM));
	CHECK_EQ(bi.alloc_flags, info.domain_flags);

	CHECK_EQ(gem_op(d.fd, 0x7fff0000u, u::GEM_OP_GET_GEM_CREATE_INFO, &info), -ENOENT);
	uint32_t none = 0;
	CHECK_EQ(gem_op(d.fd, 0x7fff0000u, u::GEM_OP_GET_GEM_CREATE_INFO, &info, &none, 1), -EINVAL);	// padding first
	CHECK_EQ(gem_op(d.fd, h, u::GEM_OP_GET_GEM_CREATE_INFO, &info, &none, 1), -EINVAL);
	CHECK_EQ(gem_op(d.fd, h, 7, &info), -EINVAL);
	CHECK_EQ(gem_op(d.fd, h, u::GEM_OP_GET_GEM_CREATE_INFO, reinterpret_cast<void *>(8)), -EFAULT);
	// GEM_CREATE refuses what is not settable, as the kernel does.
	drm_amdgpu_gem_create c{};
	c.in.bo_size = kPage;
	c.in.domains = AMDGPU_GEM_DOMAIN_VRAM;
	c.in.domain_flags = AMDGPU_GEM_CREATE_VRAM_CONTIGUOUS;
	CHECK_EQ(ioc(d.fd, DRM_IOCTL_AMDGPU_GEM_CREATE, &c), -EINVAL);
	c.in.domain_flags = AMDGPU_GEM_CREATE_ENCRYPTED;	// no TMZ on these GPUs
	CHECK_EQ(ioc(d.fd, DRM_IOCTL_AMDGPU_GEM_CREATE, &c), -EINVAL);
	CHECK_EQ(amdgpu_bo_free(bo), 0);
}

// --- GEM_VA at chosen VAs, GET_MAPPING_INFO --------------------------------------

void test_mapping_info(Dev &d)
{
	amdgpu_bo_handle bo = alloc(d.dev, 4 * kPage, kPage, AMDGPU_GEM_DOMAIN_GTT, 0);
	if (!bo)
		return;
	const uint32_t h = kms_handle(bo);
	const uint64_t va1 = kVaBase, va2 = kVaBase + (1ull << 30);
	CHECK_EQ(mappings(d.fd, h).size(), 0u);
	CHECK_EQ(amdgpu_bo_va_op_raw(d.dev, bo, 0, 4 * kPage, va1,
				     AMDGPU_VM_PAGE_READABLE | AMDGPU_VM_PAGE_WRITEABLE | AMDGPU_VM_PAGE_EXECUTABLE,
				     AMDGPU_VA_OP_MAP), 0);
	CHECK_EQ(amdgpu_bo_va_op_raw(d.dev, bo, 2 * kPage, kPage, va2, AMDGPU_VM_PAGE_READABLE | AMDGPU_VM_MTYPE_UC,
				     AMDGPU_VA_OP_MAP), 0);
	// The kernel's GEM_VA checks on the way.
	CHECK_EQ(amdgpu_bo_va_op_raw(d.dev, bo, 0, kPage, va1 + kPage, AMDGPU_VM_PAGE_READABLE, AMDGPU_VA_OP_MAP),
		 -EINVAL);	// overlap
	CHECK_EQ(amdgpu_bo_va_op_raw(d.dev, bo, 0, kPage, 0x1000, AMDGPU_VM_PAGE_READABLE, AMDGPU_VA_OP_MAP),
		 -EINVAL);	// reserved bottom
	CHECK_EQ(amdgpu_bo_va_op_raw(d.dev, bo, 3 * kPage, 2 * kPage, va2 + (1ull << 20), AMDGPU_VM_PAGE_READABLE,
				     AMDGPU_VA_OP_MAP), -EINVAL);	// beyond the BO
	CHECK_EQ(amdgpu_bo_va_op_raw(d.dev, bo, 0, kPage, va1 + kPage, 0, AMDGPU_VA_OP_UNMAP), -ENOENT);

	// Pass 1: the count only; too small: the count, nothing written.
	uint32_t n = 0;
	CHECK_EQ(gem_op(d.fd, h, u::GEM_OP_GET_MAPPING_INFO, nullptr, &n), 0);
	CHECK_EQ(n, 2u);
	u::drm_amdgpu_gem_vm_entry guard[2];
	std::memset(guard, 0xa5, sizeof guard);
	n = 1;
	CHECK_EQ(gem_op(d.fd, h, u::GEM_OP_GET_MAPPING_INFO, guard, &n), 0);
	CHECK_EQ(n, 2u);
	CHECK_EQ(guard[0].addr, 0xa5a5a5a5a5a5a5a5ull);
	n = 2;
	CHECK_EQ(gem_op(d.fd, h, u::GEM_OP_GET_MAPPING_INFO, reinterpret_cast<void *>(8), &n), -EFAULT);
	CHECK_EQ(n, 2u);
	n = 2;
	CHECK_EQ(gem_op(d.fd, h, u::GEM_OP_GET_MAPPING_INFO, guard, &n, 1), -EINVAL);	// padding
	CHECK_EQ(gem_op(d.fd, 0x7fff0000u, u::GEM_OP_GET_MAPPING_INFO, guard, &n), -ENOENT);

	const auto m = mappings(d.fd, h);
	const auto *m1 = find_mapping(m, va1), *m2 = find_mapping(m, va2);
	if (CHECK(m.size() == 2 && m1 && m2)) {
		CHECK_EQ(m1->size, 4 * kPage);
		CHECK_EQ(m1->offset, 0u);
		// GET_MAPPING_INFO reports GEM_VA's flags (Linux 6.18+).
		CHECK_EQ(m1->flags, uint64_t{AMDGPU_VM_PAGE_READABLE | AMDGPU_VM_PAGE_WRITEABLE | AMDGPU_VM_PAGE_EXECUTABLE});
		CHECK_EQ(m2->size, kPage);
		CHECK_EQ(m2->offset, 2 * kPage);
		CHECK_EQ(m2->flags, uint64_t{AMDGPU_VM_PAGE_READABLE | AMDGPU_VM_MTYPE_UC});
	}
	CHECK_EQ(amdgpu_bo_va_op_raw(d.dev, bo, 2 * kPage, kPage, va2, 0, AMDGPU_VA_OP_UNMAP), 0);
	const auto after = mappings(d.fd, h);
	CHECK(after.size() == 1 && find_mapping(after, va1));
	CHECK_EQ(amdgpu_bo_va_op_raw(d.dev, bo, 0, 4 * kPage, va1, 0, AMDGPU_VA_OP_UNMAP), 0);
	CHECK_EQ(amdgpu_bo_free(bo), 0);
}

// --- GEM_MMAP ------------------------------------------------------------------------

void test_mmap_offsets(Dev &d)
{
	amdgpu_bo_handle a = alloc(d.dev, 3 * kPage, kPage, AMDGPU_GEM_DOMAIN_GTT, 0);
	amdgpu_bo_handle b = alloc(d.dev, kPage, kPage, AMDGPU_GEM_DOMAIN_VRAM, AMDGPU_GEM_CREATE_CPU_ACCESS_REQUIRED);
	amdgpu_bo_handle hidden = alloc(d.dev, kPage, kPage, AMDGPU_GEM_DOMAIN_VRAM, AMDGPU_GEM_CREATE_NO_CPU_ACCESS);
	void *host = pages(kPage);
	amdgpu_bo_handle up = nullptr;
	CHECK_EQ(amdgpu_create_bo_from_user_mem(d.dev, host, kPage, &up), 0);
	void *cpu = nullptr;
	if (!a || !b || !hidden || !up || !CHECK_EQ(amdgpu_bo_cpu_map(a, &cpu), 0))
		return;
	testcommon::fill_pattern(cpu, 3 * kPage, 11);
	const int64_t oa = mmap_offset(d.fd, kms_handle(a)), ob = mmap_offset(d.fd, kms_handle(b));
	CHECK(oa > 0 && ob > 0 && oa != ob);
	CHECK_EQ(oa % int64_t(kPage), 0);
	CHECK_EQ(mmap_offset(d.fd, kms_handle(a)), oa);	// stable
	{
		View v(d.fd, oa, 3 * kPage);
		CHECK(v.ok() && same_bytes(v.bytes(), cpu, 3 * kPage));
	}
	CHECK_EQ(mmap_offset(d.fd, 0x7fff0000u), -ENOENT);
	CHECK_EQ(mmap_offset(d.fd, kms_handle(up)), -EPERM);
	CHECK_EQ(mmap_offset(d.fd, kms_handle(hidden)), -EPERM);
	CHECK_EQ(amdgpu_bo_cpu_unmap(a), 0);
	for (auto *bo : {a, b, hidden, up})
		CHECK_EQ(amdgpu_bo_free(bo), 0);
	std::free(host);
}

// --- GEM_CHANGE_HANDLE -------------------------------------------------------------

void test_change_handle(Dev &d)
{
	constexpr uint64_t size = 4 * kPage;
	amdgpu_bo_handle x = alloc(d.dev, size, kPage, AMDGPU_GEM_DOMAIN_VRAM, AMDGPU_GEM_CREATE_CPU_ACCESS_REQUIRED);
	amdgpu_bo_handle y = alloc(d.dev, kPage, kPage, AMDGPU_GEM_DOMAIN_GTT, 0);
	void *cpu = nullptr;
	if (!x || !y || !CHECK_EQ(amdgpu_bo_cpu_map(x, &cpu), 0))
		return;
	testcommon::fill_pattern(cpu, size, 2024);
	const uint32_t hx = kms_handle(x), hy = kms_handle(y);
	const uint64_t va = kVaBase + (2ull << 30);
	CHECK_EQ(amdgpu_bo_va_op_raw(d.dev, x, 0, size, va, AMDGPU_VM_PAGE_READABLE | AMDGPU_VM_PAGE_WRITEABLE,
				     AMDGPU_VA_OP_MAP), 0);
	const int64_t off = mmap_offset(d.fd, hx);
	const auto maps_before = mappings(d.fd, hx);
	uint32_t dmabuf = 0;
	CHECK_EQ(amdgpu_bo_export(x, amdgpu_bo_handle_type_dma_buf_fd, &dmabuf), 0);

	// The errnos, each leaving both BOs where they were.
	CHECK_EQ(change_handle(d.fd, hx, hy), -ENOSPC);
	CHECK_EQ(change_handle(d.fd, hx, 0), -ENOSPC);
	CHECK_EQ(change_handle(d.fd, hx, uint32_t(INT_MAX) + 1), -EINVAL);
	CHECK_EQ(change_handle(d.fd, 0x7fff0000u, 0x7fff0001u), -ENOENT);
	CHECK_EQ(change_handle(d.fd, hx, hx), 0);
	CHECK_EQ(mmap_offset(d.fd, hx), off);
	CHECK(mmap_offset(d.fd, hy) > 0);

	uint32_t free_handle = 4242;
	while (find_entry(all_handles(d.fd), free_handle))
		free_handle++;
	CHECK_EQ(change_handle(d.fd, hx, free_handle), 0);
	const uint32_t nh = free_handle;
	CHECK_EQ(mmap_offset(d.fd, hx), -ENOENT);	// the old handle is closed
	CHECK_EQ(mmap_offset(d.fd, nh), off);		// same BO, same offset
	const auto list = all_handles(d.fd);
	CHECK(find_entry(list, nh) && !find_entry(list, hx));
	if (const auto *e = find_entry(list, nh))
		CHECK(e->size == size && e->preferred_domains == AMDGPU_GEM_DOMAIN_VRAM);
	const auto maps_after = mappings(d.fd, nh);
	CHECK(maps_before.size() == 1 && maps_after.size() == 1 &&
	      same_bytes(maps_before.data(), maps_after.data(), sizeof maps_after[0]));
	{
		View v(d.fd, off, size);
		CHECK(v.ok() && same_bytes(v.bytes(), cpu, size));
	}
	// PRIME follows the move: the dma-buf resolves to the new handle, in
	// libdrm too (a new libdrm BO for it).
	uint32_t h = 0;
	CHECK_EQ(fd_to_handle(d.fd, int(dmabuf), &h), 0);
	CHECK_EQ(h, nh);
	amdgpu_bo_import_result moved{};
	CHECK_EQ(amdgpu_bo_import(d.dev, amdgpu_bo_handle_type_dma_buf_fd, dmabuf, &moved), 0);
	// The GPU still reads the BO at its old VA: SDMA into a fresh GTT BO.
	Mapped out = gtt(d.dev, size);
	if (moved.buf_handle && out.ok) {
		CHECK_EQ(kms_handle(moved.buf_handle), nh);
		std::memset(out.cpu, 0, size);
		if (sdma_copy(d, {moved.buf_handle, out.bo}, va, out.va, size))
			CHECK(same_bytes(out.cpu, cpu, size));
	}
	out.release(true);
	CHECK_EQ(amdgpu_bo_cpu_unmap(x), 0);
	if (moved.buf_handle) {
		CHECK_EQ(amdgpu_bo_va_op_raw(d.dev, moved.buf_handle, 0, size, va, 0, AMDGPU_VA_OP_UNMAP), 0);
		CHECK_EQ(amdgpu_bo_free(moved.buf_handle), 0);	// GEM_CLOSE of the new handle
	}
	amdgpu_bo_free(x);	// libdrm's stale BO: closes the old number, which no longer exists
	CHECK_EQ(amdgpu_bo_free(y), 0);
	::close(int(dmabuf));
}

// --- PRIME: errnos, one handle per file, another process -----------------------------

// A dma-buf fd as a dumper sees it: no file type (so CRIU's dump_one_file
// falls through to the plugins' DUMP_EXT_FILE), owner rw, the buffer's
// size, the dmabuf filesystem, and the "/dmabuf:" link criu-dev's plugin
// tests for (also through another process's /proc/<pid>/fd).
void check_dumper_view(int fd, uint64_t size, pid_t owner, int owner_fd)
{
	struct stat st{};
	if (CHECK_EQ(::fstat(fd, &st), 0)) {
		CHECK_EQ(st.st_mode, mode_t(S_IRUSR | S_IWUSR));
		CHECK(!S_ISCHR(st.st_mode) && !S_ISREG(st.st_mode) && !S_ISSOCK(st.st_mode) && !S_ISFIFO(st.st_mode));
		CHECK_EQ(uint64_t(st.st_size), size);
		CHECK_EQ(st.st_nlink, nlink_t(1));	// not a memfd's 0
		CHECK_EQ(uint64_t(st.st_blocks), size / 512);
	}
	struct statfs sfs{};
	CHECK(::fstatfs(fd, &sfs) == 0 && sfs.f_type == kDmaBufMagic);
	auto link = [](const std::string &p) {
		char b[128] = {};
		return ::readlink(p.c_str(), b, sizeof b - 1) > 0 ? std::string(b) : std::string();
	};
	CHECK(link("/proc/self/fd/" + std::to_string(fd)).starts_with("/dmabuf:"));
	CHECK(link("/proc/" + std::to_string(owner) + "/fd/" + std::to_string(owner_fd)).starts_with("/dmabuf:"));
}

struct ShareMsg {
	uint64_t size;
	uint64_t mmap_offset;	// the exporter's fake offset
	uint32_t seed;
	int32_t fd_in_exporter;
	uint64_t write_at;	// where the importer writes its own pattern
	uint32_t write_seed;
	uint32_t pad;
};

bool send_fd(int sock, const void *msg, size_t len, int fd)
{
	return testcommon::send_with_fd(sock, msg, len, fd);
}

// The whole message, and (when `fd` is not null) the fd that came with it.
bool recv_fd(int sock, void *msg, size_t len, int *fd)
{
	int got = -1;
	if (testcommon::recv_with_fd(sock, msg, len, &got) != ssize_t(len) || (fd && got < 0)) {
		if (got >= 0)
			::close(got);
		return false;
	}
	if (fd)
		*fd = got;
	else if (got >= 0)
		::close(got);
	return true;
}

void test_prime_errnos(Dev &d)
{
	amdgpu_bo_handle bo = alloc(d.dev, 2 * kPage, kPage, AMDGPU_GEM_DOMAIN_GTT, 0);
	void *host = pages(kPage);
	amdgpu_bo_handle up = nullptr;
	CHECK_EQ(amdgpu_create_bo_from_user_mem(d.dev, host, kPage, &up), 0);
	if (!bo || !up)
		return;
	const uint32_t h = kms_handle(bo);
	int fd = -1;
	CHECK_EQ(prime_to_fd(d.fd, h, 0x4, &fd), -EINVAL);	// only CLOEXEC | RDWR
	CHECK_EQ(prime_to_fd(d.fd, 0x7fff0000u, DRM_CLOEXEC, &fd), -ENOENT);
	CHECK_EQ(prime_to_fd(d.fd, kms_handle(up), DRM_CLOEXEC, &fd), -EPERM);	// userptr
	if (amdgpu_bo_handle local = alloc(d.dev, kPage, kPage, AMDGPU_GEM_DOMAIN_GTT,
					   AMDGPU_GEM_CREATE_VM_ALWAYS_VALID)) {
		CHECK_EQ(prime_to_fd(d.fd, kms_handle(local), DRM_CLOEXEC, &fd), -EPERM);	// per-VM BO
		CHECK_EQ(amdgpu_bo_free(local), 0);
	}
	int f1 = -1, f2 = -1;
	CHECK_EQ(prime_to_fd(d.fd, h, DRM_CLOEXEC | DRM_RDWR, &f1), 0);
	CHECK_EQ(prime_to_fd(d.fd, h, DRM_CLOEXEC, &f2), 0);
	CHECK(f1 >= 0 && f2 >= 0 && f1 != f2);
	CHECK_EQ(::fcntl(f1, F_GETFD), FD_CLOEXEC);
	// Both fds are the BO's one dma-buf: the exporter's own handle back.
	uint32_t back1 = 0, back2 = 0;
	CHECK_EQ(fd_to_handle(d.fd, f1, &back1), 0);
	CHECK_EQ(fd_to_handle(d.fd, f2, &back2), 0);
	CHECK(back1 == h && back2 == h);
	struct stat s1{}, s2{};
	CHECK(::fstat(f1, &s1) == 0 && ::fstat(f2, &s2) == 0 && s1.st_ino == s2.st_ino);
	check_dumper_view(f1, 2 * kPage, ::getpid(), f2);
	uint32_t none = 0;
	const int closed = ::dup(f2);
	::close(closed);
	CHECK_EQ(fd_to_handle(d.fd, closed, &none), -EBADF);
	CHECK_EQ(fd_to_handle(d.fd, d.fd, &none), -EINVAL);	// a render fd is no dma-buf
	int pipefd[2];
	if (CHECK_EQ(::pipe(pipefd), 0)) {
		CHECK_EQ(fd_to_handle(d.fd, pipefd[0], &none), -EINVAL);
		::close(pipefd[0]);
		::close(pipefd[1]);
	}
	::close(f1);
	::close(f2);
	CHECK_EQ(amdgpu_bo_free(up), 0);
	CHECK_EQ(amdgpu_bo_free(bo), 0);
	std::free(host);
}

// The exporter: a VRAM BO with a pattern, its dma-buf passed over a unix
// socket to a new process (this program again, as `--child`), which
// imports it into its own render file; then the importer's write is seen
// here.
void test_share_with_process(std::vector<Dev> &devs)
{
	static constexpr char self[] = "/proc/self/exe";
	Dev &d = devs[0];
	constexpr uint64_t size = 48 * kPage;
	amdgpu_bo_handle bo = alloc(d.dev, size, kPage, AMDGPU_GEM_DOMAIN_VRAM, AMDGPU_GEM_CREATE_CPU_ACCESS_REQUIRED);
	void *cpu = nullptr;
	if (!bo || !CHECK_EQ(amdgpu_bo_cpu_map(bo, &cpu), 0))
		return;
	testcommon::fill_pattern(cpu, size, 777);
	uint32_t dmabuf = 0;
	CHECK_EQ(amdgpu_bo_export(bo, amdgpu_bo_handle_type_dma_buf_fd, &dmabuf), 0);
	int sv[2];
	if (!CHECK_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0))
		return;
	std::fflush(stdout);
	const pid_t child = ::fork();
	if (child == 0) {
		::close(sv[0]);
		std::vector<std::string> args{self, "--child", std::to_string(sv[1])};
		for (const auto &dv : devs)
			args.push_back(std::to_string(dv.desc->drm_render_minor));
		std::vector<char *> argv;
		for (auto &a : args)
			argv.push_back(a.data());
		argv.push_back(nullptr);
		::execv(self, argv.data());
		::_exit(127);
	}
	::close(sv[1]);
	ShareMsg msg{size, uint64_t(mmap_offset(d.fd, kms_handle(bo))), 777, int32_t(dmabuf), 5 * kPage + 123, 999, 0};
	CHECK(send_fd(sv[0], &msg, sizeof msg, int(dmabuf)));
	char done = 0;
	CHECK(recv_fd(sv[0], &done, 1, nullptr) && done == 'w');
	// The importer wrote 2 pages of its pattern at write_at through the GPU.
	std::vector<unsigned char> want(2 * kPage);
	testcommon::fill_pattern(want.data(), want.size(), msg.write_seed);
	CHECK(same_bytes(static_cast<unsigned char *>(cpu) + msg.write_at, want.data(), want.size()));
	char bye = 'q';
	CHECK(send_fd(sv[0], &bye, 1, -1));
	int status = 0;
	CHECK_EQ(::waitpid(child, &status, 0), child);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	::close(sv[0]);
	CHECK_EQ(amdgpu_bo_cpu_unmap(bo), 0);
	CHECK_EQ(amdgpu_bo_free(bo), 0);
	::close(int(dmabuf));
}

// The importing process: its own render files, its own handles.
int child_main(int sock, const std::vector<uint32_t> &minors)
{
	ShareMsg msg{};
	int dmabuf = -1;
	if (!CHECK(recv_fd(sock, &msg, sizeof msg, &dmabuf)))
		return 1;
	run("child: the received dma-buf as a dumper sees it",
	    [&] { check_dumper_view(dmabuf, msg.size, ::getppid(), msg.fd_in_exporter); });
	std::vector<Dev> devs(minors.size());
	for (size_t i = 0; i < minors.size(); i++) {
		devs[i].fd = ::open(("/dev/dri/renderD" + std::to_string(minors[i])).c_str(), O_RDWR | O_CLOEXEC);
		uint32_t maj = 0, min = 0;
		CHECK(devs[i].fd >= 0 && amdgpu_device_initialize(devs[i].fd, &maj, &min, &devs[i].dev) == 0);
	}
	Dev &d = devs[0];
	run("child: import gives its own handle to the same BO, once per file", [&] {
		amdgpu_bo_import_result imp{};
		if (!d.dev || !CHECK_EQ(amdgpu_bo_import(d.dev, amdgpu_bo_handle_type_dma_buf_fd, dmabuf, &imp), 0))
			return;
		CHECK_EQ(imp.alloc_size, msg.size);
		const uint32_t h = kms_handle(imp.buf_handle);
		uint32_t again = 0, third = 0;
		CHECK_EQ(fd_to_handle(d.fd, dmabuf, &again), 0);
		const int dup = ::dup(dmabuf);
		CHECK_EQ(fd_to_handle(d.fd, dup, &third), 0);
		::close(dup);
		CHECK(again == h && third == h);
		const auto list = all_handles(d.fd);
		CHECK_EQ(list.size(), 1u);	// a fresh file: the import only
		if (const auto *e = find_entry(list, h)) {
			CHECK_EQ(e->flags, 0u);	// same device: the exporter's BO, not an import
			CHECK_EQ(e->size, msg.size);
			CHECK_EQ(e->preferred_domains, uint64_t(AMDGPU_GEM_DOMAIN_VRAM));
			CHECK_EQ(e->alloc_flags, AMDGPU_GEM_CREATE_CPU_ACCESS_REQUIRED | kEveryGemCreate);
		}
		// The same BO: the device's one fake offset, the exporter's bytes.
		CHECK_EQ(mmap_offset(d.fd, h), int64_t(msg.mmap_offset));
		std::vector<unsigned char> want(msg.size);
		testcommon::fill_pattern(want.data(), want.size(), msg.seed);
		{
			View v(d.fd, mmap_offset(d.fd, h), msg.size);
			CHECK(v.ok() && same_bytes(v.bytes(), want.data(), msg.size));
		}
		// Through this process's GPU VM: read it all, write a pattern.
		Mapped in;
		in.bo = imp.buf_handle;
		in.size = msg.size;
		in.map_va(d.dev);
		Mapped mine = gtt(d.dev, msg.size);
		if (in.ok && mine.ok) {
			std::memset(mine.cpu, 0, msg.size);
			if (sdma_copy(d, {in.bo, mine.bo}, in.va, mine.va, msg.size))
				CHECK(same_bytes(mine.cpu, want.data(), msg.size));
			testcommon::fill_pattern(mine.cpu, 2 * kPage, msg.write_seed);
			CHECK(sdma_copy(d, {in.bo, mine.bo}, mine.va, in.va + msg.write_at, 2 * kPage));
		}
		mine.release(true);
		in.release(false);
	});
	for (size_t i = 1; i < devs.size(); i++)
		run("child: import on another GPU is an import", [&] {
			Dev &p = devs[i];
			uint32_t h = 0;
			if (!p.dev || !CHECK_EQ(fd_to_handle(p.fd, dmabuf, &h), 0))
				return;
			const auto list = all_handles(p.fd);
			const auto *e = find_entry(list, h);
			if (CHECK(e)) {
				CHECK_EQ(e->flags, u::GEM_LIST_HANDLES_FLAG_IS_IMPORT);
				CHECK_EQ(e->preferred_domains, uint64_t(AMDGPU_GEM_DOMAIN_GTT));
				CHECK_EQ(e->alignment, 1u);
				CHECK_EQ(e->alloc_flags, kEveryBo);	// nothing of the exporter's inherited
				CHECK_EQ(e->size, msg.size);
			}
			std::vector<unsigned char> want(msg.size);
			testcommon::fill_pattern(want.data(), want.size(), msg.seed);
			View v(p.fd, mmap_offset(p.fd, h), kPage);
			CHECK(v.ok() && same_bytes(v.bytes(), want.data(), kPage));
			drm_gem_close cl{h, 0};
			CHECK_EQ(ioc(p.fd, DRM_IOCTL_GEM_CLOSE, &cl), 0);
		});
	const char w = 'w';
	CHECK(send_fd(sock, &w, 1, -1));
	char q = 0;
	CHECK(recv_fd(sock, &q, 1, nullptr) && q == 'q');
	for (auto &dv : devs) {
		if (dv.dev)
			amdgpu_device_deinitialize(dv.dev);
		if (dv.fd >= 0)
			::close(dv.fd);
	}
	::close(dmabuf);
	return summary();
}

} // namespace

int main(int argc, char **argv)
{
	if (argc >= 3 && std::string_view(argv[1]) == "--child") {
		std::vector<uint32_t> minors;
		for (int i = 3; i < argc; i++)
			minors.push_back(uint32_t(std::stoul(argv[i])));
		return child_main(std::stoi(argv[2]), minors);
	}
	const MachineDesc m = machine_from_args(argc, argv);
	std::vector<Dev> devs = gpu_devs(m);
	for (auto &d : devs) {
		const std::string path = "/dev/dri/renderD" + std::to_string(d.desc->drm_render_minor);
		d.fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
		uint32_t maj = 0, min = 0;
		CHECK(d.fd >= 0 && amdgpu_device_initialize(d.fd, &maj, &min, &d.dev) == 0);
	}
	Dev &d = devs[0];
	if (!d.dev)
		return summary();
	run("GEM_LIST_HANDLES: two-pass sizes, NULL, the kernel's entries", [&] { test_list_handles(d); });
	run("GEM_OP GET_GEM_CREATE_INFO (+ libdrm's 16-byte GEM_OP), errnos", [&] { test_create_info(d); });
	run("GEM_VA at chosen VAs and flags; GET_MAPPING_INFO two-pass, errnos", [&] { test_mapping_info(d); });
	run("GEM_MMAP offsets: stable, distinct, mappable; ENOENT, EPERM", [&] { test_mmap_offsets(d); });
	run("GEM_CHANGE_HANDLE: errnos; contents, VA mapping, offset, PRIME kept", [&] { test_change_handle(d); });
	run("PRIME errnos; one dma-buf per BO; what a dumper sees", [&] { test_prime_errnos(d); });
	run("dma-buf shared with another process: its own handle, one BO", [&] { test_share_with_process(devs); });
	for (auto &dv : devs) {
		if (dv.dev)
			amdgpu_device_deinitialize(dv.dev);
		if (dv.fd >= 0)
			::close(dv.fd);
	}
	return summary();
}
