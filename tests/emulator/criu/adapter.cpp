// SPDX-License-Identifier: GPL-2.0-only
//
// libkfdemu_criu_adapter.so: the emulator's CRIU-side half, for running
// real CRIU on processes that use the emulated GPU. It is a CRIU plugin
// that belongs to the emulator, not to the plugin under test: it only
// translates what CRIU sees of the emulator's own machinery, and never does
// GPU work. It must be loaded before the plugin under test (the
// kfdemu-criu wrapper arranges the plugin directory; init() refuses to run
// when another plugin of its directory is already loaded).
//
// - DUMP_UNIX_SK / RESTORE_UNIX_SK: the shim's daemon connections (AF_UNIX
//   stream sockets whose peer is $KFDEMU_SOCKET) are external sockets to
//   CRIU. They are claimed at dump (their inodes listed in the image file
//   kfdemu-adapter.img, each with the reply bytes it had queued: a call
//   that completed while its thread was being frozen, or one the model
//   sent back to be made again (wire::kRestart: it reached the model
//   after CRIU paused the process); the daemon first
//   settles the connection, Op::Settle, so that no call is left half
//   done) and restored as
//   fresh connections to the daemon, which first sends those bytes back
//   (Op::Echo), so the restored thread's restarted recvmsg reads its reply.
// - UPDATE_VMA_MAP: CRIU's restorer maps a device VMA with a raw mmap(2) of
//   the fd the plugin returns at the returned offset; the shim cannot see
//   that. The adapter calls the plugin under test's own UPDATE_VMA_MAP and
//   turns its answer (a device fd + device offset) into what the shim's
//   mmap would have mapped: the model's file and offset for that device
//   offset (the daemon's Mmap), and reports the mapping to the daemon.
//   Anything the plugin does not claim, or claims on a file that is not
//   emulated, passes through unchanged.
//
// The dump side needs nothing here: CRIU runs with the shim preloaded, which
// presents device fds and mappings as the kernel would (see README.md).
#include "amdgpu_plugin/criu_plugin_abi.h"

#include "../transport/protocol.h"

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace {

namespace wire = kfdemu::wire;

constexpr const char *kName = "kfdemu_adapter";
constexpr const char *kImage = "kfdemu-adapter.img";
// How long a dumped connection's call in progress may take to finish.
constexpr unsigned kSettleMs = 20000;

// --- logging through CRIU (criu-log.h print_on_level), else stderr --------

void log(unsigned level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void log(unsigned level, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	std::vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	auto *print = reinterpret_cast<criu_print_on_level_t *>(dlsym(RTLD_DEFAULT, "print_on_level"));
	if (print)
		print(level, "%s: %s\n", kName, msg);
	else
		std::fprintf(stderr, "%s: %s\n", kName, msg);
}

int image_dir()
{
	auto *get = reinterpret_cast<criu_get_image_dir_t *>(dlsym(RTLD_DEFAULT, "criu_get_image_dir"));
	return get ? get() : -1;
}

// The fd closed on scope exit.
struct Fd {
	int fd = -1;
	explicit Fd(int f = -1) : fd(f) {}
	~Fd()
	{
		if (fd >= 0)
			::close(fd);
	}
	Fd(const Fd &) = delete;
	Fd &operator=(const Fd &) = delete;
	int release()
	{
		int f = fd;
		fd = -1;
		return f;
	}
};

const char *daemon_socket()
{
	const char *s = std::getenv("KFDEMU_SOCKET");
	return s && *s ? s : nullptr;
}

int connect_daemon()
{
	const char *path = daemon_socket();
	if (!path)
		return -ENOENT;
	Fd s(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
	if (s.fd < 0)
		return -errno;
	sockaddr_un sa{};
	sa.sun_family = AF_UNIX;
	std::snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
	if (::connect(s.fd, reinterpret_cast<sockaddr *>(&sa), sizeof sa))
		return -errno;
	return s.release();
}

std::string to_hex(std::string_view bytes)
{
	static const char digits[] = "0123456789abcdef";
	std::string out;
	for (unsigned char c : bytes) {
		out += digits[c >> 4];
		out += digits[c & 15];
	}
	return out;
}

std::string from_hex(std::string_view hex)
{
	auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
	std::string out;
	for (size_t i = 0; i + 1 < hex.size(); i += 2)
		out += char(nibble(hex[i]) << 4 | nibble(hex[i + 1]));
	return out;
}

// The bytes waiting in a daemon connection of the dumped task (a reply its
// thread had not read yet), without consuming them. A reply with fds
// cannot be handed back: -EXDEV.
int queued_reply(int fd, std::string *out)
{
	int avail = 0;
	if (::ioctl(fd, FIONREAD, &avail))
		return -errno;
	if (avail <= 0)
		return 0;
	std::string buf(size_t(avail), '\0');
	iovec iov{buf.data(), buf.size()};
	alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int) * 253)];
	msghdr msg{};
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = ctl;
	msg.msg_controllen = sizeof ctl;
	const ssize_t n = ::recvmsg(fd, &msg, MSG_PEEK | MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
	bool fds = false;
	for (cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
			fds = true;
			const size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (size_t i = 0; i < k; ++i) {
				int f;
				std::memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof f);
				::close(f);
			}
		}
	if (fds)
		return -EXDEV;
	out->assign(buf.data(), size_t(n));
	return 0;
}

