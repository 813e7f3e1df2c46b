// SPDX-License-Identifier: GPL-2.0-only
// KFD basics: version, apertures, ACQUIRE_VM, ALLOC/MAP/UNMAP/FREE errno;
// GEM metadata as GET_DMABUF_INFO returns it.
#include "harness.h"
#include "testcommon/bo_checksum.h"

#include <criterion/criterion.h>
#include <sys/stat.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

using namespace kfdemu;
using namespace kfdemu::testing;
using namespace kfdemu::abi::kfd;

namespace {

constexpr uint32_t G0 = 0x1111, G1 = 0x2222;

struct App {
	Rig rig;
	FakeCaller c{1000};
	int kfd = -1, r0 = -1, r1 = -1;
	explicit App(MachineDesc m = make_machine({G0, G1})) : rig(std::move(m))
	{
		kfd = rig.open_kfd(c);
		r0 = rig.open_render(c, 128);
		r1 = rig.open_render(c, 129);
	}
	long acquire(uint32_t gpu, int drm)
	{
		AcquireVm a{static_cast<uint32_t>(drm), gpu};
		return rig.kfd(c, kfd, ACQUIRE_VM, &a, abi::kIocWrite);
	}
	long alloc(uint32_t gpu, uint64_t va, uint64_t size, uint32_t flags, AllocMemoryOfGpu *out, uint64_t off = 0)
	{
		*out = AllocMemoryOfGpu{va, size, 0, off, gpu, flags};
		return rig.kfd(c, kfd, ALLOC_MEMORY_OF_GPU, out);
	}
	long map(uint64_t handle, std::vector<uint32_t> ids, uint32_t *n_success = nullptr, bool unmap = false)
	{
		MapMemoryToGpu a{handle, reinterpret_cast<uint64_t>(ids.data()), static_cast<uint32_t>(ids.size()),
				 n_success ? *n_success : 0};
		long r = rig.kfd(c, kfd, unmap ? UNMAP_MEMORY_FROM_GPU : MAP_MEMORY_TO_GPU, &a);
		if (n_success)
			*n_success = a.n_success;
		return r;
	}
	long free_bo(uint64_t handle)
	{
		FreeMemoryOfGpu a{handle};
		return rig.kfd(c, kfd, FREE_MEMORY_OF_GPU, &a, abi::kIocWrite);
	}
	// Acquires G0's VM through r0 and allocates a BO of `size` bytes there
	// at VA 4 GiB (VRAM, writable unless `flags` says otherwise).
	AllocMemoryOfGpu vram_bo(uint64_t size, uint32_t flags = ALLOC_VRAM | ALLOC_WRITABLE)
	{
		cr_assert_eq(acquire(G0, r0), 0);
		AllocMemoryOfGpu a{};
		cr_assert_eq(alloc(G0, 0x100000000ull, size, flags, &a), 0);
		return a;
	}
};

} // namespace

Test(kfd_memory, version_and_apertures)
{
	App app;
	cr_assert_geq(app.kfd, 0);
	GetVersion v{};
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, GET_VERSION, &v, abi::kIocRead), 0);
	cr_assert_eq(v.major_version, 1);
	cr_assert_eq(v.minor_version, app.rig.machine.kfd_minor_version);

	GetProcessAperturesNew a{0, 0, 0};
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, GET_PROCESS_APERTURES_NEW, &a), 0);
	cr_assert_eq(a.num_of_nodes, 2);
	ProcessDeviceApertures ap[2] = {};
	a.kfd_process_device_apertures_ptr = reinterpret_cast<uint64_t>(ap);
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, GET_PROCESS_APERTURES_NEW, &a), 0);
	cr_assert_eq(ap[0].gpu_id, G0);
	cr_assert_eq(ap[1].gpu_id, G1);
	cr_assert_eq(ap[0].lds_base, 1ull << 48);
	cr_assert_lt(ap[0].gpuvm_base, ap[0].gpuvm_limit);
	a.kfd_process_device_apertures_ptr = 8; // unmapped
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, GET_PROCESS_APERTURES_NEW, &a), -EFAULT);
}

