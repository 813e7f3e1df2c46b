// SPDX-License-Identifier: GPL-2.0-only
// Object lifetime: release() of render files, KFD's own reference on an
// acquired file, dma-bufs keeping BOs alive, process_exit().
#include "harness.h"

#include <criterion/criterion.h>

#include <chrono>
#include <thread>

using namespace kfdemu;
using namespace kfdemu::testing;
using namespace kfdemu::abi;

namespace {
constexpr uint32_t G0 = 0x1111;

uint64_t available(Rig &rig, FakeCaller &c, int kfd)
{
	kfd::AvailableMemory a{0, G0, 0};
	cr_assert_eq(rig.kfd(c, kfd, kfd::AVAILABLE_MEMORY, &a), 0);
	return a.available;
}

// VRAM not used by resident BOs (1 GiB less INFO_VRAM_USAGE through render
// file `render`): GEM BOs count here, not in KFD's AVAILABLE_MEMORY.
uint64_t vram_free(Rig &rig, FakeCaller &c, int render)
{
	uint64_t used = 0;
	drm::Info a{reinterpret_cast<uint64_t>(&used), 8, drm::INFO_VRAM_USAGE, {}};
	cr_assert_eq(rig.amdgpu(c, render, drm::INFO, &a, kIocWrite), 0);
	return (1ull << 30) - used;
}
} // namespace

Test(lifetime, release_frees_render_bos)
{
	Rig rig(make_machine({G0}));
	FakeCaller c(1000);
	int kfd = rig.open_kfd(c);
	int own = rig.open_render(c, 128);
	kfd::AcquireVm acq{static_cast<uint32_t>(own), G0};
	cr_assert_eq(rig.kfd(c, kfd, kfd::ACQUIRE_VM, &acq, kIocWrite), 0);
	const uint64_t full = vram_free(rig, c, own);

	int fd = rig.open_render(c, 128);
	rig.gem_create(c, fd, 64 << 20);
	cr_assert_eq(vram_free(rig, c, own), full - (64 << 20));
	rig.model->release(key_of(fd));
	cr_assert_eq(vram_free(rig, c, own), full, "handles freed with the file");
	cr_assert(!rig.model->describe(key_of(fd)), "the file is gone");
}

Test(lifetime, dmabuf_keeps_bo_alive)
{
	Rig rig(make_machine({G0}));
	FakeCaller c(1000);
	int kfd = rig.open_kfd(c);
	int own = rig.open_render(c, 128);
	kfd::AcquireVm acq{static_cast<uint32_t>(own), G0};
	cr_assert_eq(rig.kfd(c, kfd, kfd::ACQUIRE_VM, &acq, kIocWrite), 0);
	const uint64_t full = vram_free(rig, c, own);

	int fd = rig.open_render(c, 128);
	uint32_t h = rig.gem_create(c, fd, 1 << 20);
	drm::PrimeHandle p{h, 0, -1};
	cr_assert_eq(rig.drm(c, fd, drm::PRIME_HANDLE_TO_FD, &p), 0);
	auto *m = static_cast<uint8_t *>(::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, p.fd, 0));
	m[7] = 0x77;
	rig.model->release(key_of(fd));
	cr_assert_eq(vram_free(rig, c, own), full - (1 << 20), "the dma-buf holds the BO");
	// Importing it again in a new file finds the same memory.
	int fd2 = rig.open_render(c, 128);
	drm::PrimeHandle imp{0, 0, p.fd};
	cr_assert_eq(rig.drm(c, fd2, drm::PRIME_FD_TO_HANDLE, &imp), 0);
	auto *m2 = static_cast<uint8_t *>(rig.map(c, fd2, rig.gem_mmap_offset(c, fd2, imp.handle), 4096));
	cr_assert_eq(m2[7], 0x77);
	munmap(m2, 4096);
	rig.model->release(key_of(fd2));
	rig.model->release(key_of(p.fd)); // the last dma-buf fd is gone
	cr_assert_eq(vram_free(rig, c, own), full);
	munmap(m, 4096);
}

