// SPDX-License-Identifier: GPL-2.0-only
// Scoped<T, Traits> (src/base/scoped.h): each handle freed once, and only
// when the owner lets go of it.
#include <criterion/criterion.h>

#include <utility>
#include <vector>

#include "base/scoped.h"

using namespace amdcr;

namespace {

// Handles are ints, 0 is invalid; every free is recorded.
std::vector<int> g_freed;

struct IntTraits {
	static int invalid() { return 0; }
	static void free(int v) { g_freed.push_back(v); }
};
using Owner = Scoped<int, IntTraits>;

void clear() { g_freed.clear(); }

} // namespace

TestSuite(scoped, .init = clear);

Test(scoped, destructor_frees_once)
{
	{
		Owner a(7);
		cr_expect(a.valid());
	}
	cr_assert_eq(g_freed, std::vector<int>{7});
}

Test(scoped, reset_to_the_same_handle_keeps_it)
{
	Owner a(7);
	a.reset(7);
	cr_expect(g_freed.empty(), "reset to its own handle freed it (%zu frees)", g_freed.size());
	cr_expect_eq(a.get(), 7);
	a.reset(8);
	cr_assert_eq(g_freed, std::vector<int>{7});
	a.reset();
	cr_assert_eq(g_freed, (std::vector<int>{7, 8}));
	cr_expect_not(a.valid());
}

Test(scoped, move_hands_over_without_freeing)
{
	Owner a(3);
	Owner b(std::move(a));
	cr_expect_not(a.valid());
	cr_expect(g_freed.empty());
	Owner c(4);
	c = std::move(b);
	cr_assert_eq(g_freed, std::vector<int>{4}, "the handle moved over is freed");
	cr_expect_eq(c.get(), 3);
	Owner &self = c;
	c = std::move(self);
	cr_expect_eq(c.get(), 3, "self move keeps the handle");
	cr_assert_eq(g_freed.size(), 1u);
}

Test(scoped, release_gives_up_ownership)
{
	{
		Owner a(5);
		cr_expect_eq(a.release(), 5);
		cr_expect_not(a.valid());
	}
	cr_expect(g_freed.empty());
}
