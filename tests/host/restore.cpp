// SPDX-License-Identifier: GPL-2.0-only
//
// The restore, in CRIU 4.x's order: RESTORE_INIT; the task tree is forked
// (same shape, new pids: the host restores no pids, namespaces or memory);
// POST_FORKING in the main process; in each task RESTORE_EXT_FILE for the
// plugin files (retry_needed honoured), the other fds, UPDATE_VMA_MAP and
// the mmap of each device mapping; RESUME_DEVICES_LATE(pid) per task in the
// main process; the tasks continue; exit(RESTORE, ret).
//
// A restored task has the host's memory, not the dumped one, so what it
// does after resuming is run the verifier (LIB.so:function) in itself: the
// device state the plugins restored belongs to that process.
//
// CRIU's fd store (api.h) is created with the channels, before the fork.
// Main <-> task messages go over one SOCK_SEQPACKET pair per task; files a
// task restored for others (same id in several tasks) travel over
// SOCK_DGRAM pairs with SCM_RIGHTS. All these live at high fd numbers
// ("service fds", as CRIU keeps them) so that restored fd numbers are free.
#include "restore.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstring>
#include <map>
#include <set>

#include "api.h"
#include "testcommon/scm_rights.h"

namespace host {
namespace {

enum MsgType : int { kForked = 1, kGo, kReady, kResume, kVerified };

struct Msg {
	int type = 0;
	int value = 0;
	int pid = 0;
};

bool send_msg(int fd, MsgType type, int value)
{
	Msg m{type, value, static_cast<int>(getpid())};
	for (;;) {
		const ssize_t n = send(fd, &m, sizeof(m), MSG_NOSIGNAL);
		if (n == static_cast<ssize_t>(sizeof(m)))
			return true;
		if (n < 0 && errno == EINTR)
			continue;
		return false;
	}
}

// false on EOF/error or an unexpected message.
bool recv_msg(int fd, MsgType want, Msg &m)
{
	for (;;) {
		const ssize_t n = recv(fd, &m, sizeof(m), 0);
		if (n < 0 && errno == EINTR)
			continue;
		return n == static_cast<ssize_t>(sizeof(m)) && m.type == want;
	}
}

// Places fds at the top of the fd range, below RLIMIT_NOFILE.
class ServiceFds {
public:
	ServiceFds()
	{
		struct rlimit rl;
		if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
			const rlim_t want = std::min<rlim_t>(rl.rlim_max, 4096);
			if (rl.rlim_cur < want) {
				rl.rlim_cur = want;
				setrlimit(RLIMIT_NOFILE, &rl);
			}
			getrlimit(RLIMIT_NOFILE, &rl);
			next_ = static_cast<int>(std::min<rlim_t>(rl.rlim_cur, 4096)) - 1;
		}
	}
	// Moves fd up (copies it when it is one of 0-2, which stay open).
	int place(int fd)
	{
		while (next_ > 2 && fcntl(next_, F_GETFD) != -1)
			next_--;
		if (fd == next_ || next_ <= 2)
			return fd;
		if (dup3(fd, next_, O_CLOEXEC) < 0)
			return fd;
		if (fd > 2)
			close(fd);
		return next_--;
	}
	int lowest() const { return next_ + 1; }

private:
	int next_ = 1023;
};

struct TaskChannels {
	int main_end = -1; // main's side of the control pair
	int task_end = -1; // the task's side
	int pass_send = -1; // anyone sends this task files here
	int pass_recv = -1; // the task receives them here
};

class Restorer {
public:
	Restorer(const RestoreOptions &opts, PluginSet &plugins, const Inventory &inv)
		: opts_(opts), plugins_(plugins), inv_(inv)
	{
	}
	int run();
	// After a successful run: every task's verifier result, then reaping.
	int finish();

private:
	// In the main process.
	int setup_channels();
	pid_t fork_task(size_t idx);
	void kill_tasks();
	void reap_all();
	int collect(MsgType type, const char *what, std::vector<int> *values);

	// In a restored task (never return).
	[[noreturn]] void task_main(size_t idx);
	int restore_files(size_t idx);
	// restore_files' steps: the plugin files task `idx` is the master of
	// (RESTORE_EXT_FILE, retried as asked), each sent to the other tasks
	// holding it (send_file); the files it receives from their masters;
	// the files CRIU would restore itself, reopened by path.
	int restore_own_files(size_t idx, std::vector<int> pending, std::set<int> &installed);
	int send_file(size_t idx, int id);
	int receive_files(size_t idx, std::set<int> wanted, std::set<int> &installed);
	int reopen_host_files(size_t idx, std::set<int> &installed);
	int restore_vmas(size_t idx);
	int install(size_t idx, int id, int newfd, std::set<int> &installed);
	// Before a restored fd takes number `fd`: says what it replaces.
	void note_replaced(int fd, const std::set<int> &installed) const;
	int verify();

