// SPDX-License-Identifier: GPL-2.0-only
//
// One message of a local socket (SOCK_SEQPACKET, SOCK_DGRAM) with the fds
// it carries (SCM_RIGHTS) and, on a socket with SO_PASSCRED, its sender's
// credentials: the one sendmsg and the one recvmsg of the plugin's
// channels (the guardian's, the parallel restore's).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <span>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"

namespace amdcr {

struct ReceivedMessage {
	size_t bytes = 0;	   // payload bytes; 0: the peer closed
	std::vector<UniqueFd> fds; // every fd that came, owned (O_CLOEXEC)
	pid_t pid = 0;		   // the sender (SCM_CREDENTIALS), 0 when not sent
	bool truncated = false;	   // payload or fds cut (MSG_TRUNC, MSG_CTRUNC, > max_fds)
};

// recvmsg of one message into `buf` (`len` bytes) with room for up to
// `max_fds` fds, retried on EINTR; `flags` as recvmsg's (MSG_DONTWAIT).
// The fds are owned by the result whatever else is wrong with the message.
// Fails with recvmsg's errno (EAGAIN: none waiting under MSG_DONTWAIT).
Result<ReceivedMessage> receive_with_fds(int fd, void *buf, size_t len, size_t max_fds, int flags = 0);

// sendmsg of one message of `len` bytes from `buf` with `fds` (SCM_RIGHTS;
// none: no control message), MSG_NOSIGNAL, retried on EINTR. Fails with
// sendmsg's errno (EPIPE: the peer has closed its end), or EIO when the
// socket took only part of the message.
Status send_with_fds(int fd, const void *buf, size_t len, std::span<const int> fds = {});

} // namespace amdcr
