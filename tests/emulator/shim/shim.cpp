// SPDX-License-Identifier: GPL-2.0-only
//
// libkfdemu_shim.so: the LD_PRELOAD half of the emulated AMD GPU.
//
// - Paths: /dev/kfd, /dev/dri, the KFD topology and the GPUs' DRM/PCI sysfs
//   directories are redirected into the private root the launcher wrote
//   (KFDEMU_ROOT); device nodes there are empty files that stat() reports
//   as character devices.
// - Device files: opening /dev/kfd or /dev/dri/renderD<m> asks the daemon
//   (KFDEMU_SOCKET), which answers with a real fd (SCM_RIGHTS) whose backing
//   file is a memfd created by the model. An fd is recognised as emulated by
//   the identity of that file (st_dev, st_ino), never by its number, so
//   dup/fork/SCM_RIGHTS/pidfd_getfd need no interposition at all.
// - ioctl and mmap on such fds go to the daemon; stat/readlink/statfs of
//   them are answered as the kernel would for the real device.
// - /proc/<pid>/{maps,smaps,map_files} show device mappings as the kernel
//   shows a real GPU's (for a dumper such as CRIU with the shim loaded).
//
// The only mutable globals are the ones an interposer needs: the lazily
// loaded configuration, the per-thread daemon connection, the fresh-image
// flag, a describe cache, the process's device mappings and a bitmap of
// "unreadable" sysfs fds.
#include "../transport/protocol.h"

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#define SHIM_EXPORT extern "C" __attribute__((visibility("default")))

extern "C" {
int __open_2(const char *, int);
int __open64_2(const char *, int);
int __openat_2(int, const char *, int);
int __openat64_2(int, const char *, int);
int __xstat(int, const char *, struct stat *);
int __xstat64(int, const char *, struct stat64 *);
int __lxstat(int, const char *, struct stat *);
int __lxstat64(int, const char *, struct stat64 *);
int __fxstat(int, int, struct stat *);
int __fxstat64(int, int, struct stat64 *);
int __fxstatat(int, int, const char *, struct stat *, int);
int __fxstatat64(int, int, const char *, struct stat64 *, int);
ssize_t __readlink_chk(const char *, char *, size_t, size_t);
char *__realpath_chk(const char *, char *, size_t);
}

