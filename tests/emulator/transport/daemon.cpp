// SPDX-License-Identifier: GPL-2.0-only
#include "daemon.h"

#include "faults.h"
#include "profile.h"
#include "protocol.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace kfdemu {
namespace {

int sys_pidfd_open(pid_t pid)
{
	return int(::syscall(SYS_pidfd_open, pid, 0));
}

int sys_pidfd_getfd(int pidfd, int fd)
{
	return int(::syscall(SYS_pidfd_getfd, pidfd, fd, 0));
}

// One "Key:\tvalue" line of /proc/<pid>/status, or "".
std::string status_field(pid_t pid, std::string_view key)
{
	std::ifstream in("/proc/" + std::to_string(pid) + "/status");
	std::string line;
	while (std::getline(in, line))
		if (line.size() > key.size() && line.compare(0, key.size(), key) == 0 &&
		    line[key.size()] == ':') {
			size_t i = key.size() + 1;
			while (i < line.size() && (line[i] == '\t' || line[i] == ' '))
				i++;
			return line.substr(i);
		}
	return {};
}

// The cgroup v1 device controller's path of `pid` ("/kfdemu/gpu"), or ""
// (cgroup v2 only, or no devices line).
std::string devices_cgroup(pid_t pid)
{
	std::ifstream in("/proc/" + std::to_string(pid) + "/cgroup");
	std::string line;
	while (std::getline(in, line)) {
		// "N:controller[,controller..]:path"
		const size_t a = line.find(':');
		const size_t b = a == std::string::npos ? a : line.find(':', a + 1);
		if (b == std::string::npos)
			continue;
		const std::string ctrls = "," + line.substr(a + 1, b - a - 1) + ",";
		if (ctrls.find(",devices,") != std::string::npos)
			return line.substr(b + 1);
	}
	return {};
}

// One "c 226:130 rwm" (or "a *:* rwm") entry of devices.list allows
// opening the character device maj:min for reading and writing (runc's
// "c *:* m" allows only mknod).
bool devices_entry_allows(const std::string &line, unsigned maj, unsigned min)
{
	char type = 0;
	char nums[64] = {};
	char access[8] = {};
	if (std::sscanf(line.c_str(), "%c %63s %7s", &type, nums, access) != 3 || !std::strchr(access, 'r') ||
	    !std::strchr(access, 'w'))
		return false;
	if (type == 'a')
		return true;
	const char *colon = std::strchr(nums, ':');
	if (type != 'c' || !colon)
		return false;
	const std::string m1(nums, size_t(colon - nums)), m2(colon + 1);
	return (m1 == "*" || std::strtoul(m1.c_str(), nullptr, 10) == maj) &&
	       (m2 == "*" || std::strtoul(m2.c_str(), nullptr, 10) == min);
}

// Whether the device cgroup of `pid` denies the character device maj:min,
// as the kernel's check at open and in kfd_topology.c does. Read from the
// cgroup v1 device controller's devices.list (what runc wrote from the
// OCI spec's linux.resources.devices); under cgroup v2 (an eBPF program,
// not readable here) or when unreadable: not denied.
bool devices_cgroup_denies(pid_t pid, unsigned maj, unsigned min)
{
	const std::string path = devices_cgroup(pid);
	if (path.empty())
		return false;
	std::ifstream list("/sys/fs/cgroup/devices" + path + "/devices.list");
	if (!list)
		return false;
	std::string line;
	while (std::getline(list, line))
		if (devices_entry_allows(line, maj, min))
			return false;
	return true;
}

int vm_io(pid_t tgid, uint64_t addr, void *buf, size_t len, bool write)
{
	char *p = static_cast<char *>(buf);
	while (len > 0) {
		iovec local{p, len};
		iovec remote{reinterpret_cast<void *>(addr), len};
		ssize_t n = write ? ::process_vm_writev(tgid, &local, 1, &remote, 1, 0)
				  : ::process_vm_readv(tgid, &local, 1, &remote, 1, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno == ESRCH ? -ESRCH : -EFAULT;
		}
		if (n == 0)
			return -EFAULT;
		p += n;
		addr += uint64_t(n);
		len -= size_t(n);
	}
	return 0;
}

std::string json_escape(std::string_view s)
{
	std::string o;
	for (char c : s) {
		if (c == '"' || c == '\\')
			o += '\\';
		o += c;
	}
	return o;
}

// Runs a model notification; an exception there is the model's bug, not a
// reason to stop serving everyone else.
template <typename F>
void guarded(F &&f)
{
	try {
		f();
	} catch (...) {
		std::fputs("kfd-emu: model notification failed\n", stderr);
	}
}

} // namespace

int ProcMemory::read(pid_t tgid, uint64_t addr, void *dst, size_t len)
{
	return vm_io(tgid, addr, dst, len, false);
}

int ProcMemory::write(pid_t tgid, uint64_t addr, const void *src, size_t len)
{
	return vm_io(tgid, addr, const_cast<void *>(src), len, true);
}

bool ProcMemory::vma_of(pid_t tgid, uint64_t addr, uint64_t *start, uint64_t *end)
{
	std::ifstream maps("/proc/" + std::to_string(tgid) + "/maps");
	std::string line;
	while (std::getline(maps, line)) {
		unsigned long long s = 0, e = 0;
		if (std::sscanf(line.c_str(), "%llx-%llx", &s, &e) == 2 && s <= addr && addr < e) {
			*start = s;
			*end = e;
			return true;
		}
	}
	return false;
}

