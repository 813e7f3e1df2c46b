// SPDX-License-Identifier: GPL-2.0-only
// Render node: identity ioctls, GEM handles, PRIME, GEM_VA, GEM_OP,
// GEM_LIST_HANDLES, GEM_CHANGE_HANDLE, userptr, contexts, BO lists.
#include "harness.h"

#include <criterion/criterion.h>

using namespace kfdemu;
using namespace kfdemu::testing;
using namespace kfdemu::abi::drm;

namespace {

struct Node {
	Rig rig{make_machine({0x1111, 0x2222})};
	FakeCaller c{1000};
	int fd = rig.open_render(c, 128);
};

uint32_t get32(const uint8_t *b, size_t off)
{
	uint32_t v;
	std::memcpy(&v, b + off, 4);
	return v;
}
uint64_t get64(const uint8_t *b, size_t off)
{
	uint64_t v;
	std::memcpy(&v, b + off, 8);
	return v;
}

} // namespace

Test(render, open_and_identity)
{
	Node n;
	cr_assert_geq(n.fd, 0);
	FakeCaller c(1);
	cr_assert_eq(n.rig.model->open_render(c, 140, true), -ENODEV);
	c.commit(-ENODEV);
	auto fi = n.rig.model->describe(key_of(n.fd));
	cr_assert(fi && fi->kind == FileKind::Render && fi->render_minor == 128);

	Version v{};
	cr_assert_eq(n.rig.drm(n.c, n.fd, VERSION, &v), 0);
	cr_assert_eq(v.version_major, 3);
	cr_assert_eq(v.name_len, 6);
	char name[8] = {}, desc[3] = {};
	v.name = reinterpret_cast<uint64_t>(name);
	v.desc = reinterpret_cast<uint64_t>(desc);
	v.desc_len = 2;
	cr_assert_eq(n.rig.drm(n.c, n.fd, VERSION, &v), 0);
	cr_assert_str_eq(name, "amdgpu");
	cr_assert_eq(std::string(desc, 2), "AM");
	cr_assert_eq(v.desc_len, 7);

	GetCap cap{CAP_PRIME, 0};
	cr_assert_eq(n.rig.drm(n.c, n.fd, GET_CAP, &cap), 0);
	cr_assert_eq(cap.value, 3);
	cap.capability = 0x777;
	cr_assert_eq(n.rig.drm(n.c, n.fd, GET_CAP, &cap), -EINVAL);
	uint8_t junk[40] = {};
	cr_assert_eq(n.rig.drm(n.c, n.fd, GET_CLIENT, &junk), -EACCES);
	cr_assert_eq(n.rig.drm(n.c, n.fd, 0x3f, &junk), -EINVAL, "unknown core ioctl");
	cr_assert_eq(n.rig.drm(n.c, n.fd, 0x9f, &junk), -EINVAL, "unknown driver ioctl");
}