	size_t master_of(int id) const;

	const RestoreOptions &opts_;
	PluginSet &plugins_;
	const Inventory &inv_;
	ServiceFds service_;
	std::vector<TaskChannels> ch_;
	std::vector<pid_t> new_pid_;
};

int Restorer::setup_channels()
{
	log_set_fd(service_.place(log_fd()));
	if (image_dir_fd() >= 0)
		set_image_dir_fd(service_.place(image_dir_fd()));
	for (size_t i = 0; i < inv_.tasks.size(); i++) {
		int c[2], p[2];
		if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, c) < 0 ||
		    socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, p) < 0) {
			log_perror("Can't create the task channels");
			return -1;
		}
		TaskChannels t;
		t.main_end = service_.place(c[0]);
		t.task_end = service_.place(c[1]);
		t.pass_send = service_.place(p[0]);
		t.pass_recv = service_.place(p[1]);
		ch_.push_back(t);
	}
	new_pid_.assign(inv_.tasks.size(), 0);
	return 0;
}

size_t Restorer::master_of(int id) const
{
	for (size_t i = 0; i < inv_.tasks.size(); i++)
		for (const FdRecord &f : inv_.tasks[i].fds)
			if (f.kind == "ext" && f.id == id)
				return i;
	return inv_.tasks.size();
}

pid_t Restorer::fork_task(size_t idx)
{
	const pid_t pid = fork();
	if (pid == 0)
		task_main(idx);
	if (pid < 0)
		log_perror("Can't fork task %d", inv_.tasks[idx].pid);
	return pid;
}

void Restorer::note_replaced(int fd, const std::set<int> &installed) const
{
	if (installed.count(fd) || fcntl(fd, F_GETFD) == -1)
		return;
	const auto &inh = opts_.inherited_fds;
	if (std::find(inh.begin(), inh.end(), fd) != inh.end())
		logf(kDebug, "fd %d (inherited by the host) replaced\n", fd);
	else
		logf(kWarn, "fd %d is in use in the restoring process (a plugin's?); replaced\n", fd);
}

int Restorer::install(size_t idx, int id, int newfd, std::set<int> &installed)
{
	bool used = false;
	for (const FdRecord &f : inv_.tasks[idx].fds) {
		if (f.kind != "ext" || f.id != id)
			continue;
		if (f.fd == newfd) {
			used = true;
		} else {
			note_replaced(f.fd, installed);
			if (dup2(newfd, f.fd) < 0) {
				log_perror("Can't dup %d into %d", newfd, f.fd);
				return -1;
			}
		}
		if (fcntl(f.fd, F_SETFD, f.cloexec ? FD_CLOEXEC : 0) < 0) {
			log_perror("Can't set fd flags of %d", f.fd);
			return -1;
		}
		installed.insert(f.fd);
		logf(kInfo, "Restored fd %d (id %d)\n", f.fd, id);
	}
	if (!used)
		close(newfd);
	return 0;
}

int Restorer::restore_files(size_t idx)
{
	const TaskRecord &t = inv_.tasks[idx];
	std::set<int> installed;

	// Plugin files this task is the master of (first task holding the id).
	std::vector<int> pending;
	std::set<int> wanted; // ids received from other tasks
	for (const FdRecord &f : t.fds) {
		if (f.kind != "ext")
			continue;
		if (master_of(f.id) == idx) {
			if (std::find(pending.begin(), pending.end(), f.id) == pending.end())
				pending.push_back(f.id);
		} else {
			wanted.insert(f.id);
		}
	}
	if (restore_own_files(idx, std::move(pending), installed) ||
	    receive_files(idx, std::move(wanted), installed))
		return -1;
	return reopen_host_files(idx, installed);
}

int Restorer::restore_own_files(size_t idx, std::vector<int> pending, std::set<int> &installed)
{
	for (int round = 0; !pending.empty(); round++) {
		if (round > 64) {
			logf(kError, "RESTORE_EXT_FILE keeps asking for a retry\n");
			return -1;
		}
		std::vector<int> again;
		for (int id : pending) {
			bool retry = false;
			const HookResult r = plugins_.run<cr_plugin_restore_file_t>(
				CR_PLUGIN_HOOK__RESTORE_EXT_FILE, "id=" + std::to_string(id),
				[&](cr_plugin_restore_file_t *fn) {
					retry = false;
					return fn(id, &retry);
				});
			if (r.ret < 0) {
				logf(kError, "Unable to restore %#x: %d\n", id, r.ret);
				return -1;
			}
			// With retry_needed the result is not a file yet: the
			// hook is called again after the others.
			if (retry) {
				logf(kInfo, "RESTORE_EXT_FILE(id=%d) asks for a retry\n", id);
				again.push_back(id);
				continue;
			}
			if (install(idx, id, r.ret, installed) || send_file(idx, id))
				return -1;
		}
		pending = std::move(again);
	}
	return 0;
}

