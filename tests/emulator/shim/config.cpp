// SPDX-License-Identifier: GPL-2.0-only
//
// libkfdemu_shim.so: the configuration (read once from the private root)
// and the fd bitmaps. See shim.h.
#include "shim.h"

#include "../transport/sysfs.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <string>

namespace kfdemu::shim {

// ---------------------------------------------------------------------------
// Configuration (read once).
// ---------------------------------------------------------------------------

namespace {

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
	if (auto ns = read_lines(c->root + "/" + kHostMntnsFile); !ns.empty())
		c->host_mntns = ino_t(std::strtoull(ns[0].c_str(), nullptr, 10));
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

} // namespace


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
// fd bitmaps.
// ---------------------------------------------------------------------------

namespace {
// fds whose read() fails with EPERM (a device-cgroup-denied sysfs file).
FdBits g_unreadable;
// fds classified for sysfs_store, and those of them that are attributes.
FdBits g_attr_known, g_attr;
} // namespace

FdBits g_conn_fds;

void mark_unreadable(int fd, bool on)
{
	g_unreadable.set(fd, on);
}

bool fd_unreadable(int fd)
{
	return g_unreadable.test(fd);
}

AttrFd attr_fd(int fd)
{
	return AttrFd{g_attr_known.test(fd), g_attr.test(fd)};
}

void mark_attr_fd(int fd, bool attr)
{
	g_attr.set(fd, attr);
	g_attr_known.set(fd, true);
}

// The program closed `fd` (or is about to): forget what we knew of it.
void forget_fd(int fd)
{
	g_unreadable.set(fd, false);
	g_attr_known.set(fd, false);
	g_attr.set(fd, false);
	g_conn_fds.set(fd, false);
}

} // namespace kfdemu::shim