Test(render, info_queries)
{
	Node n;
	uint32_t accel = 0;
	Info q{reinterpret_cast<uint64_t>(&accel), 4, INFO_ACCEL_WORKING, {}};
	cr_assert_eq(n.rig.amdgpu(n.c, n.fd, INFO, &q, abi::kIocWrite), 0);
	cr_assert_eq(accel, 1);
	q.return_size = 0;
	cr_assert_eq(n.rig.amdgpu(n.c, n.fd, INFO, &q, abi::kIocWrite), -EINVAL);

	uint8_t dev[368];
	std::memset(dev, 0xee, sizeof dev);
	q = Info{reinterpret_cast<uint64_t>(dev), sizeof dev, INFO_DEV_INFO, {}};
	cr_assert_eq(n.rig.amdgpu(n.c, n.fd, INFO, &q, abi::kIocWrite), 0);
	cr_assert_eq(get32(dev, 0), 0x738c, "device_id");
	cr_assert_eq(get32(dev, 16), 141, "family");
	cr_assert_eq(get64(dev, 144), 0x10000, "virtual_address_offset");
	cr_assert_eq(get64(dev, 152), 0x800000000000ull, "virtual_address_max");
	cr_assert_eq(get32(dev, 160), 4096, "virtual_address_alignment");
	cr_assert_eq(get64(dev, 336), 0xffff800000000000ull, "high_va_offset");
	cr_assert_gt(get64(dev, 344), get64(dev, 336), "high_va_max");
	cr_assert_eq(get32(dev, 48), 120, "cu_active_number");

	uint32_t reg = 0;
	q = Info{reinterpret_cast<uint64_t>(&reg), 4, INFO_READ_MMR_REG, {0x263e, 1, 0xffffffff, 0}};
	cr_assert_eq(n.rig.amdgpu(n.c, n.fd, INFO, &q, abi::kIocWrite), 0);
	cr_assert_neq(reg, 0);
	q.u[0] = 0x1234;
	cr_assert_eq(n.rig.amdgpu(n.c, n.fd, INFO, &q, abi::kIocWrite), -EINVAL, "register not whitelisted");
	q.u[0] = 0x263e;
	q.u[1] = 129;
	cr_assert_eq(n.rig.amdgpu(n.c, n.fd, INFO, &q, abi::kIocWrite), -EINVAL, "count > 128");

	HwIpInfo ip{};
	q = Info{reinterpret_cast<uint64_t>(&ip), sizeof ip, INFO_HW_IP_INFO, {HW_IP_DMA, 0, 0, 0}};
	cr_assert_eq(n.rig.amdgpu(n.c, n.fd, INFO, &q, abi::kIocWrite), 0);
	cr_assert_eq(ip.available_rings, 3, "two SDMA engines");
	cr_assert_eq(ip.hw_ip_version_major, 4);
	q.query = 0x7777;
	cr_assert_eq(n.rig.amdgpu(n.c, n.fd, INFO, &q, abi::kIocWrite), -EINVAL);
}

Test(render, gem_handles_lowest_free)
{
	Node n;
	uint32_t h1 = n.rig.gem_create(n.c, n.fd, 4096);
	uint32_t h2 = n.rig.gem_create(n.c, n.fd, 5000, DOMAIN_GTT);
	uint32_t h3 = n.rig.gem_create(n.c, n.fd, 4096);
	cr_assert_eq(h1, 1);
	cr_assert_eq(h2, 2);
	cr_assert_eq(h3, 3);
	GemClose cl{2, 0};
	cr_assert_eq(n.rig.drm(n.c, n.fd, GEM_CLOSE, &cl, abi::kIocWrite), 0);
	cr_assert_eq(n.rig.drm(n.c, n.fd, GEM_CLOSE, &cl, abi::kIocWrite), -EINVAL);
	cr_assert_eq(n.rig.gem_create(n.c, n.fd, 4096), 2);
	// Handles are per file.
	int fd2 = n.rig.open_render(n.c, 128);
	cr_assert_eq(n.rig.gem_create(n.c, fd2, 4096), 1);

	long r;
	n.rig.gem_create(n.c, n.fd, 0, DOMAIN_VRAM, &r);
	cr_assert_eq(r, -EINVAL, "size 0");
	GemCreate bad{4096, 0, 0x100, 0};
	cr_assert_eq(n.rig.amdgpu(n.c, n.fd, GEM_CREATE, &bad), -EINVAL, "unknown domain");
	GemCreate bad2{4096, 0, DOMAIN_VRAM, 1ull << 40};
	cr_assert_eq(n.rig.amdgpu(n.c, n.fd, GEM_CREATE, &bad2), -EINVAL, "unknown flag");
	GemCreate contiguous{4096, 0, DOMAIN_VRAM, 1u << 5};
	cr_assert_eq(n.rig.amdgpu(n.c, n.fd, GEM_CREATE, &contiguous), -EINVAL, "VRAM_CONTIGUOUS is not settable");
	GemCreate encrypted{4096, 0, DOMAIN_VRAM, CREATE_ENCRYPTED};
	cr_assert_eq(n.rig.amdgpu(n.c, n.fd, GEM_CREATE, &encrypted), -EINVAL, "no TMZ");

	uint64_t o1 = n.rig.gem_mmap_offset(n.c, n.fd, 1), o3 = n.rig.gem_mmap_offset(n.c, n.fd, 3);
	cr_assert_geq(o1, 0x100000000ull);
	cr_assert_eq(o1 % 4096, 0);
	cr_assert_neq(o1, o3);
	GemMmap m{99};
	cr_assert_eq(n.rig.amdgpu(n.c, n.fd, GEM_MMAP, &m), -ENOENT);

	GemListHandles lh{0, 1, 0};
	cr_assert_eq(n.rig.amdgpu(n.c, n.fd, GEM_LIST_HANDLES, &lh), 0);
	cr_assert_eq(lh.num_entries, 3, "count only: capacity too small");
	GemListHandlesEntry e[3] = {};
	lh = GemListHandles{reinterpret_cast<uint64_t>(e), 3, 0};
	cr_assert_eq(n.rig.amdgpu(n.c, n.fd, GEM_LIST_HANDLES, &lh), 0);
	cr_assert_eq(e[0].gem_handle, 1);
	cr_assert_eq(e[1].gem_handle, 2);
	cr_assert_eq(e[2].gem_handle, 3);
	cr_assert_eq(e[0].size, 4096);
	cr_assert_eq(e[0].preferred_domains, DOMAIN_VRAM);
	cr_assert_eq(e[0].alignment, 1, "page_alignment, in pages");
	cr_assert_eq(e[0].alloc_flags, CREATE_VRAM_CLEARED | CREATE_VRAM_WIPE_ON_RELEASE,
		     "GEM_CREATE always adds VRAM_CLEARED, amdgpu_bo_create WIPE_ON_RELEASE");
}

