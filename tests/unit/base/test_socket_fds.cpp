// SPDX-License-Identifier: GPL-2.0-only
// receive_with_fds (src/base/socket_fds.h): one message, its fds owned,
// its sender named, a closed peer and an empty queue told apart.
#include <criterion/criterion.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/socket_fds.h"

using namespace amdcr;

namespace {

struct Pair {
	UniqueFd a, b;
	Pair()
	{
		int sv[2];
		cr_assert_eq(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
		a = UniqueFd(sv[0]);
		b = UniqueFd(sv[1]);
	}
};

void send_with_fds(int sock, const void *buf, size_t len, const int *fds, size_t n)
{
	iovec iov{const_cast<void *>(buf), len};
	msghdr msg{};
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)] = {};
	if (n > 0) {
		msg.msg_control = control;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * n);
		cmsghdr *c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * n);
		std::memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
	}
	cr_assert_eq(::sendmsg(sock, &msg, 0), static_cast<ssize_t>(len), "sendmsg: %s", std::strerror(errno));
}

ino_t inode_of(int fd)
{
	struct stat st {};
	cr_assert_eq(::fstat(fd, &st), 0);
	return st.st_ino;
}

} // namespace

Test(socket_fds, message_with_fds_and_sender)
{
	Pair p;
	const int on = 1;
	cr_assert_eq(::setsockopt(p.b.get(), SOL_SOCKET, SO_PASSCRED, &on, sizeof(on)), 0);
	int pipefd[2];
	cr_assert_eq(::pipe(pipefd), 0);
	UniqueFd r(pipefd[0]), w(pipefd[1]);
	const uint32_t word = 0x5a5a1234;
	send_with_fds(p.a.get(), &word, sizeof(word), pipefd, 2);

	uint32_t got = 0;
	auto msg = receive_with_fds(p.b.get(), &got, sizeof(got), 4);
	cr_assert(msg.ok(), "%s", msg.ok() ? "" : msg.error().message().c_str());
	cr_expect_eq(msg->bytes, sizeof(got));
	cr_expect_eq(got, word);
	cr_assert_eq(msg->fds.size(), 2u);
	cr_expect_eq(inode_of(msg->fds[0].get()), inode_of(r.get()), "the pipe's read end, in order");
	cr_expect_eq(::fcntl(msg->fds[1].get(), F_GETFD) & FD_CLOEXEC, FD_CLOEXEC, "received close-on-exec");
	cr_expect_eq(msg->pid, ::getpid(), "the sender's pid (SO_PASSCRED)");
	cr_expect_not(msg->truncated);
}

Test(socket_fds, more_fds_than_room_is_truncated)
{
	Pair p;
	int fds[3] = {0, 1, 2};
	const char c = 'x';
	send_with_fds(p.a.get(), &c, 1, fds, 3);
	char got = 0;
	auto msg = receive_with_fds(p.b.get(), &got, 1, 1);
	cr_assert(msg.ok());
	cr_expect(msg->truncated, "3 fds into room for 1 is MSG_CTRUNC");
}

Test(socket_fds, empty_queue_and_closed_peer)
{
	Pair p;
	char got = 0;
	auto none = receive_with_fds(p.b.get(), &got, 1, 1, MSG_DONTWAIT);
	cr_assert_not(none.ok());
	cr_expect_eq(none.error().code(), EAGAIN);
	p.a = UniqueFd();
	auto closed = receive_with_fds(p.b.get(), &got, 1, 1);
	cr_assert(closed.ok());
	cr_expect_eq(closed->bytes, 0u, "EOF: 0 bytes");
	cr_expect(closed->fds.empty());
}
