// SPDX-License-Identifier: GPL-2.0-only
//
// What the tests that drive Debian's libhsakmt share: CHECK_OK, system
// memory mapped to the GPUs, and an SDMA user queue that runs packets and
// waits for their end.
#pragma once

#include "check.h"

#include <hsakmt.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <thread>

#define CHECK_OK(expr) CHECK_EQ(int(expr), int(HSAKMT_STATUS_SUCCESS))

namespace kfdemu::test {

// System memory for the GPU: allocated, mapped, freed at the end.
struct SysMem {
	void *addr = nullptr;
	size_t size = 0;
	explicit SysMem(size_t n) : size(n)
	{
		HsaMemFlags f{};
		f.ui32.HostAccess = 1;
		f.ui32.ExecuteAccess = 1;
		f.ui32.PageSize = HSA_PAGE_SIZE_4KB;
		uint64_t alt = 0;
		if (!CHECK_OK(hsaKmtAllocMemory(0, size, f, &addr)) || !addr ||
		    !CHECK_OK(hsaKmtMapMemoryToGPU(addr, size, &alt))) {
			addr = nullptr;
			return;
		}
		std::memset(addr, 0, size);
	}
	~SysMem()
	{
		if (!addr)
			return;
		CHECK_OK(hsaKmtUnmapMemoryToGPU(addr));
		CHECK_OK(hsaKmtFreeMemory(addr, size));
	}
	SysMem(const SysMem &) = delete;
	SysMem &operator=(const SysMem &) = delete;
	uint64_t va(size_t off = 0) const { return uint64_t(uintptr_t(addr)) + off; }
	template <typename T> volatile T *at(size_t off) const
	{
		return reinterpret_cast<volatile T *>(static_cast<char *>(addr) + off);
	}
};

// An SDMA user queue (SDMA v4 packets, family AI on) on GPU `node` with a
// 16 KiB ring of system memory.
class SdmaQueue {
public:
	explicit SdmaQueue(uint32_t node) : ring_(kRing)
	{
		ok_ = ring_.addr && CHECK_OK(hsaKmtCreateQueue(node, HSA_QUEUE_SDMA, 100, HSA_QUEUE_PRIORITY_NORMAL,
							       ring_.addr, kRing, nullptr, &q_));
	}
	~SdmaQueue()
	{
		if (ok_)
			CHECK_OK(hsaKmtDestroyQueue(q_.QueueId));
	}
	SdmaQueue(const SdmaQueue &) = delete;
	SdmaQueue &operator=(const SdmaQueue &) = delete;
	bool ok() const { return ok_; }

	// COPY_LINEAR of n bytes (at most 4 MiB) from GPU address src to dst.
	void copy(uint64_t dst, uint64_t src, uint32_t n)
	{
		put({kOpCopy, n - 1, 0, uint32_t(src), uint32_t(src >> 32), uint32_t(dst), uint32_t(dst >> 32)});
	}
	// FENCE: the 32-bit value v stored at dst.
	void fence(uint64_t dst, uint32_t v) { put({kOpFence, uint32_t(dst), uint32_t(dst >> 32), v}); }
	// Rings the doorbell and waits until the engine has read every packet:
	// false when it has not after `ms` (a stopped queue, e.g. a VM fault).
	bool submit(int ms = 3000)
	{
		__atomic_store_n(q_.Queue_write_ptr_aql, wptr_, __ATOMIC_RELEASE);
		__atomic_store_n(q_.Queue_DoorBell_aql, wptr_, __ATOMIC_RELEASE);
		const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
		while (__atomic_load_n(q_.Queue_read_ptr_aql, __ATOMIC_ACQUIRE) != wptr_) {
			if (std::chrono::steady_clock::now() > end)
				return false;
			std::this_thread::sleep_for(std::chrono::milliseconds(1));
		}
		return true;
	}

private:
	static constexpr uint32_t kOpCopy = 1, kOpFence = 5;
	static constexpr size_t kRing = 16 << 10;
	void put(std::initializer_list<uint32_t> dw)
	{
		for (uint32_t v : dw) {
			*ring_.at<uint32_t>(wptr_ % kRing) = v;
			wptr_ += 4;
		}
	}
	SysMem ring_;
	HsaQueueResource q_{};
	uint64_t wptr_ = 0;
	bool ok_ = false;
};

} // namespace kfdemu::test