namespace {

using namespace kfdemu;

constexpr unsigned kKfdMajor = 510, kDrmMajor = 226;
constexpr uint32_t kDmaBufMagic = 0x444d4142;

// No function-local statics with guards on the interposer paths: a
// sanitizer runtime (TSan) calls mmap/open/fstat through us while it is
// still initialising, and its __cxa_guard interceptors crash then. Real
// function pointers are cached in constant-initialised atomics instead.
template <typename F>
F real_fn(std::atomic<void *> &slot, const char *name)
{
	void *p = slot.load(std::memory_order_relaxed);
	if (!p) {
		p = dlsym(RTLD_NEXT, name);
		if (!p) {
			static const char msg[] = "kfdemu shim: missing real function\n";
			(void)!::write(2, msg, sizeof msg - 1);
			::abort();
		}
		slot.store(p, std::memory_order_relaxed);
	}
	return reinterpret_cast<F>(p);
}

#define REAL(name, type)                                                  \
	static constinit std::atomic<void *> real_slot_##name{nullptr};   \
	const auto real_##name = real_fn<type>(real_slot_##name, #name)

// ---------------------------------------------------------------------------
// Configuration (read once).
// ---------------------------------------------------------------------------

using OpenFn = int (*)(const char *, int, ...);

struct Config {
	bool active = false;
	std::string root, socket;
	std::vector<std::string> redirects;
	std::vector<std::string> unreadable;
	dev_t memfd_dev = 0;
	uint32_t image = 0;	// see wire::Request::image
	// KFDEMU_CONNECT=per-call: one daemon connection per call, closed
	// after it, so no connection fd stays in the process (CRIU: its
	// restored tasks are forked from it and keep every fd it leaves).
	bool per_call = false;
	// The root's device nodes (empty files): (st_dev, st_ino) -> path.
	// An fd on one of them (a dumper's open of a device mapping through
	// /proc/<pid>/map_files) is reported as the device.
	dev_t node_dev = 0;
	std::map<ino_t, std::string> nodes;
};

std::vector<std::string> read_lines(const std::string &path)
{
	REAL(open, OpenFn);
	REAL(read, ssize_t (*)(int, void *, size_t));
	REAL(close, int (*)(int));
	std::vector<std::string> out;
	int fd = real_open(path.c_str(), O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return out;
	std::string s;
	char buf[4096];
	ssize_t n;
	while ((n = real_read(fd, buf, sizeof buf)) > 0)
		s.append(buf, size_t(n));
	real_close(fd);
	size_t i = 0;
	while (i < s.size()) {
		size_t j = s.find('\n', i);
		if (j == std::string::npos)
			j = s.size();
		if (j > i)
			out.push_back(s.substr(i, j - i));
		i = j + 1;
	}
	return out;
}

Config *load_config()
{
	auto *c = new Config;
	const char *root = std::getenv("KFDEMU_ROOT");
	const char *sock = std::getenv("KFDEMU_SOCKET");
	if (!root || !sock || !*root || !*sock)
		return c;
	c->root = root;
	c->socket = sock;
	c->redirects = read_lines(c->root + "/.kfdemu/redirects");
	c->unreadable = read_lines(c->root + "/.kfdemu/unreadable");
	REAL(fstat, int (*)(int, struct stat *));
	REAL(close, int (*)(int));
	int m = ::memfd_create("kfdemu-probe", MFD_CLOEXEC);
	struct stat st;
	if (m >= 0 && real_fstat(m, &st) == 0)
		c->memfd_dev = st.st_dev;
	if (m >= 0)
		real_close(m);
	uint32_t img = 0;
	while (img == 0 && ::getrandom(&img, sizeof img, 0) == sizeof img) {
	}
	c->image = img ? img : uint32_t(::getpid()) | 1u;
	const char *conn = std::getenv("KFDEMU_CONNECT");
	c->per_call = conn && std::string_view(conn) == "per-call";
	REAL(stat, int (*)(const char *, struct stat *));
	auto add_node = [&](const std::string &path) {
		if (real_stat((c->root + path).c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
			c->node_dev = st.st_dev;
			c->nodes[st.st_ino] = path;
		}
	};
	add_node("/dev/kfd");
	REAL(opendir, DIR *(*)(const char *));
	if (DIR *d = real_opendir((c->root + "/dev/dri").c_str())) {
		while (dirent *e = ::readdir(d))
			if (std::string_view(e->d_name).starts_with("renderD"))
				add_node(std::string("/dev/dri/") + e->d_name);
		::closedir(d);
	}
	c->active = true;
	return c;
}

// Loaded on first use without a guard variable (see REAL): racing threads
// may both load it; one wins, the other's copy is dropped.
constinit std::atomic<Config *> g_config{nullptr};

const Config &config()
{
	Config *c = g_config.load(std::memory_order_acquire);
	if (c)
		return *c;
	Config *mine = load_config();
	if (g_config.compare_exchange_strong(c, mine, std::memory_order_acq_rel))
		return *mine;
	delete mine;
	return *c;
}

// ---------------------------------------------------------------------------
// Paths.
// ---------------------------------------------------------------------------

enum class Dev { None, Kfd, Render, Card };
struct DevPath {
	Dev kind = Dev::None;
	unsigned minor = 0;
};

std::string normalize(const char *path)
{
	std::string s;
	for (const char *p = path; *p; p++) {
		if (*p == '/' && !s.empty() && s.back() == '/')
			continue;
		// "/./" is "/" (a dumper's fstatat(root_fd, "./dev/kfd")).
		if (*p == '.' && (p[1] == '/' || !p[1]) && !s.empty() && s.back() == '/')
			continue;
		s += *p;
	}
	while (s.size() > 1 && s.back() == '/')
		s.pop_back();
	return s;
}

bool parse_uint(std::string_view s, unsigned *out)
{
	if (s.empty() || s.size() > 6)
		return false;
	unsigned v = 0;
	for (char c : s) {
		if (c < '0' || c > '9')
			return false;
		v = v * 10 + unsigned(c - '0');
	}
	*out = v;
	return true;
}

DevPath device_path(const std::string &p)
{
	DevPath d;
	if (p == "/dev/kfd")
		d.kind = Dev::Kfd;
	else if (p.starts_with("/dev/dri/renderD") && parse_uint(std::string_view(p).substr(16), &d.minor))
		d.kind = Dev::Render;
	else if (p.starts_with("/dev/dri/card") && parse_uint(std::string_view(p).substr(13), &d.minor))
		d.kind = Dev::Card;
	return d;
}

// /proc/<pid>/{maps,smaps} and /proc/<pid>/map_files/<start>-<end>: the
// files in which the kernel shows a process's mappings. The shim presents
// its device mappings there as the kernel shows a real GPU's (see
// proc_maps_fd and map_file_fd).
struct ProcPath {
	enum Kind { None, Maps, Smaps, MapFile } kind = None;
	pid_t pid = 0;
	uint64_t start = 0, end = 0;	// MapFile
};

ProcPath proc_path(const std::string &p)
{
	ProcPath r;
	if (!p.starts_with("/proc/"))
		return r;
	const size_t slash = p.find('/', 6);
	if (slash == std::string::npos)
		return r;
	const std::string_view who = std::string_view(p).substr(6, slash - 6);
	unsigned pid = 0;
	if (who == "self")
		pid = unsigned(::getpid());
	else if (!parse_uint(who, &pid) || pid == 0)
		return r;
	const std::string_view rest = std::string_view(p).substr(slash + 1);
	r.pid = pid_t(pid);
	if (rest == "maps")
		r.kind = ProcPath::Maps;
	else if (rest == "smaps")
		r.kind = ProcPath::Smaps;
	else if (rest.starts_with("map_files/")) {
		unsigned long long s = 0, e = 0;
		char tail = 0;
		const std::string range(rest.substr(10));
		if (std::sscanf(range.c_str(), "%llx-%llx%c", &s, &e, &tail) == 2 && s < e) {
			r.kind = ProcPath::MapFile;
			r.start = s;
			r.end = e;
		}
	}
	return r;
}

// The root-relative path for a redirected absolute path, or nullopt.
std::optional<std::string> redirect(const char *path)
{
	const Config &c = config();
	if (!c.active || !path || path[0] != '/')
		return std::nullopt;
	const std::string p = normalize(path);
	for (const auto &pre : c.redirects) {
		if (p.size() < pre.size() || p.compare(0, pre.size(), pre) != 0)
			continue;
		if (p.size() == pre.size() || pre.back() == ':' || p[pre.size()] == '/')
			return c.root + p;
	}
	return std::nullopt;
}

// A path relative to a directory fd inside the private root (an opendir
// of /dev/dri, a topology node directory): the absolute path the program
// means, so device and redirect rules apply to it as well. Relative to a
// directory elsewhere, only when the result is a device node or one of the
// /proc files the shim presents (CRIU reaches them relative to its /proc
// and root directory fds).
std::optional<std::string> logical_at(int dirfd, const char *path)
{
	if (!path || path[0] == '/' || !*path || dirfd < 0)
		return std::nullopt;
	const Config &c = config();
	if (!c.active)
		return std::nullopt;
	REAL(readlink, ssize_t (*)(const char *, char *, size_t));
	char dir[PATH_MAX];
	ssize_t n = real_readlink(("/proc/self/fd/" + std::to_string(dirfd)).c_str(), dir, sizeof dir - 1);
	if (n <= 0)
		return std::nullopt;
	std::string d(dir, size_t(n));
	if (d.size() <= c.root.size() || d.compare(0, c.root.size(), c.root) != 0 || d[c.root.size()] != '/') {
		if (d.empty() || d[0] != '/')
			return std::nullopt;	// not a directory path (socket:, anon_inode:)
		std::string abs = normalize((d + "/" + path).c_str());
		if (device_path(abs).kind != Dev::None || proc_path(abs).kind != ProcPath::None)
			return abs;
		return std::nullopt;
	}
	return d.substr(c.root.size()) + "/" + path;
}

bool root_has(const std::string &p)
{
	REAL(access, int (*)(const char *, int));
	return real_access((config().root + p).c_str(), F_OK) == 0;
}

// Unreadable entries are compared as resolved paths inside the root, so
// /sys/class/kfd/... and /sys/devices/virtual/kfd/... name the same file.
bool is_unreadable(const char *path)
{
	const Config &c = config();
	if (c.unreadable.empty() || !path || path[0] != '/')
		return false;
	auto rp = redirect(path);
	if (!rp)
		return false;
	REAL(realpath, char *(*)(const char *, char *));
	char res[PATH_MAX];
	if (!real_realpath(rp->c_str(), res))
		return false;
	const std::string p = res;
	for (const auto &entry : c.unreadable) {
		auto ru = redirect(entry.c_str());
		char ures[PATH_MAX];
		if (!ru || !real_realpath(ru->c_str(), ures))
			continue;
		const std::string u = ures;
		if (p == u || (p.size() > u.size() && p.compare(0, u.size(), u) == 0 && p[u.size()] == '/'))
			return true;
	}
	return false;
}

// A set of fd numbers, lock-free (read on every read()/close()).
constexpr int kMaxTrackedFd = 1 << 16;
struct FdBits {
	std::atomic<uint64_t> w[kMaxTrackedFd / 64];

	void set(int fd, bool on)
	{
		if (fd < 0 || fd >= kMaxTrackedFd)
			return;
		const uint64_t bit = 1ull << (fd % 64);
		if (on)
			w[fd / 64].fetch_or(bit, std::memory_order_relaxed);
		else if (w[fd / 64].load(std::memory_order_relaxed) & bit)
			w[fd / 64].fetch_and(~bit, std::memory_order_relaxed);
	}
	bool test(int fd) const
	{
		return fd >= 0 && fd < kMaxTrackedFd &&
		       (w[fd / 64].load(std::memory_order_relaxed) >> (fd % 64) & 1);
	}
};

// fds whose read() fails with EPERM (a device-cgroup-denied sysfs file).
FdBits g_unreadable;
// fds of this process's daemon connections. When the program closes one
// (close, close_range), its bit goes and the owning thread reconnects
// instead of writing requests into whatever file gets that number next.
FdBits g_conn_fds;

void mark_unreadable(int fd, bool on)
{
	g_unreadable.set(fd, on);
}

bool fd_unreadable(int fd)
{
	return g_unreadable.test(fd);
}

// The program closed `fd` (or is about to): forget what we knew of it.
void forget_fd(int fd)
{
	g_unreadable.set(fd, false);
	g_conn_fds.set(fd, false);
}

// ---------------------------------------------------------------------------
// The daemon connection (one per thread, re-established after fork).
// ---------------------------------------------------------------------------

struct Conn {
	int fd = -1;
	pid_t pid = 0;
	~Conn();
};
thread_local Conn t_conn;

Conn::~Conn()
{
	REAL(close, int (*)(int));
	if (fd >= 0 && pid == ::getpid() && g_conn_fds.test(fd)) {
		g_conn_fds.set(fd, false);
		real_close(fd);
	}
}

int connect_daemon()
{
	REAL(close, int (*)(int));
	const Config &c = config();
	int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	sockaddr_un sa{};
	sa.sun_family = AF_UNIX;
	std::snprintf(sa.sun_path, sizeof sa.sun_path, "%s", c.socket.c_str());
	if (::connect(s, reinterpret_cast<sockaddr *>(&sa), sizeof sa)) {
		int e = errno;
		real_close(s);
		return -e;
	}
	// Keep the connection out of the low fd numbers the program (and
	// the kernel's lowest-free-fd rule in tests) cares about.
	rlimit rl{};
	if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur >= 64) {
		int hi = ::fcntl(s, F_DUPFD_CLOEXEC, int(std::min<rlim_t>(rl.rlim_cur / 4 * 3, 1 << 15)));
		if (hi >= 0) {
			real_close(s);
			s = hi;
		}
	}
	return s;
}

struct Response {
	wire::Reply rp{};
	std::vector<wire::FdEntry> entries;
	std::vector<int> fds;
	std::string payload;
};

// One request/reply on `sock`: 0, -EPIPE when the request could not be
// sent (safe to retry elsewhere) or -EIO when the reply was lost.
int exchange(int sock, const std::string &msg, Response *out)
{
	REAL(close, int (*)(int));
	if (wire::send_all(sock, msg.data(), msg.size()))
		return -EPIPE;
	// A reply can carry one fd per BO (CRIU CHECKPOINT/RESTORE of a process
	// with tens of thousands of BOs): receive into a per-thread buffer
	// large enough for that, never dropping fds. A re-entered call (signal
	// handler) gets a buffer of its own.
	constexpr unsigned kMaxReplyFds = 1u << 18;
	static thread_local std::vector<int> t_fds;
	static thread_local int t_depth = 0;
	std::vector<int> nested;
	std::vector<int> &buf = t_depth++ ? nested : t_fds;
	if (buf.size() < kMaxReplyFds)
		buf.resize(kMaxReplyFds);
	int *fds = buf.data();
	unsigned nfds = 0;
	int err = wire::recv_all(sock, &out->rp, sizeof out->rp, fds, &nfds, kMaxReplyFds);
	if (!err) {
		out->entries.resize(out->rp.nfds);
		out->payload.resize(out->rp.len);
		if (out->rp.nfds)
			err = wire::recv_all(sock, out->entries.data(), out->rp.nfds * sizeof(wire::FdEntry),
					     fds, &nfds, kMaxReplyFds);
		if (!err && out->rp.len)
			err = wire::recv_all(sock, out->payload.data(), out->rp.len, fds, &nfds, kMaxReplyFds);
		while (!err && nfds < out->rp.nfds && nfds < kMaxReplyFds) {
			char b;
			err = wire::recv_all(sock, &b, 1, fds, &nfds, kMaxReplyFds);
		}
	}
	t_depth--;
	if (err) {
		for (unsigned i = 0; i < nfds; i++)
			real_close(fds[i]);
		return -EIO;
	}
	out->fds.assign(fds, fds + nfds);
	return 0;
}

thread_local bool t_busy = false;

// 1 in the data of every program image as it is loaded (exec), cleared
// once the daemon has answered a call of this image. A CRIU-restored
// process runs on the dumped memory, where it is 0: so the daemon can tell
// an exec (fresh image, new number) from a restore (old image, new number).
constinit std::atomic<uint32_t> g_fresh_image{1};

// One request/reply with the daemon. Returns 0 or -errno (transport failure).
int call(wire::Request rq, std::string_view payload, Response *out)
{
	REAL(close, int (*)(int));
	if (!config().active)
		return -ENODEV;
	rq.tid = int32_t(::gettid());
	rq.image = config().image;
	rq.flags = g_fresh_image.load(std::memory_order_relaxed) ? wire::kReqFreshImage : 0;
	rq.len = uint32_t(payload.size());
	std::string msg(reinterpret_cast<const char *>(&rq), sizeof rq);
	msg.append(payload);
	if (t_busy || config().per_call) {
		// Re-entered (a signal handler on this thread): the thread's
		// connection is mid-request, use a private one. Also every
		// call in per-call mode.
		int s = connect_daemon();
		if (s < 0)
			return s;
		int e = exchange(s, msg, out);
		real_close(s);
		if (e == 0)
			g_fresh_image.store(0, std::memory_order_relaxed);
		return e == -EPIPE ? -EIO : e;
	}
	t_busy = true;
	struct Unbusy {
		~Unbusy() { t_busy = false; }
	} unbusy;
	const pid_t me = ::getpid();
	for (int attempt = 0; attempt < 2; attempt++) {
		if (t_conn.fd >= 0 && (t_conn.pid != me || !g_conn_fds.test(t_conn.fd))) {
			// After fork the inherited socket is the parent's: drop it.
			// A connection the program closed is not ours to close.
			if (t_conn.pid != me && g_conn_fds.test(t_conn.fd)) {
				g_conn_fds.set(t_conn.fd, false);
				real_close(t_conn.fd);
			}
			t_conn.fd = -1;
		}
		if (t_conn.fd < 0) {
			t_conn.fd = connect_daemon();
			t_conn.pid = me;
			if (t_conn.fd < 0)
				return t_conn.fd;
			g_conn_fds.set(t_conn.fd, true);
		}
		int err = exchange(t_conn.fd, msg, out);
		if (err == 0) {
			g_fresh_image.store(0, std::memory_order_relaxed);
			return 0;
		}
		g_conn_fds.set(t_conn.fd, false);
		real_close(t_conn.fd);
		t_conn.fd = -1;
		if (err != -EPIPE)
			return err;	// a reply was lost: do not resend
	}
	return -ECONNREFUSED;
}

// Installs the fds of a reply the way the kernel's fd_install would have:
// sets their close-on-exec flag, writes their numbers where asked and
// returns the one that is the syscall's result (if any).
int64_t deliver(Response &r)
{
	int64_t result = r.rp.result;
	for (size_t i = 0; i < r.fds.size() && i < r.entries.size(); i++) {
		const int fd = r.fds[i];
		const auto &e = r.entries[i];
		if (!(e.flags & wire::kFdCloexec))
			::fcntl(fd, F_SETFD, 0);
		if (e.patch_addr) {
			const uint32_t v = uint32_t(fd);
			std::memcpy(reinterpret_cast<void *>(e.patch_addr), &v, sizeof v);
		}
		if (e.flags & wire::kFdAsResult)
			result = fd;
	}
	return result;
}

// ---------------------------------------------------------------------------
// Emulated files.
// ---------------------------------------------------------------------------

struct Key {
	uint64_t dev, ino;
	auto operator<=>(const Key &) const = default;
};
struct Info {
	int kind;	// FileKind: 0 Kfd, 1 Render, 2 DmaBuf
	unsigned minor;
	uint64_t size;
};
constexpr int kKfd = 0, kRender = 1, kDmaBuf = 2;

bool key_of(const struct stat &st, Key *k)
{
	const Config &c = config();
	if (!c.active || !S_ISREG(st.st_mode) || st.st_dev != c.memfd_dev)
		return false;
	*k = Key{uint64_t(st.st_dev), uint64_t(st.st_ino)};
	return true;
}

bool fd_key(int fd, Key *k, struct stat *out = nullptr)
{
	REAL(fstat, int (*)(int, struct stat *));
	struct stat st;
	if (fd < 0 || !config().active || real_fstat(fd, &st))
		return false;
	if (out)
		*out = st;
	return key_of(st, k);
}

std::mutex g_info_mu;
std::map<Key, Info> g_info;

std::optional<Info> describe(const Key &k)
{
	{
		std::lock_guard lock(g_info_mu);
		if (auto it = g_info.find(k); it != g_info.end())
			return it->second;
	}
	wire::Request rq{};
	rq.op = wire::Op::Describe;
	rq.dev = k.dev;
	rq.ino = k.ino;
	Response r;
	if (call(rq, {}, &r) || r.rp.result == wire::kNotEmulated || r.rp.result < 0)
		return std::nullopt;
	Info i{int(r.rp.result), unsigned(r.rp.aux[0]), r.rp.aux[1]};
	if (i.kind != kDmaBuf) {	// a dma-buf's size may still change
		std::lock_guard lock(g_info_mu);
		g_info[k] = i;
	}
	return i;
}

void fake_chr(struct stat *st, unsigned major, unsigned minor, mode_t perm)
{
	const struct stat keep = *st;
	std::memset(st, 0, sizeof *st);
	st->st_dev = makedev(0, 5);
	st->st_ino = keep.st_ino;
	st->st_mode = S_IFCHR | perm;
	st->st_nlink = 1;
	st->st_rdev = makedev(major, minor);
	st->st_blksize = 4096;
	st->st_atim = keep.st_atim;
	st->st_mtim = keep.st_mtim;
	st->st_ctim = keep.st_ctim;
}

DevPath node_of(const struct stat &st)
{
	const Config &c = config();
	if (!c.active || c.nodes.empty() || !S_ISREG(st.st_mode) || st.st_dev != c.node_dev)
		return {};
	auto it = c.nodes.find(st.st_ino);
	return it == c.nodes.end() ? DevPath{} : device_path(it->second);
}

// fstat answers for an emulated file; false when `st` is not one.
bool fake_fstat_of(struct stat *st)
{
	// A device node of the root seen through an fd (see Config::nodes):
	// what stat() of the device path answers.
	if (const DevPath d = node_of(*st); d.kind != Dev::None) {
		fake_chr(st, d.kind == Dev::Kfd ? kKfdMajor : kDrmMajor, d.minor, 0666);
		return true;
	}
	Key k;
	if (!key_of(*st, &k))
		return false;
	auto info = describe(k);
	if (!info)
		return false;
	switch (info->kind) {
	case kKfd:
		fake_chr(st, kKfdMajor, 0, 0666);
		return true;
	case kRender:
		fake_chr(st, kDrmMajor, info->minor, 0666);
		return true;
	case kDmaBuf:
		// An anonymous dma-buf inode: no file type bits, owner rw.
		st->st_mode = S_IRUSR | S_IWUSR;
		st->st_size = off_t(info->size);
		return true;
	default:
		return false;
	}
}

// stat() of a device path: 0, -ENOENT, or 1 when not a device path.
int stat_device(const char *path, struct stat *st)
{
	if (!config().active || !path)
		return 1;
	const std::string p = normalize(path);
	const DevPath d = device_path(p);
	if (d.kind == Dev::None)
		return 1;
	REAL(stat, int (*)(const char *, struct stat *));
	if (real_stat((config().root + p).c_str(), st))
		return -ENOENT;
	switch (d.kind) {
	case Dev::Kfd: fake_chr(st, kKfdMajor, 0, 0666); break;
	case Dev::Render: fake_chr(st, kDrmMajor, d.minor, 0666); break;
	case Dev::Card: fake_chr(st, kDrmMajor, d.minor, 0660); break;
	case Dev::None: break;
	}
	return 0;
}

int fail(int err)
{
	errno = err;
	return -1;
}

// ---------------------------------------------------------------------------
// /proc/<pid>/{maps,smaps,map_files}: device mappings as the kernel shows them.
// ---------------------------------------------------------------------------
//
// The kernel sees a device mapping as a mapping of the model's memfd at the
// memfd's offset. A real GPU's shows the device path, the mmap offset the
// program passed and the device node's dev/inode; a dumper (CRIU) decides
// by that what the mapping is and which plugin gets it. So /proc/<pid>/maps
// and smaps are presented with the daemon's records (`vmas <pid>`) laid over
// the kernel's lines, and /proc/<pid>/map_files/<range> of a device mapping
// opens the root's device node (fstat reports the device, readlink its path).

struct DevVma {
	uint64_t start = 0, end = 0, pgoff = 0;
	std::string path;
};

// The daemon's records of `pid`'s /dev/kfd and render-node mappings, by
// start address. dma-buf mappings are left as the kernel shows them.
std::vector<DevVma> device_vmas(pid_t pid)
{
	std::vector<DevVma> out;
	wire::Request rq{};
	rq.op = wire::Op::Introspect;
	Response r;
	if (call(rq, "vmas " + std::to_string(pid), &r) || r.rp.result < 0)
		return out;
	REAL(close, int (*)(int));
	for (int f : r.fds)
		real_close(f);
	// {"pid":N,"vmas":[{"start":S,"end":E,"pgoff":O,"prot":"rw-","path":"P"..},..]}
	const std::string &js = r.payload;
	for (size_t pos = js.find("{\"start\":"); pos != std::string::npos; pos = js.find("{\"start\":", pos + 1)) {
		unsigned long long st = 0, en = 0, off = 0;
		if (std::sscanf(js.c_str() + pos, "{\"start\":%llu,\"end\":%llu,\"pgoff\":%llu", &st, &en, &off) != 3)
			continue;
		const size_t p = js.find("\"path\":\"", pos);
		const size_t q = p == std::string::npos ? p : js.find('"', p + 8);
		if (q == std::string::npos)
			continue;
		DevVma v{st, en, off, js.substr(p + 8, q - p - 8)};
		const Dev kind = device_path(v.path).kind;
		if (kind == Dev::Kfd || kind == Dev::Render)
			out.push_back(std::move(v));
	}
	std::sort(out.begin(), out.end(), [](const DevVma &a, const DevVma &b) { return a.start < b.start; });
	return out;
}

ino_t node_ino(const std::string &path)
{
	for (const auto &[ino, p] : config().nodes)
		if (p == path)
			return ino;
	return 0;
}

// One maps line in the kernel's format (show_map_vma: the path padded to
// column 73).
std::string maps_line(uint64_t start, uint64_t end, std::string_view perms, uint64_t off, unsigned maj,
		      unsigned min, uint64_t ino, std::string_view path)
{
	char head[160];
	int n = std::snprintf(head, sizeof head, "%08llx-%08llx %.*s %08llx %02x:%02x %llu ",
			      (unsigned long long)start, (unsigned long long)end, int(perms.size()), perms.data(),
			      (unsigned long long)off, maj, min, (unsigned long long)ino);
	std::string l(head, size_t(std::max(n, 0)));
	if (!path.empty()) {
		if (l.size() < 73)
			l.resize(73, ' ');
		l += path;
	}
	return l + "\n";
}

// The text of /proc/<pid>/maps or smaps with `vmas` laid over it: a kernel
// VMA is cut where device records begin and end (the kernel merges adjacent
// mappings of one memfd), each piece keeps the VMA's other lines (smaps).
std::string present_maps(const std::string &text, const std::vector<DevVma> &vmas)
{
	std::string out;
	size_t i = 0;
	while (i < text.size()) {
		size_t eol = text.find('\n', i);
		if (eol == std::string::npos)
			eol = text.size();
		const std::string line = text.substr(i, eol - i);
		i = eol + 1;
		unsigned long long s = 0, e = 0, off = 0, ino = 0;
		unsigned maj = 0, min = 0;
		char perms[8] = {};
		int path_at = 0;
		if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %x:%x %llu %n", &s, &e, perms, &off, &maj, &min,
				&ino, &path_at) < 7) {
			out += line + "\n";
			continue;
		}
		// The VMA's other lines (smaps): up to the next header.
		std::string body;
		while (i < text.size()) {
			size_t nl = text.find('\n', i);
			if (nl == std::string::npos)
				nl = text.size();
			unsigned long long a = 0, b = 0;
			char c = 0;
			if (std::sscanf(text.c_str() + i, "%llx-%llx%c", &a, &b, &c) == 3 && c == ' ')
				break;
			body.append(text, i, nl - i).append("\n");
			i = nl + 1;
		}
		const std::string_view path = path_at > 0 ? std::string_view(line).substr(size_t(path_at)) : "";
		uint64_t cur = s;
		for (const DevVma &v : vmas) {
			if (v.end <= cur || v.start >= e)
				continue;
			if (v.start > cur) {
				out += maps_line(cur, v.start, perms, off + (cur - s), maj, min, ino, path) + body;
				cur = v.start;
			}
			const uint64_t pe = std::min<uint64_t>(e, v.end);
			// fake_chr's st_dev (0:5) and the root node's inode.
			out += maps_line(cur, pe, perms, v.pgoff + (cur - v.start), 0, 5, node_ino(v.path), v.path) + body;
			cur = pe;
		}
		if (cur < e)
			out += maps_line(cur, e, perms, off + (cur - s), maj, min, ino, path) + body;
	}
	return out;
}