bool proc_is_tracer_of(pid_t tracer_tgid, pid_t tracer_tid, pid_t pid)
{
	// /proc/<pid>/status is the leader thread's: its TracerPid is the
	// tracer *thread* (KFD: ptrace_parent(lead_thread) == current).
	std::string t = status_field(pid, "TracerPid");
	if (t.empty() || t == "0")
		return false;
	const pid_t tracer = pid_t(std::stol(t));
	std::error_code ec;
	const bool tid_is_ours = std::filesystem::exists(
		"/proc/" + std::to_string(tracer_tgid) + "/task/" + std::to_string(tracer_tid), ec);
	if (tid_is_ours)
		return tracer == tracer_tid;
	// The caller's tid is from another pid namespace, which this daemon
	// cannot translate: any thread of its process counts (laxer than KFD).
	std::string tg = status_field(tracer, "Tgid");
	return !tg.empty() && pid_t(std::stol(tg)) == tracer_tgid;
}

bool proc_has_cr_capability(pid_t tid)
{
	std::string cap = status_field(tid, "CapEff");
	if (cap.empty())
		return false;
	uint64_t v = std::stoull(cap, nullptr, 16);
	return (v >> 40 & 1) || (v >> 21 & 1);	// CHECKPOINT_RESTORE, SYS_ADMIN
}

// ---------------------------------------------------------------------------
// The Caller of one device call.
// ---------------------------------------------------------------------------

class CallerImpl final : public Caller {
public:
	CallerImpl(Daemon &d, pid_t tgid, pid_t tid, int conn) : d_(d), conn_(conn)
	{
		id_.tgid = tgid;
		id_.tid = tid > 0 ? tid : tgid;
	}
	~CallerImpl() override
	{
		for (auto &f : fds_)
			d_.drop_reserved(f.fd);
	}
	CallerImpl(const CallerImpl &) = delete;
	CallerImpl &operator=(const CallerImpl &) = delete;

	const CallerIdentity &identity() const override
	{
		if (!caps_read_) {
			// The tid may be gone (or belong to another namespace):
			// fall back to the process.
			id_.cap_checkpoint_restore = proc_has_cr_capability(id_.tid) ||
						     (id_.tid != id_.tgid && proc_has_cr_capability(id_.tgid));
			caps_read_ = true;
		}
		return id_;
	}
	int read(uint64_t addr, void *dst, size_t len) override
	{
		return vm_io(id_.tgid, addr, dst, len, false);
	}
	int write(uint64_t addr, const void *src, size_t len) override
	{
		return vm_io(id_.tgid, addr, const_cast<void *>(src), len, true);
	}
	void install_fd(int model_fd, bool cloexec, uint64_t patch_addr, bool as_result) override
	{
		Daemon::Reservation r;
		if (int e = d_.reserve_client_fd(model_fd, open_access_, &r); e < 0) {
			failed_install_ = e;
			return;
		}
		fds_.push_back({r, patch_addr,
				(cloexec ? wire::kFdCloexec : 0u) | (as_result ? wire::kFdAsResult : 0u)});
	}
	std::optional<FileKey> resolve_fd(int caller_fd) override
	{
		if (caller_fd < 0)
			return std::nullopt;
		int pidfd = sys_pidfd_open(id_.tgid);
		if (pidfd < 0)
			return std::nullopt;
		int fd = sys_pidfd_getfd(pidfd, caller_fd);
		::close(pidfd);
		struct stat st;
		if (fd < 0)
			return std::nullopt;
		bool ok = ::fstat(fd, &st) == 0;
		::close(fd);
		if (!ok)
			return std::nullopt;
		// No call back into the model here: it calls resolve_fd with its
		// lock held, and looks the key up in its own file table.
		return FileKey{st.st_dev, st.st_ino};
	}
	bool is_tracer_of(pid_t pid) override { return proc_is_tracer_of(id_.tgid, id_.tid, pid); }
	pid_t own_ns_pid(pid_t pid) override
	{
		const std::string ns = status_field(pid, "NSpid");
		const size_t last = ns.find_last_of(" \t");
		try {
			return ns.empty() ? pid : pid_t(std::stol(last == std::string::npos ? ns : ns.substr(last + 1)));
		} catch (const std::exception &) {
			return pid;
		}
	}
	void entered() override { d_.entered(conn_); }
	// The shim makes a restarted call again (wire::kRestart).
	bool restarts_while_paused() const override { return true; }
	uint64_t made_ns() const override { return made_ns_; }
	void set_made_ns(uint64_t ns) { made_ns_ = ns; }
	bool wait_caller_gone(int ms) override
	{
		const int pidfd = sys_pidfd_open(id_.tgid);
		if (pidfd < 0)
			return errno == ESRCH;
		pollfd p{pidfd, POLLIN, 0};
		int r;
		do {
			r = ::poll(&p, 1, ms);
		} while (r < 0 && errno == EINTR);
		::close(pidfd);
		return r > 0;
	}
	bool process_exists(pid_t pid) override
	{
		if (pid <= 0)
			return false;
		if (::kill(pid, 0) != 0 && errno != EPERM)
			return false;
		std::string st = status_field(pid, "State");
		return !st.empty() && st[0] != 'Z' && st[0] != 'X';
	}

