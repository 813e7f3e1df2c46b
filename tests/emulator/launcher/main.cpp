// SPDX-License-Identifier: GPL-2.0-only
//
// kfd-emu: runs a program on an emulated AMD GPU machine.
//
//   kfd-emu [--machine NAME|FILE] [--gpu-ids ID,..] [--minors M,..]
//           [--vram SIZE[,SIZE..]] [--fw-version N] [--sdma-fw-version N]
//           [--sdma-gbps G] [--vram-resident] [--fault SPEC].. [--unreadable PATH]..
//           [--device-cgroup MINOR,..] [--root DIR] [--keep-root] -- PROGRAM [ARGS..]
//   kfd-emu ctl QUERY..            (inside a launched program's environment)
//   kfd-emu ctl faults SPEC
//   kfd-emu machine [--machine ..] [overrides]   prints the machine
//
// The launcher is the daemon: it writes the sysfs root, creates the model,
// serves the shim's connections, runs PROGRAM with LD_PRELOAD set and exits
// with its status (128+N when killed by signal N).
#include "../transport/daemon.h"
#include "../transport/faults.h"
#include "../transport/profile.h"
#include "../transport/protocol.h"
#include "../transport/sysfs.h"

#include <dirent.h>
#include <signal.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#ifndef KFDEMU_SHIM_PATH
#error "KFDEMU_SHIM_PATH must name the built libkfdemu_shim.so"
#endif
#ifndef KFDEMU_PROFILE_DIR
#error "KFDEMU_PROFILE_DIR must name tests/emulator/profiles"
#endif

extern char **environ;