Test(kfd_memory, unknown_ioctl_and_other_process)
{
	App app;
	GetVersion v{};
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, 0x40, &v, abi::kIocRead), -ENOTTY);
	FakeCaller other(2000);
	cr_assert_eq(app.rig.kfd(other, app.kfd, GET_VERSION, &v, abi::kIocRead), -EBADF);
	// Its own open works, and shares nothing with 1000's context.
	int kfd2 = app.rig.open_kfd(other);
	cr_assert_eq(app.rig.kfd(other, kfd2, GET_VERSION, &v, abi::kIocRead), 0);
	// A second open in the same process shares the context.
	int kfd3 = app.rig.open_kfd(app.c);
	cr_assert_eq(app.acquire(G0, app.r0), 0);
	AllocMemoryOfGpu a{};
	a = AllocMemoryOfGpu{0x100000000ull, 4096, 0, 0, G0, ALLOC_GTT | ALLOC_WRITABLE};
	cr_assert_eq(app.rig.kfd(app.c, kfd3, ALLOC_MEMORY_OF_GPU, &a), 0);
}

Test(kfd_memory, acquire_vm_rules)
{
	App app;
	cr_assert_eq(app.acquire(0x9999, app.r0), -EINVAL, "unknown gpu");
	cr_assert_eq(app.acquire(G0, 1000), -EINVAL, "bad fd");
	cr_assert_eq(app.acquire(G0, app.r1), -EINVAL, "render file of another GPU");
	cr_assert_eq(app.acquire(G0, app.kfd), -EINVAL, "not a render file");
	cr_assert_eq(app.acquire(G0, app.r0), 0);
	cr_assert_eq(app.acquire(G0, app.r0), 0, "same file again is a no-op");
	int r0b = app.rig.open_render(app.c, 128);
	cr_assert_eq(app.acquire(G0, r0b), -EBUSY);
	// A file already used as another process's compute VM.
	FakeCaller other(2000);
	int k2 = app.rig.open_kfd(other);
	AcquireVm a{static_cast<uint32_t>(app.r1), G1};
	cr_assert_eq(app.acquire(G1, app.r1), 0);
	cr_assert_eq(app.rig.kfd(other, k2, ACQUIRE_VM, &a, abi::kIocWrite), -EINVAL);
}

Test(kfd_memory, alloc_errors)
{
	App app;
	AllocMemoryOfGpu a{};
	cr_assert_eq(app.alloc(G0, 0x100000000ull, 4096, ALLOC_VRAM, &a), -ENODEV, "no VM acquired");
	cr_assert_eq(app.acquire(G0, app.r0), 0);
	cr_assert_eq(app.alloc(G0, 0x100000000ull, 0, ALLOC_VRAM, &a), -EINVAL, "size 0");
	cr_assert_eq(app.alloc(0x4242, 0x100000000ull, 4096, ALLOC_VRAM, &a), -EINVAL, "bad gpu");
	cr_assert_eq(app.alloc(G0, 0x100000000ull, 4096, ALLOC_WRITABLE, &a), -EINVAL, "no type");
	cr_assert_eq(app.alloc(G0, 0x100000000ull, 4096, ALLOC_DOORBELL, &a), -EINVAL, "doorbell size");
	cr_assert_eq(app.alloc(G0, 0x100000000ull, 8192, ALLOC_MMIO_REMAP, &a), -EINVAL, "mmio size");
	cr_assert_eq(app.alloc(G0, 0x100000000ull, 4ull << 30, ALLOC_VRAM, &a), -ENOMEM, "beyond VRAM");
	uint8_t *mem = static_cast<uint8_t *>(aligned_alloc(4096, 8192));
	cr_assert_eq(app.alloc(G0, 0x200000000ull, 8192, ALLOC_USERPTR, &a, reinterpret_cast<uint64_t>(mem) + 1),
		     -EINVAL, "userptr not page aligned");

	cr_assert_eq(app.alloc(G0, 0x100000000ull, 4096, ALLOC_VRAM | ALLOC_WRITABLE, &a), 0);
	cr_assert_eq(a.handle, (uint64_t{G0} << 32) | 0);
	cr_assert_geq(a.mmap_offset, 0x100000000ull);
	cr_assert_eq(a.mmap_offset % 4096, 0);
	AllocMemoryOfGpu b{};
	cr_assert_eq(app.alloc(G0, 0x100001000ull, 4096, ALLOC_GTT, &b), 0);
	cr_assert_eq(b.handle, (uint64_t{G0} << 32) | 1);
	cr_assert_neq(b.mmap_offset, a.mmap_offset);
	AllocMemoryOfGpu m{};
	cr_assert_eq(app.alloc(G0, 0x100002000ull, 4096, ALLOC_MMIO_REMAP, &m), 0);
	cr_assert_eq(m.mmap_offset, (MMAP_TYPE_MMIO | mmap_gpu_id(G0)));
	AvailableMemory av{0, G0, 0};
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, AVAILABLE_MEMORY, &av), 0);
	cr_assert_eq(av.available, (1ull << 30) - 4096);
	free(mem);
}