// The real (dev, ino) of an fd: a raw fstat, past the preloaded shim (which
// presents emulated files as the devices they stand for).
bool real_key(int fd, uint64_t *dev, uint64_t *ino)
{
	struct stat st {};
	if (::syscall(SYS_fstat, fd, &st))
		return false;
	*dev = st.st_dev;
	*ino = st.st_ino;
	return true;
}

// One request/reply with the daemon on a connection of its own. The reply's
// fds are appended to *fds (the caller owns them). 0 or -errno.
int daemon_call(const wire::Request &rq, wire::Reply *rp, std::vector<int> *fds)
{
	Fd s(connect_daemon());
	if (s.fd < 0)
		return s.fd;
	if (int e = wire::send_all(s.fd, &rq, sizeof rq))
		return e;
	int got[wire::kMaxFdsPerMsg];
	unsigned n = 0;
	int e = wire::recv_all(s.fd, rp, sizeof *rp, got, &n, wire::kMaxFdsPerMsg);
	if (!e && rp->nfds) {
		std::vector<wire::FdEntry> entries(rp->nfds);
		e = wire::recv_all(s.fd, entries.data(), entries.size() * sizeof entries[0], got, &n,
				   wire::kMaxFdsPerMsg);
	}
	if (!e && rp->len) {
		std::string payload(rp->len, '\0');
		e = wire::recv_all(s.fd, payload.data(), payload.size(), got, &n, wire::kMaxFdsPerMsg);
	}
	for (unsigned i = 0; i < n; i++) {
		if (!e && fds)
			fds->push_back(got[i]);
		else
			::close(got[i]);
	}
	return e;
}

// --- where the adapter lives, and the plugins beside it --------------------

std::string own_dir()
{
	Dl_info info{};
	if (!dladdr(reinterpret_cast<void *>(&own_dir), &info) || !info.dli_fname)
		return {};
	std::string p = info.dli_fname;
	const size_t slash = p.rfind('/');
	return slash == std::string::npos ? std::string(".") : p.substr(0, slash);
}

std::string own_file()
{
	Dl_info info{};
	if (!dladdr(reinterpret_cast<void *>(&own_file), &info) || !info.dli_fname)
		return {};
	return info.dli_fname;
}

