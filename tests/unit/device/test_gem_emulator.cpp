// SPDX-License-Identifier: GPL-2.0-only
//
// The render-node GEM wrappers (src/device/gem.h) on the emulated GPU (run
// under kfd-emu; skip without a render node): the handle list with each
// BO's creation parameters, VA mappings and their flags, mmap offsets,
// dma-buf export, GEM_CREATE and PRIME import at a chosen handle
// (GemHandleSlot), GEM_METADATA and the handle's RAII. The run with
// KFDEMU_FAULTS failing GEM_LIST_HANDLES with EINVAL (what a kernel without
// the ioctl does) checks the error names the ioctl and the kernel that
// added it; the run failing every GEM_CHANGE_HANDLE so (what kernels that
// disabled it again do) shows that placing BOs does not need it.
#include <criterion/criterion.h>

#include <amdgpu_drm.h>
#include <fcntl.h>
#include <sys/ioctl.h>
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

// struct drm_gem_change_handle and its number (include/uapi/drm/drm.h),
// which the plugin no longer uses: only to show this run's kernel lacks it.
struct ChangeHandleArgs {
	uint32_t handle;
	uint32_t new_handle;
};
constexpr unsigned long kChangeHandleIoctl = _IOWR('d', 0xD2, ChangeHandleArgs);

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

namespace {

// Whether `fd` holds `handle` (GEM_MMAP answers ENOENT for a free one;
// GTT BOs only), without GEM_LIST_HANDLES, which one run fails.
bool holds(int fd, uint32_t handle)
{
	auto off = gem_mmap_offset(fd, handle);
	if (!off)
		cr_assert_eq(off.error().code(), ENOENT, "%s", off.error().message().c_str());
	return off.ok();
}

// GEM_CREATE of 4 KiB of GTT at `target`, through `slot`.
GemHandle create_at(GemHandleSlot &slot, int fd, uint32_t target)
{
	cr_assert_ok(slot.make_next(target), "handle %u", target);
	auto h = GemHandle::create(fd, 4096, 4096, kGemDomainGtt, 0);
	cr_assert_ok(h);
	auto placed = slot.check(std::move(*h), target);
	cr_assert_ok(placed, "handle %u", target);
	return std::move(*placed);
}

} // namespace

// GemHandleSlot gives BOs chosen handles through the kernel's lowest-free
// allocation, without GEM_CHANGE_HANDLE (one run fails every call of it):
// {1, 3, 4} in a new file are exactly there; 2 held a placeholder while 3
// and 4 were made and is free again once the slot is gone.
Test(gem_slot, handles_made_in_ascending_order_are_exactly_the_chosen_ones)
{
	UniqueFd fd = open_render();
	std::vector<GemHandle> bos;
	{
		GemHandleSlot slot(fd.get());
		for (uint32_t h : {1u, 3u, 4u})
			bos.push_back(create_at(slot, fd.get(), h));
		cr_assert_eq(slot.placeholders(), 1u, "handle 2 only");
		cr_assert(holds(fd.get(), 2), "the placeholder holds 2 while the slot lives");
	}
	const uint32_t want[] = {1, 3, 4};
	cr_assert_eq(bos.size(), 3u);
	for (size_t i = 0; i < bos.size(); i++)
		cr_assert_eq(bos[i].get(), want[i]);
	for (uint32_t h : want)
		cr_assert(holds(fd.get(), h), "handle %u", h);
	cr_assert_not(holds(fd.get(), 2), "the placeholder is closed");
	cr_assert_not(holds(fd.get(), 5));
	auto next = GemHandle::create(fd.get(), 4096, 4096, kGemDomainGtt, 0);
	cr_assert_ok(next);
	cr_assert_eq(next->get(), 2u, "2 is the lowest free handle again");
}

// A PRIME import of another file's BO is placed the same way (a shared BO
// of a restore).
Test(gem_slot, an_import_gets_the_chosen_handle)
{
	UniqueFd a = open_render();
	UniqueFd b = open_render();
	auto bo = GemHandle::create(a.get(), 8192, 4096, kGemDomainGtt, 0);
	cr_assert_ok(bo);
	auto dmabuf = gem_export_dmabuf(a.get(), bo->get());
	cr_assert_ok(dmabuf);
	GemHandleSlot slot(b.get());
	cr_assert_ok(slot.make_next(6));
	auto imported = GemHandle::import(b.get(), dmabuf->get());
	cr_assert_ok(imported);
	auto placed = slot.check(std::move(*imported), 6);
	cr_assert_ok(placed);
	cr_assert_eq(placed->get(), 6u);
	cr_assert_eq(slot.placeholders(), 5u, "1 to 5");
}

