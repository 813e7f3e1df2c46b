// SPDX-License-Identifier: GPL-2.0-only
//
// The guardian (plugin/guardian.h) without a GPU: a forked "CRIU" process
// starts it, tells it temporary files or restored tasks, and then either
// finishes normally or dies by SIGKILL. The test process is a subreaper, so
// the guardian (orphaned by its middle process) becomes its child and can be
// waited for. Unpausing needs KFD: the emulated realcriu tests
// (emu_realcriu_*_dump_killed_*) cover it.
#include <criterion/criterion.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "base/unique_fd.h"
#include "device/kfd.h"
#include "plugin/guardian.h"

using namespace amdcr;
namespace fs = std::filesystem;

namespace {

struct Scratch {
	fs::path dir;
	int fd = -1;
	Scratch()
	{
		char tmpl[] = "/tmp/amdcr-guardian-XXXXXX";
		cr_assert_not_null(mkdtemp(tmpl));
		dir = tmpl;
		fd = open(tmpl, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		cr_assert(fd >= 0);
		cr_assert_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	}
	~Scratch()
	{
		close(fd);
		fs::remove_all(dir);
	}
	void touch(const std::string &name) const { std::ofstream(dir / name) << "x"; }
	bool exists(const std::string &name) const { return fs::exists(dir / name); }
	std::string log() const
	{
		std::ifstream f(dir / Guardian::kLogName);
		std::stringstream s;
		s << f.rdbuf();
		return s.str();
	}
};

// Waits (2 s at most) for child `pid` to end; its wait status, or -1.
int wait_end(pid_t pid, int ms = 2000)
{
	for (int i = 0; i < ms; i++) {
		int st = 0;
		const pid_t r = waitpid(pid, &st, WNOHANG);
		if (r == pid)
			return st;
		if (r < 0)
			return -1;
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
	}
	return -1;
}

bool alive(pid_t pid)
{
	std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
	std::string s((std::istreambuf_iterator<char>(f)), {});
	const auto p = s.rfind(") ");
	return p != std::string::npos && s[p + 2] != 'Z' && s[p + 2] != 'X';
}

// In the forked "CRIU": a failed step ends it without reporting (the test
// then fails on the missing report).
void must(const Status &st)
{
	if (!st)
		_exit(5);
}

// In the forked "CRIU": forks a restored "task" that reports itself to the
// guardian through `channel` and then waits to be killed; returns its pid
// once the report is sent (the task says so through a pipe), so that a
// message sent after this reaches the guardian after the report.
pid_t reported_task(int channel)
{
	int p[2];
	if (pipe(p) != 0)
		_exit(8);
	const pid_t t = fork();
	if (t == 0) {
		close(p[0]);
		const char sent = 1;
		if (!Guardian::report_task(channel) || write(p[1], &sent, 1) != 1)
			_exit(4);
		for (;;)
			pause();
	}
	close(p[1]);
	char b;
	const bool ok = t > 0 && read(p[0], &b, 1) == 1;
	close(p[0]);
	if (!ok)
		_exit(8);
	return t;
}

// "CRIU": runs `body` with a started guardian in a forked process, which
// writes the guardian's pid (and up to two more) to a pipe; then ends as
// `body` returns (0: _exit(0) after finish(), 1: SIGKILL without it; 2:
// as 0 once a byte arrives on `hold`).
struct FakeCriu {
	pid_t criu = -1;
	pid_t guardian = -1;
	pid_t extra[2] = {-1, -1};

