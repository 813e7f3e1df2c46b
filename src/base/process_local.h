// SPDX-License-Identifier: GPL-2.0-only
//
// ProcessLocal<T>: a T that belongs to one process. fork() copies the
// parent's memory into the child, this object with it; the child's first
// get() finds another pid and makes a T of its own with the factory given
// at construction. The copy it inherited is abandoned, never destroyed:
// what it holds is the parent's (its fds may already be closed in the child
// and their numbers taken by other files, as CRIU closes every fd a task it
// forked inherited before it restores the task's own: close_old_fds), so
// its destructor must not run there. The abandoned copy stays allocated
// until the child execs or exits (a restored task's heap ends with the
// restore: CRIU's restorer unmaps every mapping not in the checkpoint).
//
// For state a process must never inherit; what a forked process shares
// with its parent by design is held beside it, outside (SharedMemory, or
// plain objects read only).
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <functional>
#include <memory>
#include <utility>

namespace amdcr {

template <typename T>
class ProcessLocal {
public:
	explicit ProcessLocal(std::function<T()> make) : make_(std::move(make)) {}
	ProcessLocal(const ProcessLocal &) = delete;
	ProcessLocal &operator=(const ProcessLocal &) = delete;
	~ProcessLocal() { abandon_if_inherited(); }

	// The calling process's T, made on its first call in this process.
	T &get()
	{
		abandon_if_inherited();
		if (!value_) {
			value_ = std::make_unique<T>(make_());
			owner_ = ::getpid();
		}
		return *value_;
	}
	// The calling process's T if get() made one here, else nullptr (none
	// yet, or only the one inherited from the parent).
	const T *find() const { return value_ && owner_ == ::getpid() ? value_.get() : nullptr; }

private:
	void abandon_if_inherited()
	{
		if (value_ && owner_ != ::getpid())
			(void)value_.release(); // the parent's: not ours to destroy
	}

	std::function<T()> make_;
	std::unique_ptr<T> value_;
	pid_t owner_ = 0; // the process value_ belongs to
};

} // namespace amdcr
