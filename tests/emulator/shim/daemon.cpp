// SPDX-License-Identifier: GPL-2.0-only
//
// libkfdemu_shim.so: the daemon connection (one per thread, re-established
// after fork) and the delivery of the fds of its replies. See shim.h.
#include "shim.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace kfdemu::shim {

// ---------------------------------------------------------------------------
// The daemon connection (one per thread, re-established after fork).
// ---------------------------------------------------------------------------

namespace {

struct Conn {
	int fd = -1;
	pid_t pid = 0;
	~Conn();
};
thread_local Conn t_conn;

Conn::~Conn()
{
	REAL(close, int (*)(int));
	if (fd >= 0 && pid == ::getpid() && g_conn_fds.test(fd)) {
		g_conn_fds.set(fd, false);
		real_close(fd);
	}
}

int connect_daemon()
{
	REAL(close, int (*)(int));
	const Config &c = config();
	int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	sockaddr_un sa{};
	sa.sun_family = AF_UNIX;
	std::snprintf(sa.sun_path, sizeof sa.sun_path, "%s", c.socket.c_str());
	if (::connect(s, reinterpret_cast<sockaddr *>(&sa), sizeof sa)) {
		int e = errno;
		real_close(s);
		return -e;
	}
	// Keep the connection out of the low fd numbers the program (and
	// the kernel's lowest-free-fd rule in tests) cares about.
	rlimit rl{};
	if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur >= 64) {
		int hi = ::fcntl(s, F_DUPFD_CLOEXEC, int(std::min<rlim_t>(rl.rlim_cur / 4 * 3, 1 << 15)));
		if (hi >= 0) {
			real_close(s);
			s = hi;
		}
	}
	return s;
}

// One request/reply on `sock`: 0, -EPIPE when the request could not be
// sent (safe to retry elsewhere) or -EIO when the reply was lost. Stamps
// the request with the inode of `sock` (wire::Request::sock_ino; a raw
// fstat, past the shim's own).
int exchange(int sock, std::string &msg, Response *out)
{
	REAL(close, int (*)(int));
	struct stat st {};
	const uint32_t ino = ::syscall(SYS_fstat, sock, &st) == 0 ? uint32_t(st.st_ino) : 0;
	std::memcpy(msg.data() + offsetof(wire::Request, sock_ino), &ino, sizeof ino);
	if (wire::send_all(sock, msg.data(), msg.size()))
		return -EPIPE;
	// A reply can carry one fd per BO (CRIU CHECKPOINT/RESTORE of a process
	// with tens of thousands of BOs): receive into a per-thread buffer
	// large enough for that, never dropping fds. A re-entered call (signal
	// handler) gets a buffer of its own.
	constexpr unsigned kMaxReplyFds = 1u << 18;
	static thread_local std::vector<int> t_fds;
	static thread_local int t_depth = 0;
	std::vector<int> nested;
	std::vector<int> &buf = t_depth++ ? nested : t_fds;
	if (buf.size() < kMaxReplyFds)
		buf.resize(kMaxReplyFds);
	int *fds = buf.data();
	unsigned nfds = 0;
	int err = wire::recv_all(sock, &out->rp, sizeof out->rp, fds, &nfds, kMaxReplyFds);
	if (!err) {
		out->entries.resize(out->rp.nfds);
		out->payload.resize(out->rp.len);
		if (out->rp.nfds)
			err = wire::recv_all(sock, out->entries.data(), out->rp.nfds * sizeof(wire::FdEntry),
					     fds, &nfds, kMaxReplyFds);
		if (!err && out->rp.len)
			err = wire::recv_all(sock, out->payload.data(), out->rp.len, fds, &nfds, kMaxReplyFds);
		while (!err && nfds < out->rp.nfds && nfds < kMaxReplyFds) {
			char b;
			err = wire::recv_all(sock, &b, 1, fds, &nfds, kMaxReplyFds);
		}
	}
	t_depth--;
	if (err) {
		for (unsigned i = 0; i < nfds; i++)
			real_close(fds[i]);
		return -EIO;
	}
	out->fds.assign(fds, fds + nfds);
	return 0;
}

thread_local bool t_busy = false;

