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
// flag, a describe cache, the process's device mappings, the spans it set
// SVM attributes on, and a bitmap of "unreadable" sysfs fds.
//
// The library's files (their functions in namespace kfdemu::shim, hidden by
// -fvisibility=hidden: of its own functions the library exports only the
// SHIM_EXPORT entry points):
//   shim.h        this: the real-function table (REAL) and what the files share
//   config.cpp    the configuration (read once), the fd bitmaps
//   daemon.cpp    the daemon connection (call, deliver)
//   paths.cpp     path parsing and redirection; open, fopen, close, dup,
//                 read, readlink/realpath, access, directories, xattrs
//   sysfs_write.cpp  the emulated /sys opened for writing (hermeticity)
//   path_change.cpp  unlink, rename, mkdir, link, chmod, truncate, ... of
//                 redirected paths (hermeticity)
//   stat.cpp      emulated files (describe), the stat family, statfs
//   proc_maps.cpp /proc/<pid>/{maps,smaps,map_files} of device mappings
//   mmap.cpp      ioctl, mmap, munmap and the process's device mappings
#pragma once

#include "../transport/protocol.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <map>
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

namespace kfdemu::shim {

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

using OpenFn = int (*)(const char *, int, ...);
using OpenAtFn = int (*)(int, const char *, int, ...);

// The device numbers the emulator shows (transport/profile.h's).
inline constexpr unsigned kKfdMajor = 510, kDrmMajor = 226;

inline int fail(int err)
{
	errno = err;
	return -1;
}

// --- config.cpp: configuration (read once) ----------------------------------

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
	// The launcher's mount namespace (kHostMntnsFile); 0: unknown, every
	// process has the host view.
	ino_t host_mntns = 0;
};

const Config &config();

// --- paths.cpp: paths -------------------------------------------------------

enum class Dev { None, Kfd, Render, Card };
struct DevPath {
	Dev kind = Dev::None;
	unsigned minor = 0;
};

std::string normalize(const char *path);
bool parse_uint(std::string_view s, unsigned *out);
DevPath device_path(const std::string &p);

// /proc/<pid>/{maps,smaps} and /proc/<pid>/map_files/<start>-<end>: the
// files in which the kernel shows a process's mappings. The shim presents
// its device mappings there as the kernel shows a real GPU's (see
// proc_maps.cpp).
struct ProcPath {
	enum Kind { None, Maps, Smaps, MapFile } kind = None;
	pid_t pid = 0;
	uint64_t start = 0, end = 0;	// MapFile
};

ProcPath proc_path(const std::string &p);
std::optional<std::string> redirect(const char *path);
// open(2) as the program's open() is interposed (devices, /proc, /sys
// writes, redirection).
int open_path(const char *path, int flags, mode_t mode);
std::optional<std::string> logical_at(int dirfd, const char *path);
bool root_has(const std::string &p);
bool is_unreadable(const char *path);
// In a container (README.md, "In a container"): the calling process is in
// a mount namespace other than the launcher's. Asked per call: a task CRIU
// restores changes namespace while it runs.
bool container_view();
// The emulated device node `p` (a device path) exists for the caller: in
// the root, and in a container also in the container's own /dev (a
// character device of the emulated numbers, as a runtime's --device makes).
bool device_present(const std::string &p);

// --- sysfs_write.cpp: the emulated /sys opened for writing -------------------

// Opening with these flags may change a file (write access, O_CREAT, O_TRUNC).
bool write_intent(int flags);
// `path` (absolute) opened for writing under a redirected /sys path, with
// sysfs's rules, beneath the root: the fd or -1 (errno). nullopt when
// `path` is no such path or `flags` write nothing (the caller opens it).
std::optional<int> open_sysfs_write(const char *path, int flags, mode_t mode);
// The absolute path a relative `path` names through `dirfd` (or the
// working directory, AT_FDCWD) when that is a redirected /sys path.
std::optional<std::string> sys_path_at(int dirfd, const char *path);
// The path of directory fd `dirfd` (AT_FDCWD: the working directory), as
// the kernel names it; nullopt when it has none.
std::optional<std::string> directory_of(int dirfd);
// openat2(root, rel) resolved beneath `root` (no "..", no link out of it).
int openat2_beneath(int root, const std::string &rel, int flags, mode_t mode);
// `p` with its "." and ".." resolved lexically (normalize keeps "..").
std::string collapse(const std::string &p);
// kernfs's store: a write(2) (pwrite, writev) to an emulated sysfs attribute
// opened for writing is its whole new value (offset and O_APPEND ignored,
// nothing of the old value left), at most a page (E2BIG beyond); the file
// then reads back the value with a newline ending it, as a show() prints
// it. nullopt when `fd` is no such attribute (the caller writes it).
std::optional<ssize_t> sysfs_store(int fd, const void *buf, size_t len);
// An fd that closes itself (the real close).
struct Closer {
	int fd;
	explicit Closer(int f) : fd(f) {}
	~Closer();
	void reset(int nfd);	// closes the one held, holds `nfd`
	Closer(const Closer &) = delete;
	Closer &operator=(const Closer &) = delete;
};

// --- config.cpp: fd bitmaps -------------------------------------------------

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

// fds of this process's daemon connections. When the program closes one
// (close, close_range), its bit goes and the owning thread reconnects
// instead of writing requests into whatever file gets that number next.
extern FdBits g_conn_fds;

void mark_unreadable(int fd, bool on);
bool fd_unreadable(int fd);
// Whether an fd is an emulated sysfs attribute open for writing
// (sysfs_store): known once it was opened here or asked about, forgotten
// at close. `attr` alone is a hint: sysfs_store checks the file.
struct AttrFd {
	bool known, attr;
};
AttrFd attr_fd(int fd);
void mark_attr_fd(int fd, bool attr);
void forget_fd(int fd);

// --- daemon.cpp: the daemon connection --------------------------------------

struct Response {
	wire::Reply rp{};
	std::vector<wire::FdEntry> entries;
	std::vector<int> fds;
	std::string payload;
};

int call(wire::Request rq, std::string_view payload, Response *out);
// CLOCK_MONOTONIC in ns: wire::Request::made_ns.
uint64_t now_ns();
int64_t deliver(Response &r);

// --- stat.cpp: emulated files -----------------------------------------------

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

bool key_of(const struct stat &st, Key *k);
bool fd_key(int fd, Key *k, struct stat *out = nullptr);
std::optional<Info> describe(const Key &k);

// --- proc_maps.cpp ----------------------------------------------------------

std::optional<int> open_proc(const ProcPath &pp, int flags);
std::optional<std::string> map_file_link(const std::string &p);

} // namespace kfdemu::shim