// open() of /proc/<pid>/{maps,smaps,map_files/..}: an fd, -1 (errno), or
// nullopt when the kernel's file is the answer (no device mapping involved).
// nullopt and not a reserved number: the fd opened may be any, 0 or 1 too.
std::optional<int> open_proc(const ProcPath &pp, int flags)
{
	if (pp.kind == ProcPath::None || ((flags & O_ACCMODE) != O_RDONLY && !(flags & O_PATH)))
		return std::nullopt;
	const std::vector<DevVma> vmas = device_vmas(pp.pid);
	if (vmas.empty())
		return std::nullopt;
	REAL(open, OpenFn);
	REAL(read, ssize_t (*)(int, void *, size_t));
	REAL(close, int (*)(int));
	if (pp.kind == ProcPath::MapFile) {
		for (const DevVma &v : vmas)
			if (v.start <= pp.start && pp.end <= v.end)
				return real_open((config().root + v.path).c_str(),
						 flags & (O_ACCMODE | O_PATH | O_CLOEXEC | O_NOFOLLOW));
		return std::nullopt;
	}
	const std::string src = "/proc/" + std::to_string(pp.pid) + (pp.kind == ProcPath::Maps ? "/maps" : "/smaps");
	int fd = real_open(src.c_str(), O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	std::string text;
	char buf[8192];
	ssize_t n;
	while ((n = real_read(fd, buf, sizeof buf)) > 0)
		text.append(buf, size_t(n));
	real_close(fd);
	if (n < 0)
		return -1;
	const std::string shown = present_maps(text, vmas);
	int m = ::memfd_create("kfdemu-maps", (flags & O_CLOEXEC) ? MFD_CLOEXEC : 0);
	if (m < 0)
		return -1;
	for (size_t done = 0; done < shown.size();) {
		ssize_t w = ::write(m, shown.data() + done, shown.size() - done);
		if (w <= 0) {
			const int e = errno;
			real_close(m);
			return fail(w < 0 ? e : EIO);
		}
		done += size_t(w);
	}
	::lseek(m, 0, SEEK_SET);
	return m;
}

// readlink() of /proc/<pid>/map_files/<range> of a device mapping.
std::optional<std::string> map_file_link(const std::string &p)
{
	const ProcPath pp = proc_path(p);
	if (pp.kind != ProcPath::MapFile)
		return std::nullopt;
	for (const DevVma &v : device_vmas(pp.pid))
		if (v.start <= pp.start && pp.end <= v.end)
			return v.path;
	return std::nullopt;
}

// ---------------------------------------------------------------------------
// open.
// ---------------------------------------------------------------------------

using OpenAtFn = int (*)(int, const char *, int, ...);

// Device open through the daemon: the new fd, -1 (errno), or nullopt when
// `path` is not a device path. nullopt and not a reserved number: the new
// fd is the lowest free one, which may be 0 or 1 (a task CRIU restores
// opens its devices before its stdio is back).
std::optional<int> open_device(const char *path, int flags)
{
	const std::string p = normalize(path);
	const DevPath d = device_path(p);
	if (d.kind == Dev::None)
		return std::nullopt;
	if (!root_has(p))
		return fail(ENOENT);
	if (d.kind == Dev::Card)
		return fail(EACCES);	// primary nodes are not emulated
	wire::Request rq{};
	rq.op = d.kind == Dev::Kfd ? wire::Op::OpenKfd : wire::Op::OpenRender;
	if (d.kind == Dev::Kfd) {
		rq.a[0] = (flags & O_CLOEXEC) != 0;
	} else {
		rq.a[0] = d.minor;
		rq.a[1] = (flags & O_CLOEXEC) != 0;
	}
	rq.a[2] = uint64_t(flags & O_ACCMODE);
	Response r;
	if (int e = call(rq, {}, &r))
		return fail(-e);
	int64_t res = deliver(r);
	if (res < 0)
		return fail(int(-res));
	return int(res);
}

int do_open(int dirfd, const char *path, int flags, mode_t mode, bool at)
{
	REAL(open, OpenFn);
	REAL(openat, OpenAtFn);
	const Config &c = config();
	if (at) {
		if (auto l = logical_at(dirfd, path))
			return do_open(AT_FDCWD, l->c_str(), flags, mode, false);
	}
	if (c.active && path && path[0] == '/') {
		if (std::optional<int> r = open_device(path, flags))
			return *r;
		if (std::optional<int> r = open_proc(proc_path(normalize(path)), flags))
			return *r;
		if (auto rp = redirect(path)) {
			int fd = real_open(rp->c_str(), flags, mode);
			if (fd >= 0 && is_unreadable(path)) {
				struct stat st;
				REAL(fstat, int (*)(int, struct stat *));
				if (real_fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode))
					mark_unreadable(fd, true);
			}
			return fd;
		}
	}
	int fd = at ? real_openat(dirfd, path, flags, mode) : real_open(path, flags, mode);
	if (fd >= 0)
		mark_unreadable(fd, false);
	return fd;
}

