// SPDX-License-Identifier: GPL-2.0-only
//
// Log lines kept for later (DeferredLog, base/log.h): what a thread beside
// CRIU's own logs waits until CRIU's thread prints it, in order. Without
// CRIU's print_on_level the lines go to stderr.
#include <criterion/criterion.h>
#include <criterion/redirect.h>

#include <cstdio>

#include "base/log.h"

using namespace amdcr;

Test(log, deferred_lines_wait_for_flush_and_keep_their_order, .init = cr_redirect_stderr)
{
	DeferredLog kept;
	log_msg_to(&kept, LogLevel::Info, "first kept, %d", 1);
	log_gpu_to(&kept, LogLevel::Warn, 0x1234, "second kept");
	log_info("printed at once");
	log_msg_to(nullptr, LogLevel::Info, "printed at once too");
	kept.flush();
	kept.flush(); // printed once only
	std::fflush(stderr);
	cr_assert_stderr_eq_str("amdgpu_plugin: printed at once\n"
				"amdgpu_plugin: printed at once too\n"
				"amdgpu_plugin: first kept, 1\n"
				"amdgpu_plugin: Warn: gpu 0x1234: second kept\n");
}