// Serves file `id`, installed in task `idx`, out to the other tasks that
// hold it.
int Restorer::send_file(size_t idx, int id)
{
	const TaskRecord &t = inv_.tasks[idx];
	for (size_t j = 0; j < inv_.tasks.size(); j++) {
		if (j == idx)
			continue;
		bool holds = false;
		for (const FdRecord &f : inv_.tasks[j].fds)
			holds |= f.kind == "ext" && f.id == id;
		if (!holds)
			continue;
		int fd = -1;
		for (const FdRecord &f : t.fds)
			if (f.kind == "ext" && f.id == id)
				fd = f.fd;
		if (!testcommon::send_with_fd(ch_[j].pass_send, &id, sizeof(id), fd)) {
			log_perror("Can't send file id %d to task %d", id, inv_.tasks[j].pid);
			return -1;
		}
	}
	return 0;
}

int Restorer::receive_files(size_t idx, std::set<int> wanted, std::set<int> &installed)
{
	while (!wanted.empty()) {
		int id = -1, fd = -1;
		const ssize_t n = testcommon::recv_with_fd(ch_[idx].pass_recv, &id, sizeof(id), &fd);
		if (n < 0 && errno == EINTR)
			continue;
		if (n != sizeof(id) || fd < 0) {
			if (fd >= 0)
				::close(fd);
			logf(kError, "Bad file message for task %d\n", inv_.tasks[idx].pid);
			return -1;
		}
		logf(kInfo, "Received file id %d\n", id);
		if (install(idx, id, fd, installed))
			return -1;
		wanted.erase(id);
	}
	return 0;
}

// Files CRIU would restore itself: the host reopens paths.
int Restorer::reopen_host_files(size_t idx, std::set<int> &installed)
{
	for (const FdRecord &f : inv_.tasks[idx].fds) {
		if (f.kind == "skip") {
			logf(kDebug, "fd %d (%s) not restored by the host\n", f.fd, f.path.c_str());
			continue;
		}
		if (f.kind != "reg")
			continue;
		const int flags = static_cast<int>(f.flags) & ~(O_CREAT | O_TRUNC | O_EXCL);
		const int fd = open(f.path.c_str(), flags | O_CLOEXEC);
		if (fd < 0) {
			// CRIU would fail (or use its link-remap); the host does
			// not restore files for their own sake, so it goes on.
			logf(kWarn, "Can't reopen %s for fd %d: %s; left as it is\n", f.path.c_str(),
			     f.fd, std::strerror(errno));
			continue;
		}
		if (f.pos > 0)
			lseek(fd, f.pos, SEEK_SET);
		if (fd != f.fd) {
			if (f.fd > 2)
				note_replaced(f.fd, installed);
			if (dup2(fd, f.fd) < 0) {
				log_perror("Can't dup %d into %d", fd, f.fd);
				close(fd);
				return -1;
			}
			close(fd);
		}
		fcntl(f.fd, F_SETFD, f.cloexec ? FD_CLOEXEC : 0);
		installed.insert(f.fd);
	}
	return 0;
}