// A new PRIME import takes the lowest free handle as GEM_CREATE does: both
// go through drm_gem_handle_create_tail, idr_alloc(&object_idr, .., 1, 0,
// ..) (the plugin's restore places BOs at their handles by this rule).
Test(render, a_new_import_takes_the_lowest_free_handle)
{
	Node n;
	uint32_t h = n.rig.gem_create(n.c, n.fd, 4096);
	PrimeHandle p{h, RDWR, -1};
	cr_assert_eq(n.rig.drm(n.c, n.fd, PRIME_HANDLE_TO_FD, &p), 0);
	int fd2 = n.rig.open_render(n.c, 128);
	for (uint32_t want : {1u, 2u, 3u})
		cr_assert_eq(n.rig.gem_create(n.c, fd2, 4096), want);
	GemClose cl{2, 0};
	cr_assert_eq(n.rig.drm(n.c, fd2, GEM_CLOSE, &cl, abi::kIocWrite), 0);
	PrimeHandle imp{0, 0, p.fd};
	cr_assert_eq(n.rig.drm(n.c, fd2, PRIME_FD_TO_HANDLE, &imp), 0);
	cr_assert_eq(imp.handle, 2u, "the gap");
	cr_assert_eq(n.rig.gem_create(n.c, fd2, 4096), 4u, "then above the highest");
}

