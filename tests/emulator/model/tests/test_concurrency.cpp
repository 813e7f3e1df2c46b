// SPDX-License-Identifier: GPL-2.0-only
// Concurrency: many client threads submitting and waiting at once; blocking
// calls (WAIT_CS, WAIT_EVENTS) do not hold the lock other calls need.
#include "harness.h"

#include <criterion/criterion.h>

#include <atomic>
#include <chrono>
#include <thread>

using namespace kfdemu;
using namespace kfdemu::testing;
using namespace kfdemu::abi::drm;

namespace {
constexpr uint64_t kSrcVa = 0x100000000ull, kDstVa = 0x200000000ull, kIbVa = 0x300000000ull;
}

Test(concurrency, parallel_submitters)
{
	Rig rig(make_machine({0x1111}));
	FakeCaller c(1000);
	int fd = rig.open_render(c, 128);
	const uint64_t size = 4ull << 20;
	uint32_t hs = rig.gem_create(c, fd, size), hd = rig.gem_create(c, fd, size);
	uint32_t hib = rig.gem_create(c, fd, 1 << 20, DOMAIN_GTT);
	cr_assert_eq(rig.gem_va(c, fd, hs, VA_OP_MAP, kSrcVa, size), 0);
	cr_assert_eq(rig.gem_va(c, fd, hd, VA_OP_MAP, kDstVa, size), 0);
	cr_assert_eq(rig.gem_va(c, fd, hib, VA_OP_MAP, kIbVa, 1 << 20), 0);
	auto *src = static_cast<uint8_t *>(rig.map(c, fd, rig.gem_mmap_offset(c, fd, hs), size));
	auto *dst = static_cast<uint8_t *>(rig.map(c, fd, rig.gem_mmap_offset(c, fd, hd), size));
	auto *ib = static_cast<uint8_t *>(rig.map(c, fd, rig.gem_mmap_offset(c, fd, hib), 1 << 20));
	for (uint64_t i = 0; i < size; ++i)
		src[i] = static_cast<uint8_t>(i * 7 + 3);
	std::memset(dst, 0, size);

	constexpr int kThreads = 4, kJobs = 32;
	const uint64_t slice = size / (kThreads * kJobs);
	std::atomic<int> failures{0};
	std::vector<std::thread> ts;
	for (int t = 0; t < kThreads; ++t)
		ts.emplace_back([&, t] {
			FakeCaller me(1000);
			uint32_t ctx = rig.ctx_alloc(me, fd);
			for (int j = 0; j < kJobs; ++j) {
				uint64_t off = (static_cast<uint64_t>(t) * kJobs + j) * slice;
				std::vector<uint32_t> v;
				pkt_copy(v, kSrcVa + off, kDstVa + off, slice);
				pad_ib(v);
				uint64_t ib_off = (static_cast<uint64_t>(t) * kJobs + j) * 64;
				std::memcpy(ib + ib_off, v.data(), v.size() * 4);
				long r;
				uint64_t seq = rig.submit(me, fd, ctx, kIbVa + ib_off, static_cast<uint32_t>(v.size() * 4), &r,
							  static_cast<uint32_t>(t % 2));
				uint64_t status = 1;
				if (r || rig.wait_cs(me, fd, ctx, seq, ~0ull, &status, static_cast<uint32_t>(t % 2)) || status)
					++failures;
			}
		});
	for (auto &t : ts)
		t.join();
	cr_assert_eq(failures.load(), 0);
	cr_assert_eq(std::memcmp(src, dst, size), 0);
	munmap(src, size);
	munmap(dst, size);
	munmap(ib, 1 << 20);
}

