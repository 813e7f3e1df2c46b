// SPDX-License-Identifier: GPL-2.0-only
#include "base/socket_fds.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace amdcr {

Result<ReceivedMessage> receive_with_fds(int fd, void *buf, size_t len, size_t max_fds, int flags)
{
	iovec iov{buf, len};
	// cmsghdr-aligned room for the fds and the credentials.
	std::vector<cmsghdr> control((CMSG_SPACE(sizeof(int) * max_fds) + CMSG_SPACE(sizeof(ucred))) /
					     sizeof(cmsghdr) +
				     1);
	msghdr msg{};
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = control.data();
	msg.msg_controllen = control.size() * sizeof(cmsghdr);
	ssize_t n;
	do {
		n = ::recvmsg(fd, &msg, flags | MSG_CMSG_CLOEXEC);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno_error(errno, "recvmsg");
	ReceivedMessage r;
	r.bytes = static_cast<size_t>(n);
	r.truncated = (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0;
	for (cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
		if (c->cmsg_level != SOL_SOCKET)
			continue;
		if (c->cmsg_type == SCM_RIGHTS) {
			const size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (size_t i = 0; i < k; i++) {
				int v;
				std::memcpy(&v, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
				r.fds.emplace_back(v);
			}
		} else if (c->cmsg_type == SCM_CREDENTIALS) {
			ucred cr{};
			std::memcpy(&cr, CMSG_DATA(c), sizeof(cr));
			r.pid = cr.pid;
		}
	}
	// The control buffer rounds up: more than asked for is a cut too.
	r.truncated |= r.fds.size() > max_fds;
	return r;
}

Status send_with_fds(int fd, const void *buf, size_t len, std::span<const int> fds)
{
	iovec iov{const_cast<void *>(buf), len};
	msghdr msg{};
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	// cmsghdr-aligned room for the fds.
	std::vector<cmsghdr> control;
	if (!fds.empty()) {
		control.resize(CMSG_SPACE(sizeof(int) * fds.size()) / sizeof(cmsghdr) + 1);
		msg.msg_control = control.data();
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
		cmsghdr *c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
		std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
	}
	ssize_t n;
	do {
		n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno_error(errno, "sendmsg");
	if (static_cast<size_t>(n) != len)
		return make_error(EIO, "short send (%zd of %zu bytes)", n, len);
	return ok_status();
}

} // namespace amdcr
