// SPDX-License-Identifier: GPL-2.0-only
//
// UniqueFd: the one owner of a file descriptor. Move-only; closes on
// destruction; release() hands ownership out and must be used.
#pragma once

#include <unistd.h>

#include <utility>

namespace amdcr {

class UniqueFd {
public:
	UniqueFd() = default;
	explicit UniqueFd(int fd) : fd_(fd) {}
	UniqueFd(const UniqueFd &) = delete;
	UniqueFd &operator=(const UniqueFd &) = delete;
	UniqueFd(UniqueFd &&o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
	UniqueFd &operator=(UniqueFd &&o) noexcept
	{
		if (this != &o)
			reset(std::exchange(o.fd_, -1));
		return *this;
	}
	~UniqueFd() { reset(); }

	int get() const { return fd_; }
	bool valid() const { return fd_ >= 0; }
	explicit operator bool() const { return valid(); }

	[[nodiscard]] int release() { return std::exchange(fd_, -1); }
	void reset(int fd = -1)
	{
		if (fd_ >= 0 && fd_ != fd)
			::close(fd_);
		fd_ = fd;
	}

private:
	int fd_ = -1;
};

} // namespace amdcr