Test(render, prime_and_change_handle)
{
	Node n;
	uint32_t h = n.rig.gem_create(n.c, n.fd, 3 * 4096);
	PrimeHandle p{h, 1 /* bad flag */, -1};
	cr_assert_eq(n.rig.drm(n.c, n.fd, PRIME_HANDLE_TO_FD, &p), -EINVAL);
	p = PrimeHandle{42, 0, -1};
	cr_assert_eq(n.rig.drm(n.c, n.fd, PRIME_HANDLE_TO_FD, &p), -ENOENT);
	p = PrimeHandle{h, RDWR, -1};
	cr_assert_eq(n.rig.drm(n.c, n.fd, PRIME_HANDLE_TO_FD, &p), 0);
	int dmabuf = p.fd;
	cr_assert_geq(dmabuf, 0);
	cr_assert_eq(lseek(dmabuf, 0, SEEK_END), 3 * 4096);
	auto fi = n.rig.model->describe(key_of(dmabuf));
	cr_assert(fi && fi->kind == FileKind::DmaBuf && fi->size == 3 * 4096);
	// A second export is the same file.
	PrimeHandle p2{h, 0, -1};
	cr_assert_eq(n.rig.drm(n.c, n.fd, PRIME_HANDLE_TO_FD, &p2), 0);
	cr_assert(key_of(p2.fd) == key_of(dmabuf));

	// Same file: the existing handle.
	PrimeHandle imp{0, 0, dmabuf};
	cr_assert_eq(n.rig.drm(n.c, n.fd, PRIME_FD_TO_HANDLE, &imp), 0);
	cr_assert_eq(imp.handle, h);
	// Another file of the same device: a new handle, same BO (same offset), stable.
	int fd2 = n.rig.open_render(n.c, 128);
	n.rig.gem_create(n.c, fd2, 4096);
	PrimeHandle imp2{0, 0, dmabuf};
	cr_assert_eq(n.rig.drm(n.c, fd2, PRIME_FD_TO_HANDLE, &imp2), 0);
	cr_assert_eq(imp2.handle, 2);
	PrimeHandle imp3{0, 0, dmabuf};
	cr_assert_eq(n.rig.drm(n.c, fd2, PRIME_FD_TO_HANDLE, &imp3), 0);
	cr_assert_eq(imp3.handle, 2);
	cr_assert_eq(n.rig.gem_mmap_offset(n.c, fd2, 2), n.rig.gem_mmap_offset(n.c, n.fd, h));
	// Another GPU: an import whose memory is shared.
	int g1 = n.rig.open_render(n.c, 129);
	PrimeHandle imp4{0, 0, dmabuf};
	cr_assert_eq(n.rig.drm(n.c, g1, PRIME_FD_TO_HANDLE, &imp4), 0);
	cr_assert_eq(imp4.handle, 1);
	auto *a = static_cast<uint8_t *>(n.rig.map(n.c, n.fd, n.rig.gem_mmap_offset(n.c, n.fd, h), 3 * 4096));
	auto *b = static_cast<uint8_t *>(n.rig.map(n.c, g1, n.rig.gem_mmap_offset(n.c, g1, 1), 3 * 4096));
	cr_assert(a && b);
	a[5000] = 0x5a;
	cr_assert_eq(b[5000], 0x5a);
	GemListHandlesEntry e[1] = {};
	GemListHandles lh{reinterpret_cast<uint64_t>(e), 1, 0};
	cr_assert_eq(n.rig.amdgpu(n.c, g1, GEM_LIST_HANDLES, &lh), 0);
	cr_assert_eq(e[0].flags, LIST_HANDLES_IS_IMPORT);
	cr_assert_eq(e[0].preferred_domains, DOMAIN_GTT, "an import is a GTT BO");
	cr_assert_eq(e[0].alignment, 1, "with page alignment");
	cr_assert_eq(e[0].alloc_flags, CREATE_VRAM_WIPE_ON_RELEASE, "VRAM_CLEARED is not inherited");
	GemOp vram{imp4.handle, GEM_OP_SET_PLACEMENT, DOMAIN_VRAM, 0, 0};
	cr_assert_eq(n.rig.amdgpu(n.c, g1, GEM_OP, &vram), -EINVAL, "an import cannot move to VRAM");
	PrimeHandle notbuf{0, 0, n.fd};
	cr_assert_eq(n.rig.drm(n.c, fd2, PRIME_FD_TO_HANDLE, &notbuf), -EINVAL);
	PrimeHandle closed{0, 0, 999};
	cr_assert_eq(n.rig.drm(n.c, fd2, PRIME_FD_TO_HANDLE, &closed), -EBADF);

	// GEM_CHANGE_HANDLE
	GemChangeHandle ch{77, 5};
	cr_assert_eq(n.rig.drm(n.c, fd2, GEM_CHANGE_HANDLE, &ch), -ENOENT);
	ch = GemChangeHandle{2, 1};
	cr_assert_eq(n.rig.drm(n.c, fd2, GEM_CHANGE_HANDLE, &ch), -ENOSPC);
	ch = GemChangeHandle{2, 0x80000000u};
	cr_assert_eq(n.rig.drm(n.c, fd2, GEM_CHANGE_HANDLE, &ch), -EINVAL);
	ch = GemChangeHandle{2, 0};
	cr_assert_eq(n.rig.drm(n.c, fd2, GEM_CHANGE_HANDLE, &ch), -ENOSPC, "handles start at 1");
	ch = GemChangeHandle{2, 9};
	cr_assert_eq(n.rig.drm(n.c, fd2, GEM_CHANGE_HANDLE, &ch), 0);
	GemMmap gone{2};
	cr_assert_eq(n.rig.amdgpu(n.c, fd2, GEM_MMAP, &gone), -ENOENT);
	PrimeHandle again{0, 0, dmabuf};
	cr_assert_eq(n.rig.drm(n.c, fd2, PRIME_FD_TO_HANDLE, &again), 0);
	cr_assert_eq(again.handle, 9, "prime cache follows the new handle");
	munmap(a, 3 * 4096);
	munmap(b, 3 * 4096);
}

