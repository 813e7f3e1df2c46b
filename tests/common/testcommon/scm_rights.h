// SPDX-License-Identifier: GPL-2.0-only
//
// One message with at most one file descriptor (SCM_RIGHTS) over a Unix
// socket: how the tests' programs hand a dma-buf or a /dev/kfd file to
// another process.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <cstddef>
#include <cstring>

namespace testcommon {

// Sends the `len` bytes at `msg`, with `fd` when it is >= 0. True when all
// of them went.
inline bool send_with_fd(int sock, const void *msg, size_t len, int fd)
{
	iovec iov{const_cast<void *>(msg), len};
	alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
	msghdr mh{};
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	if (fd >= 0) {
		mh.msg_control = control;
		mh.msg_controllen = sizeof control;
		cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
	}
	return ::sendmsg(sock, &mh, MSG_NOSIGNAL) == ssize_t(len);
}

// Receives one message into the `len` bytes at `msg`; *fd (when `fd` is
// not null) is the descriptor that came with it (close-on-exec), or -1.
// recvmsg's result: `len` when all came, 0 at the end of the stream, -1
// with errno.
inline ssize_t recv_with_fd(int sock, void *msg, size_t len, int *fd)
{
	iovec iov{msg, len};
	alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
	msghdr mh{};
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = control;
	mh.msg_controllen = sizeof control;
	const ssize_t n = ::recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	if (fd) {
		*fd = -1;
		const cmsghdr *c = n > 0 ? CMSG_FIRSTHDR(&mh) : nullptr;
		if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
		    c->cmsg_len == CMSG_LEN(sizeof(int)))
			std::memcpy(fd, CMSG_DATA(c), sizeof *fd);
	}
	return n;
}

} // namespace testcommon