Test(kfd_memory, map_unmap_free)
{
	App app;
	const AllocMemoryOfGpu a = app.vram_bo(8192);
	cr_assert_eq(app.map(a.handle, {}), -EINVAL, "n_devices 0");
	uint32_t ns = 2;
	cr_assert_eq(app.map(a.handle, {G0}, &ns), -EINVAL, "n_success > n_devices");
	cr_assert_eq(app.map(a.handle + 77, {G0}), -ENOMEM, "unknown handle");
	cr_assert_eq(app.map(a.handle, {0x4242}), -EINVAL, "unknown peer");
	MapMemoryToGpu bad{a.handle, 16, 1, 0};
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, MAP_MEMORY_TO_GPU, &bad), -EFAULT);
	// G1 has no VM: the first device succeeds, the second fails.
	ns = 0;
	cr_assert_eq(app.map(a.handle, {G0, G1}, &ns), -ENODEV);
	cr_assert_eq(ns, 1);
	cr_assert_eq(app.acquire(G1, app.r1), 0);
	cr_assert_eq(app.map(a.handle, {G0, G1}, &ns), 0);
	cr_assert_eq(ns, 2);
	cr_assert_eq(app.free_bo(a.handle), -EBUSY, "still mapped");
	// A second BO at an overlapping VA cannot be mapped.
	AllocMemoryOfGpu b{};
	cr_assert_eq(app.alloc(G0, 0x100001000ull, 4096, ALLOC_GTT, &b), 0);
	cr_assert_eq(app.map(b.handle, {G0}), -EINVAL);
	AllocMemoryOfGpu cbo{};
	cr_assert_eq(app.alloc(G0, 0x100000800ull, 4096, ALLOC_GTT, &cbo), 0);
	cr_assert_eq(app.map(cbo.handle, {G0}), -EINVAL, "misaligned VA");

	uint32_t un = 0;
	cr_assert_eq(app.map(a.handle, {G0, G1}, &un, true), 0);
	cr_assert_eq(un, 2);
	un = 0;
	cr_assert_eq(app.map(a.handle, {G0}, &un, true), -EINVAL, "not mapped");
	cr_assert_eq(app.free_bo(a.handle), 0);
	cr_assert_eq(app.free_bo(a.handle), -EINVAL, "double free");
	cr_assert_eq(app.free_bo((uint64_t{0x4242} << 32) | 1), -EINVAL, "bad gpu in handle");
	// Freed id is reused: lowest free.
	AllocMemoryOfGpu d{};
	cr_assert_eq(app.alloc(G0, 0x300000000ull, 4096, ALLOC_GTT, &d), 0);
	cr_assert_eq(d.handle & 0xffffffff, 0);
}