int Restorer::restore_vmas(size_t idx)
{
	for (const VmaRecord &v : inv_.tasks[idx].vmas) {
		uint64_t new_pgoff = v.pgoff;
		int plugin_fd = -1;
		char args[512];
		std::snprintf(args, sizeof(args), "path=%s, addr=%#" PRIx64 ", old_pgoff=%#" PRIx64,
			      v.path.c_str(), v.start, v.pgoff);
		const HookResult r = plugins_.run<cr_plugin_update_vma_map_t>(
			CR_PLUGIN_HOOK__UPDATE_VMA_MAP, args, [&](cr_plugin_update_vma_map_t *fn) {
				return fn(v.path.c_str(), v.start, v.pgoff, &new_pgoff, &plugin_fd);
			});
		if (r.ret < 0 && r.ret != -ENOTSUP) {
			logf(kError, "UPDATE_VMA_MAP failed for %#" PRIx64 ": %d\n", v.start, r.ret);
			return -1;
		}
		const uint64_t pgoff = r.ret == 1 ? new_pgoff : v.pgoff;
		int fd = plugin_fd;
		if (fd < 0) {
			const bool rw = (v.prot & PROT_WRITE) && (v.flags & MAP_SHARED);
			fd = open(v.path.c_str(), (rw ? O_RDWR : O_RDONLY) | O_CLOEXEC);
			if (fd < 0) {
				log_perror("Can't open %s to map %#" PRIx64, v.path.c_str(), v.start);
				return -1;
			}
		}
		logf(kInfo, "New mmap %#" PRIx64 "-%#" PRIx64 ":%#" PRIx64 "->%#" PRIx64 " fd %d\n",
		     v.start, v.end, v.pgoff, pgoff, fd);
		// Over the host's hold of this range (address_hold.h); where
		// nothing is held, MAP_FIXED_NOREPLACE: the host's own mappings
		// are not the dumped process's, and clobbering them would crash
		// the task.
		const bool held = opts_.hold && opts_.hold->holds(v.start, v.end);
		void *want = reinterpret_cast<void *>(v.start);
		void *got = mmap(want, v.end - v.start, v.prot,
				 v.flags | (held ? MAP_FIXED : MAP_FIXED_NOREPLACE), fd,
				 static_cast<off_t>(pgoff));
		const int err = errno;
		close(fd);
		if (got == MAP_FAILED || got != want) {
			if (got != MAP_FAILED)
				munmap(got, v.end - v.start);
			logf(kError, "Can't map %s at %#" PRIx64 ": %s\n", v.path.c_str(), v.start,
			     std::strerror(got == MAP_FAILED ? err : EEXIST));
			return -1;
		}
	}
	return 0;
}

int Restorer::verify()
{
	if (opts_.verifier_lib.empty())
		return 0;
	void *h = dlopen(opts_.verifier_lib.c_str(), RTLD_NOW);
	if (!h) {
		logf(kError, "Can't load the verifier %s: %s\n", opts_.verifier_lib.c_str(), dlerror());
		return 126;
	}
	using Fn = int(const char *);
	auto *fn = reinterpret_cast<Fn *>(dlsym(h, opts_.verifier_fn.c_str()));
	if (!fn) {
		logf(kError, "No function %s in %s\n", opts_.verifier_fn.c_str(),
		     opts_.verifier_lib.c_str());
		return 127;
	}
	return fn(opts_.verifier_arg.c_str());
}

void Restorer::task_main(size_t idx)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	const TaskRecord &t = inv_.tasks[idx];
	std::vector<pid_t> children;
	for (size_t j = 0; j < inv_.tasks.size(); j++) {
		if (inv_.tasks[j].ppid != t.pid || j == idx)
			continue;
		const pid_t c = fork_task(j);
		if (c < 0)
			_exit(1);
		children.push_back(c);
	}
	// Keep only this task's ends.
	for (size_t j = 0; j < ch_.size(); j++) {
		close(ch_[j].main_end);
		if (j != idx) {
			close(ch_[j].task_end);
			close(ch_[j].pass_recv);
		}
	}
	// The other tasks' ranges are theirs; this task maps its own over the
	// hold (restore_vmas).
	if (opts_.hold)
		opts_.hold->keep_only(t.vmas);
	const int ctl = ch_[idx].task_end;
	Msg m;
	if (!send_msg(ctl, kForked, 0) || !recv_msg(ctl, kGo, m))
		_exit(1);

	logf(kInfo, "Restoring task %d as %d\n", t.pid, getpid());
	int status = restore_files(idx);
	if (status == 0)
		status = restore_vmas(idx);
	if (!send_msg(ctl, kReady, status) || status)
		_exit(1);
	if (!recv_msg(ctl, kResume, m))
		_exit(1);

	const int result = verify();
	send_msg(ctl, kVerified, result);
	for (;;) {
		int st;
		const pid_t r = wait(&st);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			break;
	}
	_exit(result == 0 ? 0 : 1);
}

// One message of `type` from every task; values[i] for task i.
int Restorer::collect(MsgType type, const char *what, std::vector<int> *values)
{
	int ret = 0;
	for (size_t i = 0; i < ch_.size(); i++) {
		Msg m;
		if (!recv_msg(ch_[i].main_end, type, m)) {
			logf(kError, "Task %d died before %s\n", inv_.tasks[i].pid, what);
			ret = -1;
			continue;
		}
		if (type == kForked)
			new_pid_[i] = m.pid;
		if (values)
			(*values)[i] = m.value;
		else if (m.value != 0)
			ret = -1;
	}
	return ret;
}

