// SPDX-License-Identifier: GPL-2.0-only
#include "base/result.h"

#include <cstdio>
#include <cstring>

namespace amdcr {

std::string vstrprintf(const char *fmt, va_list ap)
{
	va_list copy;
	va_copy(copy, ap);
	const int n = std::vsnprintf(nullptr, 0, fmt, copy);
	va_end(copy);
	if (n <= 0)
		return {};
	std::string out(static_cast<size_t>(n), '\0');
	std::vsnprintf(out.data(), out.size() + 1, fmt, ap);
	return out;
}

std::string strprintf(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	std::string s = vstrprintf(fmt, ap);
	va_end(ap);
	return s;
}

Error make_error(int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	std::string s = vstrprintf(fmt, ap);
	va_end(ap);
	return Error(code, std::move(s));
}

Error errno_error(int err, std::string_view what)
{
	if (err < 0)
		err = -err;
	if (err == 0)
		err = EIO;
	char buf[128];
	// GNU strerror_r returns the message (maybe not in buf).
	const char *msg = strerror_r(err, buf, sizeof(buf));
	return Error(err, std::string(what) + ": " + msg);
}

} // namespace amdcr