mode_t va_mode(int flags, va_list ap)
{
	if ((flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE)
		return mode_t(va_arg(ap, int));
	return 0;
}

// ---------------------------------------------------------------------------
// stat helpers.
// ---------------------------------------------------------------------------

int do_stat(const char *path, struct stat *st, bool follow)
{
	REAL(stat, int (*)(const char *, struct stat *));
	REAL(lstat, int (*)(const char *, struct stat *));
	int r = stat_device(path, st);
	if (r <= 0)
		return r ? fail(-r) : 0;
	if (auto rp = redirect(path))
		return follow ? real_stat(rp->c_str(), st) : real_lstat(rp->c_str(), st);
	if (follow) {
		if (real_stat(path, st))
			return -1;
		// /proc/<pid>/fd/N of an emulated file follows to the memfd.
		fake_fstat_of(st);
		return 0;
	}
	return real_lstat(path, st);
}

int do_fstat(int fd, struct stat *st)
{
	REAL(fstat, int (*)(int, struct stat *));
	if (real_fstat(fd, st))
		return -1;
	fake_fstat_of(st);
	return 0;
}

int do_fstatat(int dirfd, const char *path, struct stat *st, int flags)
{
	REAL(fstatat, int (*)(int, const char *, struct stat *, int));
	if (path && !*path && (flags & AT_EMPTY_PATH))
		return do_fstat(dirfd, st);
	if (path && path[0] == '/')
		return do_stat(path, st, !(flags & AT_SYMLINK_NOFOLLOW));
	if (auto l = logical_at(dirfd, path))
		return do_stat(l->c_str(), st, !(flags & AT_SYMLINK_NOFOLLOW));
	if (real_fstatat(dirfd, path, st, flags))
		return -1;
	if (!(flags & AT_SYMLINK_NOFOLLOW))
		fake_fstat_of(st);
	return 0;
}

void stat_to_statx(const struct stat &st, struct statx *sx)
{
	sx->stx_mode = uint16_t(st.st_mode);
	sx->stx_ino = st.st_ino;
	sx->stx_size = uint64_t(st.st_size);
	sx->stx_nlink = uint32_t(st.st_nlink);
	sx->stx_uid = st.st_uid;
	sx->stx_gid = st.st_gid;
	sx->stx_blocks = uint64_t(st.st_blocks);
	sx->stx_blksize = uint32_t(st.st_blksize);
	sx->stx_rdev_major = major(st.st_rdev);
	sx->stx_rdev_minor = minor(st.st_rdev);
	sx->stx_dev_major = major(st.st_dev);
	sx->stx_dev_minor = minor(st.st_dev);
	sx->stx_atime = {st.st_atim.tv_sec, uint32_t(st.st_atim.tv_nsec), 0};
	sx->stx_mtime = {st.st_mtim.tv_sec, uint32_t(st.st_mtim.tv_nsec), 0};
	sx->stx_ctime = {st.st_ctim.tv_sec, uint32_t(st.st_ctim.tv_nsec), 0};
}

// ---------------------------------------------------------------------------
// readlink / realpath.
// ---------------------------------------------------------------------------

// "/proc/self/fd/N" and "/proc/<pid>/fd/N" (also thread-self and task/T).
bool is_proc_fd_path(const std::string &p)
{
	if (!p.starts_with("/proc/"))
		return false;
	size_t fd = p.find("/fd/");
	if (fd == std::string::npos)
		return false;
	unsigned n;
	return parse_uint(std::string_view(p).substr(fd + 4), &n);
}

std::optional<std::string> emulated_link(const char *path)
{
	if (!config().active || !path)
		return std::nullopt;
	const std::string p = normalize(path);
	if (!is_proc_fd_path(p))
		return std::nullopt;
	REAL(stat, int (*)(const char *, struct stat *));
	struct stat st;
	Key k;
	if (real_stat(path, &st) || !key_of(st, &k))
		return std::nullopt;
	auto info = describe(k);
	if (!info)
		return std::nullopt;
	switch (info->kind) {
	case kKfd: return std::string("/dev/kfd");
	case kRender: return "/dev/dri/renderD" + std::to_string(info->minor);
	case kDmaBuf: return std::string("/dmabuf:");
	default: return std::nullopt;
	}
}

ssize_t copy_link(const std::string &s, char *buf, size_t len)
{
	const size_t n = std::min(len, s.size());
	std::memcpy(buf, s.data(), n);
	return ssize_t(n);
}

ssize_t do_readlink(const char *path, char *buf, size_t len)
{
	REAL(readlink, ssize_t (*)(const char *, char *, size_t));
	if (auto l = emulated_link(path))
		return copy_link(*l, buf, len);
	if (config().active && path)
		if (auto l = map_file_link(normalize(path)))
			return copy_link(*l, buf, len);
	if (auto rp = redirect(path))
		return real_readlink(rp->c_str(), buf, len);
	if (config().active && path && is_proc_fd_path(normalize(path))) {
		// An fd of a redirected file names the file as the program
		// opened it, not its place in the private root.
		char tmp[PATH_MAX];
		ssize_t n = real_readlink(path, tmp, sizeof tmp);
		if (n < 0)
			return n;
		std::string t(tmp, size_t(n));
		const std::string &root = config().root;
		if (t.size() > root.size() && t.compare(0, root.size(), root) == 0 && t[root.size()] == '/')
			t.erase(0, root.size());
		return copy_link(t, buf, len);
	}
	return real_readlink(path, buf, len);
}

char *do_realpath(const char *path, char *resolved)
{
	REAL(realpath, char *(*)(const char *, char *));
	auto rp = redirect(path);
	if (!rp)
		return real_realpath(path, resolved);
	char tmp[PATH_MAX];
	if (!real_realpath(rp->c_str(), tmp))
		return nullptr;
	std::string out = tmp;
	const std::string &root = config().root;
	if (out.starts_with(root) && (out.size() == root.size() || out[root.size()] == '/'))
		out = out.size() == root.size() ? "/" : out.substr(root.size());
	if (out.size() >= PATH_MAX)
		return errno = ENAMETOOLONG, nullptr;
	if (!resolved) {
		resolved = static_cast<char *>(std::malloc(PATH_MAX));
		if (!resolved)
			return errno = ENOMEM, nullptr;
	}
	std::memcpy(resolved, out.c_str(), out.size() + 1);
	return resolved;
}

int do_access(const char *path, int mode)
{
	REAL(access, int (*)(const char *, int));
	if (config().active && path && device_path(normalize(path)).kind != Dev::None)
		return root_has(normalize(path)) ? 0 : fail(ENOENT);
	if (auto rp = redirect(path))
		return real_access(rp->c_str(), mode);
	return real_access(path, mode);
}

// ---------------------------------------------------------------------------
// Device mappings of this process (so munmap knows when to tell the daemon).
// ---------------------------------------------------------------------------

std::mutex g_vma_mu;
std::map<uint64_t, uint64_t> g_vmas;	// start -> end

void note_vma(uint64_t start, uint64_t len)
{
	std::lock_guard lock(g_vma_mu);
	g_vmas[start] = start + len;
}

bool drop_vma(uint64_t start, uint64_t len)
{
	std::lock_guard lock(g_vma_mu);
	const uint64_t end = start + len;
	bool hit = false;
	std::vector<std::pair<uint64_t, uint64_t>> keep;
	for (auto it = g_vmas.begin(); it != g_vmas.end();) {
		if (it->second <= start || it->first >= end) {
			++it;
			continue;
		}
		hit = true;
		if (it->first < start)
			keep.push_back({it->first, start});
		if (it->second > end)
			keep.push_back({end, it->second});
		it = g_vmas.erase(it);
	}
	for (auto &[s, e] : keep)
		g_vmas[s] = e;
	return hit;
}

void *do_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	REAL(mmap, void *(*)(void *, size_t, int, int, int, off_t));
	Key k;
	if ((flags & MAP_ANONYMOUS) || fd < 0 || !fd_key(fd, &k))
		return real_mmap(addr, len, prot, flags, fd, off);
	// The kernel's rule for the device fd itself (we map another file).
	const int acc = ::fcntl(fd, F_GETFL) & O_ACCMODE;
	if ((acc == O_WRONLY) || ((flags & MAP_TYPE) == MAP_SHARED && (prot & PROT_WRITE) && acc == O_RDONLY))
		return errno = EACCES, MAP_FAILED;
	wire::Request rq{};
	rq.op = wire::Op::Mmap;
	rq.dev = k.dev;
	rq.ino = k.ino;
	rq.a[0] = uint64_t(off);
	rq.a[1] = len;
	rq.a[2] = uint64_t(prot);
	Response r;
	if (int e = call(rq, {}, &r))
		return errno = -e, MAP_FAILED;
	if (r.rp.result == wire::kNotEmulated)
		return real_mmap(addr, len, prot, flags, fd, off);
	REAL(close, int (*)(int));
	if (r.rp.result < 0 || r.fds.empty()) {
		for (int f : r.fds)
			real_close(f);
		return errno = r.rp.result < 0 ? int(-r.rp.result) : EIO, MAP_FAILED;
	}
	void *p = real_mmap(addr, len, prot, flags, r.fds[0], off_t(r.rp.aux[0]));
	const int saved = errno;
	for (int f : r.fds)
		real_close(f);
	if (p == MAP_FAILED)
		return errno = saved, MAP_FAILED;
	note_vma(uint64_t(uintptr_t(p)), len);
	wire::Request va{};
	va.op = wire::Op::VmaAdd;
	va.dev = k.dev;
	va.ino = k.ino;
	va.a[0] = uint64_t(uintptr_t(p));
	va.a[1] = len;
	va.a[2] = uint64_t(off);
	va.a[3] = uint64_t(prot);
	va.a[4] = r.rp.aux[1];
	Response ignored;
	call(va, {}, &ignored);
	return p;
}