	// A caller in a container (a mount namespace other than the daemon's,
	// the host's) may use the GPU whose render node its /dev has with that
	// minor's numbers, if its device cgroup allows it too: after a restore
	// the two can disagree (CRIU restores the container's /dev from the
	// checkpoint, runc the cgroup from the new spec).
	bool in_container() const
	{
		const std::string proc = "/proc/" + std::to_string(id_.tgid);
		struct stat self {}, theirs {};
		return ::stat("/proc/self/ns/mnt", &self) == 0 && ::stat((proc + "/ns/mnt").c_str(), &theirs) == 0 &&
		       self.st_ino != theirs.st_ino;
	}
	bool container_denies(uint32_t minor) override
	{
		if (!in_container())
			return false;
		const std::string path = "/proc/" + std::to_string(id_.tgid) + "/root/dev/dri/renderD" + std::to_string(minor);
		struct stat node {};
		return ::stat(path.c_str(), &node) != 0 || !S_ISCHR(node.st_mode) ||
		       major(node.st_rdev) != kDrmMajor || ::minor(node.st_rdev) != minor ||
		       container_cgroup_only_denies(kDrmMajor, minor);
	}
	// The caller's device cgroup denies maj:min and the daemon's (the
	// host's, kfd-emu's) does not: the emulated machine's devices are the
	// host's, whatever cgroup the whole test runs in.
	bool container_cgroup_only_denies(unsigned maj, unsigned min) const
	{
		return devices_cgroup_denies(id_.tgid, maj, min) && !devices_cgroup_denies(::getpid(), maj, min);
	}
	// An open of a node the container's /dev has but its device cgroup
	// denies fails with EPERM, as the kernel's does.
	bool container_cgroup_denies(unsigned maj, unsigned min) const
	{
		return in_container() && container_cgroup_only_denies(maj, min);
	}

	struct Pending {
		Daemon::Reservation fd;
		uint64_t patch;
		uint32_t flags;
	};
	std::vector<Pending> take() { return std::exchange(fds_, {}); }
	int failed_install() const { return failed_install_; }
	// The access mode of the open(2) being served, for its new fd.
	void set_open_access(int access) { open_access_ = access; }

private:
	Daemon &d_;
	int conn_; // the connection the call came on (Daemon::entered)
	mutable CallerIdentity id_;
	mutable bool caps_read_ = false;
	std::vector<Pending> fds_;
	int failed_install_ = 0;
	int open_access_ = -1;
	uint64_t made_ns_ = 0;
};

// ---------------------------------------------------------------------------
// Daemon.
// ---------------------------------------------------------------------------

Daemon::Daemon(Model &model, std::string socket_path) : model_(model), path_(std::move(socket_path))
{
	listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	sockaddr_un sa{};
	sa.sun_family = AF_UNIX;
	if (path_.size() >= sizeof sa.sun_path) {
		error_ = "socket path too long: " + path_;
		return;
	}
	std::memcpy(sa.sun_path, path_.c_str(), path_.size() + 1);
	::unlink(path_.c_str());
	if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr *>(&sa), sizeof sa) ||
	    ::listen(listen_fd_, 128)) {
		error_ = "cannot listen on " + path_ + ": " + std::strerror(errno);
		return;
	}
	inotify_fd_ = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
	stop_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (inotify_fd_ < 0 || epoll_fd_ < 0 || stop_fd_ < 0) {
		error_ = std::string("inotify/epoll: ") + std::strerror(errno);
		return;
	}
	epoll_event ev{};
	ev.events = EPOLLIN;
	ev.data.u64 = uint64_t(inotify_fd_);
	::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, inotify_fd_, &ev);
	ev.data.u64 = uint64_t(stop_fd_);
	::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, stop_fd_, &ev);
}

Daemon::~Daemon()
{
	stop();
	for (int fd : {listen_fd_, inotify_fd_, epoll_fd_, stop_fd_})
		if (fd >= 0)
			::close(fd);
	for (auto &[tgid, w] : pidfds_)
		::close(w.fd);
	::unlink(path_.c_str());
}

void Daemon::start()
{
	accept_thread_ = std::thread([this] { accept_loop(); });
	watch_thread_ = std::thread([this] { watch_loop(); });
}

void Daemon::stop()
{
	if (stopping_.exchange(true))
		return;
	if (listen_fd_ >= 0)
		::shutdown(listen_fd_, SHUT_RDWR);
	uint64_t one = 1;
	if (stop_fd_ >= 0 && ::write(stop_fd_, &one, sizeof one) < 0) {
		// Nothing to do: the watcher exits on the next event anyway.
	}
	if (accept_thread_.joinable())
		accept_thread_.join();
	if (watch_thread_.joinable())
		watch_thread_.join();
}

void Daemon::accept_loop()
{
	while (!stopping_) {
		int c = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return;
		}
		ucred cred{};
		socklen_t len = sizeof cred;
		if (::getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &len) || cred.pid <= 0) {
			::close(c);
			continue;
		}
		track_process(cred.pid);
		{
			// Listed before its thread runs: await_turn sees its
			// unread first request.
			std::lock_guard lk(conns_mu_);
			conns_[c] = Conn{cred.pid};
		}
		std::thread([this, c, pid = cred.pid] { serve(c, pid); }).detach();
	}
}