Test(render, gem_va_rules)
{
	Node n;
	uint32_t h = n.rig.gem_create(n.c, n.fd, 4 * 4096);
	const uint64_t va = 0x100000000ull;
	cr_assert_eq(n.rig.gem_va(n.c, n.fd, h, VA_OP_MAP, va, 4 * 4096), 0);
	cr_assert_eq(n.rig.gem_va(n.c, n.fd, h, VA_OP_MAP, va + 4096, 4096), -EINVAL, "overlap");
	cr_assert_eq(n.rig.gem_va(n.c, n.fd, h, VA_OP_MAP, va - 4096, 8192), -EINVAL, "overlap from below");
	cr_assert_eq(n.rig.gem_va(n.c, n.fd, h, VA_OP_MAP, va + (1 << 20) + 8, 4096), -EINVAL, "va align");
	cr_assert_eq(n.rig.gem_va(n.c, n.fd, h, VA_OP_MAP, va + (1 << 20), 4096, 8), -EINVAL, "offset align");
	cr_assert_eq(n.rig.gem_va(n.c, n.fd, h, VA_OP_MAP, va + (1 << 20), 100), -EINVAL, "size align");
	cr_assert_eq(n.rig.gem_va(n.c, n.fd, h, VA_OP_MAP, va + (1 << 20), 8192, 3 * 4096), -EINVAL, "beyond bo");
	cr_assert_eq(n.rig.gem_va(n.c, n.fd, h, VA_OP_MAP, va + (1 << 20), 8192, ~0ull - 4095), -EINVAL,
		     "offset + size wraps (amdgpu_vm_verify_parameters' check_add_overflow)");
	cr_assert_eq(n.rig.gem_va(n.c, n.fd, h, VA_OP_MAP, 0x1000, 4096), -EINVAL, "below reserved bottom");
	cr_assert_eq(n.rig.gem_va(n.c, n.fd, h, VA_OP_MAP, 0x900000000000ull, 4096), -EINVAL, "in the hole");
	cr_assert_eq(n.rig.gem_va(n.c, n.fd, h, 7, va + (1 << 20), 4096), -EINVAL, "bad op");
	cr_assert_eq(n.rig.gem_va(n.c, n.fd, h, VA_OP_MAP, va + (1 << 20), 4096, 0, 0x10000), -EINVAL, "bad flags");
	cr_assert_eq(n.rig.gem_va(n.c, n.fd, 55, VA_OP_MAP, va + (1 << 20), 4096), -ENOENT, "bad handle");
	cr_assert_eq(n.rig.gem_va(n.c, n.fd, h, VA_OP_MAP, va + (1 << 20), 8192, 8192), 0, "second mapping");
	// A different file has its own VM.
	int fd2 = n.rig.open_render(n.c, 128);
	uint32_t h2 = n.rig.gem_create(n.c, fd2, 4096);
	cr_assert_eq(n.rig.gem_va(n.c, fd2, h2, VA_OP_MAP, va, 4096), 0);

	GemVmEntry e[2] = {};
	GemOp op{h, GEM_OP_GET_MAPPING_INFO, reinterpret_cast<uint64_t>(e), 1, 0};
	cr_assert_eq(n.rig.amdgpu(n.c, n.fd, GEM_OP, &op), 0);
	cr_assert_eq(op.num_entries, 2, "total, not capacity");
	cr_assert_eq(e[0].addr, 0, "nothing copied when the entries do not all fit");
	op = GemOp{h, GEM_OP_GET_MAPPING_INFO, reinterpret_cast<uint64_t>(e), 2, 1};
	cr_assert_eq(n.rig.amdgpu(n.c, n.fd, GEM_OP, &op), -EINVAL, "padding must be 0");
	op = GemOp{99, GEM_OP_GET_GEM_CREATE_INFO, reinterpret_cast<uint64_t>(e), 0, 1};
	cr_assert_eq(n.rig.amdgpu(n.c, n.fd, GEM_OP, &op), -EINVAL, "padding is checked before the handle");
	op = GemOp{h, GEM_OP_GET_MAPPING_INFO, reinterpret_cast<uint64_t>(e), 2, 0};
	cr_assert_eq(n.rig.amdgpu(n.c, n.fd, GEM_OP, &op), 0);
	cr_assert_eq(e[0].addr, va);
	cr_assert_eq(e[0].size, 4 * 4096);
	// GEM_VA's own flags (Linux 6.18+), not page table entry bits.
	cr_assert_eq(e[0].flags, VM_PAGE_READABLE | VM_PAGE_WRITEABLE | VM_PAGE_EXECUTABLE);
	cr_assert_eq(e[1].offset, 8192);
	// What CRIU's restore does: the reported flags recreate the mapping.
	const uint64_t va3 = va + (4 << 20);
	cr_assert_eq(n.rig.gem_va(n.c, n.fd, h, VA_OP_MAP, va3, 4096, 0, static_cast<uint32_t>(e[0].flags)), 0);
	cr_assert_eq(n.rig.gem_va(n.c, n.fd, h, VA_OP_UNMAP, va3, 4096), 0);
	// Other flags are reported as given: a memory type, no write.
	const uint32_t uc_readable = VM_PAGE_READABLE | (4u << 5); // AMDGPU_VM_MTYPE_UC
	cr_assert_eq(n.rig.gem_va(n.c, n.fd, h, VA_OP_MAP, va3, 4096, 0, uc_readable), 0);
	GemVmEntry three[3] = {};
	op = GemOp{h, GEM_OP_GET_MAPPING_INFO, reinterpret_cast<uint64_t>(three), 3, 0};
	cr_assert_eq(n.rig.amdgpu(n.c, n.fd, GEM_OP, &op), 0);
	cr_assert_eq(op.num_entries, 3);
	const GemVmEntry *uc = nullptr;
	for (const GemVmEntry &x : three)
		if (x.addr == va3)
			uc = &x;
	cr_assert(uc && uc->flags == uc_readable, "the MTYPE_UC read-only mapping reports its GEM_VA flags");
	cr_assert_eq(n.rig.gem_va(n.c, n.fd, h, VA_OP_UNMAP, va3, 4096), 0);
	// Above the hole: reported masked to 48 bits, which GEM_VA refuses (in
	// the hole); the sign-extended VA maps again.
	const uint64_t high = 0xffff800200000000ull;
	cr_assert_eq(n.rig.gem_va(n.c, n.fd, h, VA_OP_MAP, high, 4096), 0);
	GemVmEntry four[4] = {};
	op = GemOp{h, GEM_OP_GET_MAPPING_INFO, reinterpret_cast<uint64_t>(four), 4, 0};
	cr_assert_eq(n.rig.amdgpu(n.c, n.fd, GEM_OP, &op), 0);
	cr_assert_eq(op.num_entries, 3);
	bool masked = false;
	for (const GemVmEntry &x : four)
		masked |= x.addr == 0x800200000000ull;
	cr_assert(masked, "a VA above the hole is reported masked to 48 bits");
	cr_assert_eq(n.rig.gem_va(n.c, n.fd, h, VA_OP_UNMAP, high, 4096), 0);
	cr_assert_eq(n.rig.gem_va(n.c, n.fd, h, VA_OP_MAP, 0x800200000000ull, 4096), -EINVAL, "masked: in the hole");
	cr_assert_eq(n.rig.gem_va(n.c, n.fd, h, VA_OP_MAP, high, 4096), 0);
	cr_assert_eq(n.rig.gem_va(n.c, n.fd, h, VA_OP_UNMAP, high, 4096), 0);
	GemCreate info{};
	op = GemOp{h, GEM_OP_GET_GEM_CREATE_INFO, reinterpret_cast<uint64_t>(&info), 0, 0};
	cr_assert_eq(n.rig.amdgpu(n.c, n.fd, GEM_OP, &op), 0);
	cr_assert_eq(info.bo_size, 4 * 4096);
	cr_assert_eq(info.domains, DOMAIN_VRAM);
	cr_assert_eq(info.domain_flags, CREATE_VRAM_CLEARED | CREATE_VRAM_WIPE_ON_RELEASE);
	op.op = 9;
	cr_assert_eq(n.rig.amdgpu(n.c, n.fd, GEM_OP, &op), -EINVAL);

	cr_assert_eq(n.rig.gem_va(n.c, n.fd, h, VA_OP_UNMAP, va + 4096, 4096), -ENOENT, "not a mapping start");
	cr_assert_eq(n.rig.gem_va(n.c, n.fd, h, VA_OP_UNMAP, va, 4 * 4096), 0);
	cr_assert_eq(n.rig.gem_va(n.c, n.fd, h, VA_OP_UNMAP, va, 4 * 4096), -ENOENT);
	// CLEAR splits a mapping; REPLACE overrides.
	cr_assert_eq(n.rig.gem_va(n.c, n.fd, h, VA_OP_MAP, va, 4 * 4096), 0);
	cr_assert_eq(n.rig.gem_va(n.c, n.fd, 0, VA_OP_CLEAR, va + 4096, 0), -EINVAL,
		     "size 0 (amdgpu_vm_bo_clear_mappings' amdgpu_vm_verify_parameters)");
	cr_assert_eq(n.rig.gem_va(n.c, n.fd, 0, VA_OP_CLEAR, va + 4096, 4096), 0);
	cr_assert_eq(n.rig.gem_va(n.c, n.fd, h, VA_OP_MAP, va + 4096, 4096, 4096), 0, "hole reusable");
	cr_assert_eq(n.rig.gem_va(n.c, n.fd, h, VA_OP_REPLACE, va, 8192), 0);
	op = GemOp{h, GEM_OP_GET_MAPPING_INFO, reinterpret_cast<uint64_t>(e), 0, 0};
	cr_assert_eq(n.rig.amdgpu(n.c, n.fd, GEM_OP, &op), 0);
	cr_assert_eq(op.num_entries, 3, "replace [va,va+8K) + tail [va+8K,va+16K) + second mapping");
	// Closing the handle removes its mappings.
	GemClose cl{h, 0};
	cr_assert_eq(n.rig.drm(n.c, n.fd, GEM_CLOSE, &cl, abi::kIocWrite), 0);
	uint32_t h3 = n.rig.gem_create(n.c, n.fd, 4096);
	cr_assert_eq(n.rig.gem_va(n.c, n.fd, h3, VA_OP_MAP, va, 4096), 0);
}

