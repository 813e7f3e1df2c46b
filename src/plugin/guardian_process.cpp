// SPDX-License-Identifier: GPL-2.0-only
//
// The guardian's process (plugin/guardian.h): what it keeps of the
// messages, how it repairs what a killed CRIU left, and how it sets itself
// apart from CRIU's process when it starts.
#include "plugin/guardian_process.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <syslog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "base/file_io.h"
#include "base/socket_fds.h"
#include "plugin/guardian_protocol.h"

namespace amdcr::guardian {
namespace {

struct PausedTarget {
	pid_t pid = 0;
	UniqueFd kfd;
	UniqueFd pidfd;
};

// A /dev/kfd file about to be paused: which of the candidates KFD pauses
// (the file's owner) is not known yet.
struct PausingTarget {
	int file = 0;
	UniqueFd kfd;
	std::vector<UniqueFd> pidfds;
};

struct RestoredTask {
	pid_t pid = 0;
	UniqueFd pidfd;
};

class GuardianProcess {
public:
	GuardianProcess(Guardian::Stage stage, int chan, int criu_pidfd, int dir_fd, pid_t criu_pid)
		: stage_(stage), chan_(chan), criu_(criu_pidfd), dir_(dir_fd), criu_pid_(criu_pid)
	{
	}
	[[noreturn]] void run();

private:
	// One message from the channel: false at EOF or on an error.
	bool receive(int flags);
	void handle(const Wire &w, std::vector<UniqueFd> fds);
	[[noreturn]] void repair();
	void unpause(PausedTarget &t);
	void unpause(PausingTarget &t);
	// PTRACE_SEIZE of `pid` (alive: `pidfd`), UNPAUSE through `kfd` from
	// here, detach: 0, or the errno of what failed; *seized tells which.
	int seize_unpause(pid_t pid, int pidfd, const Kfd &kfd, bool *seized);
	void detach(pid_t pid);
	void log(const char *fmt, ...) __attribute__((format(printf, 2, 3)));