void Daemon::track_process(pid_t tgid)
{
	// The watcher may be between dropping this pid's old process and
	// telling the model: wait for that, or end the old process here.
	std::lock_guard exiting(exit_mu_);
	bool ended = false;
	{
		std::lock_guard lock(mu_);
		connections_++;
		if (auto it = pidfds_.find(tgid); it != pidfds_.end()) {
			pollfd p{it->second.fd, POLLIN, 0};
			if (::poll(&p, 1, 0) != 1)
				return;	// the process we know
			// That process has exited and its pid already names
			// another one (CRIU restores a process under its old
			// pid): end the old one before serving the new one.
			forget_process_locked(tgid);
			ended = true;
		}
	}
	if (ended)
		guarded([&] { model_.process_exit(tgid); });
	std::lock_guard lock(mu_);
	int pfd = sys_pidfd_open(tgid);
	if (pfd < 0)
		return;
	// epoll reports a token, not the fd number: a number closed here
	// may be reused while the watcher still holds an old event for it.
	const uint64_t token = next_token_++;
	pidfds_[tgid] = PidWatch{pfd, token};
	epoll_event ev{};
	ev.events = EPOLLIN;
	ev.data.u64 = token;
	::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, pfd, &ev);
}

void Daemon::forget_process_locked(pid_t tgid)
{
	auto it = pidfds_.find(tgid);
	if (it == pidfds_.end())
		return;
	::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, it->second.fd, nullptr);
	::close(it->second.fd);
	pidfds_.erase(it);
	vmas_.erase(tgid);
	images_.erase(tgid);
	exits_++;
}

void Daemon::check_image(pid_t tgid, uint32_t image, bool fresh_image)
{
	if (image == 0)
		return;
	{
		std::lock_guard lock(mu_);
		auto [it, first] = images_.try_emplace(tgid, image);
		if (first || it->second == image)
			return;
		it->second = image;
		if (!fresh_image) {
			// The same address space under another number: a
			// restored process (forked by CRIU, whose number it sent
			// first, continuing with the dumped memory). In the
			// kernel its KFD context lives on with the mm.
			restored_images_++;
			return;
		}
		vmas_.erase(tgid);
		execs_++;
	}
	// The process exec'd: what the old program image had in KFD is gone
	// (the kernel ties it to the mm that exec replaced).
	guarded([&] { model_.process_exit(tgid); });
}

