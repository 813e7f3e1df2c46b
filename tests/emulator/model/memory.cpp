// SPDX-License-Identifier: GPL-2.0-only
//
// Memory objects of the model: fds, memfd backings, BOs, VMs, fences.
#include "model/state.h"

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
	if (vram_used)
		*vram_used -= size;
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

int Vm::insert(Mapping m)
{
	if (overlaps(m.start, m.size))
		return -EINVAL;
	maps_.emplace(m.start, std::move(m));
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
	maps_.erase(it);
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
		it = maps_.erase(it);
	}
	for (auto &m : keep)
		maps_.emplace(m.start, std::move(m));
}

void Vm::remove_bo(const Bo *bo)
{
	for (auto it = maps_.begin(); it != maps_.end();)
		it = it->second.bo.get() == bo ? maps_.erase(it) : std::next(it);
}

void Vm::remove_gem_mappings(const Bo *bo)
{
	for (auto it = maps_.begin(); it != maps_.end();)
		it = it->second.bo.get() == bo && !it->second.kfd ? maps_.erase(it) : std::next(it);
}

std::vector<Mapping> Vm::of_bo(const Bo *bo) const
{
	std::vector<Mapping> v;
	for (auto &[s, m] : maps_)
		if (m.bo.get() == bo)
			v.push_back(m);
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
	for (auto &[h, b] : handles)
		if (b.get() == bo)
			return h;
	return 0;
}

uint32_t DrmFile::lowest_free_handle() const
{
	uint32_t h = 1;
	for (auto &[k, v] : handles) {
		if (k != h)
			break;
		++h;
	}
	return h;
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
