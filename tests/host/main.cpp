// SPDX-License-Identifier: GPL-2.0-only
//
// criu-host: the CRIU 4.x side of the plugin ABI, for tests. See README.md.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "api.h"
#include "dump.h"
#include "inventory.h"
#include "plugins.h"
#include "restore.h"

#include <sys/resource.h>

#include <algorithm>

namespace {

// A service fd's place: the highest free fd below min(RLIMIT_NOFILE, 4096)
// (the limit raised that far first), as the restore's other service fds.
int place_service_fd(int fd, void *)
{
	struct rlimit rl {};
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return fd;
	const rlim_t want = std::min<rlim_t>(rl.rlim_max, 4096);
	if (rl.rlim_cur < want) {
		rl.rlim_cur = want;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	for (int n = static_cast<int>(std::min<rlim_t>(rl.rlim_cur, 4096)) - 1; n > 2; n--) {
		if (n == fd)
			return fd;
		if (fcntl(n, F_GETFD) != -1)
			continue;
		if (dup3(fd, n, O_CLOEXEC) < 0)
			return fd;
		close(fd);
		return n;
	}
	return fd;
}

} // namespace

namespace {

constexpr const char *kUsage =
	"usage:\n"
	"  criu-host dump -t PID -D DIR [--libdir DIR] [--plugin PATH]...\n"
	"                 [--leave-running | --kill] [-v[N]] [-o LOG]\n"
	"  criu-host pre-dump -t PID -D DIR [--libdir DIR] [--plugin PATH]... [-v[N]] [-o LOG]\n"
	"  criu-host restore -D DIR [--libdir DIR] [--plugin PATH]...\n"
	"                 [--verifier LIB.so:function [--verifier-arg STR]]\n"
	"                 [--restore-order concurrent|tree|reverse] [-v[N]] [-o LOG]\n"
	"Every command also takes --hooks 12|13|15: the plugin ABI imitated (CRIU 4.0/4.1,\n"
	"4.2-4.2.1, criu-dev; default $CRIU_HOST_HOOKS, else 15).\n"
	"Plugins: --libdir DIR loads every *.so in DIR (readdir order), --plugin PATH\n"
	"one file (repeatable, in order); neither: $CRIU_LIBS_DIR, else /usr/lib/criu\n"
	"when it exists. Log levels: 1 error, 2 warn (default), 3 info, 4 debug.\n";

struct Options {
	std::string command;
	pid_t pid = 0;
	std::string dir;
	std::string libdir;
	std::vector<std::string> plugins;
	bool kill = false;
	int level = host::kWarn;
	std::string log;
	std::string verifier;
	std::string verifier_arg;
	std::string restore_order = "concurrent";
	unsigned hooks = CR_PLUGIN_HOOK__MAX;
};

// The library that exports this ABI's `cr_plugin_ctl` (criu_ctl.c).
const char *ctl_library(unsigned hooks)
{
	switch (hooks) {
	case 12:
		return CRIU_CTL_12;
	case 13:
		return CRIU_CTL_13;
	case 15:
		return CRIU_CTL_15;
	default:
		return nullptr;
	}
}

bool parse_level(const char *s, Options &o)
{
	if (!*s) {
		o.level++;
		return true;
	}
	if (*s == 'v') {
		o.level++;
		while (*s == 'v') {
			o.level++;
			s++;
		}
		return *s == '\0';
	}
	char *end = nullptr;
	const long v = std::strtol(s, &end, 10);
	if (*end)
		return false;
	o.level = static_cast<int>(v);
	return true;
}

bool parse(int argc, char **argv, Options &o)
{
	if (argc < 2)
		return false;
	o.command = argv[1];
	if (const char *env = std::getenv("CRIU_HOST_HOOKS"); env && *env)
		o.hooks = static_cast<unsigned>(std::atoi(env));
	for (int i = 2; i < argc; i++) {
		const std::string a = argv[i];
		auto next = [&](std::string &out) {
			if (i + 1 >= argc)
				return false;
			out = argv[++i];
			return true;
		};
		std::string v;
		if (a == "-t" || a == "--tree") {
			if (!next(v))
				return false;
			o.pid = static_cast<pid_t>(std::atoi(v.c_str()));
		} else if (a == "-D" || a == "--images-dir") {
			if (!next(o.dir))
				return false;
		} else if (a == "-L" || a == "--libdir") {
			if (!next(o.libdir))
				return false;
		} else if (a == "--plugin") {
			if (!next(v))
				return false;
			o.plugins.push_back(v);
		} else if (a == "--kill") {
			o.kill = true;
		} else if (a == "-R" || a == "--leave-running") {
			o.kill = false;
		} else if (a == "-o" || a == "--log-file") {
			if (!next(o.log))
				return false;
		} else if (a == "--verbosity") {
			if (!next(v) || !parse_level(v.c_str(), o))
				return false;
		} else if (a.rfind("-v", 0) == 0) {
			if (!parse_level(a.c_str() + 2, o))
				return false;
		} else if (a == "--hooks") {
			if (!next(v))
				return false;
			o.hooks = static_cast<unsigned>(std::atoi(v.c_str()));
		} else if (a == "--verifier") {
			if (!next(o.verifier))
				return false;
		} else if (a == "--verifier-arg") {
			if (!next(o.verifier_arg))
				return false;
		} else if (a == "--restore-order") {
			if (!next(o.restore_order) || (o.restore_order != "concurrent" && o.restore_order != "tree" &&
						       o.restore_order != "reverse")) {
				std::fprintf(stderr, "criu-host: --restore-order takes concurrent, tree or reverse\n");
				return false;
			}
		} else {
			std::fprintf(stderr, "criu-host: unknown option %s\n", a.c_str());
			return false;
		}
	}
	if (o.level < 0)
		o.level = 0;
	if (o.level > host::kDebug)
		o.level = host::kDebug;
	if (o.dir.empty() || !ctl_library(o.hooks))
		return false;
	if (o.command == "dump" || o.command == "pre-dump")
		return o.pid > 0;
	return o.command == "restore";
}

amdcr::Status load_plugins(const Options &o, host::PluginSet &ps, int stage)
{
	std::string libdir = o.libdir;
	if (libdir.empty() && o.plugins.empty()) {
		if (const char *env = std::getenv("CRIU_LIBS_DIR"); env && *env)
			libdir = env;
		else if (access("/usr/lib/criu", F_OK) == 0)
			libdir = "/usr/lib/criu";
	}
	if (!libdir.empty())
		if (auto st = ps.load_dir(libdir, stage); !st)
			return st;
	for (const std::string &p : o.plugins)
		if (auto st = ps.load(p, stage); !st)
			return st;
	return amdcr::ok_status();
}

int do_dump(const Options &o, int dirfd)
{
	const bool pre = o.command == "pre-dump";
	const int stage = pre ? CR_PLUGIN_STAGE__PRE_DUMP : CR_PLUGIN_STAGE__DUMP;
	host::PluginSet ps(o.hooks);
	if (auto st = load_plugins(o, ps, stage); !st) {
		ps.fini(stage, -1);
		host::logf(host::kError, "%s FAILED.\n", pre ? "Pre-dumping" : "Dumping");
		return 1;
	}
	host::DumpOptions d;
	d.pid = o.pid;
	d.kill = o.kill;
	d.pre_dump = pre;
	return host::run_dump(d, ps, dirfd) == 0 ? 0 : 1;
}

// The environment variable counting the host's fresh starts for a free
// address layout (restore_layout_or_reexec).
constexpr const char *kLayoutTries = "CRIU_HOST_LAYOUT_TRIES";
constexpr int kMaxLayoutTries = 8;

// Holds the tasks' mapping ranges (address_hold.h). When the host's own
// startup mappings (its executable, libraries, stack) already cover part of
// one, which address randomisation makes rare but possible, the host starts
// itself again for another layout, a few times, before it gives up. Returns
// only with the hold or an error.
amdcr::Result<host::AddressHold> restore_layout_or_reexec(const host::Inventory &inv, char **argv)
{
	auto hold = host::AddressHold::take(inv);
	if (hold || hold.error().code() != EEXIST) {
		unsetenv(kLayoutTries);
		return hold;
	}
	const char *env = std::getenv(kLayoutTries);
	const int tries = env ? std::atoi(env) : 0;
	if (tries + 1 >= kMaxLayoutTries)
		return hold.error().context("after " + std::to_string(kMaxLayoutTries) + " address layouts");
	host::logf(host::kInfo, "%s; starting again for another address layout\n",
		   hold.error().message().c_str());
	setenv(kLayoutTries, std::to_string(tries + 1).c_str(), 1);
	execv("/proc/self/exe", argv);
	return amdcr::errno_error(errno, "can't start the host again");
}

int do_restore(const Options &o, int dirfd, const std::vector<int> &inherited, char **argv)
{
	host::RestoreOptions r;
	r.inherited_fds = inherited;
	if (!o.verifier.empty()) {
		const size_t colon = o.verifier.rfind(':');
		if (colon == std::string::npos || colon == 0 || colon + 1 == o.verifier.size()) {
			std::fprintf(stderr, "criu-host: --verifier wants LIB.so:function\n");
			return 2;
		}
		r.verifier_lib = o.verifier.substr(0, colon);
		r.verifier_fn = o.verifier.substr(colon + 1);
		r.verifier_arg = o.verifier_arg;
		r.order = o.restore_order == "tree"	 ? host::RestoreOrder::Tree
			  : o.restore_order == "reverse" ? host::RestoreOrder::Reverse
							 : host::RestoreOrder::Concurrent;
	}

	// CRIU reads the inventory before loading plugins: their init(RESTORE)
	// may consult it (check_and_remove_inventory_plugin).
	auto inv = host::read_inventory(dirfd);
	if (!inv) {
		host::logf(host::kError, "Can't read the inventory in %s: %s\n", o.dir.c_str(),
			   inv.error().message().c_str());
		return 1;
	}
	host::inventory_plugins_reset(inv->plugins);
	auto hold = restore_layout_or_reexec(*inv, argv);
	if (!hold) {
		host::logf(host::kError, "%s\n", hold.error().message().c_str());
		return 1;
	}
	r.hold = &*hold;

	// As CRIU's cr_restore_tasks (criu/cr-restore.c): the fd store exists
	// before the plugins' init(RESTORE), which may put fds into it; its
	// socket is a service fd, at the top of the fd table.
	if (host::fdstore_init(place_service_fd, nullptr)) {
		host::logf(host::kError, "Can't create the fd store\n");
		return 1;
	}
	host::PluginSet ps(o.hooks);
	if (auto st = load_plugins(o, ps, CR_PLUGIN_STAGE__RESTORE); !st) {
		ps.fini(CR_PLUGIN_STAGE__RESTORE, -1);
		host::logf(host::kError, "Restoring FAILED.\n");
		return 1;
	}
	// As CRIU's cr_plugin_init (criu/plugin.c:260 in 4.2.1, :264 in
	// criu-dev) calls check_inventory_plugins (criu/image.c:190): once every
	// plugin is initialised, each entry that no plugin consumed with
	// check_and_remove_inventory_plugin() in its init(RESTORE) is missing.
	// Loading a plugin of that name is not enough.
	bool missing = false;
	for (const std::string &name : host::inventory_plugins()) {
		host::logf(host::kError, "Missing required plugin: %s\n", name.c_str());
		missing = true;
	}
	if (missing) {
		ps.fini(CR_PLUGIN_STAGE__RESTORE, -1);
		host::logf(host::kError, "Restoring FAILED.\n");
		return 1;
	}
	return host::run_restore(r, ps, *inv) == 0 ? 0 : 1;
}

} // namespace

// The fds open when the host starts (before its log and image directory).
std::vector<int> open_fds()
{
	std::vector<int> out;
	for (int fd = 3; fd < 1024; fd++)
		if (fcntl(fd, F_GETFD) != -1)
			out.push_back(fd);
	return out;
}

int main(int argc, char **argv)
{
	const std::vector<int> inherited = open_fds();
	Options o;
	if (argc == 2 && (std::strcmp(argv[1], "-h") == 0 || std::strcmp(argv[1], "--help") == 0)) {
		std::fputs(kUsage, stdout);
		return 0;
	}
	if (!parse(argc, argv, o)) {
		std::fputs(kUsage, stderr);
		return 2;
	}

	int log = 2;
	if (!o.log.empty()) {
		// A host started again for another address layout keeps the
		// log its first start began.
		const int trunc = std::getenv(kLayoutTries) ? 0 : O_TRUNC;
		log = open(o.log.c_str(), O_WRONLY | O_CREAT | trunc | O_APPEND | O_CLOEXEC, 0644);
		if (log < 0) {
			std::fprintf(stderr, "criu-host: can't open log %s: %s\n", o.log.c_str(),
				     std::strerror(errno));
			return 1;
		}
	}
	host::log_init(log, o.level);

	const bool dumping = o.command == "dump" || o.command == "pre-dump";
	if (dumping && mkdir(o.dir.c_str(), 0755) < 0 && errno != EEXIST) {
		host::log_perror("Can't create the images directory %s", o.dir.c_str());
		return 1;
	}
	// Owned through the API state (criu_get_image_dir): the restore moves
	// it to a service fd.
	const int dirfd = open(o.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0) {
		host::log_perror("Can't open the images directory %s", o.dir.c_str());
		return 1;
	}
	host::set_image_dir_fd(dirfd);
	// CRIU's registry, with this ABI's size, where a plugin's constructor
	// can find it (CRIU exports it from the executable).
	if (!dlopen(ctl_library(o.hooks), RTLD_NOW | RTLD_GLOBAL)) {
		host::logf(host::kError, "Can't load %s: %s\n", ctl_library(o.hooks), dlerror());
		return 1;
	}
	host::logf(host::kInfo, "criu-host %s (plugin ABI version %#x, %u hooks)\n",
		   o.command.c_str(), CRIU_PLUGIN_VERSION, o.hooks);

	const int ret = dumping ? do_dump(o, dirfd) : do_restore(o, dirfd, inherited, argv);
	close(host::image_dir_fd());
	return ret;
}
