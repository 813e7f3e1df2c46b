// SPDX-License-Identifier: GPL-2.0-only
//
// The wire protocol between the shim (in each client process) and the
// daemon: one Unix stream connection per client thread, strictly
// request/reply. A request is a Request header plus `len` payload bytes;
// a reply is a Reply header, `nfds` FdEntry records and `len` payload
// bytes, with the fds attached as SCM_RIGHTS (at most kMaxFdsPerMsg on the
// header's message; more follow as one-byte messages carrying the rest).
// Header-only and free of C++ runtime state so the shim can use it.
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "../model/abi.h"

namespace kfdemu::wire {

enum class Op : uint32_t {
	OpenKfd = 1,	// a0 = cloexec, a2 = access mode (O_ACCMODE bits of open)
	OpenRender,	// a0 = minor, a1 = cloexec, a2 = access mode
	Ioctl,		// key, a0 = cmd, a1 = arg
	Mmap,		// key, a0 = offset, a1 = len, a2 = prot; reply: 1 fd, aux0 = offset,
			// aux1 = the target file's inode
	VmaAdd,		// key, a0 = start, a1 = len, a2 = pgoff, a3 = prot, a4 = target inode
	VmaRemove,	// a0 = start, a1 = len
	Describe,	// key; reply: result = FileKind, aux0 = render minor, aux1 = size
	Introspect,	// payload = query; reply payload = JSON
	SetFaults,	// payload = fault spec
	Echo,		// payload: sent back raw, with no Reply header (the CRIU adapter hands a
			// restored connection the reply bytes its checkpointed one had queued)
	Settle,		// a0 = a client socket's inode (the adapter, before it looks at a
			// dumped connection): ends the blocking waits of that connection's
			// process and returns once the connection has no call in progress
			// (its reply written) and no request unread; -ETIMEDOUT if it still
			// has one after a1 ms
	SvmUnmap,	// a0 = start, a1 = len: the process unmapped memory that holds
			// SVM ranges (Model::svm_unmap)
};

struct Request {
	Op op;
	int32_t tid;
	uint64_t dev, ino;
	uint64_t a[5];
	uint32_t len;
	// Random per program image (0: not a shim, e.g. kfd-emu ctl).
	uint32_t image;
	// kReqFreshImage: this program image has not had a reply from the
	// daemon yet. A known process sending a new `image` with this flag
	// exec'd (its old KFD context is gone, as the kernel's goes with the
	// mm exec replaced); a new `image` without it is the same address
	// space continuing under the number held in its memory (a CRIU
	// restore: the restorer forks from CRIU, then the dumped memory, with
	// the dumped shim's number, takes over), so nothing ends.
	uint32_t flags;
	// The inode of the client's own end of this connection (sockfs inode
	// numbers are 32-bit), so the CRIU adapter, which sees that end in the
	// dumped task, can name the connection to the daemon (Op::Settle).
	uint32_t sock_ino;
	// When the thread made the call (CLOCK_MONOTONIC, ns; 0: not ordered,
	// e.g. kfd-emu ctl). The daemon lets a process's ioctls into the model
	// in this order, as the kernel runs each in its thread at the time it
	// is made (Daemon::await_turn); only times of one process's threads
	// are compared.
	uint64_t made_ns;
};
inline constexpr uint32_t kReqFreshImage = 1;

// Result for calls on a file the daemon does not know: the shim falls back
// to the real function.
inline constexpr int64_t kNotEmulated = INT64_MIN;
// Result of an Ioctl or Mmap the model did not serve because CRIU paused
// the caller's process (Caller::restarts_while_paused): the kernel's
// -ERESTARTSYS. The shim makes the call again 1 ms later, stamped anew,
// until it is served (after a restore on the restored connection, to which
// the adapter hands this reply when the thread was frozen before reading
// it).
inline constexpr int64_t kRestart = -abi::kErestartsys;

struct Reply {
	int64_t result;
	uint32_t nfds;
	uint32_t len;
	uint64_t aux[3];
};
// Reply::aux[2] of an Op::Mmap: the mapping is not inherited by a fork
// (the kernel's VM_DONTCOPY; the shim madvises MADV_DONTFORK).
inline constexpr uint64_t kMmapDontCopy = 1;

struct FdEntry {
	uint64_t patch_addr;	// 0: none
	uint32_t flags;		// kFdCloexec | kFdAsResult
	uint32_t pad;
};
inline constexpr uint32_t kFdCloexec = 1, kFdAsResult = 2;
inline constexpr unsigned kMaxFdsPerMsg = 250;

// Full-buffer I/O on a stream socket, retrying on EINTR. -errno or 0.
inline int send_all(int sock, const void *buf, size_t len, const int *fds = nullptr,
		    unsigned nfds = 0)
{
	const char *p = static_cast<const char *>(buf);
	bool first = true;
	while (len > 0 || (first && nfds)) {
		iovec iov{const_cast<char *>(p), len};
		msghdr msg{};
		msg.msg_iov = &iov;
		msg.msg_iovlen = 1;
		alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int) * kMaxFdsPerMsg)];
		if (first && nfds) {
			msg.msg_control = ctl;
			msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
			cmsghdr *c = CMSG_FIRSTHDR(&msg);
			c->cmsg_level = SOL_SOCKET;
			c->cmsg_type = SCM_RIGHTS;
			c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
			std::memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
		}
		ssize_t n = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		first = false;
		p += n;
		len -= size_t(n);
	}
	return 0;
}

// Receives exactly `len` bytes; fds arriving with them are appended to
// fds[*nfds..max). Extra fds beyond `max` are closed. -errno, or -EPIPE at EOF.
inline int recv_all(int sock, void *buf, size_t len, int *fds = nullptr, unsigned *nfds = nullptr,
		    unsigned max = 0)
{
	char *p = static_cast<char *>(buf);
	while (len > 0) {
		iovec iov{p, len};
		msghdr msg{};
		msg.msg_iov = &iov;
		msg.msg_iovlen = 1;
		alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int) * 253)];
		msg.msg_control = ctl;
		msg.msg_controllen = sizeof ctl;
		ssize_t n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EPIPE;
		for (cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
			if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
				continue;
			unsigned k = unsigned((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
			int tmp[253];
			std::memcpy(tmp, CMSG_DATA(c), k * sizeof(int));
			for (unsigned i = 0; i < k; i++) {
				if (fds && nfds && *nfds < max)
					fds[(*nfds)++] = tmp[i];
				else
					::close(tmp[i]);
			}
		}
		p += n;
		len -= size_t(n);
	}
	return 0;
}

} // namespace kfdemu::wire