namespace {

using namespace kfdemu;

constexpr const char *kUsage =
	"usage: kfd-emu [--machine NAME|FILE] [--gpu-ids ID,..] [--minors M,..]\n"
	"               [--vram SIZE[,..]] [--fw-version N] [--sdma-fw-version N]\n"
	"               [--sdma-gbps G] [--vram-resident] [--fault SPEC].. [--unreadable PATH]..\n"
	"               [--device-cgroup MINOR,..] [--root DIR] [--keep-root] [--] PROGRAM [ARGS..]\n"
	"       kfd-emu ctl QUERY..  |  kfd-emu ctl faults SPEC\n"
	"       kfd-emu machine [--machine ..] [overrides]\n"
	"profiles: MI100 2xMI210 2xMI300X 8xMI300X none (or a machine file); see README.md\n";

int usage(const char *why)
{
	if (why)
		std::fprintf(stderr, "kfd-emu: %s\n", why);
	std::fputs(kUsage, stderr);
	return 2;
}

struct Options {
	std::string machine = "MI100";
	Overrides ov;
	std::vector<std::string> faults, unreadable;
	// --root: the machine's root at this absolute path (which must not
	// exist or be empty) instead of a new kfdemu.XXXXXX in /dev/shm or
	// $TMPDIR (default_root_parent()): a second machine at the root and
	// socket paths of a first one that is gone,
	// where a process real CRIU dumped on the first is restored (its shim
	// keeps the paths it was dumped with).
	std::string root;
	bool keep_root = false;
	std::vector<char *> program;
};

// Parses options; returns -1 on success or an exit status.
int parse_options(int argc, char **argv, int first, Options *o)
{
	if (const char *m = std::getenv("KFDEMU_MACHINE"); m && *m)
		o->machine = m;
	for (int i = first; i < argc; i++) {
		std::string_view a = argv[i];
		if (a == "--") {
			for (int j = i + 1; j < argc; j++)
				o->program.push_back(argv[j]);
			break;
		}
		if (!a.starts_with("-")) {	// the program, without "--"
			for (int j = i; j < argc; j++)
				o->program.push_back(argv[j]);
			break;
		}
		if (a == "--vram-resident") {
			o->ov.vram_resident = true;
			continue;
		}
		if (a == "--keep-root") {
			o->keep_root = true;
			continue;
		}
		if (a == "-h" || a == "--help")
			return usage(nullptr), 0;
		if (i + 1 >= argc)
			return usage(("missing value for " + std::string(a)).c_str());
		const char *v = argv[++i];
		bool ok = true;
		if (a == "--machine")
			o->machine = v;
		else if (a == "--gpu-ids")
			ok = parse_u32_list(v, &o->ov.gpu_ids);
		else if (a == "--root") {
			o->root = v;
			ok = !o->root.empty() && o->root[0] == '/';
		} else if (a == "--minors")
			ok = parse_u32_list(v, &o->ov.minors);
		else if (a == "--vram")
			ok = parse_size_list(v, &o->ov.vram);
		else if (a == "--fw-version" || a == "--sdma-fw-version") {
			std::vector<uint32_t> x;
			ok = parse_u32_list(v, &x) && x.size() == 1;
			if (ok)
				(a == "--fw-version" ? o->ov.fw_version : o->ov.sdma_fw_version) = x[0];
		} else if (a == "--sdma-gbps") {
			char *end = nullptr;
			double g = std::strtod(v, &end);
			ok = end && *end == '\0' && g >= 0;
			o->ov.sdma_gbps = g;
		} else if (a == "--fault")
			o->faults.push_back(v);
		else if (a == "--unreadable")
			o->unreadable.push_back(v);
		else if (a == "--device-cgroup")
			ok = parse_u32_list(v, &o->ov.cgroup_minors);
		else
			return usage(("unknown option " + std::string(a)).c_str());
		if (!ok)
			return usage(("bad value for " + std::string(a) + ": " + v).c_str());
	}
	return -1;
}

std::optional<MachineDesc> build_machine(const Options &o)
{
	std::string err;
	auto m = load_machine(o.machine, KFDEMU_PROFILE_DIR, &err);
	if (!m) {
		std::fprintf(stderr, "kfd-emu: %s\n", err.c_str());
		return std::nullopt;
	}
	if (std::string e = apply_overrides(*m, o.ov); !e.empty()) {
		std::fprintf(stderr, "kfd-emu: %s\n", e.c_str());
		return std::nullopt;
	}
	return m;
}

// --- kfd-emu ctl ------------------------------------------------------------

int ctl(int argc, char **argv)
{
	const char *sock = std::getenv("KFDEMU_SOCKET");
	if (!sock || !*sock) {
		std::fputs("kfd-emu ctl: KFDEMU_SOCKET is not set (run inside kfd-emu)\n", stderr);
		return 2;
	}
	if (argc < 3)
		return usage("ctl needs a query");
	wire::Request rq{};
	std::string payload;
	if (std::string_view(argv[2]) == "faults") {
		rq.op = wire::Op::SetFaults;
		for (int i = 3; i < argc; i++)
			payload += std::string(payload.empty() ? "" : ",") + argv[i];
	} else {
		rq.op = wire::Op::Introspect;
		for (int i = 2; i < argc; i++)
			payload += std::string(payload.empty() ? "" : " ") + argv[i];
	}
	int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	sockaddr_un sa{};
	sa.sun_family = AF_UNIX;
	std::snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock);
	if (s < 0 || ::connect(s, reinterpret_cast<sockaddr *>(&sa), sizeof sa)) {
		std::fprintf(stderr, "kfd-emu ctl: connect %s: %s\n", sock, std::strerror(errno));
		return 1;
	}
	rq.tid = ::gettid();
	rq.len = uint32_t(payload.size());
	std::string msg(reinterpret_cast<const char *>(&rq), sizeof rq);
	msg += payload;
	wire::Reply rp{};
	if (wire::send_all(s, msg.data(), msg.size()) || wire::recv_all(s, &rp, sizeof rp)) {
		std::fputs("kfd-emu ctl: daemon did not answer\n", stderr);
		return 1;
	}
	std::vector<wire::FdEntry> ents(rp.nfds);
	std::string out(rp.len, '\0');
	if ((rp.nfds && wire::recv_all(s, ents.data(), rp.nfds * sizeof(wire::FdEntry))) ||
	    (rp.len && wire::recv_all(s, out.data(), rp.len))) {
		std::fputs("kfd-emu ctl: short answer\n", stderr);
		return 1;
	}
	::close(s);
	std::fwrite(out.data(), 1, out.size(), rp.result < 0 ? stderr : stdout);
	std::fputc('\n', rp.result < 0 ? stderr : stdout);
	return rp.result < 0 ? 1 : 0;
}