Test(kfd_memory, cpu_mapping_through_render_node)
{
	App app;
	const AllocMemoryOfGpu a = app.vram_bo(8192);
	auto *p = static_cast<uint8_t *>(app.rig.map(app.c, app.r0, a.mmap_offset, 8192));
	cr_assert_not_null(p);
	std::memset(p, 0xab, 8192);
	// The same bytes through introspection.
	std::string s = app.rig.model->introspect("bo-bytes 1000 " + std::to_string(a.handle) + " 4094 4");
	cr_assert_str_eq(s.c_str(), "{\"bytes\":\"abababab\"}");
	// Another open of the same node has no access.
	int other = app.rig.open_render(app.c, 128);
	int err = 0;
	cr_assert_null(app.rig.map(app.c, other, a.mmap_offset, 4096, &err));
	cr_assert_eq(err, -EACCES);
	cr_assert_null(app.rig.map(app.c, app.r0, a.mmap_offset, 3 * 4096, &err));
	cr_assert_eq(err, -EINVAL, "longer than the BO");
	munmap(p, 8192);
}

// The `bos` query's checksum is testcommon::bo_checksum of the BO's bytes,
// its never-written pages (holes in the backing) folded as zero words
// without being read, the same as pages written with zeros.
Test(kfd_memory, checksum_of_sparse_bo)
{
	App app;
	constexpr uint64_t kPage = 4096, kSize = 6 * kPage;
	const AllocMemoryOfGpu a = app.vram_bo(kSize);
	auto *p = static_cast<uint8_t *>(app.rig.map(app.c, app.r0, a.mmap_offset, kSize));
	cr_assert_not_null(p);
	std::vector<uint8_t> want(kSize, 0);
	// Pages 1 and 4 hold data (page 4 from its second byte, so a word
	// straddles zero and data), page 2 is written with zeros, pages 0, 3
	// and 5 are never touched.
	for (uint64_t i = 0; i < kPage; ++i)
		want[kPage + i] = static_cast<uint8_t>(i * 7 + 1);
	for (uint64_t i = 1; i < kPage; ++i)
		want[4 * kPage + i] = static_cast<uint8_t>(i * 13 + 5);
	std::memcpy(p + kPage, want.data() + kPage, kPage);
	std::memset(p + 2 * kPage, 0, kPage);
	std::memcpy(p + 4 * kPage + 1, want.data() + 4 * kPage + 1, kPage - 1);
	char expected[32];
	std::snprintf(expected, sizeof expected, "\"0x%016" PRIx64 "\"", testcommon::bo_checksum(want.data(), kSize));
	const std::string bos = app.rig.model->introspect("bos 1000");
	cr_assert(bos.find(std::string("\"checksum\":") + expected) != std::string::npos, "want %s in %s", expected,
		  bos.c_str());
	// One bit more in the last page changes it.
	p[5 * kPage + 17] = 1;
	cr_assert(app.rig.model->introspect("bos 1000").find(expected) == std::string::npos);
	munmap(p, kSize);
}

// A KFD BO exported as a dma-buf and imported into a render file (same
// device: the BO itself) is listed with the flags the kernel's KFD
// allocation gave it: VRAM_WIPE_ON_RELEASE on every BO, CPU_ACCESS_REQUIRED
// for public VRAM, the coherence flags; one page of alignment.
Test(kfd_memory, kfd_bo_in_render_handles)
{
	App app;
	const AllocMemoryOfGpu a = app.vram_bo(8192, ALLOC_VRAM | ALLOC_WRITABLE | ALLOC_PUBLIC | ALLOC_COHERENT);
	ExportDmabuf ex{a.handle, 0, 0};
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, EXPORT_DMABUF, &ex), 0);
	int other = app.rig.open_render(app.c, 128);
	abi::drm::PrimeHandle imp{0, 0, static_cast<int32_t>(ex.dmabuf_fd)};
	cr_assert_eq(app.rig.drm(app.c, other, abi::drm::PRIME_FD_TO_HANDLE, &imp), 0);
	abi::drm::GemListHandlesEntry e[1] = {};
	abi::drm::GemListHandles lh{reinterpret_cast<uint64_t>(e), 1, 0};
	cr_assert_eq(app.rig.amdgpu(app.c, other, abi::drm::GEM_LIST_HANDLES, &lh), 0);
	cr_assert_eq(lh.num_entries, 1);
	cr_assert_eq(e[0].gem_handle, imp.handle);
	cr_assert_eq(e[0].flags, 0, "same device: not an import");
	cr_assert_eq(e[0].preferred_domains, abi::drm::DOMAIN_VRAM);
	cr_assert_eq(e[0].alloc_flags, abi::drm::CREATE_VRAM_WIPE_ON_RELEASE | abi::drm::CREATE_CPU_ACCESS_REQUIRED |
					      abi::drm::CREATE_COHERENT);
	cr_assert_eq(e[0].alignment, 1);
	cr_assert_eq(e[0].size, 8192);
}

