// SPDX-License-Identifier: GPL-2.0-only
//
// The render-node GEM wrappers (src/device/gem.h) on the emulated GPU (run
// under kfd-emu; skip without a render node): the handle list with each
// BO's creation parameters, VA mappings and their flags, mmap offsets,
// dma-buf export, GEM_CREATE + CHANGE_HANDLE, GEM_METADATA and the
// handle's RAII. The run with KFDEMU_FAULTS failing GEM_LIST_HANDLES with
// EINVAL (what a kernel without the ioctl does) checks the error names the
// ioctl and the kernel that added it; the run failing GEM_CHANGE_HANDLE so
// (what kernels that disabled it again do), that its error says that.
#include <criterion/criterion.h>

#include <amdgpu_drm.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "../common/assert_ok.h"
#include "base/drm.h"
#include "base/unique_fd.h"
#include "device/gem.h"

using namespace amdcr;

namespace {

constexpr uint32_t kRw = uapi::kVmPageReadable | uapi::kVmPageWriteable;

UniqueFd open_render()
{
	UniqueFd fd(::open("/dev/dri/renderD128", O_RDWR | O_CLOEXEC));
	if (!fd.valid() || ::access("/dev/kfd", F_OK) != 0)
		cr_skip_test("no emulated /dev/dri/renderD128 (run under kfd-emu)");
	return fd;
}

const GemBoInfo *find(const std::vector<GemBoInfo> &l, uint32_t handle)
{
	for (const auto &b : l)
		if (b.handle == handle)
			return &b;
	return nullptr;
}

// Whether this run makes the emulator fail `ioctl` (KFDEMU_FAULTS).
bool faulting(const char *ioctl)
{
	const char *f = std::getenv("KFDEMU_FAULTS");
	return f && std::strstr(f, ioctl);
}

bool faulting_list_handles() { return faulting("GEM_LIST_HANDLES"); }
bool faulting_change_handle() { return faulting("GEM_CHANGE_HANDLE"); }

} // namespace

Test(gem, list_handles_reports_each_bo_as_created)
{
	if (faulting_list_handles())
		cr_skip_test("GEM_LIST_HANDLES fails by design in this run");
	UniqueFd fd = open_render();
	auto empty = gem_list_handles(fd.get());
	cr_assert_ok(empty);
	cr_assert_eq(empty->size(), 0u, "a new render file holds no handles");

	auto vram = GemHandle::create(fd.get(), 3 << 16, 1 << 16, kGemDomainVram, AMDGPU_GEM_CREATE_NO_CPU_ACCESS);
	cr_assert_ok(vram);
	auto gtt = GemHandle::create(fd.get(), 8192, 4096, kGemDomainGtt, 0);
	cr_assert_ok(gtt);
	auto list = gem_list_handles(fd.get());
	cr_assert_ok(list);
	cr_assert_eq(list->size(), 2u);
	const GemBoInfo *v = find(*list, vram->get());
	const GemBoInfo *g = find(*list, gtt->get());
	cr_assert(v && g, "both handles listed");
	cr_assert_eq(v->size, 3u << 16);
	cr_assert_eq(v->preferred_domains, kGemDomainVram);
	cr_assert(v->alloc_flags & AMDGPU_GEM_CREATE_NO_CPU_ACCESS);
	cr_assert_eq(v->alignment_bytes, 1u << 16, "alignment in bytes (the kernel reports pages)");
	cr_assert_not(v->is_import);
	cr_assert_eq(g->size, 8192u);
	cr_assert_eq(g->preferred_domains, kGemDomainGtt);
}

Test(gem, mapping_info_gives_each_va_range_with_flags_that_recreate_it)
{
	if (faulting_list_handles())
		cr_skip_test("GEM_LIST_HANDLES fails by design in this run");
	UniqueFd fd = open_render();
	auto bo = GemHandle::create(fd.get(), 8192, 4096, kGemDomainGtt, 0);
	cr_assert_ok(bo);
	auto none = gem_mapping_info(fd.get(), bo->get());
	cr_assert_ok(none);
	cr_assert_eq(none->size(), 0u);
	cr_assert_ok(gem_va_map(fd.get(), bo->get(), 0x400000000ull, 8192, 0, kRw));
	cr_assert_ok(gem_va_map(fd.get(), bo->get(), 0x500000000ull, 4096, 4096,
				uapi::kVmPageReadable | uapi::kVmPageExecutable));
	auto maps = gem_mapping_info(fd.get(), bo->get());
	cr_assert_ok(maps);
	cr_assert_eq(maps->size(), 2u);
	bool low = false, high = false;
	for (const auto &m : *maps) {
		if (m.addr == 0x400000000ull) {
			low = m.size == 8192 && m.offset == 0 && m.flags == kRw;
		} else if (m.addr == 0x500000000ull) {
			high = m.size == 4096 && m.offset == 4096 &&
			       m.flags == (uapi::kVmPageReadable | uapi::kVmPageExecutable);
		}
	}
	cr_assert(low && high, "both mappings with their size, offset and flags");
	auto bad = gem_mapping_info(fd.get(), 9999);
	cr_assert_not(bad.ok());
	cr_assert_eq(bad.error().code(), ENOENT);
}