void Daemon::watch_loop()
{
	epoll_event evs[16];
	while (!stopping_) {
		int n = ::epoll_wait(epoll_fd_, evs, 16, -1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		for (int i = 0; i < n; i++) {
			const uint64_t token = evs[i].data.u64;
			if (token == uint64_t(stop_fd_))
				return;
			if (token == uint64_t(inotify_fd_)) {
				alignas(inotify_event) char buf[4096];
				for (;;) {
					ssize_t r = ::read(inotify_fd_, buf, sizeof buf);
					if (r <= 0)
						break;
					for (char *p = buf; p < buf + r;) {
						auto *e = reinterpret_cast<inotify_event *>(p);
						p += sizeof *e + e->len;
						std::optional<FileKey> released;
						{
							std::lock_guard lock(mu_);
							auto it = watches_.find(e->wd);
							if (it == watches_.end())
								continue;
							if (e->mask & IN_IGNORED) {
								watches_.erase(it);
								continue;
							}
							if ((e->mask & (IN_CLOSE_WRITE | IN_CLOSE_NOWRITE)) &&
							    it->second.descriptions > 0 &&
							    --it->second.descriptions == 0) {
								released = it->second.key;
								releases_++;
							}
						}
						if (released)
							guarded([&] { model_.release(*released); });
					}
				}
				continue;
			}
			std::lock_guard exiting(exit_mu_);
			pid_t tgid = 0;
			{
				std::lock_guard lock(mu_);
				auto it = std::find_if(pidfds_.begin(), pidfds_.end(), [&](const auto &e) {
					return e.second.token == evs[i].data.u64;
				});
				if (it == pidfds_.end())
					continue;	// already ended by track_process
				tgid = it->first;
				forget_process_locked(tgid);
			}
			guarded([&] { model_.process_exit(tgid); });
		}
	}
}

int Daemon::reserve_client_fd(int model_fd, int access, Reservation *out)
{
	struct stat st;
	if (::fstat(model_fd, &st))
		return -errno;
	Reservation r;
	r.model_fd = model_fd;
	r.access = access;
	r.key = FileKey{st.st_dev, st.st_ino};
	// The watch is on the inode: a path through our own fd names it
	// without opening anything.
	const std::string self = "/proc/self/fd/" + std::to_string(model_fd);
	const int wd = ::inotify_add_watch(inotify_fd_, self.c_str(), IN_CLOSE_WRITE | IN_CLOSE_NOWRITE);
	if (wd >= 0) {
		std::lock_guard lock(mu_);
		auto &w = watches_[wd];
		w.key = r.key;
		w.descriptions++;
		installs_++;
		r.wd = wd;
	}
	*out = r;
	return 0;
}

int Daemon::open_reserved(Reservation &r)
{
	const std::string self = "/proc/self/fd/" + std::to_string(r.model_fd);
	const int mode = r.access == O_RDONLY || r.access == O_WRONLY ? r.access : O_RDWR;
	int fd = ::open(self.c_str(), mode | O_CLOEXEC);
	if (fd < 0 && mode == O_RDWR)
		fd = ::open(self.c_str(), O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		// The reservation keeps the model's file, so this is the same
		// inode; a mismatch would be a daemon bug, not a client's.
		struct stat st;
		if (::fstat(fd, &st) || FileKey{st.st_dev, st.st_ino} != r.key) {
			::close(fd);
			return -EIO;
		}
		r.wd = -1; // now a description: its close is counted by inotify
		return fd;
	}
	// Not reopenable (not a memfd): the same description, uncounted.
	fd = ::fcntl(r.model_fd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (r.wd >= 0) {
		std::lock_guard lock(mu_);
		if (auto it = watches_.find(r.wd); it != watches_.end() && it->second.descriptions > 0)
			it->second.descriptions--;
		r.wd = -1;
	}
	return fd;
}

void Daemon::drop_reserved(Reservation &r)
{
	if (r.wd < 0)
		return;
	std::optional<FileKey> released;
	{
		std::lock_guard lock(mu_);
		auto it = watches_.find(r.wd);
		if (it != watches_.end() && it->second.descriptions > 0 && --it->second.descriptions == 0) {
			released = it->second.key;
			releases_++;
		}
	}
	r.wd = -1;
	if (released)
		guarded([&] { model_.release(*released); });
}

void Daemon::vma_add(pid_t tgid, uint64_t start, uint64_t len, std::string path, uint64_t pgoff,
		     int prot, uint64_t ino)
{
	vma_remove(tgid, start, len);	// MAP_FIXED replaces what was there
	std::lock_guard lock(mu_);
	vmas_[tgid][start] = Vma{start + len, std::move(path), pgoff, prot, ino};
}

void Daemon::vma_remove(pid_t tgid, uint64_t start, uint64_t len)
{
	std::lock_guard lock(mu_);
	auto pit = vmas_.find(tgid);
	if (pit == vmas_.end())
		return;
	auto &m = pit->second;
	const uint64_t end = start + len;
	std::vector<std::pair<uint64_t, Vma>> keep;
	for (auto it = m.begin(); it != m.end();) {
		const uint64_t s = it->first, e = it->second.end;
		if (e <= start || s >= end) {
			++it;
			continue;
		}
		if (s < start)
			keep.push_back({s, Vma{start, it->second.path, it->second.pgoff, it->second.prot,
					       it->second.ino}});
		if (e > end)
			keep.push_back({end, Vma{e, it->second.path, it->second.pgoff + (end - s),
						 it->second.prot, it->second.ino}});
		it = m.erase(it);
	}
	for (auto &[s, v] : keep)
		m[s] = std::move(v);
}

std::string Daemon::order_counters()
{
	std::lock_guard lk(conns_mu_);
	return ",\"order_waits\":" + std::to_string(order_waits_) +
	       ",\"order_waits_expired\":" + std::to_string(order_waits_expired_);
}

std::optional<std::string> Daemon::introspect_local(std::string_view query)
{
	if (query == "transport") {
		std::lock_guard lock(mu_);
		unsigned open_files = 0;
		for (const auto &[wd, w] : watches_)
			open_files += w.descriptions > 0;
		return "{\"connections\":" + std::to_string(connections_) +
		       ",\"processes\":" + std::to_string(pidfds_.size()) +
		       ",\"installed_descriptions\":" + std::to_string(installs_) +
		       ",\"open_files\":" + std::to_string(open_files) +
		       ",\"releases\":" + std::to_string(releases_) +
		       ",\"process_exits\":" + std::to_string(exits_) +
		       ",\"execs\":" + std::to_string(execs_) +
		       ",\"restored_images\":" + std::to_string(restored_images_) + order_counters() + "}";
	}
	if (!query.starts_with("vmas"))
		return std::nullopt;
	pid_t pid = 0;
	std::string q(query);
	if (std::sscanf(q.c_str(), "vmas %d", &pid) != 1)
		return std::string(R"({"error":"usage: vmas <pid>"})");

	// The kernel's view of the process: file-backed ranges (the device
	// mappings are memfd mappings), merged where adjacent.
	struct Range {
		uint64_t start, end, ino;
	};
	std::vector<Range> mapped;
	{
		std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
		std::string line;
		while (std::getline(maps, line)) {
			unsigned long long s = 0, e = 0, off = 0, ino = 0;
			char perms[8] = {}, dev[16] = {};
			if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %15s %llu", &s, &e, perms, &off, dev,
					&ino) != 6 || ino == 0)
				continue;
			if (!mapped.empty() && mapped.back().end == s && mapped.back().ino == ino)
				mapped.back().end = e;
			else
				mapped.push_back({s, e, ino});
		}
	}
	// Still mapped = the range is covered by mappings of the same file
	// (the model's backing memfd, as the kernel sees it).
	auto covered = [&](uint64_t s, uint64_t e, uint64_t ino) {
		for (const auto &r : mapped)
			if (r.start <= s && e <= r.end && (ino == 0 || r.ino == ino))
				return true;
		return false;
	};

	std::lock_guard lock(mu_);
	// A forked child inherits its parent's device mappings (the shim of
	// the child never saw them): fall back to the nearest ancestor's
	// records. Either way only what is still mapped is reported.
	const std::map<uint64_t, Vma> *recs = nullptr;
	bool inherited = false;
	for (pid_t p = pid; p > 1 && !recs;) {
		if (auto it = vmas_.find(p); it != vmas_.end() && !it->second.empty())
			recs = &it->second;
		else {
			std::string pp = status_field(p, "PPid");
			p = pp.empty() ? 0 : pid_t(std::stol(pp));
			inherited = true;
		}
	}
	std::string out = "{\"pid\":" + std::to_string(pid) + ",\"vmas\":[";
	bool first = true;
	if (recs)
		for (const auto &[s, v] : *recs) {
			if (!covered(s, v.end, v.ino))
				continue;
			char prot[4] = {v.prot & 1 ? 'r' : '-', v.prot & 2 ? 'w' : '-',
					v.prot & 4 ? 'x' : '-', 0};
			char buf[512];
			std::snprintf(buf, sizeof buf,
				      "%s{\"start\":%" PRIu64 ",\"end\":%" PRIu64
				      ",\"pgoff\":%" PRIu64 ",\"prot\":\"%s\",\"path\":\"%s\"%s}",
				      first ? "" : ",", s, v.end, v.pgoff, prot,
				      json_escape(v.path).c_str(), inherited ? ",\"inherited\":true" : "");
			out += buf;
			first = false;
		}
	return out + "]}";
}