// The other *.so files of the adapter's directory (CRIU's plugin directory),
// in readdir order (CRIU's load order).
std::vector<std::string> sibling_plugins()
{
	std::vector<std::string> out;
	const std::string dir = own_dir(), self = own_file();
	DIR *d = ::opendir(dir.c_str());
	if (!d)
		return out;
	while (dirent *e = ::readdir(d)) {
		const std::string_view n = e->d_name;
		if (n.size() < 3 || !n.ends_with(".so"))
			continue;
		std::string path = dir + "/" + std::string(n);
		if (path != self)
			out.push_back(std::move(path));
	}
	::closedir(d);
	return out;
}

// A plugin of the directory that is already loaded, or "".
std::string loaded_sibling()
{
	for (const auto &p : sibling_plugins()) {
		if (void *h = dlopen(p.c_str(), RTLD_LAZY | RTLD_NOLOAD)) {
			dlclose(h);
			return p;
		}
	}
	return {};
}

// The UPDATE_VMA_MAP hooks of the plugins loaded after the adapter, in
// CRIU's order (looked up when first needed: they load after our init).
std::vector<cr_plugin_update_vma_map_t *> later_update_hooks()
{
	std::vector<cr_plugin_update_vma_map_t *> out;
	for (const auto &p : sibling_plugins()) {
		void *h = dlopen(p.c_str(), RTLD_LAZY | RTLD_NOLOAD);
		if (!h)
			continue;
		auto *d = static_cast<cr_plugin_desc_t *>(dlsym(h, "CR_PLUGIN_DESC"));
		if (d && d->max_hooks > CR_PLUGIN_HOOK__UPDATE_VMA_MAP && d->hooks[CR_PLUGIN_HOOK__UPDATE_VMA_MAP])
			out.push_back(reinterpret_cast<cr_plugin_update_vma_map_t *>(
				d->hooks[CR_PLUGIN_HOOK__UPDATE_VMA_MAP]));
		dlclose(h);	// CRIU's own handle keeps it loaded
	}
	return out;
}

// A new fd of the calling task's (emulated) /dev/kfd file, or -1. readlink
// of /proc/self/fd/N goes through the preloaded shim, which names emulated
// files by their device path.
int task_kfd_fd()
{
	DIR *d = ::opendir("/proc/self/fd");
	if (!d)
		return -1;
	int found = -1;
	while (dirent *e = ::readdir(d)) {
		char *end = nullptr;
		const long fd = std::strtol(e->d_name, &end, 10);
		if (end == e->d_name || *end || fd == dirfd(d))
			continue;
		char link[64] = {};
		const std::string p = std::string("/proc/self/fd/") + e->d_name;
		if (::readlink(p.c_str(), link, sizeof link - 1) == 8 && std::string_view(link) == "/dev/kfd") {
			found = ::fcntl(int(fd), F_DUPFD_CLOEXEC, 0);
			break;
		}
	}
	::closedir(d);
	return found;
}

// --- state ------------------------------------------------------------------

bool g_active = false;
// restore: the inodes claimed at dump, with the reply bytes each had queued
std::map<uint64_t, std::string> g_sockets;
bool g_sockets_read = false;

// --- the mm image: a VMA's length and protection ---------------------------
//
// UPDATE_VMA_MAP is not told the VMA's length, which the daemon needs (the
// model checks mmap lengths as the kernel does: a doorbell mapping must be
// one doorbell slice). CRIU's mm-<pid>.img has it: after the magics, a u32
// size and an MmEntry message whose field 14 holds the VmaEntry messages
// (start 1, end 2, pgoff 3, prot 5; images/mm.proto, images/vma.proto).

struct ImgVma {
	uint64_t start = 0, end = 0;
	uint32_t prot = 0;
};

struct Pb {
	const uint8_t *p, *end;
	bool varint(uint64_t *v)
	{
		*v = 0;
		for (unsigned shift = 0; p < end && shift < 64; shift += 7) {
			const uint8_t b = *p++;
			*v |= uint64_t(b & 0x7f) << shift;
			if (!(b & 0x80))
				return true;
		}
		return false;
	}
	// Skips a field's value of wire type `wt`.
	bool skip(unsigned wt)
	{
		uint64_t v;
		switch (wt) {
		case 0: return varint(&v);
		case 1: return (p += 8) <= end;
		case 2: return varint(&v) && v <= uint64_t(end - p) && (p += v, true);
		case 5: return (p += 4) <= end;
		default: return false;
		}
	}
};

