// SPDX-License-Identifier: GPL-2.0-only
//
// The transport on its own: what a program under kfd-emu sees of the
// machine (sysfs topology equal to the profile, device nodes, DRM/PCI
// sysfs without aliasing) and of its device fds (identity by backing file
// across dup, fork, SCM_RIGHTS and pidfd_getfd; release and process-exit
// notifications; the cgroup-style unreadable sysfs file; the adapter's
// settling of a connection with a blocked call; ioctls served in the order
// they were made; a call a process makes after CRIU paused it served).
//
// Usage (under kfd-emu, with the same machine arguments):
//   test_transport --machine NAME [--gpu-ids ..] [--minors ..]
//                  [--expect-unreadable PATH]
#include "check.h"
#include "../model/abi.h"

#include "../transport/sysfs.h"

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <set>
#include <thread>
#include <vector>

using namespace kfdemu;
using namespace kfdemu::test;

namespace {

const std::string kTopo = "/sys/class/kfd/kfd/topology/nodes/";


std::string link_of(const std::string &path)
{
	char buf[4096];
	ssize_t n = ::readlink(path.c_str(), buf, sizeof buf);
	return n < 0 ? std::string() : std::string(buf, size_t(n));
}

std::string fd_link(pid_t pid, int fd)
{
	return link_of("/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd));
}

bool is_chr(int fd, unsigned maj, unsigned min)
{
	struct stat st;
	return ::fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) && major(st.st_rdev) == maj &&
	       minor(st.st_rdev) == min;
}

// Waits (up to 2 s) for a transport counter to reach `want`.
long long wait_counter(const char *key, long long want)
{
	long long v = -1;
	for (int i = 0; i < 200; i++) {
		v = json_number(introspect("transport"), key);
		if (v >= want)
			break;
		std::this_thread::sleep_for(std::chrono::milliseconds(10));
	}
	return v;
}

void test_topology(const MachineDesc &m)
{
	CHECK_EQ(list_dir(kTopo).size(), m.nodes.size());
	CHECK_EQ(slurp("/sys/devices/virtual/kfd/kfd/topology/generation_id"), std::string("1\n"));
	for (size_t i = 0; i < m.nodes.size(); i++) {
		const NodeDesc &n = m.nodes[i];
		const std::string nd = kTopo + std::to_string(i);
		CHECK_EQ(slurp(nd + "/gpu_id"), std::to_string(n.gpu_id) + "\n");
		CHECK_EQ(slurp(nd + "/name"), n.name + "\n");
		CHECK_EQ(slurp(nd + "/properties"), properties_text(n));
		CHECK_EQ(list_dir(nd + "/mem_banks").size(), n.mem_banks.size());
		CHECK_EQ(list_dir(nd + "/caches").size(), n.caches.size());
		CHECK_EQ(list_dir(nd + "/io_links").size(), n.io_links.size());
		CHECK_EQ(prop(n, "mem_banks_count"), n.mem_banks.size());
		CHECK_EQ(prop(n, "io_links_count"), n.io_links.size());
		CHECK_EQ(prop(n, "caches_count"), n.caches.size());
		struct stat st;
		CHECK(::stat(nd.c_str(), &st) == 0 && S_ISDIR(st.st_mode));
		for (size_t l = 0; l < n.io_links.size(); l++) {
			std::string t = slurp(nd + "/io_links/" + std::to_string(l) + "/properties");
			CHECK(t.find("type " + std::to_string(n.io_links[l].type) + "\n") == 0);
			CHECK(t.find("\nnode_to " + std::to_string(n.io_links[l].node_to) + "\n") != std::string::npos);
		}
		if (n.is_gpu) {
			std::string b = slurp(nd + "/mem_banks/0/properties");
			CHECK(b.find("heap_type 1\n") == 0 || b.find("heap_type 2\n") == 0);
			CHECK(b.find("size_in_bytes " + std::to_string(n.mem_banks[0].size_in_bytes) + "\n") !=
			      std::string::npos);
		}
		{
			int fd = ::open((nd + "/properties").c_str(), O_RDONLY);
			CHECK_EQ(fd_link(::getpid(), fd), "/sys/devices/virtual/kfd/kfd/topology/nodes/" +
								  std::to_string(i) + "/properties");
			::close(fd);
		}
		// Every properties line is "<key> <unsigned decimal>".
		std::string p = slurp(nd + "/properties");
		size_t pos = 0;
		while (pos < p.size()) {
			size_t e = p.find('\n', pos);
			if (e == std::string::npos) {
				CHECK(!"properties ends with a newline");
				break;
			}
			std::string line = p.substr(pos, e - pos);
			size_t sp = line.find(' ');
			CHECK(sp != std::string::npos && sp > 0 &&
			      line.find_first_not_of("0123456789", sp + 1) == std::string::npos);
			pos = e + 1;
		}
	}
}

void test_device_nodes(const MachineDesc &m)
{
	struct stat st;
	CHECK(::stat("/dev/kfd", &st) == 0 && S_ISCHR(st.st_mode) && major(st.st_rdev) == kKfdMajor &&
	      minor(st.st_rdev) == 0);
	CHECK(::access("/dev/kfd", R_OK | W_OK) == 0);
	CHECK_EQ(link_of("/sys/class/kfd/kfd").find("devices/virtual/kfd/kfd") != std::string::npos, true);
	std::set<std::string> cards;
	const auto dri = list_dir("/dev/dri");
	for (const NodeDesc *g : gpu_nodes(m)) {
		const std::string rn = "renderD" + std::to_string(g->drm_render_minor);
		CHECK(dri.count(rn));
		CHECK(::stat(("/dev/dri/" + rn).c_str(), &st) == 0 && S_ISCHR(st.st_mode) &&
		      major(st.st_rdev) == kDrmMajor && minor(st.st_rdev) == g->drm_render_minor);
		const std::string sys = "/sys/dev/char/226:" + std::to_string(g->drm_render_minor) + "/device";
		CHECK(::stat((sys + "/drm").c_str(), &st) == 0 && S_ISDIR(st.st_mode));
		auto drm = list_dir(sys + "/drm");
		CHECK(drm.count(rn));
		CHECK(drm.count("card" + std::to_string(g->card_index)));
		CHECK_EQ(drm.size(), size_t(2));
		for (const auto &e : drm)
			if (e.starts_with("card"))
				cards.insert(e);
		std::string sub = link_of(sys + "/subsystem");
		CHECK(sub.size() >= 3 && sub.substr(sub.rfind('/') + 1) == "pci");
		CHECK(slurp(sys + "/uevent").find("PCI_SLOT_NAME=" + g->pci_slot + "\n") != std::string::npos);
		CHECK(slurp(sys + "/uevent").find("DRIVER=amdgpu\n") != std::string::npos);
		char vendor[16] = {};
		std::snprintf(vendor, sizeof vendor, "0x%04x\n", g->pci_device_id);
		CHECK_EQ(slurp(sys + "/device"), std::string(vendor));
		char *rp = ::realpath(sys.c_str(), nullptr);
		CHECK(rp && std::string(rp) == "/sys/devices/pci0000:00/" + g->pci_slot);
		std::free(rp);
	}
	CHECK_EQ(cards.size(), gpu_nodes(m).size());	// no two GPUs share a card
}

void test_open_identity(const MachineDesc &m)
{
	int kfd = ::open("/dev/kfd", O_RDWR | O_CLOEXEC);
	CHECK(kfd >= 0);
	CHECK(is_chr(kfd, kKfdMajor, 0));
	CHECK_EQ(fd_link(::getpid(), kfd), std::string("/dev/kfd"));
	CHECK_EQ(link_of("/proc/self/fd/" + std::to_string(kfd)), std::string("/dev/kfd"));
	CHECK(::fcntl(kfd, F_GETFD) & FD_CLOEXEC);
	CHECK_EQ(::fcntl(kfd, F_GETFL) & O_ACCMODE, O_RDWR);
	{
		int ro = ::open("/dev/kfd", O_RDONLY);	// as the plugin opens it
		CHECK(ro >= 0 && is_chr(ro, kKfdMajor, 0));
		CHECK_EQ(::fcntl(ro, F_GETFL) & O_ACCMODE, O_RDONLY);
		::close(ro);
	}
	int dupfd = ::fcntl(kfd, F_DUPFD_CLOEXEC, 100);
	CHECK(dupfd >= 100 && is_chr(dupfd, kKfdMajor, 0));
	struct stat a, b;
	CHECK(::stat(("/proc/self/fd/" + std::to_string(kfd)).c_str(), &a) == 0 && S_ISCHR(a.st_mode));
	CHECK(::fstat(dupfd, &b) == 0 && a.st_rdev == b.st_rdev);
	::close(dupfd);

	for (const NodeDesc *g : gpu_nodes(m)) {
		const std::string path = "/dev/dri/renderD" + std::to_string(g->drm_render_minor);
		int r = ::open(path.c_str(), O_RDWR);
		CHECK(r >= 0);
		CHECK(is_chr(r, kDrmMajor, g->drm_render_minor));
		CHECK_EQ(fd_link(::getpid(), r), path);
		CHECK(!(::fcntl(r, F_GETFD) & FD_CLOEXEC));
		int d2 = ::dup(r);
		CHECK(is_chr(d2, kDrmMajor, g->drm_render_minor));
		::close(d2);
		::close(r);
	}
	errno = 0;
	CHECK(::open("/dev/dri/renderD191", O_RDWR) < 0 && errno == ENOENT);

	// Relative to a directory fd of /dev/dri or of a topology node.
	int dri = ::open("/dev/dri", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	CHECK(dri >= 0);
	for (const NodeDesc *g : gpu_nodes(m)) {
		const std::string rn = "renderD" + std::to_string(g->drm_render_minor);
		struct stat st;
		CHECK(::fstatat(dri, rn.c_str(), &st, 0) == 0 && S_ISCHR(st.st_mode) &&
		      minor(st.st_rdev) == g->drm_render_minor);
		int r = ::openat(dri, rn.c_str(), O_RDWR | O_CLOEXEC);
		CHECK(is_chr(r, kDrmMajor, g->drm_render_minor));
		::close(r);
		CHECK(::faccessat(dri, rn.c_str(), R_OK, 0) == 0);
	}
	::close(dri);
	int node = ::open((kTopo + "1").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int gid = ::openat(node, "gpu_id", O_RDONLY | O_CLOEXEC);
	char idbuf[16] = {};
	CHECK(gid >= 0 && ::read(gid, idbuf, sizeof idbuf - 1) > 0);
	CHECK_EQ(std::string(idbuf), std::to_string(m.nodes.at(1).gpu_id) + "\n");
	::close(gid);
	::close(node);

	// fork: the child's inherited fd is still the device.
	pid_t c = ::fork();
	if (c == 0)
		::_exit(is_chr(kfd, kKfdMajor, 0) && fd_link(::getpid(), kfd) == "/dev/kfd" ? 0 : 1);
	int status = 0;
	::waitpid(c, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);

	// SCM_RIGHTS: the receiver sees the device too.
	int sv[2];
	CHECK(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	c = ::fork();
	if (c == 0) {
		::close(sv[0]);
		int got[1];
		unsigned n = 0;
		char byte;
		if (wire::recv_all(sv[1], &byte, 1, got, &n, 1) || n != 1)
			::_exit(2);
		::_exit(is_chr(got[0], kKfdMajor, 0) ? 0 : 1);
	}
	::close(sv[1]);
	char byte = 'x';
	CHECK_EQ(wire::send_all(sv[0], &byte, 1, &kfd, 1), 0);
	::waitpid(c, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	::close(sv[0]);

	// pidfd_getfd: a child's device fd taken by the parent.
	int pipefd[2];
	CHECK(::pipe2(pipefd, O_CLOEXEC) == 0);
	c = ::fork();
	if (c == 0) {
		int fd = ::open("/dev/kfd", O_RDWR);
		if (::write(pipefd[1], &fd, sizeof fd) != sizeof fd)
			::_exit(3);
		::pause();
		::_exit(0);
	}
	int child_fd = -1;
	CHECK(::read(pipefd[0], &child_fd, sizeof child_fd) == sizeof child_fd);
	CHECK_EQ(fd_link(c, child_fd), std::string("/dev/kfd"));
	int pidfd = int(::syscall(SYS_pidfd_open, c, 0));
	int taken = int(::syscall(SYS_pidfd_getfd, pidfd, child_fd, 0));
	CHECK(taken >= 0 && is_chr(taken, kKfdMajor, 0));
	::close(taken);
	::close(pidfd);
	::kill(c, SIGKILL);
	::waitpid(c, &status, 0);
	::close(pipefd[0]);
	::close(pipefd[1]);
	::close(kfd);
}

// A task CRIU restores opens its device files while its stdio is not back
// yet (its parent still has to send it): the kernel hands out fds 0, 1
// and 2 then. Each open must still be the device, at exactly that number,
// with no other fd left behind.
void test_low_fds(const MachineDesc &m)
{
	using namespace kfdemu::abi;
	const NodeDesc *g = gpu_nodes(m).front();
	const std::string rn = "/dev/dri/renderD" + std::to_string(g->drm_render_minor);
	pid_t c = ::fork();
	if (c == 0) {
		for (int fd = 0; fd < 3; fd++)
			::close(fd);
		int bad = 0;
		const int k = ::open("/dev/kfd", O_RDWR | O_CLOEXEC);	// 0
		const int r1 = ::open(rn.c_str(), O_RDWR | O_CLOEXEC);	// 1
		if (k != 0 || !is_chr(k, kKfdMajor, 0))
			bad |= 1;
		if (r1 != 1 || !is_chr(r1, kDrmMajor, g->drm_render_minor))
			bad |= 2;
		if (::fcntl(2, F_GETFD) != -1 || errno != EBADF)
			bad |= 4;	// nothing else was opened
		const int r2 = ::openat(AT_FDCWD, rn.c_str(), O_RDWR | O_CLOEXEC);	// 2
		if (r2 != 2 || !is_chr(r2, kDrmMajor, g->drm_render_minor))
			bad |= 8;
		// The model answers their ioctls (a plain file would say ENOTTY).
		kfd::GetVersion v{};
		if (::ioctl(k, ioc(kIocRead, kfd::kType, kfd::GET_VERSION, sizeof v), &v) != 0 ||
		    v.major_version != 1)
			bad |= 16;
		for (int r : {r1, r2}) {
			drm::Version dv{};
			if (::ioctl(r, ioc(kIocRead | kIocWrite, drm::kType, drm::VERSION, sizeof dv), &dv) != 0 ||
			    dv.version_major != 3)
				bad |= 32;
		}
		::_exit(bad);
	}
	int status = 0;
	CHECK(::waitpid(c, &status, 0) == c);
	CHECK(WIFEXITED(status));
	CHECK_EQ(WEXITSTATUS(status), 0);
}

void test_release_and_exit()
{
	// Let the releases of the earlier cases' files (killed children) land.
	for (int i = 0; i < 200 && json_number(introspect("transport"), "open_files") != 0; i++)
		std::this_thread::sleep_for(std::chrono::milliseconds(10));
	CHECK_EQ(json_number(introspect("transport"), "open_files"), 0);
	const long long rel0 = json_number(introspect("transport"), "releases");
	const long long exit0 = json_number(introspect("transport"), "process_exits");
	CHECK(rel0 >= 0 && exit0 >= 0);
	int fd = ::open("/dev/kfd", O_RDWR);
	int d = ::dup(fd);
	CHECK(fd >= 0 && d >= 0);
	::close(fd);
	std::this_thread::sleep_for(std::chrono::milliseconds(100));
	CHECK_EQ(json_number(introspect("transport"), "releases"), rel0);	// one dup still open
	::close(d);
	CHECK_EQ(wait_counter("releases", rel0 + 1), rel0 + 1);

	pid_t c = ::fork();
	if (c == 0) {
		int k = ::open("/dev/kfd", O_RDWR);
		::_exit(k >= 0 ? 0 : 1);
	}
	int status = 0;
	::waitpid(c, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(wait_counter("process_exits", exit0 + 1) >= exit0 + 1);
	CHECK(wait_counter("releases", rel0 + 2) >= rel0 + 2);	// the child's open
}

// Per-thread connections under load, after fork, and after the program
// closed every fd above stdio (as daemons and CRIU's restorer do).
void test_threads_fork_closerange()
{
	int kfd = ::open("/dev/kfd", O_RDWR | O_CLOEXEC);
	CHECK(kfd >= 0);
	std::atomic<int> bad{0};
	std::vector<std::thread> threads;
	for (int t = 0; t < 8; t++)
		threads.emplace_back([&] {
			for (int i = 0; i < 100; i++) {
				struct stat st;
				// fstat answers come from the daemon's describe
				// (cached per process after the first).
				if (!is_chr(kfd, kKfdMajor, 0))
					bad++;
				int d = ::dup(kfd);
				if (fd_link(::getpid(), d) != "/dev/kfd")
					bad++;
				::close(d);
				if (::fstat(kfd, &st))
					bad++;
			}
			// A fresh request kind per thread: the daemon sees it.
			if (json_number(introspect("transport"), "connections") < 1)
				bad++;
		});
	for (auto &t : threads)
		t.join();
	CHECK_EQ(bad.load(), 0);

	pid_t c = ::fork();
	if (c == 0) {
		std::thread th([&] { bad += !is_chr(kfd, kKfdMajor, 0); });
		th.join();
		int k2 = ::open("/dev/kfd", O_RDWR);
		::_exit(bad == 0 && k2 >= 0 && is_chr(k2, kKfdMajor, 0) ? 0 : 1);
	}
	int status = 0;
	::waitpid(c, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);

	c = ::fork();
	if (c == 0) {
		// Make sure this thread has a connection, then close everything.
		bool ok = is_chr(kfd, kKfdMajor, 0);
		::close_range(3, ~0u, 0);
		int k = ::open("/dev/kfd", O_RDWR);	// reconnects
		ok = ok && k >= 0 && is_chr(k, kKfdMajor, 0);
		int fill[8];
		for (int &f : fill)	// take the numbers the old socket had
			f = ::open("/dev/null", O_RDONLY);
		ok = ok && is_chr(k, kKfdMajor, 0) && fd_link(::getpid(), k) == "/dev/kfd";
		for (int f : fill)
			::close(f);
		::_exit(ok ? 0 : 1);
	}
	::waitpid(c, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);

	c = ::fork();
	if (c == 0) {
		// dup2 a file over the daemon connection (a restorer putting
		// fds back at their numbers): the next call must not use it.
		bool ok = is_chr(kfd, kKfdMajor, 0);
		int devnull = ::open("/dev/null", O_RDWR);
		for (const auto &name : list_dir("/proc/self/fd")) {
			int fd = std::atoi(name.c_str());
			if (fd > 2 && fd != devnull && fd_link(::getpid(), fd).starts_with("socket:"))
				::dup2(devnull, fd);
		}
		int k = ::open("/dev/kfd", O_RDWR);
		ok = ok && k >= 0 && is_chr(k, kKfdMajor, 0);
		::_exit(ok ? 0 : 1);
	}
	::waitpid(c, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	::close(kfd);
}

// exec: the new program image's first call tells the daemon, which drops
// the old image's KFD context (the kernel's goes with the replaced mm).
void test_exec()
{
	const long long before = json_number(introspect("transport"), "execs");
	CHECK(before >= 0);
	std::fflush(stdout);
	pid_t c = ::fork();
	if (c == 0) {
		int k = ::open("/dev/kfd", O_RDWR);	// registers this image
		char self[4096] = {};
		if (k < 0 || ::readlink("/proc/self/exe", self, sizeof self - 1) <= 0)
			::_exit(2);
		const std::string want = std::to_string(before + 1);
		::execl(self, self, "--exec-stage2", want.c_str(), nullptr);
		::_exit(3);
	}
	int status = 0;
	::waitpid(c, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

void test_no_gpu()
{
	struct stat st;
	errno = 0;
	CHECK(::stat("/dev/kfd", &st) < 0 && errno == ENOENT);
	errno = 0;
	CHECK(::open("/dev/kfd", O_RDWR) < 0 && errno == ENOENT);
	CHECK(::opendir("/sys/class/kfd/kfd/topology/nodes") == nullptr);
	for (const auto &e : list_dir("/dev/dri"))
		CHECK(!e.starts_with("renderD") && !e.starts_with("card"));
	CHECK(::access("/dev/dri/renderD128", F_OK) < 0);
}

void test_unreadable(const std::string &path, const MachineDesc &m)
{
	int fd = ::open(path.c_str(), O_RDONLY);
	CHECK(fd >= 0);
	char buf[64];
	errno = 0;
	CHECK(::read(fd, buf, sizeof buf) < 0 && errno == EPERM);
	::close(fd);
	FILE *f = std::fopen(path.c_str(), "r");
	CHECK(f != nullptr);
	if (f) {
		errno = 0;
		CHECK(std::fgets(buf, sizeof buf, f) == nullptr && errno == EPERM);
		std::fclose(f);
	}
	// The directory and the other nodes are untouched.
	std::string dir = path.substr(0, path.rfind('/'));
	struct stat st;
	CHECK(::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode));
	CHECK_EQ(slurp(kTopo + "0/properties"), properties_text(m.nodes.at(0)));
}

} // namespace

// The client sockets of this process's daemon connections (their inodes,
// a raw fstat past the shim's own).
std::vector<uint32_t> daemon_connections()
{
	const char *path = std::getenv("KFDEMU_SOCKET");
	std::vector<uint32_t> out;
	for (const std::string &name : list_dir("/proc/self/fd")) {
		const int fd = std::atoi(name.c_str());
		sockaddr_un peer{};
		socklen_t len = sizeof peer;
		struct stat st {};
		if (path && ::getpeername(fd, reinterpret_cast<sockaddr *>(&peer), &len) == 0 &&
		    peer.sun_family == AF_UNIX && std::string_view(peer.sun_path) == path &&
		    ::syscall(SYS_fstat, fd, &st) == 0)
			out.push_back(uint32_t(st.st_ino));
	}
	return out;
}

// A connection of our own to the daemon (as the shim's, without the shim).
int connect_raw()
{
	int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	sockaddr_un sa{};
	sa.sun_family = AF_UNIX;
	std::snprintf(sa.sun_path, sizeof sa.sun_path, "%s", std::getenv("KFDEMU_SOCKET"));
	if (s >= 0 && ::connect(s, reinterpret_cast<sockaddr *>(&sa), sizeof sa)) {
		::close(s);
		s = -1;
	}
	return s;
}

int64_t settle(uint32_t ino, uint64_t timeout_ms)
{
	wire::Request rq{};
	rq.op = wire::Op::Settle;
	rq.tid = ::gettid();
	rq.a[0] = ino;
	rq.a[1] = timeout_ms;
	int64_t r = INT64_MIN;
	const int s = connect_raw();
	wire::Reply rp{};
	if (s >= 0 && !wire::send_all(s, &rq, sizeof rq) && !wire::recv_all(s, &rp, sizeof rp))
		r = rp.result;
	if (s >= 0)
		::close(s);
	return r;
}

// A /dev/kfd fd of this process with one auto-reset signal event (its id
// in `ce`), for the tests of blocking waits below.
int open_kfd_with_event(abi::kfd::CreateEvent *ce)
{
	using namespace abi;
	int kfd = ::open("/dev/kfd", O_RDWR | O_CLOEXEC);
	CHECK(kfd >= 0);
	*ce = {};
	ce->event_type = kfd::EVENT_SIGNAL;
	ce->auto_reset = 1;
	CHECK_EQ(::ioctl(kfd, ioc(kIocRead | kIocWrite, kfd::kType, kfd::CREATE_EVENT, sizeof *ce), ce), 0);
	return kfd;
}

// What the CRIU adapter does before it looks at a dumped connection
// (wire::Op::Settle): a thread blocked in an infinite WAIT_EVENTS has its
// wait ended (as timed out) and its reply written; an idle connection
// settles at once; an inode no connection has is -ENOENT.
void test_settle()
{
	using namespace abi;
	kfd::CreateEvent ce{};
	const int kfd = open_kfd_with_event(&ce);
	const auto before = daemon_connections();
	std::atomic<int> waited{-1};
	std::atomic<uint32_t> result{~0u};
	std::thread waiter([&] {
		kfd::EventData ev{};
		ev.event_id = ce.event_id;
		kfd::WaitEvents we{};
		we.events_ptr = reinterpret_cast<uint64_t>(&ev);
		we.num_events = 1;
		we.timeout = 0xffffffffu;
		waited = ::ioctl(kfd, ioc(kIocRead | kIocWrite, kfd::kType, kfd::WAIT_EVENTS, sizeof we), &we);
		result = we.wait_result;
	});
	// The waiter's own connection: the one that was not there before.
	uint32_t mine = 0;
	for (int i = 0; i < 200 && !mine; i++) {
		for (uint32_t ino : daemon_connections())
			if (std::find(before.begin(), before.end(), ino) == before.end())
				mine = ino;
		if (!mine)
			std::this_thread::sleep_for(std::chrono::milliseconds(10));
	}
	CHECK(mine != 0);
	std::this_thread::sleep_for(std::chrono::milliseconds(100)); // let it block
	CHECK_EQ(waited.load(), -1);
	CHECK_EQ(settle(mine, 5000), 0);
	for (int i = 0; i < 200 && waited.load() == -1; i++)
		std::this_thread::sleep_for(std::chrono::milliseconds(10));
	if (waited.load() == -1) { // not ended: end it (the checks below fail)
		kfd::EventId id{ce.event_id, 0};
		::ioctl(kfd, ioc(kIocWrite, kfd::kType, kfd::SET_EVENT, sizeof id), &id);
	}
	waiter.join();
	CHECK_EQ(waited.load(), 0);
	CHECK_EQ(result.load(), kfd::WAIT_TIMEOUT);
	// The waiter's connection went with its thread; this thread's is idle.
	CHECK(!before.empty());
	for (uint32_t ino : before)
		CHECK_EQ(settle(ino, 5000), 0);
	CHECK_EQ(settle(1, 100), -ENOENT); // no such connection
	::close(kfd);
}

uint64_t monotonic_ns()
{
	timespec t{};
	::clock_gettime(CLOCK_MONOTONIC, &t);
	return uint64_t(t.tv_sec) * 1000000000u + uint64_t(t.tv_nsec);
}

// A process's ioctls go into the model in the order its threads made them,
// as a kernel's run in their threads (Daemon::await_turn): a WAIT_EVENTS (no
// timeout) made first, whose request the daemon has only part of for 300
// ms, goes in before another thread's SET_EVENT made during those 300 ms. So the wait
// finds the event not signaled (WAIT_TIMEOUT) and the set, finding no
// waiter, leaves it signaled for the next wait. Served as read, the set
// would go first and the wait would consume it (WAIT_COMPLETE).
void test_call_order()
{
	using namespace abi;
	kfd::CreateEvent ce{};
	const int kfd = open_kfd_with_event(&ce);
	const long long waits_before = json_number(introspect("transport"), "order_waits");
	struct stat st {};
	CHECK_EQ(::syscall(SYS_fstat, kfd, &st), 0); // the memfd: the daemon's key
	kfd::EventData ev{};
	ev.event_id = ce.event_id;
	kfd::WaitEvents we{};
	we.events_ptr = reinterpret_cast<uint64_t>(&ev);
	we.num_events = 1;
	we.timeout = 0;
	wire::Request rq{};
	rq.op = wire::Op::Ioctl;
	rq.tid = ::gettid();
	rq.dev = st.st_dev;
	rq.ino = st.st_ino;
	rq.a[0] = ioc(kIocRead | kIocWrite, kfd::kType, kfd::WAIT_EVENTS, sizeof we);
	rq.a[1] = reinterpret_cast<uint64_t>(&we);
	rq.made_ns = monotonic_ns();
	const int s = connect_raw();
	CHECK(s >= 0);
	const char *bytes = reinterpret_cast<const char *>(&rq);
	CHECK_EQ(wire::send_all(s, bytes, 8), 0);
	std::this_thread::sleep_for(std::chrono::milliseconds(50));
	std::atomic<int> set_result{1};
	std::atomic<bool> set_done{false};
	std::thread setter([&] {
		kfd::EventId id{ce.event_id, 0};
		set_result = ::ioctl(kfd, ioc(kIocWrite, kfd::kType, kfd::SET_EVENT, sizeof id), &id);
		set_done = true;
	});
	std::this_thread::sleep_for(std::chrono::milliseconds(300));
	const bool set_early = set_done.load();
	CHECK_EQ(wire::send_all(s, bytes + 8, sizeof rq - 8), 0);
	wire::Reply rp{};
	CHECK_EQ(wire::recv_all(s, &rp, sizeof rp), 0);
	setter.join();
	::close(s);
	CHECK(!set_early); // it waited for the wait made before it
	CHECK_EQ(rp.result, 0);
	CHECK_EQ(we.wait_result, kfd::WAIT_TIMEOUT);
	CHECK_EQ(set_result.load(), 0);
	we.wait_result = ~0u;
	CHECK_EQ(::ioctl(kfd, ioc(kIocRead | kIocWrite, kfd::kType, kfd::WAIT_EVENTS, sizeof we), &we), 0);
	CHECK_EQ(we.wait_result, kfd::WAIT_COMPLETE);
	CHECK(json_number(introspect("transport"), "order_waits") > waits_before);
	::close(kfd);
}

long long model_counter(const char *key)
{
	return std::max(0LL, json_number(introspect("counters"), key));
}

// The child of test_served_while_paused: opens /dev/kfd (its fd number to
// `ready`), waits for a byte on `go`, creates an event, writes the ioctl's
// result to `done` and ends after another byte on `go` (its KFD process
// goes with it).
[[noreturn]] void paused_child(int ready, int go, int done)
{
	using namespace abi;
	const int kfd = ::open("/dev/kfd", O_RDWR | O_CLOEXEC);
	char c = 0;
	if (::write(ready, &kfd, sizeof kfd) != sizeof kfd || ::read(go, &c, 1) != 1)
		_exit(1);
	kfd::CreateEvent ce{};
	ce.event_type = kfd::EVENT_SIGNAL;
	ce.auto_reset = 1;
	const int r = ::ioctl(kfd, ioc(kIocRead | kIocWrite, kfd::kType, kfd::CREATE_EVENT, sizeof ce), &ce);
	_exit(::write(done, &r, sizeof r) == sizeof r && ::read(go, &c, 1) == 1 ? 0 : 1);
}

// A call a process makes of itself after CRIU's PROCESS_INFO paused it is
// served, as the kernel serves the ioctl of a thread that runs (a process
// checkpointing itself does so): only a call made before the pause and
// reaching the model after it is sent back to be made again
// (-ERESTARTSYS, wire::kRestart; Caller::restarts_while_paused). The
// child's CREATE_EVENT, made while its tracer (this thread) holds it
// paused, returns at once with its event, nothing restarted. (A shim that
// made it again and again here hung every self-checkpoint, e.g.
// test_kfd_emulator's.)
void test_served_while_paused()
{
	using namespace abi;
	int ready[2], go[2], done[2];
	CHECK(::pipe2(ready, O_CLOEXEC) == 0 && ::pipe2(go, O_CLOEXEC) == 0 && ::pipe2(done, O_CLOEXEC) == 0);
	const pid_t child = ::fork();
	if (child == 0)
		paused_child(ready[1], go[0], done[1]);
	int child_kfd = -1;
	CHECK_EQ(::read(ready[0], &child_kfd, sizeof child_kfd), ssize_t(sizeof child_kfd));
	const int pidfd = int(::syscall(SYS_pidfd_open, child, 0));
	const int kfd = int(::syscall(SYS_pidfd_getfd, pidfd, child_kfd, 0));
	CHECK(kfd >= 0);
	CHECK_EQ(::ptrace(PTRACE_SEIZE, child, nullptr, nullptr), 0L);
	const unsigned long criu_op = ioc(kIocRead | kIocWrite, kfd::kType, kfd::CRIU_OP, sizeof(kfd::CriuArgs));
	kfd::CriuArgs a{};
	a.op = kfd::CRIU_PROCESS_INFO;
	CHECK_EQ(::ioctl(kfd, criu_op, &a), 0);
	const long long restarts = model_counter("restarted_while_paused");
	CHECK_EQ(::write(go[1], "g", 1), 1L);
	pollfd p{done[0], POLLIN, 0};
	CHECK_EQ(::poll(&p, 1, 10000), 1);
	int r = -1;
	CHECK_EQ(::read(done[0], &r, sizeof r), ssize_t(sizeof r));
	CHECK_EQ(r, 0);
	const std::string events = "events " + std::to_string(child);
	CHECK(introspect(events).find("\"id\":") != std::string::npos);
	CHECK_EQ(model_counter("restarted_while_paused"), restarts);
	a = {};
	a.op = kfd::CRIU_UNPAUSE;
	CHECK_EQ(::ioctl(kfd, criu_op, &a), 0);
	CHECK_EQ(::write(go[1], "x", 1), 1L);
	int status = 0;
	CHECK_EQ(::waitpid(child, &status, __WALL), child);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	for (int fd : {ready[0], ready[1], go[0], go[1], done[0], done[1], pidfd, kfd})
		::close(fd);
}

// An ioctl whose fd names another file by the time the request reaches the
// daemon than when the shim read the fd's key (fd_key): a thread CRIU froze
// between the two runs on after the restore with the dumped file's key,
// which the daemon no longer knows (the restored fd is another memfd). The
// kernel resolves the fd as the call enters, so the call goes to the fd's
// file now. Before the shim re-read the key it made the real ioctl on the
// memfd (ENOTTY): libhsakmt's hsaKmtFreeMemory failed so after a restore
// (rocm_realcriu_*_hsa_stream_* flake (b)). fstat_hook.cpp runs
// swap_file() inside the shim's fstat: the fd gets a new /dev/kfd and the
// old file is released before the request goes.
long long g_rel0 = 0;
bool g_swapped = false;
void swap_file(int fd)
{
	const int n = ::open("/dev/kfd", O_RDWR | O_CLOEXEC);
	g_swapped = n >= 0 && ::dup3(n, fd, O_CLOEXEC) == fd;
	if (n >= 0)
		::close(n);
	g_swapped = g_swapped && wait_counter("releases", g_rel0 + 1) >= g_rel0 + 1;
}

void test_rekey_after_fd_change()
{
	using namespace abi;
	using Arm = void (*)(int, void (*)(int));
	auto arm = reinterpret_cast<Arm>(::dlsym(RTLD_DEFAULT, "kfdemu_test_after_fstat"));
	CHECK(arm != nullptr);
	if (!arm)
		return;
	const int kfd = ::open("/dev/kfd", O_RDWR | O_CLOEXEC);
	CHECK(kfd >= 0);
	struct stat before {}, after {};
	CHECK_EQ(::syscall(SYS_fstat, kfd, &before), 0);
	const unsigned long get_version = ioc(kIocRead, kfd::kType, kfd::GET_VERSION, sizeof(kfd::GetVersion));
	kfd::GetVersion v{};
	CHECK_EQ(::ioctl(kfd, get_version, &v), 0);
	g_rel0 = json_number(introspect("transport"), "releases");
	arm(kfd, swap_file);
	v = {};
	const int r = ::ioctl(kfd, get_version, &v);
	const int err = errno;
	CHECK(g_swapped);
	CHECK_EQ(::syscall(SYS_fstat, kfd, &after), 0);
	CHECK(after.st_ino != before.st_ino);
	CHECK_EQ(r, 0);
	if (r)
		std::fprintf(stderr, "  ioctl after the fd changed: errno %d (%s)\n", err, std::strerror(err));
	CHECK_EQ(v.major_version, 1u);
	::close(kfd);
}

int main(int argc, char **argv)
{
	if (argc == 3 && std::string_view(argv[1]) == "--exec-stage2") {
		// The exec'd image: its first shim call reports the exec.
		int k = ::open("/dev/kfd", O_RDWR);
		const long long execs = json_number(introspect("transport"), "execs");
		return k >= 0 && execs == std::atoll(argv[2]) ? 0 : 1;
	}
	std::string unreadable, fstat_hook;
	for (int i = 1; i + 1 < argc; i++)
		if (std::string_view(argv[i]) == "--expect-unreadable")
			unreadable = argv[i + 1];
		else if (std::string_view(argv[i]) == "--fstat-hook")
			fstat_hook = argv[i + 1];
	if (!fstat_hook.empty()) {
		// The hook goes after the shim: the shim's real fstat is its.
		if (!::dlsym(RTLD_DEFAULT, "kfdemu_test_after_fstat")) {
			const char *pre = std::getenv("LD_PRELOAD");
			::setenv("LD_PRELOAD", ((pre ? std::string(pre) + " " : std::string()) + fstat_hook).c_str(), 1);
			::execv("/proc/self/exe", argv);
			std::perror("test_transport: re-exec with the fstat hook");
			return 127;
		}
		run("an ioctl whose fd changed file after the shim read its key goes to the new file",
		    test_rekey_after_fd_change);
		return summary();
	}
	const MachineDesc m = machine_from_args(argc, argv);

	if (gpu_nodes(m).empty()) {
		run("no GPU: no /dev/kfd, topology or render nodes", test_no_gpu);
		return summary();
	}
	if (!unreadable.empty()) {
		run("unreadable sysfs file fails read() with EPERM", [&] { test_unreadable(unreadable, m); });
		return summary();
	}
	run("topology equals the profile", [&] { test_topology(m); });
	run("device nodes and DRM/PCI sysfs", [&] { test_device_nodes(m); });
	run("fd identity: dup, fork, SCM_RIGHTS, pidfd_getfd", [&] { test_open_identity(m); });
	run("device opens at fds 0, 1, 2 (a restored task before its stdio)", [&] { test_low_fds(m); });
	run("release on last close, process exit", test_release_and_exit);
	run("threads, fork, close_range/dup2 over the daemon connection", test_threads_fork_closerange);
	run("exec drops the old image's KFD context", test_exec);
	run("settle: a blocked WAIT_EVENTS ends, its reply written", test_settle);
	run("a process's ioctls go into the model in the order they were made", test_call_order);
	run("a paused process's own call made after the pause is served", test_served_while_paused);
	return summary();
}
