// SPDX-License-Identifier: GPL-2.0-only
//
// The error convention (base/result.h): an Error's errno is always positive
// (negated for CRIU), context prefixes the message, errno_error names the
// errno, strprintf formats any length.
#include <criterion/criterion.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "../common/assert_ok.h"
#include "base/result.h"

using namespace amdcr;

Test(error, code_is_a_positive_errno)
{
	cr_expect_eq(Error(ENOENT, "x").code(), ENOENT);
	cr_expect_eq(Error(ENOENT, "x").neg(), -ENOENT);
	cr_expect_eq(Error(0, "x").code(), EIO, "0 is no error code");
	cr_expect_eq(Error(-EINVAL, "x").code(), EIO, "a negative code is not taken as is");
}

Test(error, context_prefixes_the_message)
{
	const Error e = make_error(EINVAL, "bad %s %d", "value", 7);
	cr_expect_eq(e.message(), std::string("bad value 7"));
	const Error c = e.context("parsing");
	cr_expect_eq(c.message(), std::string("parsing: bad value 7"));
	cr_expect_eq(c.code(), EINVAL);
	cr_expect_eq(e.message(), std::string("bad value 7"), "the original is unchanged");
	Error moved = Error(ENOSPC, "full").context("write").context("dump");
	cr_expect_eq(moved.message(), std::string("dump: write: full"));
	cr_expect_eq(moved.code(), ENOSPC);
}

Test(error, errno_error_names_the_errno)
{
	const Error pos = errno_error(ENOENT, "open /x");
	cr_expect_eq(pos.code(), ENOENT);
	cr_expect_eq(pos.message(), std::string("open /x: ") + std::strerror(ENOENT));
	cr_expect_eq(errno_error(-EACCES, "y").code(), EACCES, "a negative errno is accepted");
	cr_expect_eq(errno_error(0, "z").code(), EIO);
}

Test(error, strprintf_formats_any_length)
{
	const std::string long_arg(5000, 'a');
	const std::string s = strprintf("<%s|%d>", long_arg.c_str(), 42);
	cr_expect_eq(s.size(), long_arg.size() + 5);
	cr_expect_eq(s, "<" + long_arg + "|42>");
}

Test(result, holds_a_value_or_an_error)
{
	Result<int> v = 5;
	cr_assert_ok(v);
	cr_expect_eq(*v, 5);
	Result<int> e = make_error(EBADF, "nope");
	cr_assert_not(e.ok());
	cr_expect_eq(e.error().code(), EBADF);
	cr_expect_eq(e.error().message(), std::string("nope"));

	Status ok = ok_status();
	cr_assert_ok(ok);
	Status bad = errno_error(EPERM, "op");
	cr_assert_not(bad.ok());
	cr_expect_eq(bad.error().neg(), -EPERM);
}