std::optional<ImgVma> parse_vma(const uint8_t *p, const uint8_t *end)
{
	Pb pb{p, end};
	ImgVma v;
	while (pb.p < pb.end) {
		uint64_t key, val;
		if (!pb.varint(&key))
			return std::nullopt;
		const unsigned field = unsigned(key >> 3), wt = unsigned(key & 7);
		if (wt == 0 && (field == 1 || field == 2 || field == 5)) {
			if (!pb.varint(&val))
				return std::nullopt;
			if (field == 1)
				v.start = val;
			else if (field == 2)
				v.end = val;
			else
				v.prot = uint32_t(val);
		} else if (!pb.skip(wt)) {
			return std::nullopt;
		}
	}
	return v;
}

std::vector<ImgVma> read_mm_image(pid_t pid)
{
	std::vector<ImgVma> out;
	const int dir = image_dir();
	if (dir < 0)
		return out;
	const std::string name = "mm-" + std::to_string(pid) + ".img";
	Fd fd(::openat(dir, name.c_str(), O_RDONLY | O_CLOEXEC));
	if (fd.fd < 0)
		return out;
	std::string data;
	char buf[65536];
	ssize_t n;
	while ((n = ::read(fd.fd, buf, sizeof buf)) > 0)
		data.append(buf, size_t(n));
	constexpr uint32_t kCommonMagic = 0x54564319;	// IMG_COMMON_MAGIC
	size_t at = 4;
	uint32_t first = 0;
	if (data.size() < 8)
		return out;
	std::memcpy(&first, data.data(), 4);
	if (first == kCommonMagic)
		at = 8;
	uint32_t size = 0;
	if (data.size() < at + 4)
		return out;
	std::memcpy(&size, data.data() + at, 4);
	at += 4;
	if (data.size() - at < size)
		return out;
	const auto *p = reinterpret_cast<const uint8_t *>(data.data() + at);
	Pb pb{p, p + size};
	while (pb.p < pb.end) {
		uint64_t key, len;
		if (!pb.varint(&key))
			break;
		if ((key >> 3) == 14 && (key & 7) == 2) {
			if (!pb.varint(&len) || len > uint64_t(pb.end - pb.p))
				break;
			if (auto v = parse_vma(pb.p, pb.p + len))
				out.push_back(*v);
			pb.p += len;
		} else if (!pb.skip(unsigned(key & 7))) {
			break;
		}
	}
	return out;
}

std::optional<ImgVma> image_vma(uint64_t addr)
{
	// Read once per restoring task (CRIU forks them from one another).
	static pid_t read_for = 0;
	static std::vector<ImgVma> vmas;
	if (read_for != ::getpid()) {
		read_for = ::getpid();
		vmas = read_mm_image(read_for);
	}
	for (const auto &v : vmas)
		if (v.start == addr)
			return v;
	return std::nullopt;
}

// --- hooks ------------------------------------------------------------------

int init(int stage)
{
	g_active = daemon_socket() != nullptr;
	if (!g_active) {
		log(CRIU_LOG_INFO, "KFDEMU_SOCKET unset: not under kfd-emu, inactive");
		return 0;
	}
	// Hooks of plugins loaded earlier run before ours: the plugin under
	// test would answer UPDATE_VMA_MAP before the adapter could translate.
	const std::string before = loaded_sibling();
	if (!before.empty()) {
		log(CRIU_LOG_ERROR,
		    "%s was loaded before the adapter (CRIU loads its plugin directory in readdir order); "
		    "use the kfdemu-criu wrapper, which puts the adapter first",
		    before.c_str());
		return -1;
	}
	log(CRIU_LOG_INFO, "active (stage %d, daemon %s), loaded first", stage, daemon_socket());
	return 0;
}