// A FILE whose reads fail with EPERM (fopen of an "unreadable" sysfs file).
FILE *unreadable_file()
{
	cookie_io_functions_t io{};
	io.read = [](void *, char *, size_t) -> ssize_t {
		errno = EPERM;
		return -1;
	};
	io.close = [](void *) { return 0; };
	return ::fopencookie(nullptr, "r", io);
}

FILE *do_fopen(const char *path, const char *mode, bool is64)
{
	using FopenFn = FILE *(*)(const char *, const char *);
	REAL(fopen, FopenFn);
	REAL(fopen64, FopenFn);
	auto &fn = is64 ? real_fopen64 : real_fopen;
	if (auto rp = redirect(path)) {
		FILE *f = fn(rp->c_str(), mode);
		if (f && is_unreadable(path)) {
			struct stat st;
			REAL(fstat, int (*)(int, struct stat *));
			if (real_fstat(fileno(f), &st) == 0 && !S_ISDIR(st.st_mode)) {
				std::fclose(f);
				return unreadable_file();
			}
		}
		return f;
	}
	return fn(path, mode);
}

} // namespace

// ===========================================================================
// Interposed entry points.
// ===========================================================================

SHIM_EXPORT int open(const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t m = va_mode(flags, ap);
	va_end(ap);
	return do_open(AT_FDCWD, path, flags, m, false);
}
SHIM_EXPORT int open64(const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t m = va_mode(flags, ap);
	va_end(ap);
	return do_open(AT_FDCWD, path, flags, m, false);
}
SHIM_EXPORT int openat(int dirfd, const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t m = va_mode(flags, ap);
	va_end(ap);
	return do_open(dirfd, path, flags, m, true);
}
SHIM_EXPORT int openat64(int dirfd, const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t m = va_mode(flags, ap);
	va_end(ap);
	return do_open(dirfd, path, flags, m, true);
}
SHIM_EXPORT int __open_2(const char *path, int flags) { return do_open(AT_FDCWD, path, flags, 0, false); }
SHIM_EXPORT int __open64_2(const char *path, int flags) { return do_open(AT_FDCWD, path, flags, 0, false); }
SHIM_EXPORT int __openat_2(int d, const char *path, int flags) { return do_open(d, path, flags, 0, true); }
SHIM_EXPORT int __openat64_2(int d, const char *path, int flags) { return do_open(d, path, flags, 0, true); }

