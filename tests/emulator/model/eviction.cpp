// SPDX-License-Identifier: GPL-2.0-only
//
// VRAM eviction, as amdgpu's TTM placement and amdkfd's eviction fences do
// it, reduced to what a client and a checkpoint can see:
//
// - A VRAM BO is placed in VRAM when it is created. When VRAM is full, the
//   least recently placed BOs of the GPU are moved to GTT (contents kept:
//   a BO's memory is the same memfd wherever it resides) until the new one
//   fits. Not evictable: a BO an unfinished SDMA job uses, and the KFD BOs
//   of the calling process (TTM asks amdkfd_fence_check_mm: a KFD process
//   needs all its BOs resident). Nothing a client can do pins a BO here.
//   When moving BOs does not free enough, SVM ranges of other processes
//   in that VRAM migrate to system memory (svm.cpp, svm_evict_vram).
// - GEM_CREATE of a VRAM-only BO that evicting cannot make room for is
//   retried with VRAM|GTT (amdgpu_gem_create_ioctl) and lives in GTT. A
//   BO created with VRAM|GTT goes to GTT without evicting anything when
//   VRAM is full (TTM tries every allowed placement's free space before it
//   evicts).
// - KFD's allocations (ALLOC_MEMORY_OF_GPU, CRIU RESTORE's BOs) first pass
//   KFD's own limit, KFD's VRAM bytes against the VRAM size
//   (amdgpu_amdkfd_reserve_mem_limit), then need the room: ENOMEM without
//   it. KFD's limit ignores GEM BOs, which is why a KFD allocation evicts
//   them.
// - Evicting a KFD BO signals its process's eviction fence: the process's
//   queues are evicted (one count of evict_count, as a CRIU pause is one)
//   and a restore is due after MachineDesc::restore_delay_ms (the kernel's
//   100 ms). The restore worker then moves every VRAM BO of the process
//   back to VRAM, evicting others as above; if they do not fit it tries
//   again after the same delay. Then the
//   queues run again (unless a CRIU pause still holds them), and
//   mem_info_vram_used is written again (the ioctls that evict write it
//   as they return).
// - A GEM BO moved to GTT stays there (the kernel moves it back when a CS
//   uses it; the model's CS does not).
// - GTT has a size (MemoryLimits::gtt_size, per GPU): a BO bigger than its
//   domain's manager fails at once (amdgpu_bo_validate_size: with GTT among
//   the domains GTT's size counts, else VRAM's), so a VRAM-only GEM BO no
//   VRAM can hold is retried with VRAM|GTT and fails only past GTT's size.
//   GTT BOs, and VRAM BOs placed in or evicted to GTT, count in GTT's use
//   (mem_info_gtt_used); a BO that does not fit in what is left fails with
//   ENOMEM (ttm_bo_validate's ENOSPC as userspace sees it). The kernel
//   would first move idle GEM BOs out of GTT to system memory: the model
//   moves nothing out of GTT. An evicted VRAM BO that GTT cannot take is
//   in system memory, counted nowhere.
// - KFD's GTT and userptr BOs first pass KFD's machine-wide limits
//   (KfdMemLimit: system memory for both, TTM for GTT): ENOMEM past them.
#include "model/state.h"

#include <algorithm>
#include <cerrno>