	template <typename Body>
	FakeCriu(Guardian::Stage stage, int dir_fd, Body body, int hold = -1, bool stdio_closed = false)
	{
		int p[2];
		cr_assert_eq(pipe(p), 0);
		criu = fork();
		cr_assert(criu >= 0);
		if (criu == 0) {
			close(p[0]);
			if (stdio_closed)
				for (int fd = 0; fd < 3; fd++)
					close(fd);
			auto g = Guardian::start(stage, dir_fd);
			pid_t out[3] = {g ? g->pid() : -1, -1, -1};
			int no_child = waitpid(-1, nullptr, WNOHANG) < 0 && errno == ECHILD;
			if (!g || !no_child) {
				(void)!write(p[1], out, sizeof(out));
				_exit(2);
			}
			const int how = body(*g, out + 1);
			(void)!write(p[1], out, sizeof(out));
			if (how == 1)
				raise(SIGKILL);
			char b;
			if (how == 2 && read(hold, &b, 1) != 1)
				_exit(6);
			_exit(g->finish() ? 0 : 3);
		}
		close(p[1]);
		pid_t in[3] = {-1, -1, -1};
		cr_assert_eq(read(p[0], in, sizeof(in)), static_cast<ssize_t>(sizeof(in)));
		close(p[0]);
		guardian = in[0];
		extra[0] = in[1];
		extra[1] = in[2];
		cr_assert_gt(guardian, 0, "the guardian started, and CRIU has no child of it");
	}
};

} // namespace

Test(guardian, keeps_only_its_own_fds_and_session)
{
	Scratch s;
	int spare[2];
	cr_assert_eq(pipe(spare), 0);
	std::string fds;
	pid_t sid = 0;
	FakeCriu c(
		Guardian::Stage::Dump, s.fd,
		[&](Guardian &, pid_t *out) {
			out[0] = getsid(0);
			return 2; // until the test has looked at the guardian
		},
		spare[0]);
	sid = c.extra[0];
	for (const auto &e : fs::directory_iterator("/proc/" + std::to_string(c.guardian) + "/fd"))
		fds += fs::read_symlink(e.path()).string() + " ";
	cr_assert(fds.find("pipe:") == std::string::npos, "the guardian holds none of CRIU's pipes: %s", fds.c_str());
	cr_assert_neq(getsid(c.guardian), sid, "its own session");
	std::ifstream comm("/proc/" + std::to_string(c.guardian) + "/comm");
	std::string name;
	std::getline(comm, name);
	cr_assert_eq(name, Guardian::kComm);
	(void)!write(spare[1], "x", 1);
	cr_assert_eq(wait_end(c.criu), 0);
	cr_assert_eq(wait_end(c.guardian), 0);
	close(spare[0]);
	close(spare[1]);
}

Test(guardian, a_killed_dump_loses_its_temporary_files_only)
{
	Scratch s;
	s.touch(".amdgpu-pages-1-a6cc.img.tmp-0001");
	s.touch(".amdgpu-kfd-1.img.tmp-0002");
	s.touch("amdgpu-kfd-2.img");
	FakeCriu c(Guardian::Stage::Dump, s.fd, [&](Guardian &g, pid_t *) {
		must(g.temp_file(".amdgpu-pages-1-a6cc.img.tmp-0001"));
		must(g.temp_file(".amdgpu-kfd-1.img.tmp-0002"));
		must(g.temp_file(".amdgpu-never-created.tmp-0003"));
		return 1;
	});
	const int st = wait_end(c.criu);
	cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	cr_assert_eq(wait_end(c.guardian), 0, "the guardian exits after its repair");
	cr_assert(!s.exists(".amdgpu-pages-1-a6cc.img.tmp-0001"));
	cr_assert(!s.exists(".amdgpu-kfd-1.img.tmp-0002"));
	cr_assert(s.exists("amdgpu-kfd-2.img"), "a complete image keeps its name");
	const std::string log = s.log();
	cr_assert(log.find("ended before the plugin finished its dump") != std::string::npos, "%s", log.c_str());
	cr_assert(log.find("removed the temporary file .amdgpu-pages-1-a6cc.img.tmp-0001") != std::string::npos,
		  "%s", log.c_str());
	cr_assert(log.find("never-created") == std::string::npos, "a file never created is not reported: %s",
		  log.c_str());
}

Test(guardian, a_finished_dump_keeps_its_files)
{
	Scratch s;
	s.touch(".amdgpu-pages-1-a6cc.img.tmp-0001");
	FakeCriu c(Guardian::Stage::Dump, s.fd, [&](Guardian &g, pid_t *) {
		must(g.temp_file(".amdgpu-pages-1-a6cc.img.tmp-0001"));
		return 0;
	});
	cr_assert_eq(wait_end(c.criu), 0);
	cr_assert_eq(wait_end(c.guardian, 10), 0, "already ended when finish() returned");
	cr_assert(s.exists(".amdgpu-pages-1-a6cc.img.tmp-0001"), "the plugin's own cleanup decides");
	cr_assert(!s.exists(Guardian::kLogName));
}


// A guardian that does not end when told (stopped here) fails finish()
// after its bound, with where it is; once it runs again, it ends.
Test(guardian, finish_says_where_a_guardian_that_did_not_end_is, .timeout = 30)
{
	Scratch s;
	FakeCriu c(Guardian::Stage::Dump, s.fd, [&](Guardian &g, pid_t *out) {
		const pid_t pid = g.pid();
		kill(pid, SIGSTOP);
		const Status st = g.finish();
		kill(pid, SIGCONT);
		const std::string want = "guardian: pid " + std::to_string(pid) + " still running";
		out[0] = !st && st.error().code() == ETIMEDOUT &&
				 st.error().message().find(want) != std::string::npos &&
				 st.error().message().find("(state T, waiting in ") != std::string::npos
			 ? 1
			 : 0;
		if (!out[0])
			std::fprintf(stderr, "finish(): %s\n", st ? "ok" : st.error().message().c_str());
		return 0;
	});
	cr_assert_eq(wait_end(c.criu, 20000), 0);
	cr_assert_eq(c.extra[0], 1, "finish() failed with ETIMEDOUT, naming the pid and its state");
	cr_assert_eq(wait_end(c.guardian), 0, "it ended once continued");
}
Test(guardian, a_killed_restore_kills_the_tasks_not_resumed)
{
	Scratch s;
	FakeCriu c(Guardian::Stage::Restore, s.fd, [&](Guardian &g, pid_t *out) {
		for (int i = 0; i < 2; i++)
			out[i] = reported_task(g.channel());
		must(g.resumed(out[1]));
		return 1;
	});
	cr_assert(WIFSIGNALED(wait_end(c.criu)));
	cr_assert_eq(wait_end(c.guardian), 0);
	// Both tasks are ours now (CRIU's children, orphaned to the subreaper).
	const int st = wait_end(c.extra[0]);
	cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "the task not resumed was killed (0x%x)", st);
	cr_assert(alive(c.extra[1]), "the resumed task runs on");
	kill(c.extra[1], SIGKILL);
	(void)wait_end(c.extra[1]);
	const std::string log = s.log();
	cr_assert(log.find("pid " + std::to_string(c.extra[0]) + ": killed (SIGKILL)") != std::string::npos, "%s",
		  log.c_str());
	cr_assert(log.find("pid " + std::to_string(c.extra[1]) + ":") == std::string::npos, "%s", log.c_str());
}