SHIM_EXPORT FILE *fopen(const char *path, const char *mode) { return do_fopen(path, mode, false); }
SHIM_EXPORT FILE *fopen64(const char *path, const char *mode) { return do_fopen(path, mode, true); }

SHIM_EXPORT int close(int fd)
{
	REAL(close, int (*)(int));
	forget_fd(fd);
	return real_close(fd);
}

// dup2/dup3 onto one of our fds replaces the file behind it (a restorer
// putting fds back at their old numbers): forget it as for close.
SHIM_EXPORT int dup2(int oldfd, int newfd) noexcept
{
	REAL(dup2, int (*)(int, int));
	if (oldfd != newfd)
		forget_fd(newfd);
	return real_dup2(oldfd, newfd);
}
SHIM_EXPORT int dup3(int oldfd, int newfd, int flags) noexcept
{
	REAL(dup3, int (*)(int, int, int));
	if (oldfd != newfd)
		forget_fd(newfd);
	return real_dup3(oldfd, newfd, flags);
}

SHIM_EXPORT int close_range(unsigned first, unsigned last, int flags) noexcept
{
	REAL(close_range, int (*)(unsigned, unsigned, int));
	if (!(flags & CLOSE_RANGE_CLOEXEC))
		for (unsigned fd = first; fd <= last && fd < unsigned(kMaxTrackedFd); fd++)
			forget_fd(int(fd));
	return real_close_range(first, last, flags);
}