namespace kfdemu::detail {

namespace {

using Clock = std::chrono::steady_clock;

} // namespace

int ModelImpl::place_bo(const std::shared_ptr<Bo> &bo, const VramClient &who)
{
	Device &d = *bo->dev;
	bo->gtt_used = d.gtt_used;
	// amdgpu_bo_validate_size (KFD's userptr BOs are GTT BOs to it);
	// GEM_CREATE retries a VRAM-only BO with GTT.
	const bool gtt_domain = bo->type == BoType::Gtt || bo->type == BoType::Userptr || who.gtt_too;
	if (bo->type == BoType::Vram && !gtt_domain && bo->size >= d.vram_size && (who.kfd || bo->size >= d.gtt_size))
		return -ENOMEM;
	if ((bo->type == BoType::Vram || bo->type == BoType::Gtt || bo->type == BoType::Userptr) && gtt_domain &&
	    bo->size >= d.gtt_size)
		return -ENOMEM;
	if (who.kfd && (bo->type == BoType::Gtt || bo->type == BoType::Userptr)) {
		const uint64_t ttm = bo->type == BoType::Gtt ? bo->size : 0;
		if (!kfd_limit_->reserve(bo->size, ttm))
			return -ENOMEM;
		bo->kfd_limit = kfd_limit_;
		bo->kfd_system = bo->size;
		bo->kfd_ttm = ttm;
	}
	if (bo->type == BoType::Vram)
		return place_vram_bo(bo, who);
	if (bo->type == BoType::Gtt && !put_in_gtt(bo))
		return -ENOMEM;
	return 0;
}

bool ModelImpl::put_in_gtt(const std::shared_ptr<Bo> &bo)
{
	Device &d = *bo->dev;
	if (*d.gtt_used + bo->size > d.gtt_size)
		return false;
	*d.gtt_used += bo->size;
	bo->in_gtt = true;
	return true;
}

int ModelImpl::place_vram_bo(const std::shared_ptr<Bo> &bo, const VramClient &who)
{
	Device &d = *bo->dev;
	bo->vram_used = d.vram_used;
	if (who.kfd) {
		if (*d.kfd_vram_used + bo->size > d.vram_size)
			return -ENOMEM;
		if (!make_vram_room(d, bo->size, who.current))
			return -ENOMEM;
		*d.kfd_vram_used += bo->size;
		bo->kfd_vram_used = d.kfd_vram_used;
		bo->kfd_tgid = who.current;
		put_in_vram(d, bo);
		return 0;
	}
	const bool fits = *d.vram_used + bo->size <= d.vram_size;
	if (fits || (!who.gtt_too && make_vram_room(d, bo->size, who.current))) {
		put_in_vram(d, bo);
		return 0;
	}
	if (!put_in_gtt(bo))
		return -ENOMEM;
	++counters_->gem_gtt_fallbacks; // created in GTT
	return 0;
}

bool ModelImpl::make_vram_room(Device &d, uint64_t size, pid_t current)
{
	if (size > d.vram_size)
		return false;
	const uint64_t used = *d.vram_used;
	uint64_t freed = 0;
	std::vector<std::shared_ptr<Bo>> victims;
	for (auto it = d.vram_lru.begin(); it != d.vram_lru.end() && used - freed + size > d.vram_size;) {
		std::shared_ptr<Bo> bo = it->second.lock();
		if (!bo) {
			it = d.vram_lru.erase(it);
			continue;
		}
		++it;
		if (bo->busy > 0 || (bo->kfd && bo->kfd_tgid == current))
			continue;
		freed += bo->size;
		victims.push_back(std::move(bo));
	}
	const uint64_t short_by = used - freed + size > d.vram_size ? used - freed + size - d.vram_size : 0;
	if (short_by > svm_evictable(d, current))
		return false;
	for (auto &v : victims)
		evict_bo(v);
	if (short_by)
		svm_evict_vram(d, short_by, current);
	return true;
}

void ModelImpl::put_in_vram(Device &d, const std::shared_ptr<Bo> &bo)
{
	*d.vram_used += bo->size;
	bo->in_vram = true;
	if (bo->in_gtt.exchange(false))
		*d.gtt_used -= bo->size;
	bo->lru = d.next_lru++;
	d.vram_lru[bo->lru] = bo;
	// A freed BO leaves its entry (it may die on an engine thread, without
	// the lock): dropped here now and then, and by make_vram_room's walk.
	if (d.vram_lru.size() > 1024 && d.vram_lru.size() % 512 == 0)
		for (auto it = d.vram_lru.begin(); it != d.vram_lru.end();)
			it = it->second.expired() ? d.vram_lru.erase(it) : std::next(it);
	if (bo->evictions)
		d.bytes_moved += bo->size; // back from GTT
}

void ModelImpl::evict_bo(const std::shared_ptr<Bo> &bo)
{
	Device &d = *bo->dev;
	d.vram_lru.erase(bo->lru);
	bo->in_vram = false;
	*d.vram_used -= bo->size;
	(void)put_in_gtt(bo); // or to system memory when GTT is full
	++bo->evictions;
	++d.num_evictions;
	d.bytes_moved += bo->size;
	if (!bo->kfd)
		return;
	auto it = procs_.find(bo->kfd_tgid);
	if (it == procs_.end())
		return;
	KfdProcess &p = *it->second;
	if (p.mem_evicted)
		return; // its queues are already evicted, its restore scheduled
	p.mem_evicted = true;
	++p.evict_count;
	++p.mem_evictions;
	++counters_->process_evictions;
	p.restore_at = Clock::now() + std::chrono::milliseconds(machine_.restore_delay_ms);
	restore_kick_ = true;
	restore_cv_.notify_all();
}

bool ModelImpl::restore_process_bos(KfdProcess &p)
{
	for (Pdd &pdd : p.pdds)
		for (auto &[id, bo] : pdd.bos) {
			if (bo->type != BoType::Vram || bo->in_vram)
				continue;
			if (!make_vram_room(*pdd.dev, bo->size, p.tgid))
				return false;
			put_in_vram(*pdd.dev, bo);
			++counters_->bo_restores;
		}
	return true;
}

Clock::time_point ModelImpl::restore_due(Clock::time_point now)
{
	Clock::time_point next = Clock::time_point::max();
	for (auto &[pid, p] : procs_) {
		if (!p->mem_evicted)
			continue;
		if (p->restore_at <= now) {
			if (restore_process_bos(*p)) {
				p->mem_evicted = false;
				if (p->evict_count > 0)
					--p->evict_count;
				++p->mem_restores;
				++counters_->process_restores;
				publish_devices(); // mem_info_vram_used
				continue;
			}
			p->restore_at = now + std::chrono::milliseconds(machine_.restore_delay_ms);
		}
		next = std::min(next, p->restore_at);
	}
	return next;
}

void ModelImpl::restore_worker(std::stop_token st)
{
	Lock lk(mu_);
	while (!st.stop_requested()) {
		const Clock::time_point next = restore_due(Clock::now());
		// Woken by an eviction, a deadline or the stop.
		auto kicked = [this] { return restore_kick_; };
		if (next == Clock::time_point::max())
			restore_cv_.wait(lk, st, kicked);
		else
			restore_cv_.wait_until(lk, st, next, kicked);
		restore_kick_ = false;
	}
}

} // namespace kfdemu::detail