// --- kfd-emu machine ----------------------------------------------------------

int print_machine(const MachineDesc &m)
{
	std::printf("machine %s (%zu nodes)\n", m.name.c_str(), m.nodes.size());
	for (size_t i = 0; i < m.nodes.size(); i++) {
		const auto &n = m.nodes[i];
		if (n.is_gpu)
			std::printf("node %zu: gpu %s gpu_id %u renderD%u card%u pci %s vram %llu links %zu\n",
				    i, n.name.c_str(), n.gpu_id, n.drm_render_minor, n.card_index,
				    n.pci_slot.c_str(),
				    static_cast<unsigned long long>(n.mem_banks.empty() ? 0 : n.mem_banks[0].size_in_bytes),
				    n.io_links.size());
		else
			std::printf("node %zu: cpu links %zu\n", i, n.io_links.size());
	}
	return 0;
}

// --- run --------------------------------------------------------------------

// Re-executes the launcher without our own shim preloaded (a launcher
// started from inside an emulated program must not be emulated itself).
void strip_own_preload(char **argv)
{
	const char *pre = std::getenv("LD_PRELOAD");
	if (!pre || !std::strstr(pre, "kfdemu_shim"))
		return;
	std::string kept;
	std::string_view s = pre;
	while (!s.empty()) {
		size_t e = s.find_first_of(" :");
		std::string_view tok = s.substr(0, e);
		if (!tok.empty() && tok.find("kfdemu_shim") == std::string_view::npos)
			kept += (kept.empty() ? "" : " ") + std::string(tok);
		s.remove_prefix(e == std::string_view::npos ? s.size() : e + 1);
	}
	if (kept.empty())
		::unsetenv("LD_PRELOAD");
	else
		::setenv("LD_PRELOAD", kept.c_str(), 1);
	::unsetenv("KFDEMU_SOCKET");
	::unsetenv("KFDEMU_ROOT");
	::execv("/proc/self/exe", argv);
	std::perror("kfd-emu: re-exec");
	std::exit(127);
}

std::vector<std::string> child_env(const std::string &root, const std::string &sock)
{
	std::vector<std::string> env;
	std::string preload = KFDEMU_SHIM_PATH, asan = "verify_asan_link_order=0";
	for (char **e = environ; *e; e++) {
		std::string_view v = *e;
		if (v.starts_with("LD_PRELOAD="))
			preload += " " + std::string(v.substr(11));
		else if (v.starts_with("ASAN_OPTIONS="))
			asan = std::string(v.substr(13)) + ":" + asan;
		else if (!v.starts_with("KFDEMU_SOCKET=") && !v.starts_with("KFDEMU_ROOT="))
			env.emplace_back(v);
	}
	env.push_back("LD_PRELOAD=" + preload);
	env.push_back("ASAN_OPTIONS=" + asan);
	env.push_back("KFDEMU_ROOT=" + root);
	env.push_back("KFDEMU_SOCKET=" + sock);
	return env;
}

// PATH lookup done before fork: the child may only call async-signal-safe
// functions (daemon and model threads may hold malloc's lock at fork time).
std::string resolve_program(const char *prog, const std::vector<std::string> &env)
{
	if (std::strchr(prog, '/'))
		return prog;
	std::string path = "/usr/local/bin:/usr/bin:/bin";
	for (const auto &e : env)
		if (e.starts_with("PATH="))
			path = e.substr(5);
	size_t i = 0;
	while (i <= path.size()) {
		size_t j = path.find(':', i);
		if (j == std::string::npos)
			j = path.size();
		std::string cand = (j > i ? path.substr(i, j - i) : ".") + "/" + prog;
		if (::access(cand.c_str(), X_OK) == 0)
			return cand;
		i = j + 1;
	}
	return prog;
}