SHIM_EXPORT ssize_t read(int fd, void *buf, size_t len)
{
	REAL(read, ssize_t (*)(int, void *, size_t));
	if (fd_unreadable(fd))
		return fail(EPERM);
	return real_read(fd, buf, len);
}
SHIM_EXPORT ssize_t pread(int fd, void *buf, size_t len, off_t off)
{
	REAL(pread, ssize_t (*)(int, void *, size_t, off_t));
	if (fd_unreadable(fd))
		return fail(EPERM);
	return real_pread(fd, buf, len, off);
}
SHIM_EXPORT ssize_t pread64(int fd, void *buf, size_t len, off64_t off)
{
	REAL(pread64, ssize_t (*)(int, void *, size_t, off64_t));
	if (fd_unreadable(fd))
		return fail(EPERM);
	return real_pread64(fd, buf, len, off);
}

SHIM_EXPORT int ioctl(int fd, unsigned long request, ...) noexcept
{
	va_list ap;
	va_start(ap, request);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	REAL(ioctl, int (*)(int, unsigned long, ...));
	Key k;
	if (!fd_key(fd, &k))
		return real_ioctl(fd, request, arg);
	wire::Request rq{};
	rq.op = wire::Op::Ioctl;
	rq.dev = k.dev;
	rq.ino = k.ino;
	rq.a[0] = request;
	rq.a[1] = uint64_t(uintptr_t(arg));
	Response r;
	if (int e = call(rq, {}, &r))
		return fail(-e);
	if (r.rp.result == wire::kNotEmulated)
		return real_ioctl(fd, request, arg);
	int64_t res = deliver(r);
	if (res < 0)
		return fail(int(-res));
	return int(res);
}

SHIM_EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) noexcept
{
	return do_mmap(addr, len, prot, flags, fd, off);
}
SHIM_EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off) noexcept
{
	return do_mmap(addr, len, prot, flags, fd, off);
}
SHIM_EXPORT int munmap(void *addr, size_t len) noexcept
{
	REAL(munmap, int (*)(void *, size_t));
	int r = real_munmap(addr, len);
	if (r == 0 && config().active && drop_vma(uint64_t(uintptr_t(addr)), len)) {
		const int saved = errno;
		wire::Request rq{};
		rq.op = wire::Op::VmaRemove;
		rq.a[0] = uint64_t(uintptr_t(addr));
		rq.a[1] = len;
		Response ignored;
		call(rq, {}, &ignored);
		errno = saved;
	}
	return r;
}

// --- stat family (GLIBC_2.33 names and the older __xstat ones) -------------