// EXPORT_DMABUF as kfd_ioctl_export_dmabuf: dma_buf_fd() passes `flags` to
// get_unused_fd_flags(), which takes any bits (O_CLOEXEC is the one that
// counts); a userptr BO is refused by amdgpu_gem_prime_export (EPERM); an
// unknown handle is EINVAL.
Test(kfd_memory, export_dmabuf_flags_and_userptr)
{
	App app;
	const AllocMemoryOfGpu a = app.vram_bo(8192);
	ExportDmabuf ex{a.handle, abi::drm::CLOEXEC | abi::drm::RDWR | 04000 /* O_NONBLOCK */, 0};
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, EXPORT_DMABUF, &ex), 0, "any fd flags are taken");
	ExportDmabuf none{a.handle + 77, 0, 0};
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, EXPORT_DMABUF, &none), -EINVAL, "unknown handle");
	const size_t sz = 4 * 4096;
	void *mem = aligned_alloc(4096, sz);
	AllocMemoryOfGpu u{};
	cr_assert_eq(app.alloc(G0, 0x200000000ull, sz, ALLOC_USERPTR | ALLOC_WRITABLE, &u, reinterpret_cast<uint64_t>(mem)),
		     0);
	ExportDmabuf ux{u.handle, abi::drm::CLOEXEC, 0};
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, EXPORT_DMABUF, &ux), -EPERM, "userptr: amdgpu_gem_prime_export");
	cr_assert_eq(app.free_bo(u.handle), 0);
	free(mem);
}

// IMPORT_DMABUF as kfd_ioctl_import_dmabuf: a gpu_id the process has no
// device for is EINVAL (kfd_process_device_data_by_id), a closed fd EBADF
// and an fd that is not a dma-buf EINVAL (dma_buf_get in
// drm_gem_prime_fd_to_handle); a dma-buf of the device becomes a KFD BO.
Test(kfd_memory, import_dmabuf_errnos)
{
	App app;
	const AllocMemoryOfGpu a = app.vram_bo(8192);
	ExportDmabuf ex{a.handle, abi::drm::CLOEXEC, 0};
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, EXPORT_DMABUF, &ex), 0);
	ImportDmabuf im{0x300000000ull, 0, 0x7777, ex.dmabuf_fd};
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, IMPORT_DMABUF, &im), -EINVAL, "unknown gpu_id");
	im = ImportDmabuf{0x300000000ull, 0, G0, 0x7ffffff0u};
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, IMPORT_DMABUF, &im), -EBADF, "closed fd");
	im = ImportDmabuf{0x300000000ull, 0, G0, static_cast<uint32_t>(app.kfd)};
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, IMPORT_DMABUF, &im), -EINVAL, "not a dma-buf");
	im = ImportDmabuf{0x300000000ull, 0, G0, ex.dmabuf_fd};
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, IMPORT_DMABUF, &im), 0);
	cr_assert_eq(im.handle >> 32, G0);
}

Test(kfd_memory, userptr_ledger)
{
	App app;
	cr_assert_eq(app.acquire(G0, app.r0), 0);
	const size_t sz = 64 * 4096;
	void *mem = aligned_alloc(4096, sz);
	AllocMemoryOfGpu a{};
	cr_assert_eq(app.alloc(G0, 0x100000000ull, sz, ALLOC_USERPTR | ALLOC_WRITABLE, &a,
			       reinterpret_cast<uint64_t>(mem)),
		     0);
	std::string s = app.rig.model->introspect("userptr 1000");
	std::string want = "{\"pid\":1000,\"current\":" + std::to_string(sz) + ",\"peak\":" + std::to_string(sz) + "}";
	cr_assert(s == want, "%s", s.c_str());
	cr_assert_eq(app.free_bo(a.handle), 0);
	s = app.rig.model->introspect("userptr 1000");
	want = "{\"pid\":1000,\"current\":0,\"peak\":" + std::to_string(sz) + "}";
	cr_assert(s == want, "%s", s.c_str());
	free(mem);
}