Test(guardian, a_restore_guardian_ends_once_every_task_is_resumed)
{
	Scratch s;
	FakeCriu c(Guardian::Stage::Restore, s.fd, [&](Guardian &g, pid_t *out) {
		out[0] = reported_task(g.channel());
		must(g.resumed(out[0]));
		for (int i = 0; i < 2000 && alive(g.pid()); i++) // it ends by itself
			std::this_thread::sleep_for(std::chrono::milliseconds(1));
		return 1; // CRIU killed now changes nothing
	});
	cr_assert(WIFSIGNALED(wait_end(c.criu)));
	cr_assert_eq(wait_end(c.guardian), 0);
	std::this_thread::sleep_for(std::chrono::milliseconds(100));
	cr_assert(alive(c.extra[0]), "the resumed task runs on");
	kill(c.extra[0], SIGKILL);
	(void)wait_end(c.extra[0]);
	cr_assert(!s.exists(Guardian::kLogName));
}

namespace {

// A file outside the image directory that a planted link points at.
struct Outside {
	fs::path dir;
	Outside()
	{
		char tmpl[] = "/tmp/amdcr-guardian-away-XXXXXX";
		cr_assert_not_null(mkdtemp(tmpl));
		dir = tmpl;
		std::ofstream(dir / "secret") << "root's\n";
		cr_assert_eq(chmod((dir / "secret").c_str(), 0600), 0);
	}
	~Outside() { fs::remove_all(dir); }
	std::string secret() const
	{
		std::ifstream f(dir / "secret");
		return std::string((std::istreambuf_iterator<char>(f)), {});
	}
};

// A killed dump (one temporary file) or restore (one task not resumed).
void killed_session(const Scratch &s, Guardian::Stage stage)
{
	s.touch(".amdgpu-pages-1-a6cc.img.tmp-0001");
	FakeCriu c(stage, s.fd, [&](Guardian &g, pid_t *out) {
		if (stage == Guardian::Stage::Dump) {
			must(g.temp_file(".amdgpu-pages-1-a6cc.img.tmp-0001"));
			return 1;
		}
		out[0] = reported_task(g.channel());
		return 1;
	});
	cr_assert(WIFSIGNALED(wait_end(c.criu)));
	cr_assert_eq(wait_end(c.guardian), 0, "the guardian repaired and exited");
	if (stage == Guardian::Stage::Dump) {
		cr_assert(!s.exists(".amdgpu-pages-1-a6cc.img.tmp-0001"), "the repair itself went on");
	} else {
		const int st = wait_end(c.extra[0]);
		cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "the repair itself went on (0x%x)", st);
	}
}

} // namespace