SHIM_EXPORT int stat(const char *p, struct stat *st) noexcept { return do_stat(p, st, true); }
SHIM_EXPORT int stat64(const char *p, struct stat64 *st) noexcept
{
	return do_stat(p, reinterpret_cast<struct stat *>(st), true);
}
SHIM_EXPORT int lstat(const char *p, struct stat *st) noexcept { return do_stat(p, st, false); }
SHIM_EXPORT int lstat64(const char *p, struct stat64 *st) noexcept
{
	return do_stat(p, reinterpret_cast<struct stat *>(st), false);
}
SHIM_EXPORT int fstat(int fd, struct stat *st) noexcept { return do_fstat(fd, st); }
SHIM_EXPORT int fstat64(int fd, struct stat64 *st) noexcept
{
	return do_fstat(fd, reinterpret_cast<struct stat *>(st));
}
SHIM_EXPORT int fstatat(int d, const char *p, struct stat *st, int fl) noexcept
{
	return do_fstatat(d, p, st, fl);
}
SHIM_EXPORT int fstatat64(int d, const char *p, struct stat64 *st, int fl) noexcept
{
	return do_fstatat(d, p, reinterpret_cast<struct stat *>(st), fl);
}
SHIM_EXPORT int __xstat(int, const char *p, struct stat *st) { return do_stat(p, st, true); }
SHIM_EXPORT int __xstat64(int, const char *p, struct stat64 *st)
{
	return do_stat(p, reinterpret_cast<struct stat *>(st), true);
}
SHIM_EXPORT int __lxstat(int, const char *p, struct stat *st) { return do_stat(p, st, false); }
SHIM_EXPORT int __lxstat64(int, const char *p, struct stat64 *st)
{
	return do_stat(p, reinterpret_cast<struct stat *>(st), false);
}
SHIM_EXPORT int __fxstat(int, int fd, struct stat *st) { return do_fstat(fd, st); }
SHIM_EXPORT int __fxstat64(int, int fd, struct stat64 *st)
{
	return do_fstat(fd, reinterpret_cast<struct stat *>(st));
}
SHIM_EXPORT int __fxstatat(int, int d, const char *p, struct stat *st, int fl)
{
	return do_fstatat(d, p, st, fl);
}
SHIM_EXPORT int __fxstatat64(int, int d, const char *p, struct stat64 *st, int fl)
{
	return do_fstatat(d, p, reinterpret_cast<struct stat *>(st), fl);
}

SHIM_EXPORT int statx(int d, const char *p, int fl, unsigned mask, struct statx *sx) noexcept
{
	REAL(statx, int (*)(int, const char *, int, unsigned, struct statx *));
	const bool by_fd = p && !*p && (fl & AT_EMPTY_PATH);
	const bool follow = !(fl & AT_SYMLINK_NOFOLLOW);
	if (auto l = logical_at(d, p))
		return statx(AT_FDCWD, l->c_str(), fl, mask, sx);
	if (!config().active || !p || (!by_fd && p[0] != '/'))
		return real_statx(d, p, fl, mask, sx);
	if (!by_fd && device_path(normalize(p)).kind == Dev::None) {
		if (auto rp = redirect(p))
			return real_statx(AT_FDCWD, rp->c_str(), fl, mask, sx);
	}
	struct stat st;
	if (by_fd ? do_fstat(d, &st) : do_stat(p, &st, follow))
		return -1;
	// Start from the real answer where there is one, then overlay.
	if (by_fd || device_path(normalize(p)).kind == Dev::None) {
		if (real_statx(d, p, fl, mask, sx))
			return -1;
	} else {
		std::memset(sx, 0, sizeof *sx);
	}
	sx->stx_mask |= STATX_BASIC_STATS;
	stat_to_statx(st, sx);
	return 0;
}

SHIM_EXPORT int fstatfs(int fd, struct statfs *sf) noexcept
{
	REAL(fstatfs, int (*)(int, struct statfs *));
	if (real_fstatfs(fd, sf))
		return -1;
	Key k;
	if (fd_key(fd, &k))
		if (auto i = describe(k); i && i->kind == kDmaBuf)
			sf->f_type = kDmaBufMagic;
	return 0;
}
SHIM_EXPORT int fstatfs64(int fd, struct statfs64 *sf) noexcept
{
	return fstatfs(fd, reinterpret_cast<struct statfs *>(sf));
}

// --- links, paths, directories ---------------------------------------------

SHIM_EXPORT ssize_t readlink(const char *p, char *buf, size_t len) noexcept
{
	return do_readlink(p, buf, len);
}
SHIM_EXPORT ssize_t __readlink_chk(const char *p, char *buf, size_t len, size_t)
{
	return do_readlink(p, buf, len);
}
SHIM_EXPORT ssize_t readlinkat(int d, const char *p, char *buf, size_t len) noexcept
{
	REAL(readlinkat, ssize_t (*)(int, const char *, char *, size_t));
	if (p && p[0] == '/')
		return do_readlink(p, buf, len);
	if (auto l = logical_at(d, p))
		return do_readlink(l->c_str(), buf, len);
	return real_readlinkat(d, p, buf, len);
}
SHIM_EXPORT char *realpath(const char *p, char *resolved) noexcept { return do_realpath(p, resolved); }
SHIM_EXPORT char *__realpath_chk(const char *p, char *resolved, size_t) { return do_realpath(p, resolved); }

SHIM_EXPORT int access(const char *p, int mode) noexcept { return do_access(p, mode); }
SHIM_EXPORT int faccessat(int d, const char *p, int mode, int fl) noexcept
{
	REAL(faccessat, int (*)(int, const char *, int, int));
	if (p && p[0] == '/')
		return do_access(p, mode);
	if (auto l = logical_at(d, p))
		return do_access(l->c_str(), mode);
	return real_faccessat(d, p, mode, fl);
}

SHIM_EXPORT DIR *opendir(const char *p)
{
	REAL(opendir, DIR *(*)(const char *));
	if (auto rp = redirect(p))
		return real_opendir(rp->c_str());
	return real_opendir(p);
}

using DirentFilter = int (*)(const struct dirent *);
using DirentCmp = int (*)(const struct dirent **, const struct dirent **);
using Dirent64Filter = int (*)(const struct dirent64 *);
using Dirent64Cmp = int (*)(const struct dirent64 **, const struct dirent64 **);

SHIM_EXPORT int scandir(const char *p, struct dirent ***list, DirentFilter f, DirentCmp c)
{
	REAL(scandir, int (*)(const char *, struct dirent ***, DirentFilter, DirentCmp));
	if (auto rp = redirect(p))
		return real_scandir(rp->c_str(), list, f, c);
	return real_scandir(p, list, f, c);
}
SHIM_EXPORT int scandir64(const char *p, struct dirent64 ***list, Dirent64Filter f, Dirent64Cmp c)
{
	REAL(scandir64, int (*)(const char *, struct dirent64 ***, Dirent64Filter, Dirent64Cmp));
	if (auto rp = redirect(p))
		return real_scandir64(rp->c_str(), list, f, c);
	return real_scandir64(p, list, f, c);
}

// Extended attributes (ls -l asks for ACLs): device nodes have none,
// redirected paths answer from the root.
namespace {
template <typename F, typename... A>
ssize_t xattr_call(F real, const char *p, A... a)
{
	if (config().active && p && device_path(normalize(p)).kind != Dev::None)
		return root_has(normalize(p)) ? fail(ENODATA) : fail(ENOENT);
	if (auto rp = redirect(p))
		return real(rp->c_str(), a...);
	return real(p, a...);
}
} // namespace

SHIM_EXPORT ssize_t getxattr(const char *p, const char *n, void *v, size_t s) noexcept
{
	REAL(getxattr, ssize_t (*)(const char *, const char *, void *, size_t));
	return xattr_call(real_getxattr, p, n, v, s);
}
SHIM_EXPORT ssize_t lgetxattr(const char *p, const char *n, void *v, size_t s) noexcept
{
	REAL(lgetxattr, ssize_t (*)(const char *, const char *, void *, size_t));
	return xattr_call(real_lgetxattr, p, n, v, s);
}
SHIM_EXPORT ssize_t listxattr(const char *p, char *l, size_t s) noexcept
{
	REAL(listxattr, ssize_t (*)(const char *, char *, size_t));
	if (config().active && p && device_path(normalize(p)).kind != Dev::None)
		return root_has(normalize(p)) ? 0 : fail(ENOENT);
	return xattr_call(real_listxattr, p, l, s);
}
SHIM_EXPORT ssize_t llistxattr(const char *p, char *l, size_t s) noexcept
{
	REAL(llistxattr, ssize_t (*)(const char *, char *, size_t));
	if (config().active && p && device_path(normalize(p)).kind != Dev::None)
		return root_has(normalize(p)) ? 0 : fail(ENOENT);
	return xattr_call(real_llistxattr, p, l, s);
}