// 1 in the data of every program image as it is loaded (exec), cleared
// once the daemon has answered a call of this image. A CRIU-restored
// process runs on the dumped memory, where it is 0: so the daemon can tell
// an exec (fresh image, new number) from a restore (old image, new number).
constinit std::atomic<uint32_t> g_fresh_image{1};

} // namespace

uint64_t now_ns()
{
	timespec now{};
	::clock_gettime(CLOCK_MONOTONIC, &now);
	return uint64_t(now.tv_sec) * 1000000000u + uint64_t(now.tv_nsec);
}

namespace {

// One request/reply with the daemon (call).
int call_once(wire::Request rq, std::string_view payload, Response *out)
{
	REAL(close, int (*)(int));
	rq.image = config().image;
	rq.flags = g_fresh_image.load(std::memory_order_relaxed) ? wire::kReqFreshImage : 0;
	rq.len = uint32_t(payload.size());
	std::string msg(reinterpret_cast<const char *>(&rq), sizeof rq);
	msg.append(payload);
	if (t_busy || config().per_call) {
		// Re-entered (a signal handler on this thread): the thread's
		// connection is mid-request, use a private one. Also every
		// call in per-call mode.
		int s = connect_daemon();
		if (s < 0)
			return s;
		int e = exchange(s, msg, out);
		real_close(s);
		if (e == 0)
			g_fresh_image.store(0, std::memory_order_relaxed);
		return e == -EPIPE ? -EIO : e;
	}
	t_busy = true;
	struct Unbusy {
		~Unbusy() { t_busy = false; }
	} unbusy;
	const pid_t me = ::getpid();
	for (int attempt = 0; attempt < 2; attempt++) {
		if (t_conn.fd >= 0 && (t_conn.pid != me || !g_conn_fds.test(t_conn.fd))) {
			// After fork the inherited socket is the parent's: drop it.
			// A connection the program closed is not ours to close.
			if (t_conn.pid != me && g_conn_fds.test(t_conn.fd)) {
				g_conn_fds.set(t_conn.fd, false);
				real_close(t_conn.fd);
			}
			t_conn.fd = -1;
		}
		if (t_conn.fd < 0) {
			t_conn.fd = connect_daemon();
			t_conn.pid = me;
			if (t_conn.fd < 0)
				return t_conn.fd;
			g_conn_fds.set(t_conn.fd, true);
		}
		int err = exchange(t_conn.fd, msg, out);
		if (err == 0) {
			g_fresh_image.store(0, std::memory_order_relaxed);
			return 0;
		}
		g_conn_fds.set(t_conn.fd, false);
		real_close(t_conn.fd);
		t_conn.fd = -1;
		if (err != -EPIPE)
			return err;	// a reply was lost: do not resend
	}
	return -ECONNREFUSED;
}

} // namespace

// One request/reply with the daemon, stamped with the time the call is made
// (wire::Request::made_ns) unless the caller did; a call the daemon sent
// back to be restarted (wire::kRestart: CRIU paused the process) is made
// again, stamped anew (a restarted syscall is made when the thread runs
// again), until it is served. Returns 0 or -errno (transport failure).
int call(wire::Request rq, std::string_view payload, Response *out)
{
	if (!config().active)
		return -ENODEV;
	rq.tid = int32_t(::gettid());
	if (!rq.made_ns)
		rq.made_ns = now_ns();
	for (;;) {
		const int e = call_once(rq, payload, out);
		if (e || out->rp.result != wire::kRestart)
			return e;
		const timespec wait{0, 1000000};
		::nanosleep(&wait, nullptr);
		rq.made_ns = now_ns();
	}
}

// Installs the fds of a reply the way the kernel's fd_install would have:
// sets their close-on-exec flag, writes their numbers where asked and
// returns the one that is the syscall's result (if any).
int64_t deliver(Response &r)
{
	int64_t result = r.rp.result;
	for (size_t i = 0; i < r.fds.size() && i < r.entries.size(); i++) {
		const int fd = r.fds[i];
		const auto &e = r.entries[i];
		if (!(e.flags & wire::kFdCloexec))
			::fcntl(fd, F_SETFD, 0);
		if (e.patch_addr) {
			const uint32_t v = uint32_t(fd);
			std::memcpy(reinterpret_cast<void *>(e.patch_addr), &v, sizeof v);
		}
		if (e.flags & wire::kFdAsResult)
			result = fd;
	}
	return result;
}

} // namespace kfdemu::shim
