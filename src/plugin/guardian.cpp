// SPDX-License-Identifier: GPL-2.0-only
//
// The guardian's plugin side: starting its process (guardian_process.cpp
// runs in it), and the messages that tell it what to guard
// (guardian_protocol.h).
#include "plugin/guardian.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <span>
#include <string>
#include <vector>

#include "base/file_io.h"
#include "plugin/guardian_process.h"
#include "plugin/guardian_protocol.h"

namespace amdcr {

using guardian::Kind;
using guardian::Wire;

namespace {

// How long the plugin waits for a live guardian's first message. A
// guardian that ends before sending it ends the wait at once (the channel
// hangs up: it holds the channel's last other end), so the bound only
// meets a guardian still starting: on a CI run at load 25 the fork and
// the middle process's end took 3.3 s, and no message came in the 2 s
// this bound then was, so that dump went on unguarded, which is worse
// than a dump that waits longer.
constexpr int kStartTimeoutMs = 30000;

// How long finish() waits for the guardian, told to exit, to have ended.
// It calls _exit as soon as it reads the message; a CI run under that same
// load still had a normal dump's guardian there after the 2 s this bound
// then was (not reproduced; its scheduling and the teardown of a process
// forked from CRIU's are what is left to take the time). Only a loaded
// machine ever waits more than a moment.
constexpr int kFinishTimeoutMs = 10000;

// Where the guardian `pid` is, for the message of a finish() that timed
// out: its state and wait channel from /proc ("" when it cannot be read).
std::string where_is(pid_t pid)
{
	const std::string proc = "/proc/" + std::to_string(pid);
	auto stat = read_text_file(AT_FDCWD, proc + "/stat", 4096);
	if (!stat)
		return "";
	auto wchan = read_text_file(AT_FDCWD, proc + "/wchan", 256);
	// The state follows the command's closing parenthesis.
	const auto paren = stat->rfind(')');
	const char state = paren != std::string::npos && paren + 2 < stat->size() ? (*stat)[paren + 2] : '?';
	return std::string(" (state ") + state + ", waiting in " + (wchan && !wchan->empty() ? *wchan : "?") + ")";
}

// The guardian's first message: its pid (kStartTimeoutMs at most).
Result<pid_t> receive_started(int chan)
{
	pollfd p{chan, POLLIN, 0};
	int r;
	do {
		r = ::poll(&p, 1, kStartTimeoutMs);
	} while (r < 0 && errno == EINTR);
	if (r <= 0)
		return make_error(ETIMEDOUT, "guardian: did not start within %d s", kStartTimeoutMs / 1000);
	Wire w;
	const ssize_t n = ::recv(chan, &w, sizeof(w), MSG_DONTWAIT);
	if (n != static_cast<ssize_t>(sizeof(w)) || w.kind != static_cast<uint32_t>(Kind::Started) || w.pid <= 0)
		return make_error(EPROTO, "guardian: did not start (%zd bytes)", n);
	return static_cast<pid_t>(w.pid);
}

// `fd` moved to the lowest free fd >= 3. CRIU may run with 0-2 closed;
// socketpair and pidfd_open then return them, and the guardian points 0-2
// at /dev/null.
Status above_stdio(UniqueFd &fd, const char *what)
{
	if (fd.get() >= 3)
		return ok_status();
	UniqueFd moved(::fcntl(fd.get(), F_DUPFD_CLOEXEC, 3));
	if (!moved)
		return errno_error(errno, std::string("guardian: moving ") + what + " above fd 2");
	fd = std::move(moved);
	return ok_status();
}

} // namespace

Result<Guardian> Guardian::start(Stage stage, int image_dir_fd)
{
	int sv[2];
	if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
		return errno_error(errno, "guardian: socketpair");
	UniqueFd ours(sv[0]), theirs(sv[1]);
	const pid_t criu = ::getpid();
	UniqueFd criu_pidfd(guardian::pidfd_open(criu));
	if (!criu_pidfd)
		return errno_error(errno, "guardian: pidfd_open of CRIU's process");
	for (UniqueFd *fd : {&ours, &theirs, &criu_pidfd})
		if (auto st = above_stdio(*fd, fd == &criu_pidfd ? "a pidfd" : "the channel"); !st)
			return std::move(st).error();
	UniqueFd dir;
	if (image_dir_fd >= 0) {
		dir.reset(::fcntl(image_dir_fd, F_DUPFD_CLOEXEC, 3));
		if (!dir)
			return errno_error(errno, "guardian: dup of the image directory");
	}

	// CRIU must never see a child of ours exit (its SIGCHLD handlers end
	// the dump or restore): the middle process is reaped right here,
	// with SIGCHLD held back until then.
	sigset_t chld, old;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	(void)::pthread_sigmask(SIG_BLOCK, &chld, &old);
	const pid_t middle = ::fork();
	if (middle == 0) {
		(void)::setsid();
		const pid_t g = ::fork();
		if (g == 0)
			guardian::run_guardian(stage, theirs.get(), criu_pidfd.get(), dir.get(), criu);
		_exit(g < 0 ? 1 : 0);
	}
	const int fork_errno = errno;
	int status = 0;
	pid_t r = -1;
	if (middle > 0)
		do {
			r = ::waitpid(middle, &status, __WALL);
		} while (r < 0 && errno == EINTR);
	(void)::pthread_sigmask(SIG_SETMASK, &old, nullptr);
	if (middle < 0)
		return errno_error(fork_errno, "guardian: fork");
	if (r != middle || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return make_error(ECHILD, "guardian: could not be started (status 0x%x)", status);
	theirs.reset();
	auto pid = receive_started(ours.get());
	if (!pid)
		return std::move(pid).error();
	UniqueFd pidfd(guardian::pidfd_open(*pid));
	if (!pidfd)
		return errno_error(errno, "guardian: pidfd_open of the guardian");
	return Guardian(std::move(ours), std::move(pidfd), *pid);
}

Status Guardian::pausing(const Kfd &target, int file, std::span<const pid_t> candidates) const
{
	if (candidates.empty() || candidates.size() > kMaxCandidates)
		return make_error(EINVAL, "guardian: %zu candidate processes (1 to %zu)", candidates.size(),
				  kMaxCandidates);
	std::vector<UniqueFd> pidfds;
	for (pid_t pid : candidates) {
		pidfds.emplace_back(guardian::pidfd_open(pid));
		if (!pidfds.back())
			return errno_error(errno, "guardian: pidfd_open of process " + std::to_string(pid));
	}
	Wire w;
	w.kind = static_cast<uint32_t>(Kind::Pausing);
	w.file = file;
	int fds[guardian::kMaxFds];
	fds[0] = target.fd();
	for (size_t i = 0; i < pidfds.size(); i++)
		fds[i + 1] = pidfds[i].get();
	return guardian::send_message(chan_.get(), w, std::span<const int>(fds, pidfds.size() + 1));
}

Status Guardian::paused(const Kfd &target, pid_t pid, int file) const
{
	UniqueFd pidfd(guardian::pidfd_open(pid));
	if (!pidfd)
		return errno_error(errno, "guardian: pidfd_open of the paused process");
	Wire w;
	w.kind = static_cast<uint32_t>(Kind::Paused);
	w.pid = pid;
	w.file = file;
	const int fds[] = {target.fd(), pidfd.get()};
	return guardian::send_message(chan_.get(), w, fds);
}

Status Guardian::unpaused(pid_t pid) const
{
	Wire w;
	w.kind = static_cast<uint32_t>(Kind::Unpaused);
	w.pid = pid;
	return guardian::send_message(chan_.get(), w);
}

Status Guardian::temp_file(std::string_view name) const
{
	Wire w;
	if (name.size() >= sizeof(w.name))
		return make_error(ENAMETOOLONG, "guardian: file name too long");
	w.kind = static_cast<uint32_t>(Kind::TempFile);
	std::copy(name.begin(), name.end(), w.name);
	return guardian::send_message(chan_.get(), w);
}

Status Guardian::resumed(pid_t pid) const
{
	Wire w;
	w.kind = static_cast<uint32_t>(Kind::Resumed);
	w.pid = pid;
	return guardian::send_message(chan_.get(), w);
}

Status Guardian::report_task(int channel)
{
	UniqueFd self(guardian::pidfd_open(::getpid()));
	if (!self)
		return errno_error(errno, "guardian: pidfd_open of the restored task");
	Wire w;
	w.kind = static_cast<uint32_t>(Kind::Task);
	const int fd = self.get();
	return guardian::send_message(channel, w, std::span<const int>(&fd, 1));
}

bool Guardian::ended() const
{
	if (!pidfd_)
		return true;
	pollfd p{pidfd_.get(), POLLIN, 0};
	return ::poll(&p, 1, 0) > 0;
}

Status Guardian::finish()
{
	if (!chan_)
		return ok_status();
	Wire w;
	w.kind = static_cast<uint32_t>(Kind::Finished);
	Status st = guardian::send_message(chan_.get(), w, {});
	if (!st && (st.error().code() == EPIPE || st.error().code() == ECONNRESET))
		st = ok_status(); // it has exited already (a restore with every task resumed)
	if (st) {
		// Until the guardian's process has ended (its pidfd turns
		// readable), kFinishTimeoutMs at most.
		pollfd p{pidfd_.get(), POLLIN, 0};
		int r;
		do {
			r = ::poll(&p, 1, kFinishTimeoutMs);
		} while (r < 0 && errno == EINTR);
		if (r == 0)
			st = make_error(ETIMEDOUT, "guardian: pid %d still running %d s after it was told to exit%s",
					static_cast<int>(pid_), kFinishTimeoutMs / 1000, where_is(pid_).c_str());
	}
	chan_.reset();
	pidfd_.reset();
	return st;
}

} // namespace amdcr
