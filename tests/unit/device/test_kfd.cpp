// SPDX-License-Identifier: GPL-2.0-only
//
// The KFD wrapper without a KFD: open errors and the ioctl chokepoint's
// error reporting (a node that is not KFD answers ENOTTY).
#include <criterion/criterion.h>

#include <fcntl.h>

#include <string>

#include "device/kfd.h"

using namespace amdcr;

Test(kfd, open_missing_node_reports_enoent)
{
	auto k = Kfd::open("/nonexistent/kfd");
	cr_assert(!k.ok());
	cr_assert_eq(k.error().code(), ENOENT);
	cr_assert(k.error().message().find("/nonexistent/kfd") != std::string::npos,
		  "%s", k.error().message().c_str());
}

Test(kfd, ioctl_on_a_non_kfd_node_is_an_error_naming_the_op)
{
	auto k = Kfd::open("/dev/null");
	cr_assert(k.ok());
	auto v = k->get_version();
	cr_assert(!v.ok());
	cr_assert_eq(v.error().code(), ENOTTY);
	cr_assert(v.error().message().find("GET_VERSION") != std::string::npos);

	auto info = k->process_info();
	cr_assert(!info.ok());
	cr_assert_eq(info.error().code(), ENOTTY);
	cr_assert(info.error().message().find("CRIU_OP PROCESS_INFO") != std::string::npos,
		  "%s", info.error().message().c_str());
	auto st = k->resume(1);
	cr_assert(!st.ok());
	cr_assert(st.error().message().find("RESUME") != std::string::npos);
}

Test(kfd, restore_without_render_fd_is_einval_before_the_ioctl)
{
	auto k = Kfd::open("/dev/null");
	cr_assert(k.ok());
	KfdDeviceBucket dev{0x1234, 0x5678, -1};
	uint8_t priv[8] = {};
	KfdRestoreRequest req;
	req.devices = std::span(&dev, 1);
	req.priv_data = priv;
	auto r = k->restore(req);
	cr_assert(!r.ok());
	cr_assert_eq(r.error().code(), EINVAL);
}

Test(kfd, chokepoint_returns_negative_errno)
{
	auto k = Kfd::adopt(UniqueFd(::open("/dev/null", O_RDONLY | O_CLOEXEC)));
	cr_assert_eq(k.ioctl(0xdeadbeef, nullptr), -ENOTTY);
	auto bad = Kfd::adopt(UniqueFd());
	cr_assert_eq(bad.ioctl(0xdeadbeef, nullptr), -EBADF);
}