Test(render, userptr_ctx_bo_list)
{
	Node n;
	void *mem = aligned_alloc(4096, 4 * 4096);
	GemUserptr u{reinterpret_cast<uint64_t>(mem) + 8, 4096, 0xe, 0};
	cr_assert_eq(n.rig.amdgpu(n.c, n.fd, GEM_USERPTR, &u), -EINVAL, "unaligned addr");
	u = GemUserptr{reinterpret_cast<uint64_t>(mem), 4096, USERPTR_ANONONLY, 0};
	cr_assert_eq(n.rig.amdgpu(n.c, n.fd, GEM_USERPTR, &u), -EACCES, "neither READONLY nor REGISTER");
	u = GemUserptr{reinterpret_cast<uint64_t>(mem), 4096, 0x100, 0};
	cr_assert_eq(n.rig.amdgpu(n.c, n.fd, GEM_USERPTR, &u), -EINVAL, "unknown flag");
	u = GemUserptr{4096, 4096, 0xe, 0};
	cr_assert_eq(n.rig.amdgpu(n.c, n.fd, GEM_USERPTR, &u), -EFAULT, "validate unmapped");
	u = GemUserptr{reinterpret_cast<uint64_t>(mem), 4 * 4096, 0xe, 0};
	cr_assert_eq(n.rig.amdgpu(n.c, n.fd, GEM_USERPTR, &u), 0);
	cr_assert_eq(u.handle, 1);
	GemMmap m{u.handle};
	cr_assert_eq(n.rig.amdgpu(n.c, n.fd, GEM_MMAP, &m), -EPERM);
	PrimeHandle p{u.handle, 0, -1};
	cr_assert_eq(n.rig.drm(n.c, n.fd, PRIME_HANDLE_TO_FD, &p), -EPERM);
	std::string s = n.rig.model->introspect("userptr 1000");
	cr_assert(s == "{\"pid\":1000,\"current\":16384,\"peak\":16384}", "%s", s.c_str());

	uint32_t c1 = n.rig.ctx_alloc(n.c, n.fd), c2 = n.rig.ctx_alloc(n.c, n.fd);
	cr_assert_eq(c1, 1);
	cr_assert_eq(c2, 2);
	Ctx fr{CTX_OP_FREE, 0, 7, 0};
	cr_assert_eq(n.rig.amdgpu(n.c, n.fd, CTX, &fr), -EINVAL);
	fr.ctx_id = c1;
	cr_assert_eq(n.rig.amdgpu(n.c, n.fd, CTX, &fr), 0);
	cr_assert_eq(n.rig.ctx_alloc(n.c, n.fd), 1);
	Ctx badop{9, 0, 0, 0};
	cr_assert_eq(n.rig.amdgpu(n.c, n.fd, CTX, &badop), -EINVAL);

	BoListEntry ents[2] = {{u.handle, 0}, {44, 0}};
	BoList bl{BO_LIST_CREATE, 0, 2, sizeof(BoListEntry), reinterpret_cast<uint64_t>(ents)};
	cr_assert_eq(n.rig.amdgpu(n.c, n.fd, BO_LIST, &bl), -ENOENT);
	bl = BoList{BO_LIST_CREATE, 0, 1, sizeof(BoListEntry), reinterpret_cast<uint64_t>(ents)};
	cr_assert_eq(n.rig.amdgpu(n.c, n.fd, BO_LIST, &bl), 0);
	cr_assert_eq(bl.operation, 1, "list handle");
	GemClose cl{u.handle, 0};
	cr_assert_eq(n.rig.drm(n.c, n.fd, GEM_CLOSE, &cl, abi::kIocWrite), 0);
	free(mem);
}

