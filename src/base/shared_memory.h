// SPDX-License-Identifier: GPL-2.0-only
//
// SharedMemory<T>: one T in an anonymous MAP_SHARED mapping of its own,
// constructed there and destroyed (then unmapped) by the one owner. A
// process forked afterwards shares the same T with its parent, so T holds
// nothing a process owns alone: atomics, plain data, futex words. Move-only;
// a moved-from owner holds nothing.
#pragma once

#include <sys/mman.h>

#include <cerrno>
#include <new>
#include <utility>

#include "base/result.h"

namespace amdcr {

template <typename T>
class SharedMemory {
public:
	// `what` names the memory in the error.
	static Result<SharedMemory> create(const char *what)
	{
		void *p = ::mmap(nullptr, sizeof(T), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return errno_error(errno, std::string("mmap of ") + what);
		return SharedMemory(new (p) T());
	}
	SharedMemory(SharedMemory &&o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
	SharedMemory &operator=(SharedMemory &&o) noexcept
	{
		if (this != &o) {
			reset();
			p_ = std::exchange(o.p_, nullptr);
		}
		return *this;
	}
	SharedMemory(const SharedMemory &) = delete;
	SharedMemory &operator=(const SharedMemory &) = delete;
	~SharedMemory() { reset(); }

	T &operator*() const { return *p_; }
	T *operator->() const { return p_; }
	T *get() const { return p_; }

private:
	explicit SharedMemory(T *p) : p_(p) {}
	void reset()
	{
		if (!p_)
			return;
		p_->~T();
		::munmap(p_, sizeof(T));
		p_ = nullptr;
	}
	T *p_ = nullptr;
};

} // namespace amdcr
