// SPDX-License-Identifier: GPL-2.0-only
//
// Memory objects of the model: fds, memfd backings, BOs, VMs, fences.
#include "model/state.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace kfdemu::detail {

Fd &Fd::operator=(Fd &&o) noexcept
{
	if (this != &o) {
		if (fd_ >= 0)
			::close(fd_);
		fd_ = o.fd_;
		o.fd_ = -1;
	}
	return *this;
}

Fd::~Fd()
{
	if (fd_ >= 0)
		::close(fd_);
}

std::shared_ptr<Backing> Backing::create(uint64_t size, const char *name, int *err)
{
	std::shared_ptr<Backing> b(new Backing());
	int fd = ::memfd_create(name, MFD_CLOEXEC);
	if (fd < 0) {
		*err = -errno;
		return nullptr;
	}
	b->fd_ = Fd(fd);
	if (::ftruncate(fd, static_cast<off_t>(size)) != 0) {
		*err = -ENOMEM;
		return nullptr;
	}
	struct stat st {};
	if (::fstat(fd, &st) != 0) {
		*err = -errno;
		return nullptr;
	}
	b->key_ = FileKey{st.st_dev, st.st_ino};
	b->size_ = size;
	if (size) {
		void *p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
		if (p == MAP_FAILED) {
			*err = -ENOMEM;
			return nullptr;
		}
		b->base_ = static_cast<uint8_t *>(p);
	}
	return b;
}

int Backing::populate()
{
	if (size_ && ::fallocate(fd_.get(), 0, 0, static_cast<off_t>(size_)) != 0)
		return -ENOMEM;
	// The daemon's own mapping too (the emulated SDMA copies through it):
	// its page-table entries made now, not one fault per page inside a
	// DMA. Before Linux 5.14 (EINVAL) the copy makes them as it goes.
	if (size_)
		(void)::madvise(base_, size_, MADV_POPULATE_WRITE);
	return 0;
}

Backing::~Backing()
{
	if (base_)
		::munmap(base_, size_);
}

void UserptrLedger::add(pid_t tgid, uint64_t bytes, bool gem)
{
	std::lock_guard lk(mu_);
	auto &e = m_[tgid];
	e.first += bytes;
	if (e.first > e.second)
		e.second = e.first;
	if (!gem)
		return;
	all_.first += bytes;
	if (all_.first > all_.second)
		all_.second = all_.first;
}

void UserptrLedger::sub(pid_t tgid, uint64_t bytes, bool gem)
{
	std::lock_guard lk(mu_);
	auto &e = m_[tgid];
	const uint64_t gone = std::min(e.first, bytes);
	e.first -= gone;
	if (gem)
		all_.first -= std::min(all_.first, gone);
}

std::pair<uint64_t, uint64_t> UserptrLedger::gem_all() const
{
	std::lock_guard lk(mu_);
	return all_;
}

std::pair<uint64_t, uint64_t> UserptrLedger::get(pid_t tgid) const
{
	std::lock_guard lk(mu_);
	auto it = m_.find(tgid);
	return it == m_.end() ? std::pair<uint64_t, uint64_t>{0, 0} : it->second;
}

Bo::~Bo()
{
	if (type == BoType::Userptr && ledger)
		ledger->sub(userptr_tgid, size, userptr_gem);
	if (vram_used && in_vram)
		*vram_used -= size;
	if (gtt_used && in_gtt)
		*gtt_used -= size;
	if (kfd_vram_used)
		*kfd_vram_used -= size;
	if (kfd_limit)
		kfd_limit->unreserve(kfd_system, kfd_ttm);
}

bool KfdMemLimit::reserve(uint64_t system, uint64_t ttm)
{
	std::lock_guard lk(mu_);
	if (system_used_ + system > max_system_ || ttm_used_ + ttm > max_ttm_)
		return false;
	system_used_ += system;
	ttm_used_ += ttm;
	return true;
}

void KfdMemLimit::unreserve(uint64_t system, uint64_t ttm)
{
	std::lock_guard lk(mu_);
	system_used_ -= std::min(system_used_, system);
	ttm_used_ -= std::min(ttm_used_, ttm);
}

// ---- Vm -------------------------------------------------------------------

bool Vm::overlaps(uint64_t start, uint64_t size) const
{
	uint64_t end = start + size;
	auto it = maps_.lower_bound(start);
	if (it != maps_.end() && it->first < end)
		return true;
	if (it != maps_.begin()) {
		--it;
		if (it->first + it->second.size > start)
			return true;
	}
	return false;
}

void Vm::add(Mapping m)
{
	by_bo_[m.bo.get()].insert(m.start);
	const uint64_t start = m.start;
	maps_.emplace(start, std::move(m));
}

std::map<uint64_t, Mapping>::iterator Vm::erase(std::map<uint64_t, Mapping>::iterator it)
{
	auto idx = by_bo_.find(it->second.bo.get());
	if (idx != by_bo_.end()) {
		idx->second.erase(it->first);
		if (idx->second.empty())
			by_bo_.erase(idx);
	}
	return maps_.erase(it);
}

int Vm::insert(Mapping m)
{
	if (overlaps(m.start, m.size))
		return -EINVAL;
	add(std::move(m));
	return 0;
}