Test(gem, mmap_offset_and_dmabuf_export)
{
	UniqueFd fd = open_render();
	auto gtt = GemHandle::create(fd.get(), 4096, 4096, kGemDomainGtt, 0);
	cr_assert_ok(gtt);
	auto off = gem_mmap_offset(fd.get(), gtt->get());
	cr_assert_ok(off);
	cr_assert_neq(*off, 0u);
	auto hidden = GemHandle::create(fd.get(), 4096, 4096, kGemDomainVram, AMDGPU_GEM_CREATE_NO_CPU_ACCESS);
	cr_assert_ok(hidden);
	auto no = gem_mmap_offset(fd.get(), hidden->get());
	cr_assert_not(no.ok());
	cr_assert_eq(no.error().code(), EPERM, "a BO without CPU access has no mmap offset");
	auto dmabuf = gem_export_dmabuf(fd.get(), hidden->get());
	cr_assert_ok(dmabuf);
	cr_assert(dmabuf->valid());
}

Test(gem, change_handle_moves_the_bo_and_the_handle_closes_it)
{
	if (faulting_list_handles())
		cr_skip_test("GEM_LIST_HANDLES fails by design in this run");
	if (faulting_change_handle())
		cr_skip_test("GEM_CHANGE_HANDLE fails by design in this run");
	UniqueFd fd = open_render();
	{
		auto a = GemHandle::create(fd.get(), 4096, 4096, kGemDomainGtt, 0);
		cr_assert_ok(a);
		const uint32_t first = a->get();
		cr_assert_ok(a->change_to(77));
		cr_assert_eq(a->get(), 77u);
		auto list = gem_list_handles(fd.get());
		cr_assert_ok(list);
		cr_assert(find(*list, 77) && !find(*list, first), "the BO is at 77 only");
		auto b = GemHandle::create(fd.get(), 4096, 4096, kGemDomainGtt, 0);
		cr_assert_ok(b);
		const uint32_t bh = b->get();
		auto taken = b->change_to(77);
		cr_assert_not(taken.ok(), "77 is taken");
		cr_assert_eq(taken.error().code(), ENOSPC);
		cr_assert_eq(b->get(), bh, "unchanged on failure");
		cr_assert(std::strstr(taken.error().message().c_str(), "DRM_IOCTL_GEM_CHANGE_HANDLE"));
		const uint32_t kept = GemHandle(std::move(*b)).release();
		cr_assert_eq(kept, bh);
	}
	auto list = gem_list_handles(fd.get());
	cr_assert_ok(list);
	cr_assert_eq(list->size(), 1u, "77 was closed, the released one stays");
}

Test(gem_old_kernel, a_missing_list_handles_ioctl_is_named_with_the_kernel_that_has_it)
{
	if (!faulting_list_handles())
		cr_skip_test("needs KFDEMU_FAULTS=DRM_IOCTL_AMDGPU_GEM_LIST_HANDLES:errno=EINVAL");
	UniqueFd fd = open_render();
	auto l = gem_list_handles(fd.get());
	cr_assert_not(l.ok());
	cr_assert_eq(l.error().code(), EINVAL);
	const std::string msg = l.error().message();
	cr_assert(msg.find("DRM_IOCTL_AMDGPU_GEM_LIST_HANDLES") != std::string::npos, "%s", msg.c_str());
	cr_assert(msg.find(kGemCriuKernel) != std::string::npos, "%s", msg.c_str());
}

// Handles outside the idr's 1..INT_MAX are refused before the ioctl: the
// kernel would answer EINVAL above INT_MAX (which reads as a missing
// ioctl) and, before lib/idr's c6e8e595a079, move the BO to another handle
// than 0 while answering 0. The handle the BO has already takes no call.
Test(gem, change_to_refuses_handles_outside_the_idr_range)
{
	UniqueFd fd = open_render();
	auto a = GemHandle::create(fd.get(), 4096, 4096, kGemDomainGtt, 0);
	cr_assert_ok(a);
	const uint32_t h = a->get();
	for (uint32_t bad : {0u, kMaxGemHandle + 1, 0xffffffffu}) {
		auto st = a->change_to(bad);
		cr_assert_not(st.ok(), "handle %u refused", bad);
		cr_assert_eq(st.error().code(), EINVAL);
		const std::string msg = st.error().message();
		cr_assert(msg.find("not a GEM handle") != std::string::npos, "%s", msg.c_str());
		cr_assert(msg.find(kGemCriuKernel) == std::string::npos, "not read as a missing ioctl: %s",
			  msg.c_str());
		cr_assert_eq(a->get(), h, "unchanged on failure");
	}
	cr_assert_ok(a->change_to(h));
	cr_assert_eq(a->get(), h);
}