Test(kfd_memory, queues_and_events)
{
	App app;
	cr_assert_eq(app.acquire(G0, app.r0), 0);
	std::vector<uint8_t> ring(4096);
	uint64_t rptr = 0, wptr = 0;
	CreateQueue q{};
	q.ring_base_address = reinterpret_cast<uint64_t>(ring.data());
	q.ring_size = 4096;
	q.gpu_id = G0;
	q.queue_type = QUEUE_COMPUTE_AQL;
	q.queue_percentage = 100;
	q.read_pointer_address = reinterpret_cast<uint64_t>(&rptr);
	q.write_pointer_address = reinterpret_cast<uint64_t>(&wptr);
	CreateQueue bad = q;
	bad.queue_type = 9;
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, CREATE_QUEUE, &bad), -524);
	bad = q;
	bad.ring_size = 3000;
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, CREATE_QUEUE, &bad), -EINVAL);
	bad = q;
	bad.queue_priority = 16;
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, CREATE_QUEUE, &bad), -EINVAL);
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, CREATE_QUEUE, &q), 0);
	cr_assert_eq(q.queue_id, 0);
	cr_assert_eq(q.doorbell_offset >> 62, 3);
	// The doorbell page maps through /dev/kfd.
	void *db = app.rig.map(app.c, app.kfd, q.doorbell_offset & ~0xfffull, 8192);
	cr_assert_not_null(db);
	munmap(db, 8192);

	CreateEvent e{};
	e.event_type = EVENT_SIGNAL;
	e.auto_reset = 1;
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, CREATE_EVENT, &e), 0);
	EventId id{e.event_id, 0};
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, SET_EVENT, &id, abi::kIocWrite), 0);
	EventData ed{};
	ed.event_id = e.event_id;
	WaitEvents w{reinterpret_cast<uint64_t>(&ed), 1, 1, 1000, 9};
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, WAIT_EVENTS, &w), 0);
	cr_assert_eq(w.wait_result, WAIT_COMPLETE);
	w.timeout = 10;
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, WAIT_EVENTS, &w), 0);
	cr_assert_eq(w.wait_result, WAIT_TIMEOUT, "auto-reset event consumed");
	EventId unknown{777, 0};
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, DESTROY_EVENT, &unknown, abi::kIocWrite), -EINVAL);
	DestroyQueue dq{5, 0};
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, DESTROY_QUEUE, &dq), -EINVAL);
	std::string s = app.rig.model->introspect("queues 1000");
	cr_assert(s.find("\"state\":\"active\"") != std::string::npos, "%s", s.c_str());
}

Test(kfd_memory, process_exit_frees)
{
	App app;
	app.vram_bo(1 << 20, ALLOC_VRAM);
	app.rig.model->process_exit(1000);
	std::string s = app.rig.model->introspect("bos 1000");
	cr_assert(s == "{\"error\":\"no such process\"}", "%s", s.c_str());
	// VRAM accounting returns: a new process can allocate all of it.
	FakeCaller n(3000);
	int k = app.rig.open_kfd(n);
	AcquireVm acq{static_cast<uint32_t>(app.rig.open_render(n, 128)), G0};
	cr_assert_eq(app.rig.kfd(n, k, ACQUIRE_VM, &acq, abi::kIocWrite), 0);
	AvailableMemory av{0, G0, 0};
	cr_assert_eq(app.rig.kfd(n, k, AVAILABLE_MEMORY, &av), 0);
	cr_assert_eq(av.available, 1ull << 30);
}

// Resident bytes (smaps Rss) of this process's mappings of the model's BO
// memfds of `size` bytes: the daemon's own mappings (the model runs here).
static uint64_t bo_mappings_rss(uint64_t size)
{
	std::ifstream smaps("/proc/self/smaps");
	uint64_t rss = 0;
	bool counted = false;
	for (std::string line; std::getline(smaps, line);) {
		unsigned long long lo = 0, hi = 0, kb = 0;
		if (std::sscanf(line.c_str(), "%llx-%llx", &lo, &hi) == 2) // a mapping's first line
			counted = hi - lo == size && line.find("memfd:kfdemu-bo") != std::string::npos;
		else if (counted && std::sscanf(line.c_str(), "Rss: %llu kB", &kb) == 1)
			rss += kb << 10;
	}
	return rss;
}