namespace {

std::string path_of(const FileInfo &fi)
{
	switch (fi.kind) {
	case FileKind::Kfd: return "/dev/kfd";
	case FileKind::Render: return "/dev/dri/renderD" + std::to_string(fi.render_minor);
	case FileKind::DmaBuf: return "/dmabuf:";
	}
	return "?";
}

} // namespace

int64_t Daemon::settle(uint32_t client_ino, uint64_t timeout_ms)
{
	const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
	std::unique_lock lk(conns_mu_);
	bool seen = false; // a connection that closed since has settled too
	for (;;) {
		// The connection, and any whose first request is still unread
		// (its client inode not known yet): it may be the one.
		bool found = false, idle = true;
		pid_t tgid = 0;
		for (auto &[fd, c] : conns_) {
			int unread = 0;
			if (::ioctl(fd, FIONREAD, &unread))
				unread = 0;
			if (c.client_ino == client_ino) {
				found = true;
				tgid = c.tgid;
				idle = idle && !c.busy && unread == 0;
			} else if (c.client_ino == 0 && unread > 0) {
				idle = false;
			}
		}
		seen = seen || found;
		if (idle)
			return seen ? 0 : -ENOENT;
		if (std::chrono::steady_clock::now() >= deadline)
			return -ETIMEDOUT;
		if (tgid) {
			// A call blocked in WAIT_EVENTS ends (as timed out);
			// one that started since the last pass too.
			lk.unlock();
			guarded([&] { model_.interrupt_waits(tgid); });
			lk.lock();
		}
		conns_cv_.wait_for(lk, std::chrono::milliseconds(5));
	}
}

// ---------------------------------------------------------------------------
// One connection: requests read, handled by kind, replies sent.
// ---------------------------------------------------------------------------

// One request being served and the reply it makes: the header, the JSON or
// text payload, and fds attached without entries (mmap's target).
struct Daemon::Call {
	pid_t tgid;
	const wire::Request &rq;
	const std::string &payload;
	CallerImpl &caller;
	FileKey key;
	wire::Reply rp{};
	std::string out;
	std::vector<int> extra_fds;
};

void Daemon::set_busy(int conn, bool busy)
{
	std::lock_guard lk(conns_mu_);
	conns_[conn].busy = busy;
	if (!busy)
		conns_cv_.notify_all();
}

bool Daemon::read_request(int conn, wire::Request *rq, std::string *payload)
{
	// Wait for a request without taking it, then mark the call in
	// progress before reading it: Op::Settle sees either unread bytes or
	// a busy connection, never neither; await_turn, unread bytes or a
	// request being read.
	char peek;
	ssize_t pn;
	do
		pn = ::recv(conn, &peek, 1, MSG_PEEK);
	while (pn < 0 && errno == EINTR);
	if (pn <= 0)
		return false;
	{
		std::lock_guard lk(conns_mu_);
		conns_[conn].busy = true;
		conns_[conn].reading = true;
	}
	struct Read {
		Daemon &d;
		int conn;
		const wire::Request &rq;
		bool ok = false;
		~Read()
		{
			std::lock_guard lk(d.conns_mu_);
			Conn &c = d.conns_[conn];
			c.reading = false;
			c.made_ns = ok && rq.op == wire::Op::Ioctl ? rq.made_ns : 0;
			if (ok && rq.sock_ino)
				c.client_ino = rq.sock_ino;
			d.conns_cv_.notify_all();
		}
	} read{*this, conn, *rq};
	if (wire::recv_all(conn, rq, sizeof *rq))
		return false;
	payload->assign(rq->len, '\0');
	read.ok = !(rq->len && wire::recv_all(conn, payload->data(), rq->len));
	return read.ok;
}

bool Daemon::earlier_call_pending(int self, pid_t tgid, uint64_t made_ns, int fd, const Conn &c)
{
	if (fd == self || c.tgid != tgid)
		return false;
	if (c.made_ns)
		return c.made_ns < made_ns || (c.made_ns == made_ns && fd < self);
	if (c.reading)
		return true;
	int unread = 0;
	return !c.busy && ::ioctl(fd, FIONREAD, &unread) == 0 && unread > 0;
}

