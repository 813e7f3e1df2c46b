// SPDX-License-Identifier: GPL-2.0-only
#include "copy/sdma_engine.h"

#include <amdgpu_drm.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <thread>

#include "base/file_io.h"

namespace amdcr {

Result<std::unique_ptr<SdmaEngine>> SdmaEngine::create(int render_fd, SdmaEngineOptions opts)
{
	if (opts.ib_packets == 0)
		return make_error(EINVAL, "SDMA engine: ib_packets is 0");
	auto dev = Device::initialize(render_fd);
	if (!dev)
		return std::move(dev).error();
	auto ctx = Context::create(*dev);
	if (!ctx)
		return std::move(ctx).error();
	const size_t page = page_size();
	const size_t ib_bytes = (sdma_ib_dwords(opts.ib_packets) * 4 + page - 1) / page * page;
	auto ib = Bo::alloc(*dev, ib_bytes, AMDGPU_GEM_DOMAIN_GTT);
	if (!ib)
		return std::move(ib).error().context("SDMA IB");
	auto ib_va = VaMapping::map(*dev, *ib);
	if (!ib_va)
		return std::move(ib_va).error().context("SDMA IB");
	auto ib_cpu = CpuMapping::map(*ib);
	if (!ib_cpu)
		return std::move(ib_cpu).error().context("SDMA IB");
	return std::unique_ptr<SdmaEngine>(new SdmaEngine(std::move(*dev), std::move(*ctx), std::move(*ib),
							   std::move(*ib_va), std::move(*ib_cpu), opts));
}

SdmaEngine::SdmaEngine(Device dev, Context ctx, Bo ib, VaMapping ib_va, CpuMapping ib_cpu,
		       SdmaEngineOptions opts)
	: dev_(std::move(dev)), caps_(SdmaCaps::for_family(dev_.family_id())), ctx_(std::move(ctx)),
	  ib_(std::move(ib)), ib_va_(std::move(ib_va)), ib_cpu_(std::move(ib_cpu)), opts_(opts)
{
	ib_dwords_capacity_ = ib_.size() / 4;
	max_packets_ = sdma_max_packets(ib_dwords_capacity_);
}

SdmaEngine::~SdmaEngine()
{
	// Never free what a running job uses.
	if (outstanding_)
		(void)wait_fence(*outstanding_, opts_.fence_timeout_ns);
	list_ = BoList();
	drop_buffers();
}

Result<GpuBuffer> SdmaEngine::import_dmabuf(int dmabuf_fd, uint64_t size)
{
	auto bo = Bo::import_dmabuf(dev_, dmabuf_fd);
	if (!bo)
		return std::move(bo).error();
	if (size > bo->size())
		return make_error(EINVAL, "%s holds %" PRIu64 " bytes, %" PRIu64 " requested",
				  bo->name().c_str(), bo->size(), size);
	auto va = VaMapping::map(dev_, *bo);
	if (!va)
		return std::move(va).error();
	GpuBuffer out{va->va(), size ? size : bo->size()};
	buffers_.push_back(Mapped{std::move(*bo), std::move(*va), false});
	list_stale_ = true;
	return out;
}

GpuBuffer SdmaEngine::adopt(Bo bo, VaMapping va, uint64_t size)
{
	GpuBuffer out{va.va(), size ? size : bo.size()};
	buffers_.push_back(Mapped{std::move(bo), std::move(va), true});
	list_stale_ = true;
	return out;
}

struct ImportFeed::Slot {
	bool done = false;
	std::optional<Bo> bo;
	std::optional<VaMapping> va;
	std::optional<Error> error;
};

ImportFeed::ImportFeed(SdmaEngine &engine, std::span<const SdmaEngine::DmabufSpec> specs,
		       unsigned threads)
	: engine_(engine), specs_(specs.begin(), specs.end()),
	  slots_(std::make_unique<Slot[]>(specs.size()))
{
	const size_t n = std::clamp<size_t>(threads, 1, std::max<size_t>(specs_.size(), 1));
	for (size_t t = 0; t < n && !specs_.empty(); t++)
		workers_.emplace_back([this] { work(); });
}

ImportFeed::~ImportFeed()
{
	{
		std::lock_guard lk(mu_);
		stop_ = true;
	}
	workers_.clear(); // joins; imported but unconsumed BOs go with slots_
}

void ImportFeed::work()
{
	const Device &dev = engine_.device();
	for (;;) {
		size_t i;
		{
			std::lock_guard lk(mu_);
			if (stop_ || next_ >= specs_.size())
				return;
			i = next_++;
		}
		Slot s;
		auto bo = Bo::import_dmabuf(dev, specs_[i].fd);
		if (!bo) {
			s.error.emplace(std::move(bo).error());
		} else if (specs_[i].size > bo->size()) {
			s.error.emplace(make_error(EINVAL, "%s holds %" PRIu64 " bytes, %" PRIu64 " requested",
						   bo->name().c_str(), bo->size(), specs_[i].size));
		} else {
			auto va = VaMapping::map(dev, *bo);
			if (!va)
				s.error.emplace(std::move(va).error());
			else
				s.va.emplace(std::move(*va));
			s.bo.emplace(std::move(*bo));
		}
		std::lock_guard lk(mu_);
		s.done = true;
		if (s.error)
			stop_ = true; // the transfer stops at this buffer anyway
		// The mapping goes before its BO if the slot is dropped.
		slots_[i].bo = std::move(s.bo);
		slots_[i].va = std::move(s.va);
		slots_[i].error = std::move(s.error);
		slots_[i].done = true;
		ready_.notify_all();
	}
}

Result<GpuBuffer> ImportFeed::get(size_t i)
{
	std::unique_lock lk(mu_);
	ready_.wait(lk, [&] { return slots_[i].done || (stop_ && next_ <= i); });
	Slot &s = slots_[i];
	if (!s.done)
		return make_error(ECANCELED, "dma-buf %zu was not imported: an earlier import failed", i);
	if (s.error)
		return std::move(*s.error).context(strprintf("BO %zu", i));
	Bo bo = std::move(*s.bo);
	VaMapping va = std::move(*s.va);
	s.va.reset();
	s.bo.reset();
	lk.unlock();
	return engine_.adopt(std::move(bo), std::move(va), specs_[i].size);
}

void SdmaEngine::release_buffers()
{
	if (outstanding_)
		(void)wait_outstanding();
	list_ = BoList();
	drop_buffers();
	list_stale_ = true;
}

void SdmaEngine::drop_buffers()
{
	// Each Mapped goes with one or two kernel round trips (see Mapped);
	// thousands of them are spread over a few threads (libdrm's BO and VA
	// calls are thread-safe).
	constexpr size_t kThreads = 4, kWorthIt = 256;
	if (buffers_.size() < kWorthIt) {
		buffers_.clear();
		return;
	}
	std::vector<std::vector<Mapped>> parts(kThreads);
	for (size_t i = 0; i < buffers_.size(); i++)
		parts[i % kThreads].push_back(std::move(buffers_[i]));
	buffers_.clear();
	std::vector<std::jthread> pool;
	for (auto &part : parts)
		pool.emplace_back([&part] { part.clear(); });
}

Result<uint64_t> SdmaEngine::attach_staging(void *ptr, size_t size)
{
	if (staging_)
		return make_error(EBUSY, "SDMA engine: staging memory already attached");
	auto bo = Bo::from_user_mem(dev_, ptr, size);
	if (!bo)
		return std::move(bo).error();
	auto va = VaMapping::map(dev_, *bo);
	if (!va)
		return std::move(va).error();
	const uint64_t addr = va->va();
	staging_.emplace(Mapped{std::move(*bo), std::move(*va), true});
	list_stale_ = true;
	return addr;
}

void SdmaEngine::detach_staging()
{
	if (outstanding_)
		(void)wait_outstanding();
	list_ = BoList();
	staging_.reset();
	list_stale_ = true;
}

Status SdmaEngine::refresh_bo_list()
{
	if (!list_stale_ && list_.valid())
		return ok_status();
	std::vector<amdgpu_bo_handle> handles;
	handles.reserve(buffers_.size() + 2);
	handles.push_back(ib_.get());
	if (staging_)
		handles.push_back(staging_->bo.get());
	for (const auto &b : buffers_)
		handles.push_back(b.bo.get());
	list_ = BoList(); // destroy the old list before making the new one
	auto list = BoList::create(dev_, handles);
	if (!list)
		return std::move(list).error();
	list_ = std::move(*list);
	list_stale_ = false;
	return ok_status();
}

Result<uint64_t> SdmaEngine::submit(std::span<const CopyRange> ranges)
{
	if (outstanding_)
		return make_error(EBUSY, "SDMA engine: a submission is still outstanding");
	if (ranges.empty())
		return make_error(EINVAL, "SDMA engine: empty submission");
	if (auto st = refresh_bo_list(); !st)
		return std::move(st).error();
	std::span<uint32_t> ib(static_cast<uint32_t *>(ib_cpu_.ptr()), ib_dwords_capacity_);
	const size_t dwords = sdma_encode_copies(caps_, ranges, ib);
	if (dwords == 0)
		return make_error(E2BIG, "SDMA engine: %zu ranges do not fit an IB of %zu dwords",
				  ranges.size(), ib_dwords_capacity_);
	auto fence = submit_dma(ctx_, list_, ib_va_.va(), static_cast<uint32_t>(dwords));
	if (!fence)
		return std::move(fence).error();
	outstanding_ = *fence;
	return fence->seq();
}

Status SdmaEngine::wait(uint64_t ticket)
{
	if (!outstanding_ || outstanding_->seq() != ticket)
		return make_error(EINVAL, "SDMA engine: no outstanding submission %" PRIu64, ticket);
	return wait_outstanding();
}

Status SdmaEngine::wait_outstanding()
{
	const DmaFence f = *outstanding_;
	outstanding_.reset();
	auto st = wait_fence(f, opts_.fence_timeout_ns);
	if (!st && st.error().code() == ETIMEDOUT)
		return make_error(ETIMEDOUT,
				  "SDMA copy (job seq %" PRIu64 ") not finished after %.3g s, the limit %s sets "
				  "(default %" PRIu64 "): the GPU's DMA engine is hung or overloaded; "
				  "if it is only slow, raise %s",
				  f.seq(), static_cast<double>(opts_.fence_timeout_ns) / 1e9, kSdmaTimeoutEnv,
				  kDefaultSdmaTimeoutSeconds, kSdmaTimeoutEnv);
	return st;
}

} // namespace amdcr
