// SPDX-License-Identifier: GPL-2.0-only
//
// Scoped<T, Traits>: one move-only owner template for every non-fd handle
// (libdrm device/BO/context handles, mappings, ...). Traits provides
// `static T invalid()` and `static void free(T)`.
#pragma once

#include <utility>

namespace amdcr {

template <typename T, typename Traits>
class Scoped {
public:
	Scoped() : v_(Traits::invalid()) {}
	explicit Scoped(T v) : v_(v) {}
	Scoped(const Scoped &) = delete;
	Scoped &operator=(const Scoped &) = delete;
	Scoped(Scoped &&o) noexcept : v_(std::exchange(o.v_, Traits::invalid())) {}
	Scoped &operator=(Scoped &&o) noexcept
	{
		if (this != &o)
			reset(std::exchange(o.v_, Traits::invalid()));
		return *this;
	}
	~Scoped() { reset(); }

	T get() const { return v_; }
	bool valid() const { return v_ != Traits::invalid(); }
	explicit operator bool() const { return valid(); }
	[[nodiscard]] T release() { return std::exchange(v_, Traits::invalid()); }
	// Frees the handle held, unless it is `v` itself (as UniqueFd::reset).
	void reset(T v = Traits::invalid())
	{
		if (valid() && v_ != v)
			Traits::free(v_);
		v_ = v;
	}

private:
	T v_;
};

// Runs a callable at scope exit.
template <typename F>
class ScopeExit {
public:
	explicit ScopeExit(F f) : f_(std::move(f)) {}
	ScopeExit(const ScopeExit &) = delete;
	ScopeExit &operator=(const ScopeExit &) = delete;
	~ScopeExit() { f_(); }

private:
	F f_;
};

} // namespace amdcr