Test(lifetime, kfd_keeps_acquired_file)
{
	Rig rig(make_machine({G0}));
	FakeCaller c(1000);
	int kfd = rig.open_kfd(c);
	int own = rig.open_render(c, 128);
	kfd::AcquireVm acq{static_cast<uint32_t>(own), G0};
	cr_assert_eq(rig.kfd(c, kfd, kfd::ACQUIRE_VM, &acq, kIocWrite), 0);
	kfd::AllocMemoryOfGpu a{0x100000000ull, 1 << 20, 0, 0, G0, kfd::ALLOC_VRAM | kfd::ALLOC_WRITABLE};
	cr_assert_eq(rig.kfd(c, kfd, kfd::ALLOC_MEMORY_OF_GPU, &a), 0);
	uint32_t ids[1] = {G0};
	kfd::MapMemoryToGpu mp{a.handle, reinterpret_cast<uint64_t>(ids), 1, 0};
	cr_assert_eq(rig.kfd(c, kfd, kfd::MAP_MEMORY_TO_GPU, &mp), 0);
	rig.model->release(key_of(own)); // the app closed its render fd
	// The VM lives on: more KFD allocations and maps still work there.
	kfd::AllocMemoryOfGpu b{0x100100000ull, 4096, 0, 0, G0, kfd::ALLOC_GTT};
	cr_assert_eq(rig.kfd(c, kfd, kfd::ALLOC_MEMORY_OF_GPU, &b), 0);
	kfd::MapMemoryToGpu mp2{b.handle, reinterpret_cast<uint64_t>(ids), 1, 0};
	cr_assert_eq(rig.kfd(c, kfd, kfd::MAP_MEMORY_TO_GPU, &mp2), 0);
	kfd::MapMemoryToGpu overlap{b.handle, reinterpret_cast<uint64_t>(ids), 1, 0};
	cr_assert_eq(rig.kfd(c, kfd, kfd::MAP_MEMORY_TO_GPU, &overlap), 0, "mapping twice is a no-op");
	std::string p = rig.model->introspect("processes");
	cr_assert(p.find("\"bound\":true") != std::string::npos, "%s", p.c_str());

	// The kfd fd's release does not end the context; the process's exit does.
	rig.model->release(key_of(kfd));
	p = rig.model->introspect("processes");
	cr_assert(p.find("\"pid\":1000") != std::string::npos, "%s", p.c_str());
	rig.model->process_exit(1000);
	p = rig.model->introspect("processes");
	cr_assert(p == "{\"processes\":[]}", "%s", p.c_str());
	// A new context can allocate all of VRAM again.
	FakeCaller n(1001);
	int k2 = rig.open_kfd(n);
	int r2 = rig.open_render(n, 128);
	kfd::AcquireVm acq2{static_cast<uint32_t>(r2), G0};
	cr_assert_eq(rig.kfd(n, k2, kfd::ACQUIRE_VM, &acq2, kIocWrite), 0);
	cr_assert_eq(available(rig, n, k2), 1ull << 30);
}

Test(lifetime, exit_unblocks_event_waiters)
{
	Rig rig(make_machine({G0}));
	FakeCaller c(1000);
	int kfd = rig.open_kfd(c);
	kfd::CreateEvent e{};
	cr_assert_eq(rig.kfd(c, kfd, kfd::CREATE_EVENT, &e), 0);
	long r = 1;
	std::thread waiter([&] {
		FakeCaller me(1000);
		kfd::EventData ed{};
		ed.event_id = e.event_id;
		kfd::WaitEvents w{reinterpret_cast<uint64_t>(&ed), 1, 1, 0xffffffffu, 9};
		r = rig.kfd(me, kfd, kfd::WAIT_EVENTS, &w);
	});
	std::this_thread::sleep_for(std::chrono::milliseconds(30));
	rig.model->process_exit(1000);
	waiter.join();
	cr_assert_eq(r, -ESRCH);
}
