// SPDX-License-Identifier: GPL-2.0-only
//
// Program images and the KFD context (daemon exec detection). In the
// kernel a process's KFD context lives with its mm: an execve ends it, a
// CRIU restore does not (the restored task is forked by CRIU, then its
// memory is replaced by the dumped one). Every shim request carries a
// number chosen per program image and a "fresh image" flag set until the
// image's first answered call; this test speaks the wire protocol itself
// to play the two cases from one process:
//  - a new number without the flag (what a restored process sends: CRIU's
//    number first, then the dumped image's) keeps the context;
//  - a new number with the flag (a freshly exec'd image) ends it.
// The real execve case is in test_transport (test_exec).
//
// Usage (under kfd-emu): test_image
#include "check.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/kfd_ioctl.h>

using namespace kfdemu;
using namespace kfdemu::test;

namespace {

// One Describe request on a connection of its own, sent as a program image
// with number `image` (fresh or not). True when the daemon answered.
bool send_as_image(uint32_t image, bool fresh)
{
	const char *sock = std::getenv("KFDEMU_SOCKET");
	if (!sock)
		return false;
	int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return false;
	sockaddr_un sa{};
	sa.sun_family = AF_UNIX;
	std::snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock);
	bool ok = false;
	if (::connect(s, reinterpret_cast<sockaddr *>(&sa), sizeof sa) == 0) {
		wire::Request rq{};
		rq.op = wire::Op::Describe;
		rq.tid = ::gettid();
		rq.image = image;
		rq.flags = fresh ? wire::kReqFreshImage : 0;
		wire::Reply rp{};
		ok = wire::send_all(s, &rq, sizeof rq) == 0 && wire::recv_all(s, &rp, sizeof rp) == 0 &&
		     rp.nfds == 0 && rp.len == 0;
	}
	::close(s);
	return ok;
}

uint32_t random_image()
{
	uint32_t v = 0;
	while (v == 0)
		if (::getrandom(&v, sizeof v, 0) != sizeof v)
			v = uint32_t(::getpid()) * 2654435761u;
	return v;
}

int kfd_version(int kfd)
{
	kfd_ioctl_get_version_args v{};
	return ::ioctl(kfd, AMDKFD_IOC_GET_VERSION, &v) == 0 && v.major_version == 1 ? 0 : errno;
}

bool has_kfd_process(pid_t pid)
{
	const std::string js = introspect("processes");
	return js.find("{\"pid\":" + std::to_string(pid) + ",") != std::string::npos;
}

// A restored process: its first calls come under CRIU's number (the
// restorer forked from CRIU), then under the dumped image's. Neither is a
// fresh image, so the context stays.
void test_restore_keeps_context()
{
	const int kfd = ::open("/dev/kfd", O_RDWR | O_CLOEXEC);
	CHECK(kfd >= 0);
	CHECK_EQ(kfd_version(kfd), 0);	// registers this image with the daemon
	const std::string before = introspect("transport");
	const long long execs = json_number(before, "execs");
	const long long restored = json_number(before, "restored_images");
	CHECK(execs >= 0 && restored >= 0);

	CHECK(send_as_image(random_image(), false));	// "CRIU's" number
	CHECK_EQ(kfd_version(kfd), 0);			// the dumped image's again
	const std::string after = introspect("transport");
	CHECK_EQ(json_number(after, "execs"), execs);
	CHECK_EQ(json_number(after, "restored_images"), restored + 2);
	CHECK(has_kfd_process(::getpid()));
	::close(kfd);
}

// A freshly loaded image with a new number: the old context ends.
void test_fresh_image_is_exec()
{
	const int kfd = ::open("/dev/kfd", O_RDWR | O_CLOEXEC);
	CHECK(kfd >= 0);
	CHECK_EQ(kfd_version(kfd), 0);
	CHECK(has_kfd_process(::getpid()));
	const long long execs = json_number(introspect("transport"), "execs");

	CHECK(send_as_image(random_image(), true));
	CHECK_EQ(json_number(introspect("transport"), "execs"), execs + 1);
	CHECK(!has_kfd_process(::getpid()));
	// The old image's file has no context behind it any more.
	CHECK_EQ(kfd_version(kfd), ESRCH);
	::close(kfd);
}

// The flag goes with the first answer: a fresh image's own first call
// under a known number ends nothing (fork children start that way).
void test_fresh_flag_cleared()
{
	const pid_t c = ::fork();
	if (c == 0) {
		const int kfd = ::open("/dev/kfd", O_RDWR | O_CLOEXEC);
		const bool ok = kfd >= 0 && kfd_version(kfd) == 0 && kfd_version(kfd) == 0 &&
				has_kfd_process(::getpid());
		::_exit(ok ? 0 : 1);
	}
	int status = 0;
	::waitpid(c, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

} // namespace

int main()
{
	if (!std::getenv("KFDEMU_SOCKET")) {
		std::puts("NOT RUN: not under kfd-emu (KFDEMU_SOCKET unset)");
		return 77;
	}
	run("fork child: first and later calls keep its context", test_fresh_flag_cleared);
	run("new image number without the fresh flag (restore) keeps the KFD context",
	    test_restore_keeps_context);
	// Last: it ends this process's KFD context.
	run("new image number with the fresh flag (exec) ends the KFD context", test_fresh_image_is_exec);
	return summary();
}