// Linux 6.18.36, the 7.0 stable series and mainline since June 2026 answer
// DRM_IOCTL_GEM_CHANGE_HANDLE with drm_invalid_op's EINVAL (the run with
// KFDEMU_FAULTS failing it so): the error names the ioctl, the kernel that
// added it and those that disable it again, and says what cannot be done.
// A BO already at its handle needs no call and still succeeds.
Test(gem_change_handle_disabled, the_error_says_the_kernel_disables_the_ioctl)
{
	if (!faulting_change_handle())
		cr_skip_test("needs KFDEMU_FAULTS=DRM_IOCTL_GEM_CHANGE_HANDLE:errno=EINVAL");
	UniqueFd fd = open_render();
	auto a = GemHandle::create(fd.get(), 4096, 4096, kGemDomainGtt, 0);
	cr_assert_ok(a);
	const uint32_t h = a->get();
	cr_assert_ok(a->change_to(h), "the handle it has: no ioctl, which would fail here");
	auto st = a->change_to(h + 40);
	cr_assert_not(st.ok());
	cr_assert_eq(st.error().code(), EINVAL);
	cr_assert_eq(a->get(), h);
	const std::string msg = st.error().message();
	cr_assert(msg.find("DRM_IOCTL_GEM_CHANGE_HANDLE") != std::string::npos, "%s", msg.c_str());
	cr_assert(msg.find(kGemCriuKernel) != std::string::npos, "%s", msg.c_str());
	cr_assert(msg.find(kGemChangeHandleDisabledIn) != std::string::npos, "%s", msg.c_str());
	cr_assert(msg.find("cannot be restored") != std::string::npos, "%s", msg.c_str());
}

// GEM_METADATA: what SET gives a BO, GET returns exactly (an odd-sized
// blob too); flags without data are set as well (the kernel stores flags
// only with data, so gem_set_metadata sets a byte first, then none); more
// than 256 bytes is refused before the ioctl; an unknown handle: ENOENT.
Test(gem, metadata_set_is_what_get_returns)
{
	UniqueFd fd = open_render();
	auto bo = GemHandle::create(fd.get(), 8192, 4096, kGemDomainVram, 0);
	cr_assert_ok(bo);
	auto fresh = gem_get_metadata(fd.get(), bo->get());
	cr_assert_ok(fresh);
	cr_assert(fresh->empty(), "a new BO has no metadata");

	GemMetadata md{0x8000000000000123ull, 0x3a0000004c05ull, std::vector<uint8_t>(37)};
	for (size_t i = 0; i < md.data.size(); i++)
		md.data[i] = static_cast<uint8_t>(i * 7 + 1);
	cr_assert_ok(gem_set_metadata(fd.get(), bo->get(), md));
	auto got = gem_get_metadata(fd.get(), bo->get());
	cr_assert_ok(got);
	cr_assert(*got == md, "GET gives %zu bytes, flags 0x%llx, tiling 0x%llx", got->data.size(),
		  static_cast<unsigned long long>(got->flags), static_cast<unsigned long long>(got->tiling_info));

	auto other = GemHandle::create(fd.get(), 8192, 4096, kGemDomainGtt, 0);
	cr_assert_ok(other);
	const GemMetadata flags_only{0x42, 0x7, {}};
	cr_assert_ok(gem_set_metadata(fd.get(), other->get(), flags_only));
	auto back = gem_get_metadata(fd.get(), other->get());
	cr_assert_ok(back);
	cr_assert(*back == flags_only, "flags 0x%llx, tiling 0x%llx, %zu bytes",
		  static_cast<unsigned long long>(back->flags), static_cast<unsigned long long>(back->tiling_info),
		  back->data.size());

	auto big = gem_set_metadata(fd.get(), other->get(), GemMetadata{0, 0, std::vector<uint8_t>(257)});
	cr_assert_not(big.ok());
	cr_assert_eq(big.error().code(), EINVAL);
	cr_assert(big.error().message().find("257 bytes of metadata, more than the 256") != std::string::npos, "%s",
		  big.error().message().c_str());
	auto unknown = gem_get_metadata(fd.get(), 9999);
	cr_assert_not(unknown.ok());
	cr_assert_eq(unknown.error().code(), ENOENT);
	cr_assert(unknown.error().message().find("DRM_IOCTL_AMDGPU_GEM_METADATA(GET") != std::string::npos, "%s",
		  unknown.error().message().c_str());
}
