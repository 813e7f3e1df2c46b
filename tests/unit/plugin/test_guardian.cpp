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
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

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

// "CRIU": runs `body` with a started guardian in a forked process, which
// writes the guardian's pid (and up to two more) to a pipe; then ends as
// `body` returns (0: _exit(0) after finish(), 1: SIGKILL without it; 2:
// as 0 once a byte arrives on `hold`).
struct FakeCriu {
	pid_t criu = -1;
	pid_t guardian = -1;
	pid_t extra[2] = {-1, -1};

	template <typename Body>
	FakeCriu(Guardian::Stage stage, int dir_fd, Body body, int hold = -1)
	{
		int p[2];
		cr_assert_eq(pipe(p), 0);
		criu = fork();
		cr_assert(criu >= 0);
		if (criu == 0) {
			close(p[0]);
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

Test(guardian, a_killed_restore_kills_the_tasks_not_resumed)
{
	Scratch s;
	FakeCriu c(Guardian::Stage::Restore, s.fd, [&](Guardian &g, pid_t *out) {
		for (int i = 0; i < 2; i++) {
			out[i] = fork();
			if (out[i] == 0) {
				if (!Guardian::report_task(g.channel()))
					_exit(4);
				for (;;)
					pause();
			}
		}
		std::this_thread::sleep_for(std::chrono::milliseconds(100)); // both reported
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
		out[0] = fork();
		if (out[0] == 0) {
			if (!Guardian::report_task(g.channel()))
				_exit(4);
			for (;;)
				pause();
		}
		std::this_thread::sleep_for(std::chrono::milliseconds(100));
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
