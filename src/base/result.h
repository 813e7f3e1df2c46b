// SPDX-License-Identifier: GPL-2.0-only
//
// The project's one error convention.
//
// A fallible function returns Result<T>: either a value or an Error, which
// carries a positive errno (what CRIU gets back, negated) and a message that
// says what failed and where. Functions do not log their errors: the caller
// with the most context logs once (at the hook boundary), so every failure
// appears in CRIU's log exactly once, with its whole story.
#pragma once

#include <cerrno>
#include <cstdarg>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

namespace amdcr {

// printf-style formatting into a std::string.
std::string strprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
std::string vstrprintf(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));

class Error {
public:
	Error(int code, std::string message) : code_(code > 0 ? code : EIO), message_(std::move(message)) {}

	// Positive errno.
	int code() const { return code_; }
	// Negative errno, as returned to CRIU.
	int neg() const { return -code_; }
	const std::string &message() const { return message_; }

	// Prefix the message with where it happened: "what: <message>".
	Error context(std::string_view what) const &
	{
		return Error(code_, std::string(what) + ": " + message_);
	}
	Error context(std::string_view what) &&
	{
		message_.insert(0, std::string(what) + ": ");
		return std::move(*this);
	}

private:
	int code_;
	std::string message_;
};

// An Error with a formatted message.
Error make_error(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// An Error from a positive or negative errno value: "<what>: <strerror>".
Error errno_error(int err, std::string_view what);

template <typename T>
class [[nodiscard]] Result {
public:
	Result(T value) : v_(std::in_place_index<0>, std::move(value)) {}
	Result(Error error) : v_(std::in_place_index<1>, std::move(error)) {}

	bool ok() const { return v_.index() == 0; }
	explicit operator bool() const { return ok(); }

	T &value() & { return std::get<0>(v_); }
	const T &value() const & { return std::get<0>(v_); }
	T &&value() && { return std::get<0>(std::move(v_)); }
	T &operator*() & { return value(); }
	const T &operator*() const & { return value(); }
	T &&operator*() && { return std::move(*this).value(); }
	T *operator->() { return &value(); }
	const T *operator->() const { return &value(); }

	const Error &error() const & { return std::get<1>(v_); }
	Error &&error() && { return std::get<1>(std::move(v_)); }

private:
	std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
public:
	Result() = default;
	Result(Error error) : e_(std::move(error)) {}

	bool ok() const { return !e_.has_value(); }
	explicit operator bool() const { return ok(); }
	const Error &error() const & { return *e_; }
	Error &&error() && { return std::move(*e_); }

private:
	std::optional<Error> e_;
};

using Status = Result<void>;

inline Status ok_status() { return Status(); }

} // namespace amdcr
