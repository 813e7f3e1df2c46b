// SPDX-License-Identifier: GPL-2.0-only
//
// ensure_fd_room: room for one dma-buf fd per BO (CRIU CHECKPOINT/RESTORE
// install that many). It raises the soft RLIMIT_NOFILE when the hard one
// allows, and otherwise fails with EMFILE naming both numbers and how to
// raise the limit. Criterion runs each test in its own process, so the
// limits and capabilities changed here die with it.
#include <criterion/criterion.h>

#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <string>

#include "device/system.h"

using namespace amdcr;

namespace {

void set_nofile(rlim_t soft, rlim_t hard)
{
	struct rlimit rl {soft, hard};
	cr_assert_eq(::setrlimit(RLIMIT_NOFILE, &rl), 0, "setrlimit(%lu, %lu)", (unsigned long)soft,
		     (unsigned long)hard);
}

rlim_t soft_nofile()
{
	struct rlimit rl {};
	cr_assert_eq(::getrlimit(RLIMIT_NOFILE, &rl), 0);
	return rl.rlim_cur;
}

// As CRIU without CAP_SYS_RESOURCE (or a user's process): the hard limit
// can no longer be raised.
void drop_cap_sys_resource()
{
	__user_cap_header_struct head{_LINUX_CAPABILITY_VERSION_3, 0};
	__user_cap_data_struct data[2]{};
	cr_assert_eq(::syscall(SYS_capget, &head, data), 0);
	data[CAP_SYS_RESOURCE / 32].effective &= ~(1u << (CAP_SYS_RESOURCE % 32));
	cr_assert_eq(::syscall(SYS_capset, &head, data), 0);
}

} // namespace

Test(fd_room, enough_room_leaves_the_limit_alone)
{
	set_nofile(512, 4096);
	cr_assert(ensure_fd_room(16).ok());
	cr_assert_eq(soft_nofile(), 512u);
}

Test(fd_room, raises_the_soft_limit_up_to_what_is_needed)
{
	set_nofile(256, 8192);
	auto st = ensure_fd_room(3000);
	cr_assert(st.ok(), "%s", st.ok() ? "" : st.error().message().c_str());
	cr_assert_geq(soft_nofile(), 3000u);
	cr_assert_leq(soft_nofile(), 8192u);
}

Test(fd_room, fails_clearly_when_the_hard_limit_is_too_low)
{
	set_nofile(256, 256);
	drop_cap_sys_resource();
	auto st = ensure_fd_room(16384);
	cr_assert(!st.ok(), "16384 fds fitted under a hard limit of 256");
	cr_assert_eq(st.error().code(), EMFILE);
	const std::string m = st.error().message();
	cr_assert(m.find("16384 more file descriptors") != std::string::npos, "%s", m.c_str());
	cr_assert(m.find("hard limit is 256") != std::string::npos, "%s", m.c_str());
	cr_assert(m.find("ulimit -Hn") != std::string::npos, "%s", m.c_str());
	cr_assert_eq(soft_nofile(), 256u);
}