// --vram-resident: a VRAM BO's host memory is allocated with the BO (its
// memfd has every block), and the model's mapping of it (through which
// the emulated SDMA copies) is populated; by default untouched pages have
// neither. GTT BOs are not affected.
Test(kfd_memory, vram_resident_allocates_host_memory_with_the_bo)
{
	for (bool resident : {false, true}) {
		MachineDesc m = make_machine({G0, G1});
		m.nodes[1].vram_resident = resident;
		App app(std::move(m));
		const uint64_t size = 8ull << 20;
		AllocMemoryOfGpu vram = app.vram_bo(size), gtt{};
		cr_assert_eq(app.alloc(G0, 0x200000000ull, size, ALLOC_GTT | ALLOC_WRITABLE, &gtt), 0);
		for (auto *bo : {&vram, &gtt}) {
			ExportDmabuf e{bo->handle, 0, 0};
			cr_assert_eq(app.rig.kfd(app.c, app.kfd, EXPORT_DMABUF, &e), 0);
			struct stat st {};
			cr_assert_eq(fstat(static_cast<int>(e.dmabuf_fd), &st), 0);
			const bool full = static_cast<uint64_t>(st.st_blocks) * 512 >= size;
			cr_assert_eq(full, resident && bo == &vram, "resident %d, %s BO: %lld blocks", resident,
				     bo == &vram ? "VRAM" : "GTT", static_cast<long long>(st.st_blocks));
		}
		const uint64_t rss = bo_mappings_rss(size); // the VRAM and the GTT BO's mappings
		cr_assert_eq(rss, resident ? size : 0, "resident %d: %llu bytes of the BOs' mappings resident", resident,
			     static_cast<unsigned long long>(rss));
	}
}

