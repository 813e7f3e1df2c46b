// SPDX-License-Identifier: GPL-2.0-only
//
// SdmaEngine: DmaEngine on an amdgpu render node through libdrm_amdgpu.
//
// One per GPU (and thread). It owns ONE context, ONE IB BO (GTT, CPU
// mapped, GPU mapped, sized for `ib_packets` copy packets) and ONE BO list
// for the current set of BOs (IB + staging + imported buffers), rebuilt only
// when that set changes; all are reused across chunks and BOs.
//
// The plugin's use (copy/gpu_copy.cpp, one GPU's dump or restore):
//   auto eng = SdmaEngine::create(render_fd);
//   ImportFeed bufs(*eng, dmabuf_specs); // imports on worker threads
//   auto stats = transfer_to_file(*eng, bufs, pages, bound); // or _from_
// (import_dmabuf/release_buffers are the one-at-a-time path tests use.)
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <optional>
#include <span>
#include <vector>

#include "base/result.h"
#include "config/config.h"
#include "copy/dma_engine.h"
#include "copy/sdma_packets.h"
#include "copy/transfer.h"
#include "device/amdgpu.h"

namespace amdcr {

struct SdmaEngineOptions {
	// Copy packets one submission may carry (sizes the IB BO).
	size_t ib_packets = 4096;
	// Wait per submission before giving up with ETIMEDOUT (KFD_SDMA_TIMEOUT).
	uint64_t fence_timeout_ns = kDefaultSdmaTimeoutSeconds * 1'000'000'000;
};

class SdmaEngine final : public DmaEngine {
public:
	// `render_fd` stays the caller's (libdrm dups it).
	static Result<std::unique_ptr<SdmaEngine>> create(int render_fd,
							  SdmaEngineOptions opts = {});
	~SdmaEngine() override;

	uint32_t family_id() const { return dev_.family_id(); }
	const SdmaCaps &caps() const { return caps_; }
	const Device &device() const { return dev_; }

	// Imports a dma-buf and maps it. `size` (e.g. the KFD bucket's) is
	// the bytes to copy; 0 means the whole dma-buf; larger is EINVAL.
	Result<GpuBuffer> import_dmabuf(int dmabuf_fd, uint64_t size = 0);

	struct DmabufSpec {
		int fd = -1;
		uint64_t size = 0; // as for import_dmabuf
	};

	// Takes over a BO imported and mapped elsewhere (ImportFeed's threads)
	// as one of this engine's buffers; its handle is the engine's alone
	// (see Mapped).
	GpuBuffer adopt(Bo bo, VaMapping va, uint64_t size);

	// Drops every imported buffer (no submission may be outstanding).
	void release_buffers();

	Result<uint64_t> attach_staging(void *ptr, size_t size) override;
	void detach_staging() override;
	uint64_t max_bytes_per_range() const override { return caps_.max_bytes_per_packet; }
	size_t max_ranges_per_submission() const override { return max_packets_; }
	Result<uint64_t> submit(std::span<const CopyRange> ranges) override;
	Status wait(uint64_t ticket) override;

private:
	friend class ImportFeed;
	// A BO with its VA mapping in this engine. `sole` when nothing else in
	// the process can hold the BO's handle (the staging userptr BO, the
	// KFD dma-bufs ImportFeed imports): it then goes with one kernel round
	// trip, the GEM close (VaMapping::close_with); otherwise (a dma-buf of
	// a BO this process may hold itself on the same GPU: libdrm shares the
	// handle) with an UNMAP and the close.
	struct Mapped {
		Mapped(Bo b, VaMapping v, bool only) : bo(std::move(b)), va(std::move(v)), sole(only) {}
		Mapped(Mapped &&) noexcept = default;
		Mapped &operator=(Mapped &&) = delete;
		~Mapped()
		{
			if (sole)
				va.close_with(std::move(bo));
			else
				VaMapping unmapped = std::move(va); // before bo is closed
		}
		Bo bo;
		VaMapping va;
		bool sole = false;
	};

	SdmaEngine(Device dev, Context ctx, Bo ib, VaMapping ib_va, CpuMapping ib_cpu,
		   SdmaEngineOptions opts);
	Status refresh_bo_list();
	void drop_buffers();
	Status wait_outstanding();

	// Destroyed in reverse order: list, buffers, staging, IB, context,
	// then the device.
	Device dev_;
	SdmaCaps caps_;
	Context ctx_;
	Bo ib_;
	VaMapping ib_va_;
	CpuMapping ib_cpu_;
	std::optional<Mapped> staging_;
	std::vector<Mapped> buffers_;
	BoList list_;
	bool list_stale_ = true;
	SdmaEngineOptions opts_;
	size_t ib_dwords_capacity_ = 0;
	size_t max_packets_ = 0;
	std::optional<DmaFence> outstanding_;
};

// A BufferFeed that imports dma-bufs into `engine` on a few threads, ahead
// of the transfer that consumes them: each import and VA map is a kernel
// round trip, and with thousands of small BOs they cost more than the
// copy. The transfer gets buffer i as soon as it is imported, so imports
// overlap the DMA and the file I/O. The engine itself is only touched from
// the consumer's thread (get()). Destroy the feed before the engine.
// The dma-bufs must be of BOs no libdrm device of this process holds a
// handle to (KFD's CHECKPOINT/RESTORE dma-bufs in CRIU's process): the
// engine closes each import without a separate unmap (see Mapped).
class ImportFeed final : public BufferFeed {
public:
	ImportFeed(SdmaEngine &engine, std::span<const SdmaEngine::DmabufSpec> specs,
		   unsigned threads = 4);
	~ImportFeed() override;
	ImportFeed(const ImportFeed &) = delete;
	ImportFeed &operator=(const ImportFeed &) = delete;

	size_t count() const override { return specs_.size(); }
	uint64_t size(size_t i) const override { return specs_[i].size; }
	Result<GpuBuffer> get(size_t i) override;

private:
	struct Slot;
	void work();

	SdmaEngine &engine_;
	std::vector<SdmaEngine::DmabufSpec> specs_;
	std::unique_ptr<Slot[]> slots_;
	std::mutex mu_;
	std::condition_variable ready_;
	size_t next_ = 0;	// next index a worker claims
	bool stop_ = false;
	std::vector<std::jthread> workers_;
};

} // namespace amdcr