void Daemon::await_turn(int conn, uint64_t made_ns)
{
	if (!made_ns)
		return;
	const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kOrderWaitMs);
	std::unique_lock lk(conns_mu_);
	const pid_t tgid = conns_[conn].tgid;
	bool waited = false;
	for (;;) {
		bool pending = false;
		for (const auto &[fd, c] : conns_)
			if ((pending = earlier_call_pending(conn, tgid, made_ns, fd, c)))
				break;
		if (!pending)
			break;
		if (std::chrono::steady_clock::now() >= deadline) {
			++order_waits_expired_;
			break;
		}
		waited = true;
		// Unread bytes do not notify: look again soon.
		conns_cv_.wait_for(lk, std::chrono::milliseconds(2));
	}
	order_waits_ += waited;
}

void Daemon::entered(int conn)
{
	std::lock_guard lk(conns_mu_);
	auto it = conns_.find(conn);
	if (it == conns_.end() || !it->second.made_ns)
		return;
	it->second.made_ns = 0;
	conns_cv_.notify_all();
}

void Daemon::on_open(Call &call)
{
	const wire::Request &rq = call.rq;
	call.caller.set_open_access(int(rq.a[2] & O_ACCMODE));
	if (rq.op == wire::Op::OpenKfd)
		call.rp.result = call.caller.container_cgroup_denies(kKfdMajor, 0)
					 ? -EPERM
					 : model_.open_kfd(call.caller, rq.a[0] != 0);
	else
		call.rp.result = call.caller.container_cgroup_denies(kDrmMajor, unsigned(rq.a[0]))
					 ? -EPERM
					 : model_.open_render(call.caller, uint32_t(rq.a[0]), rq.a[1] != 0);
}

void Daemon::on_ioctl(Call &call)
{
	if (!model_.describe(call.key))
		call.rp.result = wire::kNotEmulated;
	else
		call.rp.result = model_.ioctl(call.caller, call.key, call.rq.a[0], call.rq.a[1]);
}

void Daemon::on_mmap(Call &call)
{
	if (!model_.describe(call.key)) {
		call.rp.result = wire::kNotEmulated;
		return;
	}
	const wire::Request &rq = call.rq;
	MmapTarget t;
	call.rp.result = model_.mmap(call.caller, call.key, rq.a[0], rq.a[1], int(rq.a[2]), &t);
	if (call.rp.result != 0)
		return;
	int fd = ::fcntl(t.fd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0)
		call.rp.result = -errno;
	else
		call.extra_fds.push_back(fd);
	call.rp.aux[0] = t.offset;
	struct stat tst;
	call.rp.aux[1] = ::fstat(t.fd, &tst) == 0 ? uint64_t(tst.st_ino) : 0;
	call.rp.aux[2] = t.dont_copy ? wire::kMmapDontCopy : 0;
}

void Daemon::on_vma_add(Call &call)
{
	const wire::Request &rq = call.rq;
	auto fi = model_.describe(call.key);
	if (fi)
		vma_add(call.tgid, rq.a[0], rq.a[1], path_of(*fi), rq.a[2], int(rq.a[3]), rq.a[4]);
	call.rp.result = fi ? 0 : -ENOENT;
}

void Daemon::on_describe(Call &call)
{
	auto fi = model_.describe(call.key);
	if (!fi) {
		call.rp.result = wire::kNotEmulated;
		return;
	}
	call.rp.result = int64_t(fi->kind);
	call.rp.aux[0] = fi->render_minor;
	call.rp.aux[1] = fi->size;
}

void Daemon::on_introspect(Call &call)
{
	if (auto local = introspect_local(call.payload))
		call.out = *local;
	else
		call.out = model_.introspect(call.payload);
}

void Daemon::on_set_faults(Call &call)
{
	std::string err;
	auto rules = parse_faults(call.payload, &err);
	if (!rules) {
		call.rp.result = -EINVAL;
		call.out = err;
	} else {
		model_.set_faults(std::move(*rules));
	}
}

void Daemon::dispatch(Call &call)
{
	// A model failure must not take the daemon (and every client) down:
	// it becomes this call's error.
	try {
		switch (call.rq.op) {
		case wire::Op::OpenKfd:
		case wire::Op::OpenRender: on_open(call); break;
		case wire::Op::Ioctl: on_ioctl(call); break;
		case wire::Op::Mmap: on_mmap(call); break;
		case wire::Op::VmaAdd: on_vma_add(call); break;
		case wire::Op::VmaRemove: vma_remove(call.tgid, call.rq.a[0], call.rq.a[1]); break;
		case wire::Op::SvmUnmap: model_.svm_unmap(call.tgid, call.rq.a[0], call.rq.a[1]); break;
		case wire::Op::Describe: on_describe(call); break;
		case wire::Op::Introspect: on_introspect(call); break;
		case wire::Op::Settle: call.rp.result = settle(uint32_t(call.rq.a[0]), call.rq.a[1]); break;
		case wire::Op::SetFaults: on_set_faults(call); break;
		default: call.rp.result = -ENOSYS; break;
		}
	} catch (const std::bad_alloc &) {
		call.rp.result = -ENOMEM;
	} catch (...) {
		call.rp.result = -EIO;
	}
}