// A handle the file holds already fails with an error naming it; the
// placeholder that showed it is closed, the file's other handles stay.
Test(gem_slot, a_taken_handle_fails_naming_it)
{
	UniqueFd fd = open_render();
	auto one = GemHandle::create(fd.get(), 4096, 4096, kGemDomainGtt, 0);
	auto two = GemHandle::create(fd.get(), 4096, 4096, kGemDomainGtt, 0);
	cr_assert_ok(one);
	cr_assert_ok(two);
	cr_assert_eq(two->get(), 2u);
	{
		GemHandleSlot slot(fd.get());
		auto st = slot.make_next(2);
		cr_assert_not(st.ok(), "2 is taken");
		cr_assert_eq(st.error().code(), EEXIST);
		const std::string msg = st.error().message();
		cr_assert(msg.find("GEM handle 2 is taken") != std::string::npos, "%s", msg.c_str());
		cr_assert(msg.find("lowest free handle is 3") != std::string::npos, "%s", msg.c_str());
		cr_assert_eq(slot.placeholders(), 0u);
	}
	cr_assert_not(holds(fd.get(), 3), "the placeholder at 3 is closed");
	cr_assert(holds(fd.get(), 1) && holds(fd.get(), 2));
}

// 0 and handles over INT_MAX are no idr ids: refused without a placeholder.
// A BO that did not get its handle is refused naming both and closed.
Test(gem_slot, handles_outside_the_idr_range_and_a_wrong_handle_are_refused)
{
	UniqueFd fd = open_render();
	GemHandleSlot slot(fd.get());
	for (uint32_t bad : {0u, kMaxGemHandle + 1, 0xffffffffu}) {
		auto st = slot.make_next(bad);
		cr_assert_not(st.ok(), "handle %u refused", bad);
		cr_assert_eq(st.error().code(), EINVAL);
		cr_assert(st.error().message().find("not a GEM handle") != std::string::npos, "%s",
			  st.error().message().c_str());
	}
	cr_assert_eq(slot.placeholders(), 0u);
	cr_assert_not(holds(fd.get(), 1), "no placeholder made");
	auto h = GemHandle::create(fd.get(), 4096, 4096, kGemDomainGtt, 0);
	cr_assert_ok(h);
	cr_assert_eq(h->get(), 1u);
	auto wrong = slot.check(std::move(*h), 7);
	cr_assert_not(wrong.ok());
	const std::string msg = wrong.error().message();
	cr_assert(msg.find("GEM handle 7 got handle 1") != std::string::npos, "%s", msg.c_str());
	cr_assert_not(holds(fd.get(), 1), "the misplaced BO is closed");
}

// The run failing GEM_CHANGE_HANDLE as Linux 6.18.36, 7.0 stable and
// mainline since June 2026 do (drm_invalid_op: EINVAL for every call), in
// which the gem_slot tests pass as well: each call fails, not the first only.
Test(gem_change_handle_disabled, every_change_handle_fails)
{
	if (!faulting("GEM_CHANGE_HANDLE"))
		cr_skip_test("needs KFDEMU_FAULTS=DRM_IOCTL_GEM_CHANGE_HANDLE:every:errno=EINVAL");
	UniqueFd fd = open_render();
	auto a = GemHandle::create(fd.get(), 4096, 4096, kGemDomainGtt, 0);
	cr_assert_ok(a);
	for (uint32_t to : {40u, 41u, 42u}) {
		ChangeHandleArgs args{a->get(), to};
		errno = 0;
		cr_assert_eq(::ioctl(fd.get(), kChangeHandleIoctl, &args), -1, "to %u", to);
		cr_assert_eq(errno, EINVAL, "to %u", to);
	}
	cr_assert(holds(fd.get(), a->get()), "the BO stayed");
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
