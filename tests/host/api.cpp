// SPDX-License-Identifier: GPL-2.0-only
#include "api.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>

#define CR_EXPORT extern "C" __attribute__((visibility("default")))

namespace host {
namespace {

// The state behind the exported C API (see api.h): the only mutable globals.
struct ApiState {
	int log_fd = 2;
	int log_level = kWarn;
	int image_dir_fd = -1;
	pid_t main_pid = 0;
	struct timespec start = {};
	std::vector<std::string> inventory_plugins;
	// fdstore_add()'s fds, by id: high in the fd table, inherited by
	// every task the restore forks.
	std::vector<int> fdstore;
};

ApiState &state()
{
	static ApiState s;
	return s;
}

const char *tag(int level)
{
	switch (level) {
	case kError:
		return "Error: ";
	case kWarn:
		return "Warn: ";
	default:
		return "";
	}
}

void vemit(int level, const char *fmt, va_list ap, bool with_errno, int err)
{
	ApiState &s = state();
	if (level != kMsg && level > s.log_level)
		return;

	std::string line;
	if (level != kMsg) {
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		long sec = now.tv_sec - s.start.tv_sec;
		long nsec = now.tv_nsec - s.start.tv_nsec;
		if (nsec < 0) {
			nsec += 1000000000L;
			sec--;
		}
		char prefix[64];
		std::snprintf(prefix, sizeof(prefix), "(%02ld.%06ld) ", sec, nsec / 1000);
		line += prefix;
		if (getpid() != s.main_pid) {
			std::snprintf(prefix, sizeof(prefix), "%6d: ", static_cast<int>(getpid()));
			line += prefix;
		}
		line += tag(level);
	}

	va_list copy;
	va_copy(copy, ap);
	const int n = std::vsnprintf(nullptr, 0, fmt, copy);
	va_end(copy);
	if (n > 0) {
		std::string text(static_cast<size_t>(n), '\0');
		std::vsnprintf(text.data(), text.size() + 1, fmt, ap);
		line += text;
	}
	if (with_errno) {
		while (!line.empty() && line.back() == '\n')
			line.pop_back();
		line += ": ";
		line += std::strerror(err);
	}
	if (line.empty() || line.back() != '\n')
		line += '\n';

	// One write per line: forked restore tasks share the log (O_APPEND).
	const char *p = line.data();
	size_t left = line.size();
	while (left > 0) {
		const ssize_t w = ::write(s.log_fd, p, left);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		p += w;
		left -= static_cast<size_t>(w);
	}
}

} // namespace

void log_init(int fd, int level)
{
	ApiState &s = state();
	s.log_fd = fd;
	s.log_level = level;
	s.main_pid = getpid();
	clock_gettime(CLOCK_MONOTONIC, &s.start);
}

int log_fd() { return state().log_fd; }
int log_level() { return state().log_level; }
void log_set_fd(int fd) { state().log_fd = fd; }

void logf(int level, const char *fmt, ...)
{
	const int err = errno;
	va_list ap;
	va_start(ap, fmt);
	vemit(level, fmt, ap, false, 0);
	va_end(ap);
	errno = err;
}

void log_perror(const char *fmt, ...)
{
	const int err = errno;
	va_list ap;
	va_start(ap, fmt);
	vemit(kError, fmt, ap, true, err);
	va_end(ap);
	errno = err;
}

void set_image_dir_fd(int fd) { state().image_dir_fd = fd; }
int image_dir_fd() { return state().image_dir_fd; }

void inventory_plugins_reset(std::vector<std::string> names)
{
	state().inventory_plugins = std::move(names);
}

void inventory_add_plugin(const std::string &name)
{
	auto &v = state().inventory_plugins;
	if (std::find(v.begin(), v.end(), name) == v.end())
		v.push_back(name);
}

std::vector<std::string> inventory_plugins() { return state().inventory_plugins; }

int fdstore_add(int fd)
{
	struct rlimit rl {};
	const rlim_t cur = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : 1024;
	const int kept = fcntl(fd, F_DUPFD_CLOEXEC, static_cast<int>(std::min<rlim_t>(cur / 2, 1 << 20)));
	if (kept < 0)
		return -1;
	state().fdstore.push_back(kept);
	return static_cast<int>(state().fdstore.size() - 1);
}

int fdstore_get(int id)
{
	const auto &v = state().fdstore;
	if (id < 0 || static_cast<size_t>(id) >= v.size())
		return -1;
	return fcntl(v[static_cast<size_t>(id)], F_DUPFD_CLOEXEC, 0);
}

bool inventory_remove_plugin(const std::string &name)
{
	auto &v = state().inventory_plugins;
	auto it = std::find(v.begin(), v.end(), name);
	if (it == v.end())
		return false;
	v.erase(it);
	return true;
}

} // namespace host

// ---- the symbols plugins resolve in the criu binary ------------------------

CR_EXPORT void print_on_level(unsigned int loglevel, const char *format, ...)
{
	// LOG_MSG is -1 in criu-log.h: it arrives here as UINT_MAX.
	const int level = loglevel > static_cast<unsigned>(host::kDebug) ? host::kMsg
									  : static_cast<int>(loglevel);
	const int err = errno;
	va_list ap;
	va_start(ap, format);
	host::vemit(level, format, ap, false, 0);
	va_end(ap);
	errno = err;
}

CR_EXPORT int criu_get_image_dir(void) { return host::image_dir_fd(); }

CR_EXPORT int add_inventory_plugin(const char *name)
{
	if (!name)
		return -1;
	host::inventory_add_plugin(name);
	host::logf(host::kDebug, "Plugin %s added to the inventory\n", name);
	return 0;
}

// CRIU 4.0-4.2 signature; the length bounds the comparison as strncmp does.
CR_EXPORT bool check_and_remove_inventory_plugin(const char *name, size_t n)
{
	if (!name)
		return false;
	for (const std::string &p : host::inventory_plugins()) {
		if (std::strncmp(p.c_str(), name, n) == 0)
			return host::inventory_remove_plugin(p);
	}
	return false;
}

// CRIU's fdstore: fds the main process keeps for the tasks it restores,
// whatever their namespaces (an id; a new fd of the file per get).
CR_EXPORT int fdstore_add(int fd) { return host::fdstore_add(fd); }
CR_EXPORT int fdstore_get(int id) { return host::fdstore_get(id); }