void fini(int, int) {}

int dump_unix_sk(int fd, int id)
{
	if (!g_active)
		return -ENOTSUP;
	sockaddr_un peer{};
	socklen_t len = sizeof peer;
	int type = 0;
	socklen_t tlen = sizeof type;
	if (::getpeername(fd, reinterpret_cast<sockaddr *>(&peer), &len) || peer.sun_family != AF_UNIX ||
	    ::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tlen) || type != SOCK_STREAM)
		return -ENOTSUP;
	const size_t n = len > offsetof(sockaddr_un, sun_path) ? len - offsetof(sockaddr_un, sun_path) : 0;
	const std::string_view path(peer.sun_path, strnlen(peer.sun_path, n));
	if (path != daemon_socket())
		return -ENOTSUP;
	// A call of the frozen thread still in progress in the daemon would
	// reply after the look below, into a connection that is not restored:
	// the daemon first ends the process's waits (as timed out; the
	// kernel's would be restarted) and lets every call of this connection
	// finish, so that each either has its reply queued here or was never
	// read (then the restored thread's restarted send makes it again).
	wire::Request settle{};
	uint64_t dev = 0, ino = 0;
	if (real_key(fd, &dev, &ino)) {
		settle.op = wire::Op::Settle;
		settle.tid = int32_t(::gettid());
		settle.a[0] = ino;
		settle.a[1] = kSettleMs;
		wire::Reply rp{};
		int err = daemon_call(settle, &rp, nullptr);
		if (!err && rp.result < 0 && rp.result != -ENOENT)
			err = int(rp.result);
		if (err) {
			log(CRIU_LOG_ERROR,
			    "socket %u: a call of the dumped process is still in progress in the emulator after %u ms "
			    "(its reply would be lost): %s",
			    unsigned(id), unsigned(kSettleMs), std::strerror(-err));
			return err;
		}
	}
	// A reply the thread had not read when it was frozen (its call had
	// completed: the kernel's ioctl would have returned) waits in the
	// socket; it is kept and handed to the new connection at restore.
	std::string queued;
	if (int err = queued_reply(fd, &queued)) {
		log(CRIU_LOG_ERROR, "socket %u: %s", unsigned(id), std::strerror(-err));
		return err;
	}
	const int dir = image_dir();
	Fd img(dir < 0 ? -1 : ::openat(dir, kImage, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
	const std::string line = "daemon-socket " + std::to_string(unsigned(id)) + " " + to_hex(queued) + "\n";
	if (img.fd < 0 || ::write(img.fd, line.data(), line.size()) != ssize_t(line.size())) {
		const int e = errno ? errno : EIO;
		log(CRIU_LOG_ERROR, "socket %u: cannot record it in %s: %s", unsigned(id), kImage, std::strerror(e));
		return -e;
	}
	log(CRIU_LOG_DEBUG, "socket %u is a daemon connection of the shim: reconnected at restore (%zu reply bytes queued)",
	    unsigned(id), queued.size());
	return 0;
}

void read_socket_list()
{
	if (g_sockets_read)
		return;
	g_sockets_read = true;
	const int dir = image_dir();
	Fd img(dir < 0 ? -1 : ::openat(dir, kImage, O_RDONLY | O_CLOEXEC));
	if (img.fd < 0)
		return;
	std::string text;
	char buf[4096];
	ssize_t n;
	while ((n = ::read(img.fd, buf, sizeof buf)) > 0)
		text.append(buf, size_t(n));
	size_t pos = 0;
	while (pos < text.size()) {
		size_t eol = text.find('\n', pos);
		if (eol == std::string::npos)
			eol = text.size();
		unsigned long long ino = 0;
		int used = 0;
		if (std::sscanf(text.c_str() + pos, "daemon-socket %llu%n", &ino, &used) == 1) {
			size_t h = pos + size_t(used);
			while (h < eol && text[h] == ' ')
				++h;
			g_sockets[ino] = from_hex(std::string_view(text).substr(h, eol - h));
		}
		pos = eol + 1;
	}
}

int restore_unix_sk(int id)
{
	if (!g_active)
		return -ENOTSUP;
	read_socket_list();
	if (!g_sockets.count(unsigned(id)))
		return -ENOTSUP;
	const int s = connect_daemon();
	if (s < 0) {
		log(CRIU_LOG_ERROR, "socket %u: cannot connect to the daemon: %s", unsigned(id), std::strerror(-s));
		return s;
	}
	const std::string &queued = g_sockets[unsigned(id)];
	if (!queued.empty()) {
		// The daemon sends the bytes back: they wait in the new
		// connection for the restored thread's restarted recvmsg.
		wire::Request rq{};
		rq.op = wire::Op::Echo;
		rq.len = uint32_t(queued.size());
		std::string msg(reinterpret_cast<const char *>(&rq), sizeof rq);
		msg += queued;
		if (int err = wire::send_all(s, msg.data(), msg.size())) {
			log(CRIU_LOG_ERROR, "socket %u: cannot hand back its queued reply: %s", unsigned(id),
			    std::strerror(-err));
			::close(s);
			return err;
		}
	}
	log(CRIU_LOG_DEBUG, "socket %u: new daemon connection, fd %d (%zu queued reply bytes handed back)", unsigned(id),
	    s, queued.size());
	return s;
}

// CRIU ignores an UPDATE_VMA_MAP error and maps the plugin's fd (or the
// path) raw, which here maps the wrong memory without a word. Answer an
// offset no file can be mapped at instead: the restorer's mmap fails and
// the restore with it, after the error logged above.
int unmappable(int *plugin_fd, uint64_t *new_pgoff)
{
	if (*plugin_fd >= 0)
		::close(*plugin_fd);
	*plugin_fd = -1;
	*new_pgoff = ~uint64_t(0) << 12;
	return 1;
}

int update_vma_map(const char *path, const uint64_t addr, const uint64_t old_pgoff, uint64_t *new_pgoff,
		   int *plugin_fd)
{
	if (!g_active)
		return -ENOTSUP;
	int ret = -ENOTSUP;
	for (auto *hook : later_update_hooks()) {
		ret = hook(path, addr, old_pgoff, new_pgoff, plugin_fd);
		if (ret != -ENOTSUP)
			break;
	}
	if (ret != 1)
		return ret;	// nothing to translate: as the plugin answered
	std::optional<Fd> own_kfd;
	if (*plugin_fd < 0) {
		// CRIU will open the path itself and map that file. A /dev/kfd
		// mapping is the process's, whichever of its kfd files maps it
		// (the kernel's kfd_mmap looks up the caller's process): use the
		// kfd file the task already has, as a new open would.
		// In a mount namespace (a container) CRIU names the file
		// relative to its root: "dev/kfd".
		if (std::string_view(path) != "/dev/kfd" && std::string_view(path) != "dev/kfd") {
			log(CRIU_LOG_DEBUG, "mapping %s at 0x%llx: no fd and not /dev/kfd: untranslated", path,
			    (unsigned long long)addr);
			return ret;
		}
		own_kfd.emplace(task_kfd_fd());
		if (own_kfd->fd < 0) {
			log(CRIU_LOG_ERROR, "mapping %s at 0x%llx: the task has no /dev/kfd file", path,
			    (unsigned long long)addr);
			return -ENOENT;
		}
		*plugin_fd = own_kfd->release();
	}
	if (const char *b = std::getenv("KFDEMU_ADAPTER_BREAK_VMA_MAP"); b && *b == '1') {
		// The negative test's plugin bug: its answer one page off.
		log(CRIU_LOG_WARN, "KFDEMU_ADAPTER_BREAK_VMA_MAP: offset 0x%llx of %s answered as 0x%llx",
		    (unsigned long long)*new_pgoff, path, (unsigned long long)(*new_pgoff + 4096));
		*new_pgoff += 4096;
	}
	const int dev_fd = *plugin_fd;
	wire::Request rq{};
	if (!real_key(dev_fd, &rq.dev, &rq.ino))
		return ret;
	const auto vma = image_vma(addr);
	if (!vma) {
		log(CRIU_LOG_ERROR, "mapping %s at 0x%llx: not in mm-%d.img", path, (unsigned long long)addr,
		    int(::getpid()));
		return unmappable(plugin_fd, new_pgoff);
	}
	rq.op = wire::Op::Mmap;
	rq.tid = int32_t(::gettid());
	rq.a[0] = *new_pgoff;
	rq.a[1] = vma->end - vma->start;
	rq.a[2] = vma->prot;
	wire::Reply rp{};
	std::vector<int> fds;
	if (int e = daemon_call(rq, &rp, &fds)) {
		log(CRIU_LOG_ERROR, "mapping %s at 0x%llx: daemon: %s", path, (unsigned long long)addr,
		    std::strerror(-e));
		return unmappable(plugin_fd, new_pgoff);
	}
	if (rp.result == wire::kNotEmulated) {
		for (int f : fds)
			::close(f);
		log(CRIU_LOG_DEBUG, "mapping %s at 0x%llx: fd %d (%llx:%llu) is not emulated: untranslated", path,
		    (unsigned long long)addr, dev_fd, (unsigned long long)rq.dev, (unsigned long long)rq.ino);
		return ret;	// a real device file: CRIU maps it as it is
	}
	if (rp.result < 0 || fds.size() != 1) {
		for (int f : fds)
			::close(f);
		const int e = rp.result < 0 ? int(-rp.result) : EIO;
		log(CRIU_LOG_ERROR, "mapping %s at 0x%llx offset 0x%llx (+0x%llx): %s", path,
		    (unsigned long long)addr, (unsigned long long)*new_pgoff,
		    (unsigned long long)(vma->end - vma->start), std::strerror(e));
		return unmappable(plugin_fd, new_pgoff);
	}
	// The daemon's record of the mapping the restorer is about to make
	// (what the shim's mmap reports after mapping).
	wire::Request va{};
	va.op = wire::Op::VmaAdd;
	va.tid = int32_t(::gettid());
	va.dev = rq.dev;
	va.ino = rq.ino;
	va.a[0] = addr;
	va.a[1] = vma->end - vma->start;
	va.a[2] = *new_pgoff;
	va.a[3] = vma->prot;
	va.a[4] = rp.aux[1];
	wire::Reply ignored{};
	daemon_call(va, &ignored, nullptr);
	log(CRIU_LOG_DEBUG, "mapping %s at 0x%llx: device offset 0x%llx is model file offset 0x%llx", path,
	    (unsigned long long)addr, (unsigned long long)*new_pgoff, (unsigned long long)rp.aux[0]);
	::close(dev_fd);
	*plugin_fd = fds[0];
	*new_pgoff = rp.aux[0];
	return 1;
}

cr_plugin_desc_t make_desc()
{
	cr_plugin_desc_t d{};
	d.name = kName;
	d.init = init;
	d.exit = fini;
	d.version = CRIU_PLUGIN_VERSION;
	// Every CRIU 4.x knows the first nine hooks.
	d.max_hooks = CR_PLUGIN_HOOK__UPDATE_VMA_MAP + 1;
	d.hooks[CR_PLUGIN_HOOK__DUMP_UNIX_SK] = reinterpret_cast<void *>(dump_unix_sk);
	d.hooks[CR_PLUGIN_HOOK__RESTORE_UNIX_SK] = reinterpret_cast<void *>(restore_unix_sk);
	d.hooks[CR_PLUGIN_HOOK__UPDATE_VMA_MAP] = reinterpret_cast<void *>(update_vma_map);
	return d;
}

} // namespace

extern "C" {
__attribute__((visibility("default"))) cr_plugin_desc_t CR_PLUGIN_DESC = make_desc();
}
