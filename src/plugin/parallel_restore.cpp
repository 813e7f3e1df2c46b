// SPDX-License-Identifier: GPL-2.0-only
#include "plugin/parallel_restore.h"

#include <fcntl.h>
#include <sched.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <future>
#include <map>
#include <system_error>
#include <tuple>

#include "base/log.h"
#include "base/socket_fds.h"
#include "plugin/criu_api.h"

namespace amdcr {
namespace {

constexpr uint32_t kMagic = 0x52504d41; // "AMPR"
constexpr uint32_t kStop = 0;		 // kind of the main process's stop message

// One message: this header, and `count` dma-bufs as SCM_RIGHTS.
struct Header {
	uint32_t magic = kMagic;
	uint32_t kind = 0;
	int32_t file_id = 0;
	uint32_t first = 0; // index of the message's first buffer in the file
	uint32_t count = 0;
	uint32_t total = 0; // buffers of the file
};

// A message as received: the header, the dma-bufs, the sender.
struct Received {
	Header head;
	std::vector<UniqueFd> fds;
	pid_t pid = 0;
};

// The main process's ends sit high in its fd table, clear of the low
// numbers CRIU's tasks will restore (CRIU itself keeps its service fds at
// the very top).
Result<UniqueFd> above_low_fds(int fd)
{
	struct rlimit rl {};
	const rlim_t cur = ::getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : 1024;
	const int base = static_cast<int>(std::min<rlim_t>(cur / 2, 1 << 20));
	UniqueFd orig(fd);
	const int high = ::fcntl(orig.get(), F_DUPFD_CLOEXEC, base);
	if (high < 0)
		return errno_error(errno, "parallel restore: moving the channel's fd");
	return UniqueFd(high);
}

Status send_message(int fd, const Header &h, std::span<const int> fds)
{
	if (auto st = send_with_fds(fd, &h, sizeof(h), fds); !st)
		return std::move(st).error().context("parallel restore: sending to CRIU's main process");
	return ok_status();
}

Result<Received> receive_message(int fd)
{
	Header h;
	auto msg = receive_with_fds(fd, &h, sizeof(h), ParallelRestore::kMaxFdsPerMessage);
	if (!msg)
		return std::move(msg).error().context("parallel restore: receiving from the tasks");
	const size_t n = msg->bytes;
	if (n == 0)
		return make_error(EPIPE, "parallel restore: the channel was closed");
	if (msg->truncated)
		return make_error(EPROTO, "parallel restore: a message was truncated");
	if (n != sizeof(h) || h.magic != kMagic)
		return make_error(EPROTO, "parallel restore: a malformed message (%zu bytes)", n);
	if (msg->fds.size() != h.count || h.first > h.total || h.count > h.total - h.first)
		return make_error(EPROTO,
				  "parallel restore: file %d: a message with %zu buffers claims %u (from %u of %u)",
				  h.file_id, msg->fds.size(), h.count, h.first, h.total);
	return Received{h, std::move(msg->fds), msg->pid};
}

const char *kind_name(uint32_t kind)
{
	return kind == static_cast<uint32_t>(HandOverKind::Kfd) ? "KFD" : "render node";
}

} // namespace

ParallelRestore::ParallelRestore(UniqueFd recv, UniqueFd send, int store_id, CopyFn copy)
	: recv_(std::move(recv)), send_(std::move(send)), store_id_(store_id), copy_(std::move(copy))
{
}

Result<std::unique_ptr<ParallelRestore>> ParallelRestore::create(CopyFn copy)
{
	int sv[2];
	if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
		return errno_error(errno, "parallel restore: socketpair");
	auto recv = above_low_fds(sv[0]);
	auto send = above_low_fds(sv[1]);
	if (!recv)
		return std::move(recv).error();
	if (!send)
		return std::move(send).error();
	const int on = 1;
	if (::setsockopt(recv->get(), SOL_SOCKET, SO_PASSCRED, &on, sizeof(on)) != 0)
		return errno_error(errno, "parallel restore: SO_PASSCRED");
	const auto id = criu::fdstore_add(send->get());
	if (!id)
		return make_error(ENOTSUP, "CRIU offers no fdstore (fdstore_add) to reach the restored tasks");
	return std::unique_ptr<ParallelRestore>(
		new ParallelRestore(std::move(*recv), std::move(*send), *id, std::move(copy)));
}

ParallelRestore::~ParallelRestore()
{
	if (!thread_.joinable())
		return;
	cancel_ = true;
	if (auto st = send_stop(); !st) {
		// Without a stop message the thread would wait forever: end
		// its receive instead.
		(void)::shutdown(recv_.get(), SHUT_RD);
	}
	thread_.join();
	log_.flush();
}

Status ParallelRestore::hand_over(HandOverKind kind, int file_id, std::span<const int> dmabufs) const
{
	const auto fd = criu::fdstore_get(store_id_);
	if (!fd)
		return make_error(EIO,
				  "parallel restore: CRIU's fdstore has no channel %d to its main process "
				  "(KFD_PARALLEL_RESTORE=0 restores without it)",
				  store_id_);
	UniqueFd channel(*fd);
	const size_t total = dmabufs.size();
	for (size_t first = 0; first < total; first += kMaxFdsPerMessage) {
		const size_t n = std::min(kMaxFdsPerMessage, total - first);
		Header h;
		h.kind = static_cast<uint32_t>(kind);
		h.file_id = file_id;
		h.first = static_cast<uint32_t>(first);
		h.count = static_cast<uint32_t>(n);
		h.total = static_cast<uint32_t>(total);
		if (auto st = send_message(channel.get(), h, dmabufs.subspan(first, n)); !st)
			return st;
	}
	return ok_status();
}

Status ParallelRestore::send_stop() const
{
	Header h;
	h.kind = kStop;
	return send_message(send_.get(), h, {});
}

Status ParallelRestore::start()
{
	// Every signal blocked in the thread (and the copy threads it
	// starts): CRIU's handlers, SIGCHLD above all, belong on its main
	// thread.
	sigset_t all, old;
	sigfillset(&all);
	if (int err = ::pthread_sigmask(SIG_BLOCK, &all, &old); err != 0)
		return errno_error(err, "parallel restore: pthread_sigmask");
	// The thread gives up its share of the process's fs_struct (cwd,
	// root, umask) before CRIU's main thread goes on: the kernel refuses
	// setns() into a mount namespace (EINVAL) to a thread whose fs_struct
	// is shared, and CRIU's main thread enters the restored mount
	// namespaces while this thread copies (containers).
	std::promise<int> unshared;
	auto ready = unshared.get_future();
	try {
		thread_ = std::thread([this, &unshared] {
			const int err = ::unshare(CLONE_FS) == 0 ? 0 : errno;
			unshared.set_value(err);
			if (err == 0)
				serve();
		});
	} catch (const std::system_error &e) {
		::pthread_sigmask(SIG_SETMASK, &old, nullptr);
		return make_error(e.code().value(), "parallel restore: starting its thread: %s", e.what());
	}
	::pthread_sigmask(SIG_SETMASK, &old, nullptr);
	if (const int err = ready.get(); err != 0) {
		thread_.join();
		return errno_error(err, "parallel restore: unshare(CLONE_FS) in its thread");
	}
	log_info("parallel restore: CRIU's main process copies the GPU memory the tasks hand over");
	return ok_status();
}

Status ParallelRestore::finish(std::vector<pid_t> *senders)
{
	if (!finished_) {
		finished_ = true; // outcome_ is the thread's until it is joined
		Status stop = send_stop();
		if (!stop)
			(void)::shutdown(recv_.get(), SHUT_RD); // the thread's receive ends instead
		if (thread_.joinable())
			thread_.join();
		else if (stop)
			serve(); // POST_FORKING never reached us: the queue is served here
		if (!stop && (!outcome_ || outcome_->ok()))
			outcome_ = std::move(stop);
		log_.flush();
	}
	if (senders)
		*senders = senders_;
	return *outcome_;
}

void ParallelRestore::serve()
{
	struct Pending {
		std::vector<UniqueFd> fds;
		uint32_t received = 0;
	};
	// By (task, kind, file id).
	std::map<std::tuple<pid_t, uint32_t, int>, Pending> pending;
	std::optional<Error> failure;
	auto fail = [&](Error e) {
		if (!failure)
			failure = std::move(e);
	};
	for (;;) {
		auto msg = receive_message(recv_.get());
		if (!msg) {
			fail(std::move(msg).error());
			break;
		}
		const Header &h = msg->head;
		if (h.kind == kStop)
			break;
		if (h.kind != static_cast<uint32_t>(HandOverKind::Kfd) &&
		    h.kind != static_cast<uint32_t>(HandOverKind::Render)) {
			fail(make_error(EPROTO, "parallel restore: a message of unknown kind %u", h.kind));
			continue;
		}
		if (std::find(senders_.begin(), senders_.end(), msg->pid) == senders_.end())
			senders_.push_back(msg->pid);
		const auto key = std::make_tuple(msg->pid, h.kind, static_cast<int>(h.file_id));
		Pending &p = pending[key];
		if (p.fds.empty())
			p.fds.resize(h.total);
		if (p.fds.size() != h.total || h.first != p.received) {
			fail(make_error(EPROTO, "parallel restore: task %d, file %d: buffers out of order", msg->pid,
					h.file_id));
			pending.erase(key);
			continue;
		}
		for (auto &fd : msg->fds)
			p.fds[p.received++] = std::move(fd);
		if (p.received < h.total)
			continue;
		HandOver ho;
		ho.kind = static_cast<HandOverKind>(h.kind);
		ho.file_id = h.file_id;
		ho.pid = msg->pid;
		ho.dmabufs = std::move(p.fds);
		pending.erase(key);
		if (failure || cancel_)
			continue; // the restore fails anyway: copy no more
		if (auto st = copy_(ho, cancel_, log_); !st)
			fail(std::move(st).error().context(strprintf(
				"parallel restore of task %d, %s file %d", ho.pid, kind_name(h.kind), ho.file_id)));
	}
	for (const auto &[key, p] : pending)
		fail(make_error(EPROTO, "parallel restore: task %d, file %d: %u of %zu buffers received",
				std::get<0>(key), std::get<2>(key), p.received, p.fds.size()));
	outcome_ = failure ? Status(std::move(*failure)) : ok_status();
}

} // namespace amdcr