	Guardian::Stage stage_;
	UniqueFd chan_, criu_, dir_, log_;
	pid_t criu_pid_;
	bool plugin_gone_ = false; // the channel reached EOF without Finished
	bool log_refused_ = false; // amdgpu-guardian.log could not be opened safely
	std::vector<PausedTarget> paused_;
	std::vector<PausingTarget> pausing_;
	std::vector<std::string> temps_;
	std::vector<RestoredTask> tasks_;
};

// The pid a pidfd refers to, in our pid namespace (its fdinfo's "Pid:").
pid_t pidfd_pid(int pidfd)
{
	char path[64];
	std::snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
	FILE *f = std::fopen(path, "re");
	if (!f)
		return 0;
	char line[256];
	long pid = 0;
	while (std::fgets(line, sizeof(line), f))
		if (std::sscanf(line, "Pid: %ld", &pid) == 1)
			break;
	std::fclose(f);
	return static_cast<pid_t>(pid);
}

bool GuardianProcess::receive(int flags)
{
	Wire w;
	auto msg = receive_with_fds(chan_.get(), &w, sizeof(w), kMaxFds, flags);
	if (!msg && msg.error().code() == EAGAIN)
		return false;
	if (!msg || msg->bytes == 0) {
		plugin_gone_ = true;
		return false;
	}
	if (msg->bytes != sizeof(w)) {
		log("malformed message dropped: %zu bytes, not %zu (with %zu fds)", msg->bytes, sizeof(w),
		    msg->fds.size());
		return true;
	}
	handle(w, std::move(msg->fds));
	return true;
}

void GuardianProcess::handle(const Wire &w, std::vector<UniqueFd> fds)
{
	if (!well_formed(w, fds.size(), stage_)) {
		log("malformed message dropped: kind %u, pid %d, file %d, %zu fds (at the %s)", w.kind, w.pid,
		    w.file, fds.size(), stage_ == Guardian::Stage::Dump ? "dump" : "restore");
		return;
	}
	switch (static_cast<Kind>(w.kind)) {
	case Kind::Paused:
		std::erase_if(pausing_, [&](const PausingTarget &t) { return t.file == w.file; });
		paused_.push_back({w.pid, std::move(fds[0]), std::move(fds[1])});
		break;
	case Kind::Pausing: {
		PausingTarget t{w.file, std::move(fds[0]), {}};
		for (size_t i = 1; i < fds.size(); i++)
			t.pidfds.push_back(std::move(fds[i]));
		pausing_.push_back(std::move(t));
		break;
	}
	case Kind::Unpaused:
		std::erase_if(paused_, [&](const PausedTarget &t) { return t.pid == w.pid; });
		break;
	case Kind::TempFile:
		temps_.emplace_back(w.name, strnlen(w.name, sizeof(w.name)));
		break;
	case Kind::Task: {
		const pid_t pid = pidfd_pid(fds[0].get());
		tasks_.push_back({pid, std::move(fds[0])});
		break;
	}
	case Kind::Resumed:
		std::erase_if(tasks_, [&](const RestoredTask &t) { return t.pid == w.pid; });
		if (stage_ == Guardian::Stage::Restore && tasks_.empty())
			_exit(0); // every task with GPU state is resumed: nothing to guard
		break;
	case Kind::Finished:
		_exit(0);
	case Kind::Started:
		break;
	}
}

void GuardianProcess::run()
{
	for (;;) {
		pollfd p[2] = {{criu_.get(), POLLIN, 0}, {plugin_gone_ ? -1 : chan_.get(), POLLIN, 0}};
		if (::poll(p, 2, -1) < 0) {
			// Acting now could unpause or kill under a live CRIU:
			// wait and watch again instead.
			if (errno != EINTR)
				::usleep(10000);
			continue;
		}
		if (p[0].revents) {
			// Whatever the plugin sent before CRIU ended counts.
			while (!plugin_gone_ && receive(MSG_DONTWAIT)) {
			}
			repair();
		}
		if (p[1].revents)
			(void)receive(0);
	}
}

void GuardianProcess::log(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	std::vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	::syslog(LOG_WARNING, "guardian: %s", msg);
	if (!dir_.valid())
		return;
	if (!log_.valid() && !log_refused_) {
		// The directory is the user's: a planted symbolic link or
		// FIFO is refused (syslog says why), never followed.
		auto fd = open_in_dir(dir_.get(), Guardian::kLogName, InDir::Append);
		if (!fd) {
			log_refused_ = true;
			::syslog(LOG_WARNING, "guardian: not logging to the image directory: %s",
				 fd.error().message().c_str());
			return;
		}
		log_ = std::move(*fd);
	}
	if (!log_.valid())
		return;
	char when[64] = {};
	const time_t now = ::time(nullptr);
	struct tm tm {};
	if (::gmtime_r(&now, &tm))
		std::strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	::dprintf(log_.get(), "%s amdgpu_plugin guardian (pid %d): %s\n", when, static_cast<int>(::getpid()), msg);
}

void GuardianProcess::detach(pid_t pid)
{
	if (::ptrace(PTRACE_INTERRUPT, pid, nullptr, nullptr) != 0)
		return;
	// Up to 1 s for the stop; without it our exit detaches the tracee.
	// A deadline, not a count of 1 ms sleeps: under load each sleep
	// takes several (a CI run's guardian logged its UNPAUSE 6 s after it).
	const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
	while (std::chrono::steady_clock::now() < deadline) {
		int status = 0;
		const pid_t r = ::waitpid(pid, &status, __WALL | WNOHANG);
		if (r < 0)
			return;
		if (r == pid && !WIFSTOPPED(status))
			return; // it ended
		if (r == pid) {
			// A signal-delivery stop passes its signal on; the
			// interrupt's own stop (PTRACE_EVENT_STOP) none.
			const bool event_stop = (status >> 16) == PTRACE_EVENT_STOP;
			const long sig = event_stop ? 0 : WSTOPSIG(status);
			(void)::ptrace(PTRACE_DETACH, pid, nullptr, reinterpret_cast<void *>(sig));
			return;
		}
		::usleep(1000);
	}
}

int GuardianProcess::seize_unpause(pid_t pid, int pidfd, const Kfd &kfd, bool *seized)
{
	*seized = false;
	if (pidfd_send_signal(pidfd, 0) != 0)
		return ESRCH;
	// CRIU's ptrace ends with CRIU; allow the kernel a moment (2 s at most,
	// a deadline as in detach).
	int err = 0;
	const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
	for (;;) {
		if (::ptrace(PTRACE_SEIZE, pid, nullptr, nullptr) == 0) {
			err = 0;
			break;
		}
		err = errno;
		if ((err != EPERM && err != EBUSY) || std::chrono::steady_clock::now() >= deadline)
			break;
		::usleep(1000);
	}
	if (err != 0)
		return err;
	// The pid was a number until now: the target may have ended (and
	// been reaped) while the seize was retried, and its pid gone to
	// another process, which we must not touch. While the pidfd's process
	// has not been reaped its pid is its own: if it still takes a signal,
	// the process seized is the target.
	if (pidfd_send_signal(pidfd, 0) != 0) {
		detach(pid);
		log("pid %d: ended while it was being seized, and the pid is another process's now: detached at once, "
		    "untouched",
		    pid);
		return ESRCH;
	}
	*seized = true;
	const Status st = kfd.unpause();
	detach(pid);
	return st ? 0 : st.error().code();
}

void GuardianProcess::unpause(PausedTarget &t)
{
	const Kfd kfd = Kfd::adopt(std::move(t.kfd));
	bool seized = false;
	const int err = seize_unpause(t.pid, t.pidfd.get(), kfd, &seized);
	if (err == 0)
		log("pid %d: GPU queues resumed (UNPAUSE)", t.pid);
	else if (err == ESRCH && !seized)
		log("pid %d: gone (its GPU queues went with it)", t.pid);
	else if (!seized)
		log("pid %d: its GPU queues stay paused: PTRACE_SEIZE: %s", t.pid, std::strerror(err));
	else
		log("pid %d: its GPU queues stay paused: KFD CRIU_OP UNPAUSE: %s", t.pid, std::strerror(err));
}

// CRIU ended between the plugin's announcement and its confirmation: KFD
// may or may not have paused the file's owner. UNPAUSE through the file
// from each candidate in turn: the owner's answers (done, or EINVAL: not
// paused, CRIU ended before the pause or the plugin had unpaused it
// without finding its pid) end the search; EBADF says the
// candidate is not the owner (KFD takes CRIU_OP from another process only
// from the tracer of the owner's leader thread): logged, the next is tried.
void GuardianProcess::unpause(PausingTarget &t)
{
	const Kfd kfd = Kfd::adopt(std::move(t.kfd));
	for (const auto &pidfd : t.pidfds) {
		const pid_t pid = pidfd_pid(pidfd.get());
		if (pid <= 0)
			continue; // gone
		bool seized = false;
		const int err = seize_unpause(pid, pidfd.get(), kfd, &seized);
		if (err == 0) {
			log("pid %d: GPU queues resumed (UNPAUSE)", pid);
			return;
		}
		if (err == EINVAL && seized) {
			log("pid %d: its GPU queues were not paused when CRIU ended: nothing to resume", pid);
			return;
		}
		if (err == EBADF && seized) {
			log("pid %d: holds the file but is not its KFD process (EBADF): trying the next process", pid);
			continue;
		}
		if (err == ESRCH && !seized)
			continue;
		log("pid %d: if CRIU paused its GPU queues they stay paused: %s: %s", pid,
		    seized ? "KFD CRIU_OP UNPAUSE" : "PTRACE_SEIZE", std::strerror(err));
	}
	// Every candidate was gone, failed, or only held the file: the
	// owner, if CRIU paused it, was not among them.
	log("none of the %zu processes announced as holding the /dev/kfd file answered as its KFD process: if "
	    "CRIU paused the owner's GPU queues they stay paused",
	    t.pidfds.size());
}

void GuardianProcess::repair()
{
	const char *what = stage_ == Guardian::Stage::Dump ? "dump" : "restore";
	if (paused_.empty() && pausing_.empty() && temps_.empty() && tasks_.empty())
		_exit(0);
	log("CRIU (pid %d) ended before the plugin finished its %s", static_cast<int>(criu_pid_), what);
	for (auto &t : paused_)
		unpause(t);
	for (auto &t : pausing_)
		unpause(t);
	for (const auto &name : temps_) {
		if (!dir_.valid())
			break;
		if (::unlinkat(dir_.get(), name.c_str(), 0) == 0)
			log("removed the temporary file %s", name.c_str());
		else if (errno != ENOENT)
			log("temporary file %s not removed: %s", name.c_str(), std::strerror(errno));
	}
	for (const auto &t : tasks_) {
		if (pidfd_send_signal(t.pidfd.get(), SIGKILL) == 0)
			log("pid %d: killed (SIGKILL): restored task whose GPU state CRIU did not finish", t.pid);
		else if (errno != ESRCH)
			log("pid %d: not killed: %s", t.pid, std::strerror(errno));
	}
	_exit(0);
}

// Closes every fd but `keep` (all >= 3: Guardian::start moved them there);
// 0-2 become /dev/null.
void close_all_but(std::vector<int> keep)
{
	if (std::any_of(keep.begin(), keep.end(), [](int fd) { return fd < 3; }))
		_exit(1); // 0-2 are about to be replaced: start() prevents this
	std::sort(keep.begin(), keep.end());
	unsigned first = 3;
	for (int fd : keep) {
		if (static_cast<unsigned>(fd) > first)
			(void)::close_range(first, static_cast<unsigned>(fd) - 1, 0);
		first = static_cast<unsigned>(fd) + 1;
	}
	(void)::close_range(first, ~0U, 0);
	const int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null >= 0) {
		for (int fd = 0; fd < 3; fd++)
			(void)::dup2(null, fd);
		if (null > 2)
			::close(null);
	}
}

void reset_signals()
{
	struct sigaction dfl {};
	dfl.sa_handler = SIG_DFL;
	for (int sig = 1; sig < NSIG; sig++)
		(void)::sigaction(sig, &dfl, nullptr);
	sigset_t none;
	sigemptyset(&none);
	(void)::sigprocmask(SIG_SETMASK, &none, nullptr);
}

} // namespace

void run_guardian(Guardian::Stage stage, int chan, int criu_pidfd, int dir_fd, pid_t criu_pid)
{
	reset_signals();
	std::vector<int> keep = {chan, criu_pidfd};
	if (dir_fd >= 0)
		keep.push_back(dir_fd);
	close_all_but(keep);
	(void)::prctl(PR_SET_NAME, Guardian::kComm, 0, 0, 0);
	(void)::chdir("/");
	::openlog("amdgpu_plugin", LOG_PID, LOG_DAEMON);
	// Our pid, for finish() to wait for our end.
	Wire hello;
	hello.kind = static_cast<uint32_t>(Kind::Started);
	hello.pid = ::getpid();
	if (!send_message(chan, hello))
		_exit(1);
	GuardianProcess(stage, chan, criu_pidfd, dir_fd, criu_pid).run();
}

} // namespace amdcr::guardian