// amdgpu_gem_metadata_ioctl keeps the metadata's exact byte count, and
// GET_DMABUF_INFO returns it as amdgpu_amdkfd_get_dmabuf_info does.
Test(kfd_memory, gem_metadata_keeps_its_size_and_get_dmabuf_info_returns_it)
{
	App app;
	const AllocMemoryOfGpu a = app.vram_bo(8192, ALLOC_VRAM | ALLOC_WRITABLE | ALLOC_PUBLIC);
	ExportDmabuf ex{a.handle, 0, 0};
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, EXPORT_DMABUF, &ex), 0);
	// Imported into its own GPU's file: the KFD BO itself gets a handle.
	abi::drm::PrimeHandle imp{0, 0, static_cast<int32_t>(ex.dmabuf_fd)};
	cr_assert_eq(app.rig.drm(app.c, app.r0, abi::drm::PRIME_FD_TO_HANDLE, &imp), 0);

	abi::drm::GemMetadata md{};
	md.handle = imp.handle;
	md.op = 1;
	md.flags = 0x77;
	md.tiling_info = 0x1234;
	md.data_size_bytes = 5;
	std::memcpy(md.data, "\x01\x02\x03\x04\x05\x06\x07\x08", 8);
	cr_assert_eq(app.rig.amdgpu(app.c, app.r0, abi::drm::GEM_METADATA, &md), 0);
	abi::drm::GemMetadata get{};
	get.handle = imp.handle;
	get.op = 2;
	std::memset(get.data, 0xaa, sizeof get.data);
	cr_assert_eq(app.rig.amdgpu(app.c, app.r0, abi::drm::GEM_METADATA, &get), 0);
	cr_assert_eq(get.data_size_bytes, 5u, "the exact size, not 8");
	cr_assert_eq(get.flags, 0x77u);
	cr_assert_eq(get.tiling_info, 0x1234u);
	const auto *bytes = reinterpret_cast<const uint8_t *>(get.data);
	cr_assert(std::memcmp(bytes, "\x01\x02\x03\x04\x05", 5) == 0);
	cr_assert_eq(bytes[5], 0xaa, "bytes past the size are left as the caller sent them");
	md.data_size_bytes = 257;
	cr_assert_eq(app.rig.amdgpu(app.c, app.r0, abi::drm::GEM_METADATA, &md), -EINVAL, "over 256 bytes");
	// Another op: amdgpu_gem_metadata_ioctl answers 0 and changes nothing.
	abi::drm::GemMetadata other{};
	other.handle = imp.handle;
	other.op = 3;
	other.data_size_bytes = 1;
	cr_assert_eq(app.rig.amdgpu(app.c, app.r0, abi::drm::GEM_METADATA, &other), 0, "unknown op: 0");
	cr_assert_eq(app.rig.amdgpu(app.c, app.r0, abi::drm::GEM_METADATA, &get), 0);
	cr_assert_eq(get.data_size_bytes, 5u, "unchanged by the unknown op");

	// GET_DMABUF_INFO: without a buffer metadata_size stays as given.
	GetDmabufInfo gi{};
	gi.dmabuf_fd = ex.dmabuf_fd;
	gi.metadata_size = 1234;
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, GET_DMABUF_INFO, &gi), 0);
	cr_assert_eq(gi.size, 8192u);
	cr_assert_eq(gi.gpu_id, G0);
	cr_assert_eq(gi.flags, ALLOC_VRAM | ALLOC_PUBLIC, "the domain and CPU access, not the KFD alloc flags");
	cr_assert_eq(gi.metadata_size, 1234u);
	// A buffer too small: EINVAL with the size the metadata needs.
	uint8_t buf[16];
	std::memset(buf, 0xcc, sizeof buf);
	gi = GetDmabufInfo{0, reinterpret_cast<uint64_t>(buf), 4, 0, 0, ex.dmabuf_fd};
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, GET_DMABUF_INFO, &gi), -EINVAL);
	cr_assert_eq(gi.metadata_size, 5u);
	cr_assert_eq(buf[0], 0xcc, "nothing copied");
	gi = GetDmabufInfo{0, reinterpret_cast<uint64_t>(buf), sizeof buf, 0, 0, ex.dmabuf_fd};
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, GET_DMABUF_INFO, &gi), 0);
	cr_assert_eq(gi.metadata_size, 5u);
	cr_assert(std::memcmp(buf, "\x01\x02\x03\x04\x05\xcc", 6) == 0, "5 bytes copied out");
	gi = GetDmabufInfo{0, 8, sizeof buf, 0, 0, ex.dmabuf_fd};
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, GET_DMABUF_INFO, &gi), -EFAULT, "unwritable buffer");

	// Size 0 drops the data and keeps the flags (amdgpu_bo_set_metadata).
	md.data_size_bytes = 0;
	md.flags = 0x99;
	cr_assert_eq(app.rig.amdgpu(app.c, app.r0, abi::drm::GEM_METADATA, &md), 0);
	cr_assert_eq(app.rig.amdgpu(app.c, app.r0, abi::drm::GEM_METADATA, &get), 0);
	cr_assert_eq(get.data_size_bytes, 0u);
	cr_assert_eq(get.flags, 0x77u);

	// A GEM GTT BO of G1: its GPU and GTT.
	const uint32_t h = app.rig.gem_create(app.c, app.r1, 4096, abi::drm::DOMAIN_GTT);
	abi::drm::PrimeHandle ph{h, 0, -1};
	cr_assert_eq(app.rig.drm(app.c, app.r1, abi::drm::PRIME_HANDLE_TO_FD, &ph), 0);
	gi = GetDmabufInfo{};
	gi.dmabuf_fd = static_cast<uint32_t>(ph.fd);
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, GET_DMABUF_INFO, &gi), 0);
	cr_assert_eq(gi.gpu_id, G1);
	cr_assert_eq(gi.flags, ALLOC_GTT);
	gi.dmabuf_fd = 999;
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, GET_DMABUF_INFO, &gi), -EBADF, "no such fd");
	gi.dmabuf_fd = static_cast<uint32_t>(app.r0);
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, GET_DMABUF_INFO, &gi), -EINVAL, "not a dma-buf");
}