void Restorer::kill_tasks()
{
	for (pid_t p : new_pid_)
		if (p > 0)
			kill(p, SIGKILL);
}

void Restorer::reap_all()
{
	for (;;) {
		int st;
		const pid_t r = waitpid(-1, &st, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			break;
	}
}

int Restorer::run()
{
	const HookResult ri = plugins_.run<cr_plugin_restore_init_t>(
		CR_PLUGIN_HOOK__RESTORE_INIT, "",
		[](cr_plugin_restore_init_t *fn) { return fn(); });
	if (ri.ret < 0 && ri.ret != -ENOTSUP) {
		logf(kError, "RESTORE_INIT failed: %d\n", ri.ret);
		return -1;
	}
	if (setup_channels())
		return -1;

	// Orphans of failed tasks come back to us for reaping.
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	size_t root = 0;
	for (size_t i = 0; i < inv_.tasks.size(); i++)
		if (inv_.tasks[i].ppid == 0)
			root = i;
	if (fork_task(root) < 0)
		return -1;
	for (const TaskChannels &c : ch_) {
		close(c.task_end);
		close(c.pass_recv);
	}

	auto fail = [&]() {
		kill_tasks();
		reap_all();
		return -1;
	};
	if (collect(kForked, "forking", nullptr))
		return fail();
	for (size_t i = 0; i < inv_.tasks.size(); i++)
		logf(kInfo, "Task %d forked as %d\n", inv_.tasks[i].pid, new_pid_[i]);

	const HookResult pf = plugins_.run<cr_plugin_post_forking_t>(
		CR_PLUGIN_HOOK__POST_FORKING, "", [](cr_plugin_post_forking_t *fn) { return fn(); });
	if (pf.ret < 0 && pf.ret != -ENOTSUP) {
		logf(kError, "POST_FORKING failed: %d\n", pf.ret);
		return fail();
	}

	if (opts_.order == RestoreOrder::Concurrent) {
		for (const TaskChannels &c : ch_)
			send_msg(c.main_end, kGo, 0);
		if (collect(kReady, "its files and mappings were restored", nullptr))
			return fail();
	} else {
		for (size_t k = 0; k < ch_.size(); k++) {
			const size_t i = opts_.order == RestoreOrder::Tree ? k : ch_.size() - 1 - k;
			Msg m;
			send_msg(ch_[i].main_end, kGo, 0);
			if (!recv_msg(ch_[i].main_end, kReady, m) || m.value != 0) {
				logf(kError, "Task %d failed to restore its files and mappings\n", inv_.tasks[i].pid);
				return fail();
			}
		}
	}

	for (size_t i = 0; i < inv_.tasks.size(); i++) {
		const pid_t pid = new_pid_[i];
		const HookResult r = plugins_.run<cr_plugin_resume_devices_late_t>(
			CR_PLUGIN_HOOK__RESUME_DEVICES_LATE, "pid=" + std::to_string(pid),
			[&](cr_plugin_resume_devices_late_t *fn) { return fn(pid); });
		if (r.ret < 0 && r.ret != -ENOTSUP) {
			logf(kError, "RESUME_DEVICES_LATE failed for %d: %d\n", pid, r.ret);
			return fail();
		}
	}
	for (const TaskChannels &c : ch_)
		send_msg(c.main_end, kResume, 0);
	return 0;
}

int Restorer::finish()
{
	int ret = 0;
	for (size_t i = 0; i < ch_.size(); i++) {
		Msg m;
		if (!recv_msg(ch_[i].main_end, kVerified, m)) {
			logf(kError, "Task %d (restored as %d) died before its verifier result\n",
			     inv_.tasks[i].pid, new_pid_[i]);
			ret = -1;
			continue;
		}
		if (opts_.verifier_lib.empty())
			continue;
		logf(kMsg, "verify: task %d (restored as %d): %s() = %d (%s)\n", inv_.tasks[i].pid,
		     new_pid_[i], opts_.verifier_fn.c_str(), m.value, m.value == 0 ? "pass" : "FAIL");
		if (m.value != 0)
			ret = -1;
	}
	reap_all();
	if (ret)
		logf(kError, "Verification FAILED.\n");
	return ret;
}

} // namespace

int run_restore(const RestoreOptions &opts, PluginSet &plugins, const Inventory &inv)
{
	Restorer r(opts, plugins, inv);
	const int ret = r.run();
	plugins.fini(CR_PLUGIN_STAGE__RESTORE, ret);
	if (ret) {
		logf(kError, "Restoring FAILED.\n");
		return ret;
	}
	logf(kInfo, "Restore finished successfully. Tasks resumed.\n");
	return r.finish();
}

} // namespace host