// --root DIR: creates DIR (mode 0700, as mkdtemp), or takes it when it
// is an empty directory; anything else is refused (a machine still running
// there, or files that are not ours to remove at exit). Returns an error.
std::string make_root_at(const std::string &dir)
{
	if (::mkdir(dir.c_str(), 0700) == 0)
		return "";
	if (errno != EEXIST)
		return std::strerror(errno);
	DIR *d = ::opendir(dir.c_str());
	if (!d)
		return std::string("exists and cannot be read: ") + std::strerror(errno);
	bool empty = true;
	while (dirent *e = ::readdir(d))
		if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, ".."))
			empty = false;
	::closedir(d);
	return empty ? "" : "exists and is not empty (is another machine still running there?)";
}

// The fault rules of $KFDEMU_FAULTS and --fault, in that order; false
// (after a message) when one does not parse.
bool collect_faults(const Options &o, std::vector<FaultRule> *faults)
{
	std::vector<std::string> specs = o.faults;
	if (const char *f = std::getenv("KFDEMU_FAULTS"); f && *f)
		specs.insert(specs.begin(), f);
	for (const auto &spec : specs) {
		std::string err;
		auto r = parse_faults(spec, &err);
		if (!r) {
			std::fprintf(stderr, "kfd-emu: fault '%s': %s\n", spec.c_str(), err.c_str());
			return false;
		}
		faults->insert(faults->end(), r->begin(), r->end());
	}
	return true;
}

// Where a new root goes: /dev/shm when it is a writable tmpfs, else
// $TMPDIR (else /tmp). The root holds what the kernel keeps in memory
// (sysfs, /proc files, device nodes), about a thousand small files and
// directories; on a disk filesystem their creation and removal cost
// seconds per machine (ext4 mounted with discard: 4-7 s against 0.3 s on
// tmpfs on a loaded 2-core VM), paid by every test that starts one.
std::string default_root_parent()
{
	struct statfs fs {};
	if (::statfs("/dev/shm", &fs) == 0 && fs.f_type == TMPFS_MAGIC && ::access("/dev/shm", W_OK) == 0)
		return "/dev/shm";
	const char *tmp = std::getenv("TMPDIR");
	return tmp && *tmp ? tmp : "/tmp";
}

// The machine's root (--root or a new <default_root_parent()>/kfdemu.*) with its sysfs,
// mount namespace note and unreadable paths written; "" (after a message,
// the root removed) on failure.
std::string make_machine_root(const Options &o, const MachineDesc &machine)
{
	std::string root;
	if (!o.root.empty()) {
		if (std::string e = make_root_at(o.root); !e.empty()) {
			std::fprintf(stderr, "kfd-emu: --root %s: %s\n", o.root.c_str(), e.c_str());
			return "";
		}
		root = o.root;
	} else {
		root = default_root_parent() + "/kfdemu.XXXXXX";
		if (!::mkdtemp(root.data())) {
			std::perror("kfd-emu: mkdtemp");
			return "";
		}
	}
	std::string e = write_sysfs(machine, root);
	if (!e.empty())
		e = "sysfs: " + e;
	if (e.empty())
		e = write_host_mntns(root);
	if (e.empty()) {
		std::vector<std::string> unreadable = o.unreadable;
		for (auto &p : cgroup_denied_paths(machine))
			unreadable.push_back(std::move(p));
		e = write_unreadable(root, unreadable);
	}
	if (!e.empty()) {
		std::fprintf(stderr, "kfd-emu: %s\n", e.c_str());
		remove_tree(root);
		return "";
	}
	return root;
}

// The daemon (this process) holds one fd per BO (its memfd), a limit the
// kernel does not have, and one message of fds more while it sends a CRIU
// op's dma-bufs: its soft fd limit is lifted as high as the system allows
// (root may raise the hard limit up to fs.nr_open), else to the hard one.
// The original limit, for the program; false if it could not be read.
bool raise_nofile(struct rlimit *orig)
{
	if (::getrlimit(RLIMIT_NOFILE, orig) != 0)
		return false;
	struct rlimit raised = *orig;
	raised.rlim_cur = raised.rlim_max = 1 << 20;
	if (::setrlimit(RLIMIT_NOFILE, &raised) != 0) {
		raised = *orig;
		raised.rlim_cur = raised.rlim_max;
		::setrlimit(RLIMIT_NOFILE, &raised);
	}
	return true;
}