Test(concurrency, wait_cs_does_not_block_others)
{
	Rig rig(make_machine({0x1111}, 141, 1ull << 30, 0.02)); // 20 MB/s
	FakeCaller c(1000);
	int fd = rig.open_render(c, 128);
	uint32_t hs = rig.gem_create(c, fd, 4 << 20), hd = rig.gem_create(c, fd, 4 << 20);
	uint32_t hib = rig.gem_create(c, fd, 4096, DOMAIN_GTT);
	cr_assert_eq(rig.gem_va(c, fd, hs, VA_OP_MAP, kSrcVa, 4 << 20), 0);
	cr_assert_eq(rig.gem_va(c, fd, hd, VA_OP_MAP, kDstVa, 4 << 20), 0);
	cr_assert_eq(rig.gem_va(c, fd, hib, VA_OP_MAP, kIbVa, 4096), 0);
	auto *ib = static_cast<uint32_t *>(rig.map(c, fd, rig.gem_mmap_offset(c, fd, hib), 4096));
	std::vector<uint32_t> v;
	pkt_copy(v, kSrcVa, kDstVa, 4 << 20); // ~200 ms at 20 MB/s
	pad_ib(v);
	std::memcpy(ib, v.data(), v.size() * 4);
	uint32_t ctx = rig.ctx_alloc(c, fd);
	long r;
	uint64_t seq = rig.submit(c, fd, ctx, kIbVa, static_cast<uint32_t>(v.size() * 4), &r);
	cr_assert_eq(r, 0);
	std::atomic<bool> done{false};
	std::thread waiter([&] {
		FakeCaller me(1000);
		uint64_t status = 1;
		rig.wait_cs(me, fd, ctx, seq, ~0ull, &status);
		done = true;
	});
	std::this_thread::sleep_for(std::chrono::milliseconds(20));
	auto t0 = std::chrono::steady_clock::now();
	cr_assert_neq(rig.gem_create(c, fd, 4096), 0u);
	double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
	cr_assert_lt(dt, 0.05, "an ioctl during WAIT_CS took %f s", dt);
	cr_assert(!done.load(), "the copy should still be running");
	auto wait_idle = [&](uint32_t h, uint64_t rel_ns) {
		timespec ts{};
		clock_gettime(CLOCK_MONOTONIC, &ts);
		uint64_t t = static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec) + rel_ns;
		GemWaitIdle w{h, 0, t};
		cr_assert_eq(rig.amdgpu(c, fd, GEM_WAIT_IDLE, &w), 0);
		uint32_t status;
		std::memcpy(&status, &w, 4);
		return status;
	};
	cr_assert_eq(wait_idle(hd, 5 * 1000 * 1000), 1u, "destination busy during the copy");
	cr_assert_eq(wait_idle(hib, 0), 0u, "the IB is not a copy operand");
	waiter.join();
	cr_assert(done.load());
	cr_assert_eq(wait_idle(hd, 0), 0u, "idle once the job is done");
	munmap(ib, 4096);
}

Test(concurrency, wait_events_woken_by_set_event)
{
	Rig rig(make_machine({0x1111}));
	FakeCaller c(1000);
	int kfd = rig.open_kfd(c);
	abi::kfd::CreateEvent e{};
	e.event_type = abi::kfd::EVENT_SIGNAL;
	cr_assert_eq(rig.kfd(c, kfd, abi::kfd::CREATE_EVENT, &e), 0);
	std::atomic<uint32_t> result{99};
	std::thread waiter([&] {
		FakeCaller me(1000);
		abi::kfd::EventData ed{};
		ed.event_id = e.event_id;
		abi::kfd::WaitEvents w{reinterpret_cast<uint64_t>(&ed), 1, 1, 0xffffffffu, 9};
		if (rig.kfd(me, kfd, abi::kfd::WAIT_EVENTS, &w) == 0)
			result = w.wait_result;
	});
	std::this_thread::sleep_for(std::chrono::milliseconds(30));
	abi::kfd::GetVersion ver{};
	cr_assert_eq(rig.kfd(c, kfd, abi::kfd::GET_VERSION, &ver, abi::kIocRead), 0, "not blocked by the waiter");
	cr_assert_eq(result.load(), 99u);
	abi::kfd::EventId id{e.event_id, 0};
	cr_assert_eq(rig.kfd(c, kfd, abi::kfd::SET_EVENT, &id, abi::kIocWrite), 0);
	waiter.join();
	cr_assert_eq(result.load(), abi::kfd::WAIT_COMPLETE);
}