Test(guardian, its_log_is_created_with_mode_0600)
{
	Scratch s;
	::umask(0);
	killed_session(s, Guardian::Stage::Dump);
	struct stat st = {};
	cr_assert_eq(lstat((s.dir / Guardian::kLogName).c_str(), &st), 0);
	cr_assert(S_ISREG(st.st_mode));
	cr_assert_eq(st.st_mode & 07777, 0600u, "mode %o", st.st_mode & 07777);
}

// A symbolic link planted as amdgpu-guardian.log (to a root-owned file
// elsewhere, or dangling) is never followed, at a killed dump and at a
// killed restore; the repair goes on without the file log.
Test(guardian, a_planted_log_link_is_not_followed)
{
	for (Guardian::Stage stage : {Guardian::Stage::Dump, Guardian::Stage::Restore}) {
		for (bool dangling : {false, true}) {
			Scratch s;
			Outside away;
			const fs::path target = away.dir / (dangling ? "made-by-root" : "secret");
			fs::create_symlink(target, s.dir / Guardian::kLogName);
			killed_session(s, stage);
			cr_assert_eq(away.secret(), "root's\n", "the file elsewhere was appended to");
			cr_assert(!fs::exists(away.dir / "made-by-root"), "a file was created outside the directory");
			cr_assert(fs::is_symlink(s.dir / Guardian::kLogName));
		}
	}
}

Test(guardian, a_planted_log_fifo_does_not_block_the_repair)
{
	Scratch s;
	cr_assert_eq(mkfifo((s.dir / Guardian::kLogName).c_str(), 0600), 0);
	killed_session(s, Guardian::Stage::Dump); // wait_end: 2 s at most
}

// CRIU may run with fds 0-2 closed: the guardian's channel and pidfd land
// there, and must survive its pointing 0-2 at /dev/null.
Test(guardian, works_when_criu_has_fds_0_to_2_closed)
{
	Scratch s;
	s.touch(".amdgpu-kfd-1.img.tmp-0002");
	FakeCriu c(
		Guardian::Stage::Dump, s.fd,
		[&](Guardian &g, pid_t *) {
			must(g.temp_file(".amdgpu-kfd-1.img.tmp-0002"));
			return 1;
		},
		-1, true);
	cr_assert(WIFSIGNALED(wait_end(c.criu)));
	cr_assert_eq(wait_end(c.guardian), 0);
	cr_assert(!s.exists(".amdgpu-kfd-1.img.tmp-0002"), "the guardian heard of the file and removed it");
}

// A message that is not what its kind must be is logged, not acted on: a
// temporary file's name is a name of the directory, never a path.
Test(guardian, malformed_messages_are_logged_not_acted_on)
{
	Scratch s;
	Outside away;
	const std::string escape = "../" + away.dir.filename().string() + "/secret";
	FakeCriu c(Guardian::Stage::Dump, s.fd, [&](Guardian &g, pid_t *) {
		must(g.temp_file(escape));
		if (send(g.channel(), "xy", 2, MSG_NOSIGNAL) != 2)
			_exit(7);
		std::this_thread::sleep_for(std::chrono::milliseconds(50));
		return 1;
	});
	cr_assert(WIFSIGNALED(wait_end(c.criu)));
	cr_assert_eq(wait_end(c.guardian), 0);
	cr_assert_eq(away.secret(), "root's\n", "a file outside the directory was removed");
	const std::string log = s.log();
	cr_assert(log.find("malformed message dropped: kind 3") != std::string::npos, "%s", log.c_str());
	cr_assert(log.find("malformed message dropped: 2 bytes") != std::string::npos, "%s", log.c_str());
}

