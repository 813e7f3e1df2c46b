// SPDX-License-Identifier: GPL-2.0-only
//
// What a unit test printed on stderr, through Criterion's redirection:
//
//   Test(suite, name, .init = amdcr::test::redirect_stderr) {
//           ...
//           const std::string err = amdcr::test::captured_stderr();
//   }
#pragma once

#include <criterion/criterion.h>
#include <criterion/redirect.h>

#include <cstdio>
#include <string>

namespace amdcr::test {

inline void redirect_stderr() { cr_redirect_stderr(); }

// Everything written to stderr so far (flushed first).
inline std::string captured_stderr()
{
	std::fflush(stderr);
	FILE *f = cr_get_redirected_stderr();
	std::string out;
	char buf[4096];
	size_t n;
	while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0)
		out.append(buf, n);
	return out;
}

} // namespace amdcr::test