const Mapping *Vm::find(uint64_t va) const
{
	auto it = maps_.upper_bound(va);
	if (it == maps_.begin())
		return nullptr;
	--it;
	if (va < it->first + it->second.size)
		return &it->second;
	return nullptr;
}

bool Vm::remove(const Bo *bo, uint64_t start)
{
	auto it = maps_.find(start);
	if (it == maps_.end() || it->second.bo.get() != bo)
		return false;
	erase(it);
	return true;
}

void Vm::clear(uint64_t start, uint64_t size)
{
	uint64_t end = start + size;
	std::vector<Mapping> keep;
	auto it = maps_.lower_bound(start);
	if (it != maps_.begin())
		--it;
	while (it != maps_.end() && it->first < end) {
		Mapping &m = it->second;
		uint64_t mend = m.start + m.size;
		if (mend <= start) {
			++it;
			continue;
		}
		if (m.start < start) {
			Mapping head = m;
			head.size = start - m.start;
			keep.push_back(head);
		}
		if (mend > end) {
			Mapping tail = m;
			tail.start = end;
			tail.offset = m.offset + (end - m.start);
			tail.size = mend - end;
			keep.push_back(tail);
		}
		it = erase(it);
	}
	for (auto &m : keep)
		add(std::move(m));
}

void Vm::remove_bo(const Bo *bo)
{
	auto idx = by_bo_.find(bo);
	if (idx == by_bo_.end())
		return;
	const std::set<uint64_t> starts = idx->second;
	for (uint64_t s : starts)
		erase(maps_.find(s));
}

void Vm::remove_gem_mappings(const Bo *bo)
{
	auto idx = by_bo_.find(bo);
	if (idx == by_bo_.end())
		return;
	const std::set<uint64_t> starts = idx->second;
	for (uint64_t s : starts)
		if (auto it = maps_.find(s); !it->second.kfd)
			erase(it);
}

std::vector<Mapping> Vm::of_bo(const Bo *bo) const
{
	std::vector<Mapping> v;
	if (auto idx = by_bo_.find(bo); idx != by_bo_.end())
		for (uint64_t s : idx->second)
			v.push_back(maps_.at(s));
	return v;
}

void Fence::signal(int err)
{
	{
		std::lock_guard lk(mu);
		done = true;
		error = err;
	}
	cv.notify_all();
}

uint32_t DrmFile::handle_of(const Bo *bo) const
{
	auto it = by_bo_.find(bo);
	return it == by_bo_.end() ? 0 : *it->second.begin();
}

uint32_t DrmFile::handle_of_export(const Bo *exporter) const
{
	auto it = by_exporter_.find(exporter);
	return it == by_exporter_.end() ? 0 : *it->second.begin();
}

uint32_t DrmFile::lowest_free_handle() const
{
	uint32_t h = taken_below_;
	for (auto it = handles_.find(h); it != handles_.end() && it->first == h; ++it)
		++h;
	return h;
}

void DrmFile::add_handle(uint32_t h, std::shared_ptr<Bo> bo)
{
	by_bo_[bo.get()].insert(h);
	by_exporter_[bo->exporter()].insert(h);
	handles_[h] = std::move(bo);
	if (h == taken_below_)
		taken_below_ = lowest_free_handle();
}

std::shared_ptr<Bo> DrmFile::take_handle(uint32_t h)
{
	auto it = handles_.find(h);
	if (it == handles_.end())
		return nullptr;
	std::shared_ptr<Bo> bo = std::move(it->second);
	handles_.erase(it);
	for (auto *idx : {&by_bo_, &by_exporter_}) {
		auto e = idx->find(idx == &by_bo_ ? bo.get() : bo->exporter());
		if (e != idx->end() && e->second.erase(h) && e->second.empty())
			idx->erase(e);
	}
	taken_below_ = std::min(taken_below_, h);
	return bo;
}

uint64_t Device::alloc_fake_offset(const std::shared_ptr<Bo> &bo)
{
	uint64_t off = next_fake_offset;
	next_fake_offset += page_align(bo->size ? bo->size : kPage);
	if (by_offset.size() > 1024 && by_offset.size() % 512 == 0)
		for (auto it = by_offset.begin(); it != by_offset.end();)
			it = it->second.expired() ? by_offset.erase(it) : std::next(it);
	by_offset[off] = bo;
	return off;
}

std::shared_ptr<Bo> Device::bo_at_offset(uint64_t off)
{
	auto it = by_offset.upper_bound(off);
	if (it == by_offset.begin())
		return nullptr;
	--it;
	auto bo = it->second.lock();
	if (!bo || off >= it->first + page_align(bo->size))
		return nullptr;
	return bo;
}

Pdd *KfdProcess::pdd_by_user_id(uint32_t id)
{
	for (auto &p : pdds)
		if (p.user_gpu_id == id)
			return &p;
	return nullptr;
}

Pdd *KfdProcess::pdd_by_actual_id(uint32_t id)
{
	for (auto &p : pdds)
		if (p.dev->gpu_id == id)
			return &p;
	return nullptr;
}

} // namespace kfdemu::detail