// Forwards the signals in `sigs` to `child` until it ends; its status.
int wait_program(pid_t child, const sigset_t &sigs)
{
	int status = 0;
	for (;;) {
		siginfo_t si{};
		if (sigwaitinfo(&sigs, &si) < 0)
			continue;
		if (si.si_signo != SIGCHLD) {
			::kill(child, si.si_signo);
			continue;
		}
		pid_t w = ::waitpid(child, &status, WNOHANG);
		if (w == child)
			return status;
	}
}

int run(const Options &o, const MachineDesc &machine)
{
	std::vector<FaultRule> faults;
	if (!collect_faults(o, &faults))
		return 2;
	const std::string root = make_machine_root(o, machine);
	if (root.empty())
		return 1;
	const std::string sock = root + "/.kfdemu/socket";

	// Signals are handled synchronously by the main thread (and blocked in
	// every daemon thread, which inherit this mask).
	sigset_t sigs, old;
	sigemptyset(&sigs);
	for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGQUIT})
		sigaddset(&sigs, s);
	sigprocmask(SIG_BLOCK, &sigs, &old);

	auto memory = std::make_shared<ProcMemory>();
	std::unique_ptr<Model> model = make_model(machine, memory);
	model->set_sysfs_root(root); // kfd proc/<pid>, mem_info_vram_used
	if (!faults.empty())
		model->set_faults(faults);
	// Owned for the rest of the process: daemon threads may still be
	// blocked inside the model when the launcher exits.
	auto *daemon = new Daemon(*model, sock);
	if (!daemon->error().empty()) {
		std::fprintf(stderr, "kfd-emu: %s\n", daemon->error().c_str());
		remove_tree(root);
		return 1;
	}
	daemon->start();

	std::vector<std::string> env = child_env(root, sock);
	std::vector<char *> envp;
	for (auto &e : env)
		envp.push_back(e.data());
	envp.push_back(nullptr);
	std::vector<char *> args = o.program;
	args.push_back(nullptr);
	const std::string exe = resolve_program(args[0], env);
	const std::string exec_err = "kfd-emu: cannot execute " + exe + "\n";

	struct rlimit orig_nofile {};
	const bool have_nofile = raise_nofile(&orig_nofile);
	pid_t child = ::fork();
	if (child < 0) {
		std::perror("kfd-emu: fork");
		remove_tree(root);
		return 1;
	}
	if (child == 0) {
		sigprocmask(SIG_SETMASK, &old, nullptr);
		if (have_nofile)
			::setrlimit(RLIMIT_NOFILE, &orig_nofile);
		::execve(exe.c_str(), args.data(), envp.data());
		(void)!::write(2, exec_err.data(), exec_err.size());
		::_exit(127);
	}
	const int status = wait_program(child, sigs);
	// Reap any other children (none expected) without blocking.
	while (::waitpid(-1, nullptr, WNOHANG) > 0) {
	}
	daemon->stop();
	if (o.keep_root)
		std::fprintf(stderr, "kfd-emu: root kept at %s\n", root.c_str());
	else
		remove_tree(root);
	std::fflush(nullptr);
	const int code = WIFEXITED(status) ? WEXITSTATUS(status)
			 : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
	// Skip destructors: connection threads of surviving clients may still
	// be inside the model.
	::_exit(code);
}

} // namespace

int main(int argc, char **argv)
{
	if (argc >= 2 && std::string_view(argv[1]) == "ctl")
		return ctl(argc, argv);
	const bool describe_only = argc >= 2 && std::string_view(argv[1]) == "machine";
	if (!describe_only)
		strip_own_preload(argv);
	Options o;
	if (int r = parse_options(argc, argv, describe_only ? 2 : 1, &o); r >= 0)
		return r;
	auto machine = build_machine(o);
	if (!machine)
		return 2;

	if (describe_only)
		return print_machine(*machine);
	if (o.program.empty())
		return usage("no program given (after --)");
	return run(o, *machine);
}