// The fds a reply carries: the caller's installs (reserved, opened one
// message's worth at a time, see Reservation) then the extra fds.
struct Daemon::ReplyFds {
	Daemon &d;
	std::vector<CallerImpl::Pending> pend;
	std::vector<int> &extra;
	std::vector<int> batch;

	size_t total() const { return pend.size() + extra.size(); }
	// Opens entries [from, from + n) into `batch`; -errno (and nothing
	// left open or reserved in that range) on failure.
	int open_batch(size_t from, size_t n)
	{
		batch.clear();
		for (size_t i = from; i < from + n; i++) {
			if (i >= pend.size()) {
				batch.push_back(extra[i - pend.size()]);
				continue;
			}
			const int fd = d.open_reserved(pend[i].fd);
			if (fd < 0) {
				close_batch();
				for (size_t j = i; j < pend.size(); j++)
					d.drop_reserved(pend[j].fd);
				return fd;
			}
			batch.push_back(fd);
		}
		return 0;
	}
	void close_batch()
	{
		for (int f : batch)
			::close(f);
		batch.clear();
	}
	// Drops the reservations and closes the extra fds from entry `from` on
	// (none of them sent).
	void abandon_from(size_t from)
	{
		for (size_t j = from; j < pend.size(); j++)
			d.drop_reserved(pend[j].fd);
		for (size_t j = std::max(from, pend.size()); j < total(); j++)
			::close(extra[j - pend.size()]);
	}
};

int Daemon::send_reply(int conn, Call &call)
{
	// The kernel fails the call when an fd cannot be installed.
	wire::Reply &rp = call.rp;
	if (rp.result >= 0 && rp.result != wire::kNotEmulated && call.caller.failed_install() < 0)
		rp.result = call.caller.failed_install();
	ReplyFds fds{*this, call.caller.take(), call.extra_fds, {}};
	if (rp.result < 0 && rp.result != wire::kNotEmulated) {
		for (auto &p : fds.pend)
			drop_reserved(p.fd);
		fds.pend.clear();
	}
	std::vector<wire::FdEntry> entries;
	for (auto &p : fds.pend)
		entries.push_back({p.patch, p.flags, 0});
	entries.resize(fds.total(), wire::FdEntry{0, 0, 0});
	// The first batch is opened before the header goes out, so failing to
	// open it still fails the call.
	size_t first = std::min<size_t>(entries.size(), wire::kMaxFdsPerMsg);
	if (int e = fds.open_batch(0, first); e < 0) {
		for (int fd : call.extra_fds)
			::close(fd);
		rp.result = e;
		entries.clear();
		first = 0;
		fds.pend.clear();
		call.extra_fds.clear();
	}
	rp.nfds = uint32_t(entries.size());
	rp.len = uint32_t(call.out.size());
	std::string msg(reinterpret_cast<const char *>(&rp), sizeof rp);
	msg.append(reinterpret_cast<const char *>(entries.data()), entries.size() * sizeof(wire::FdEntry));
	msg += call.out;
	int err = wire::send_all(conn, msg.data(), msg.size(), fds.batch.data(), unsigned(first));
	fds.close_batch();
	if (err)
		fds.abandon_from(first);
	for (size_t i = first; !err && i < entries.size(); i += wire::kMaxFdsPerMsg) {
		const size_t k = std::min<size_t>(entries.size() - i, wire::kMaxFdsPerMsg);
		// A failure here, after the header, ends the connection: the
		// client's call fails with EIO (a lost reply).
		err = fds.open_batch(i, k);
		if (!err) {
			char b = 0;
			err = wire::send_all(conn, &b, 1, fds.batch.data(), unsigned(k));
			fds.close_batch();
		} else {
			// open_batch stopped at a reserved entry: the extra fds of
			// this batch (after every reserved one) were not taken into it.
			for (size_t j = std::max(i, fds.pend.size()); j < i + k; j++)
				::close(call.extra_fds[j - fds.pend.size()]);
		}
		if (err)
			fds.abandon_from(i + k);
	}
	return err;
}

void Daemon::serve(int conn, pid_t tgid)
{
	struct Unregister {
		Daemon &d;
		int conn;
		~Unregister()
		{
			// Closed under the lock: its number is not reused
			// while it is still listed.
			std::lock_guard lk(d.conns_mu_);
			d.conns_.erase(conn);
			::close(conn);
			d.conns_cv_.notify_all();
		}
	} unregister{*this, conn};
	std::string payload;
	for (;;) {
		wire::Request rq{};
		if (!read_request(conn, &rq, &payload))
			break;
		if (rq.op == wire::Op::Echo) {
			if (wire::send_all(conn, payload.data(), payload.size()))
				break;
			set_busy(conn, false);
			continue;
		}
		check_image(tgid, rq.image, rq.flags & wire::kReqFreshImage);
		if (rq.op == wire::Op::Ioctl)
			await_turn(conn, rq.made_ns);
		CallerImpl caller(*this, tgid, rq.tid, conn);
		caller.set_made_ns(rq.made_ns);
		Call call{tgid, rq, payload, caller, FileKey{dev_t(rq.dev), ino_t(rq.ino)}, {}, {}, {}};
		dispatch(call);
		entered(conn); // if it never reached the model
		// The call in progress ends (for Op::Settle) once its reply is
		// written.
		if (send_reply(conn, call))
			break;
		set_busy(conn, false);
	}
}

} // namespace kfdemu