// AMDGPU_CTX_OP_GET/SET_STABLE_PSTATE with amdgpu_ctx_ioctl's rules: GET
// takes no flags, SET a pstate up to PEAK; one context holds the GPU's
// level (another's SET: EBUSY) until it sets NONE or is freed, which puts
// back the pstate it found at its creation.
Test(render, stable_pstate_through_the_context_op)
{
	Node n;
	auto op = [&](uint32_t o, uint32_t ctx, uint32_t flags, uint32_t *out = nullptr) {
		Ctx a{o, flags, ctx, 0};
		const long r = n.rig.amdgpu(n.c, n.fd, CTX, &a);
		if (out)
			std::memcpy(out, &a, 4);
		return r;
	};
	const uint32_t c1 = n.rig.ctx_alloc(n.c, n.fd), c2 = n.rig.ctx_alloc(n.c, n.fd);
	uint32_t p = 99;
	cr_assert_eq(op(CTX_OP_GET_STABLE_PSTATE, c1, 0, &p), 0);
	cr_assert_eq(p, 0, "NONE: the level is auto");
	cr_assert_eq(op(CTX_OP_GET_STABLE_PSTATE, c1, 1), -EINVAL, "GET takes no flags");
	cr_assert_eq(op(CTX_OP_SET_STABLE_PSTATE, c1, 5), -EINVAL, "past PEAK");
	cr_assert_eq(op(CTX_OP_SET_STABLE_PSTATE, c1, 0x10), -EINVAL, "outside the mask");
	cr_assert_eq(op(CTX_OP_SET_STABLE_PSTATE, 77, 1), -EINVAL, "no such context");
	cr_assert_eq(op(CTX_OP_SET_STABLE_PSTATE, c1, 4), 0);
	cr_assert_eq(op(CTX_OP_GET_STABLE_PSTATE, c2, 0, &p), 0);
	cr_assert_eq(p, 4, "PEAK, seen from any context");
	cr_assert_eq(op(CTX_OP_SET_STABLE_PSTATE, c2, 2), -EBUSY, "c1 holds the level");
	cr_assert_eq(op(CTX_OP_SET_STABLE_PSTATE, c1, 2), 0, "its holder changes it");
	cr_assert_eq(op(CTX_OP_SET_STABLE_PSTATE, c1, 0), 0, "NONE releases it");
	cr_assert_eq(op(CTX_OP_SET_STABLE_PSTATE, c2, 1), 0);
	const uint32_t c3 = n.rig.ctx_alloc(n.c, n.fd); // created under STANDARD
	cr_assert_eq(op(CTX_OP_SET_STABLE_PSTATE, c2, 0), 0);
	Ctx fr{CTX_OP_FREE, 0, c2, 0};
	cr_assert_eq(n.rig.amdgpu(n.c, n.fd, CTX, &fr), 0, "c2 found NONE: freeing it changes nothing");
	cr_assert_eq(op(CTX_OP_GET_STABLE_PSTATE, c1, 0, &p), 0);
	cr_assert_eq(p, 0);
	fr.ctx_id = c3;
	cr_assert_eq(n.rig.amdgpu(n.c, n.fd, CTX, &fr), 0);
	cr_assert_eq(op(CTX_OP_GET_STABLE_PSTATE, c1, 0, &p), 0);
	cr_assert_eq(p, 1, "c3 put back the STANDARD it was created under");
}
