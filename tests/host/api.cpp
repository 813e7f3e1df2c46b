// SPDX-License-Identifier: GPL-2.0-only
#include "api.h"

#include <pthread.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

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
	int fdstore_sk = -1;
	struct FdStoreShared *fdstore = nullptr; // MAP_SHARED: every task's
};

// The fd store's state that every restored task shares.
struct FdStoreShared {
	pthread_mutex_t lock; // process-shared: the peek offset and next_id
	int next_id;
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

bool inventory_remove_plugin(const std::string &name)
{
	auto &v = state().inventory_plugins;
	auto it = std::find(v.begin(), v.end(), name);
	if (it == v.end())
		return false;
	v.erase(it);
	return true;
}

int fdstore_init(int (*place)(int fd, void *ctx), void *ctx)
{
	ApiState &st = state();
	void *p = mmap(nullptr, sizeof(FdStoreShared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		log_perror("Can't map the fd store's state");
		return -1;
	}
	auto *shared = static_cast<FdStoreShared *>(p);
	pthread_mutexattr_t attr;
	pthread_mutexattr_init(&attr);
	pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
	pthread_mutex_init(&shared->lock, &attr);
	pthread_mutexattr_destroy(&attr);
	shared->next_id = 0;
	// As CRIU's: connected to itself (so no queue length limit applies)
	// and with large buffers, since every stored fd stays queued.
	const int sk = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	sockaddr_un addr{};
	addr.sun_family = AF_UNIX;
	const int n = std::snprintf(addr.sun_path + 1, sizeof(addr.sun_path) - 1, "criu-host-fdstore-%d",
				    static_cast<int>(getpid()));
	const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
	const int big = INT32_MAX / 2;
	if (sk < 0 || bind(sk, reinterpret_cast<sockaddr *>(&addr), len) < 0 ||
	    connect(sk, reinterpret_cast<sockaddr *>(&addr), len) < 0) {
		log_perror("Can't create the fd store");
		if (sk >= 0)
			close(sk);
		munmap(p, sizeof(FdStoreShared));
		return -1;
	}
	if (setsockopt(sk, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big)) < 0)
		(void)setsockopt(sk, SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
	if (setsockopt(sk, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big)) < 0)
		(void)setsockopt(sk, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
	st.fdstore = shared;
	st.fdstore_sk = place(sk, ctx);
	return st.fdstore_sk < 0 ? -1 : 0;
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

namespace {

// One fd store message: one byte, room for one fd (the message is set up
// to point at its own members, so it is neither copied nor moved).
struct OneFdMessage {
	char byte = 0;
	iovec iov{&byte, 1};
	alignas(cmsghdr) char buf[CMSG_SPACE(sizeof(int))] = {};
	msghdr msg{};
	OneFdMessage()
	{
		msg.msg_iov = &iov;
		msg.msg_iovlen = 1;
		msg.msg_control = buf;
		msg.msg_controllen = sizeof(buf);
	}
	OneFdMessage(const OneFdMessage &) = delete;
	OneFdMessage &operator=(const OneFdMessage &) = delete;
};

} // namespace

// CRIU's fd store (see api.h): the id of a copy of `fd`, or -1.
CR_EXPORT int fdstore_add(int fd)
{
	host::ApiState &st = host::state();
	if (!st.fdstore)
		return -1;
	OneFdMessage m;
	cmsghdr *c = CMSG_FIRSTHDR(&m.msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
	pthread_mutex_lock(&st.fdstore->lock);
	int id = -1;
	if (sendmsg(st.fdstore_sk, &m.msg, MSG_NOSIGNAL) == 1)
		id = st.fdstore->next_id++;
	else
		host::log_perror("Can't send fd %d into the fd store", fd);
	pthread_mutex_unlock(&st.fdstore->lock);
	return id;
}

// A new fd of the fd store's entry `id` (the entry stays), or -1.
CR_EXPORT int fdstore_get(int id)
{
	host::ApiState &st = host::state();
	if (!st.fdstore || id < 0)
		return -1;
	OneFdMessage m;
	int fd = -1;
	pthread_mutex_lock(&st.fdstore->lock);
	// Each message is one byte: a peek offset of `id` bytes skips the
	// `id` messages before it.
	if (setsockopt(st.fdstore_sk, SOL_SOCKET, SO_PEEK_OFF, &id, sizeof(id)) == 0 &&
	    recvmsg(st.fdstore_sk, &m.msg, MSG_PEEK | MSG_DONTWAIT | MSG_CMSG_CLOEXEC) == 1) {
		cmsghdr *c = CMSG_FIRSTHDR(&m.msg);
		if (c && c->cmsg_type == SCM_RIGHTS)
			std::memcpy(&fd, CMSG_DATA(c), sizeof(int));
	} else {
		host::log_perror("Can't get entry %d of the fd store", id);
	}
	pthread_mutex_unlock(&st.fdstore->lock);
	return fd;
}