namespace {

// In a pid namespace of its own (as its init): a paused process T whose
// pid, while the guardian retries its PTRACE_SEIZE (T is traced by us),
// goes to a bystander B (T killed and reaped, ns_last_pid set). The
// guardian must notice through T's pidfd that the process it seized is not
// T and detach without touching it. The "KFD file" is /dev/null: an UNPAUSE
// through it would fail with ENOTTY, which the log would then show.
// Returns 0, or a code naming the failed step.
int reused_pid_scenario(const std::string &dir)
{
	const int dir_fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	const pid_t t = fork();
	if (t == 0) {
		for (;;)
			pause();
	}
	if (dir_fd < 0 || t < 0 || ptrace(PTRACE_SEIZE, t, nullptr, nullptr) != 0)
		return 10;
	int p[2];
	if (pipe(p) != 0)
		return 10;
	const pid_t criu = fork();
	if (criu == 0) {
		auto g = Guardian::start(Guardian::Stage::Dump, dir_fd);
		if (!g)
			_exit(11);
		const Kfd fake = Kfd::adopt(UniqueFd(open("/dev/null", O_RDWR | O_CLOEXEC)));
		if (!g->paused(fake, t, 1))
			_exit(12);
		const pid_t gp = g->pid();
		if (write(p[1], &gp, sizeof(gp)) != sizeof(gp))
			_exit(12);
		std::this_thread::sleep_for(std::chrono::milliseconds(50));
		raise(SIGKILL);
	}
	pid_t guardian = -1;
	int st = 0;
	if (criu < 0 || read(p[0], &guardian, sizeof(guardian)) != sizeof(guardian) ||
	    waitpid(criu, &st, 0) != criu || !WIFSIGNALED(st))
		return 13;
	// The guardian now retries its seize of t (EPERM: we trace it). It is
	// stopped while the pid changes hands, so that no attempt of it falls
	// between t's end and b's start.
	std::this_thread::sleep_for(std::chrono::milliseconds(300));
	kill(guardian, SIGSTOP);
	kill(t, SIGKILL);
	while (waitpid(t, &st, __WALL) == t && !WIFSIGNALED(st) && !WIFEXITED(st)) {
	}
	{
		std::ofstream last("/proc/sys/kernel/ns_last_pid");
		last << (t - 1);
	}
	const pid_t b = fork();
	if (b == 0) {
		for (;;)
			pause();
	}
	kill(guardian, SIGCONT);
	if (b != t) {
		kill(b, SIGKILL);
		return 14; // the pid did not go to the bystander
	}
	// The guardian ends (it is ours: we are the namespace's init).
	for (int i = 0; i < 5000; i++) {
		const pid_t r = waitpid(-1, &st, WNOHANG);
		if (r > 0 && r != b)
			break;
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
	}
	const bool b_alive = kill(b, 0) == 0;
	kill(b, SIGKILL);
	return b_alive ? 0 : 15;
}

} // namespace

// Should a seize attempt of the guardian still fall between T's reaping and
// B's fork, it finds no process and gives up ("gone"): that run tests
// nothing and is repeated (a few times at most).
Test(guardian, a_pid_reused_during_the_seize_is_left_untouched)
{
	std::string log;
	for (int attempt = 0; attempt < 5; attempt++) {
		Scratch s;
		// A single-threaded child makes the namespace (unshare refuses
		// CLONE_NEWPID in the test runner) and forks its init.
		const pid_t outer = fork();
		cr_assert(outer >= 0);
		if (outer == 0) {
			if (unshare(CLONE_NEWPID) != 0)
				_exit(100);
			const pid_t init = fork();
			if (init == 0)
				_exit(reused_pid_scenario(s.dir.string()));
			int st = 0;
			if (init < 0 || waitpid(init, &st, 0) != init || !WIFEXITED(st))
				_exit(101);
			_exit(WEXITSTATUS(st));
		}
		int st = 0;
		cr_assert_eq(waitpid(outer, &st, 0), outer);
		if (WIFEXITED(st) && WEXITSTATUS(st) == 100)
			cr_skip_test("unshare(CLONE_NEWPID) failed: no pid namespace to reuse a pid in");
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "scenario step failed (0x%x)", st);
		log = s.log();
		if (log.find("gone (its GPU queues went with it)") == std::string::npos)
			break;
	}
	cr_assert(log.find("ended while it was being seized, and the pid is another process's now: detached at "
			   "once, untouched") != std::string::npos,
		  "%s", log.c_str());
	cr_assert(log.find("CRIU_OP UNPAUSE") == std::string::npos, "it acted on the new process: %s", log.c_str());
}
