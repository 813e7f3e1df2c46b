// SPDX-License-Identifier: GPL-2.0-only
//
// What a dumper (CRIU, with the shim preloaded) sees of a process's device
// mappings and of the shim itself:
//  - /proc/<pid>/maps and smaps show a render-node BO mapping as the kernel
//    shows a real GPU's: the device path, the GEM mmap offset (the kernel
//    only has a memfd at offset 0), dev 00:05 and the device node's inode;
//    a kernel VMA that spans two such mappings (adjacent mappings of one
//    memfd merge) is shown as two lines; other lines are untouched;
//  - /proc/<pid>/map_files/<range> opens as the device (fstat: 226:<m>),
//    readlink names it, and fstatat(<root dir fd>, "./dev/dri/renderD<m>")
//    agrees on dev/inode (CRIU's check that the path still names the file);
//  - KFDEMU_CONNECT=per-call leaves no daemon connection in the process.
//
// Usage (under kfd-emu): test_procmaps
#include "check.h"

#include <amdgpu_drm.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xf86drm.h>

#include <cinttypes>
#include <dirent.h>
#include <vector>

using namespace kfdemu;
using namespace kfdemu::test;

namespace {

struct Line {
	uint64_t start = 0, end = 0, off = 0, ino = 0;
	unsigned maj = 0, min = 0;
	std::string path;
};

// The whole file through open/read (not stdio); "" when it cannot be opened.
std::string read_raw(const std::string &path)
{
	std::string s;
	int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return s;
	char buf[4096];
	ssize_t n;
	while ((n = ::read(fd, buf, sizeof buf)) > 0)
		s.append(buf, size_t(n));
	::close(fd);
	return s;
}

// The maps/smaps header lines overlapping [lo, hi).
std::vector<Line> lines_in(const std::string &text, uint64_t lo, uint64_t hi)
{
	std::vector<Line> out;
	size_t i = 0;
	while (i < text.size()) {
		size_t eol = text.find('\n', i);
		if (eol == std::string::npos)
			eol = text.size();
		const std::string l = text.substr(i, eol - i);
		i = eol + 1;
		Line x;
		unsigned long long s, e, o, ino;
		char perms[8];
		int at = 0;
		if (std::sscanf(l.c_str(), "%llx-%llx %7s %llx %x:%x %llu %n", &s, &e, perms, &o, &x.maj, &x.min,
				&ino, &at) < 7)
			continue;
		if (e <= lo || s >= hi)
			continue;
		x.start = s;
		x.end = e;
		x.off = o;
		x.ino = ino;
		if (at > 0)
			x.path = l.substr(size_t(at));
		out.push_back(x);
	}
	return out;
}

int xioctl(int fd, unsigned long req, void *arg)
{
	return ::ioctl(fd, req, arg) == 0 ? 0 : -errno;
}

// A GTT BO of `size` on `rfd`: its GEM mmap offset, or 0.
uint64_t gem_bo(int rfd, uint64_t size)
{
	drm_amdgpu_gem_create cr{};
	cr.in.bo_size = size;
	cr.in.domains = AMDGPU_GEM_DOMAIN_GTT;
	if (xioctl(rfd, DRM_IOCTL_AMDGPU_GEM_CREATE, &cr))
		return 0;
	drm_amdgpu_gem_mmap gm{};
	gm.in.handle = cr.out.handle;
	return xioctl(rfd, DRM_IOCTL_AMDGPU_GEM_MMAP, &gm) ? 0 : gm.out.addr_ptr;
}

void test_maps(const std::string &node)
{
	const int rfd = ::open(node.c_str(), O_RDWR | O_CLOEXEC);
	if (!CHECK(rfd >= 0))
		return;
	struct stat nst {};
	CHECK(::stat(node.c_str(), &nst) == 0 && S_ISCHR(nst.st_mode));
	const uint64_t off1 = gem_bo(rfd, 3 * 4096), off2 = gem_bo(rfd, 2 * 4096);
	if (!CHECK(off1 && off2))
		return;
	// Two mappings side by side: the kernel may merge them into one VMA
	// of the model's memfd; the presented maps must not.
	auto *base = static_cast<char *>(::mmap(nullptr, 5 * 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
	CHECK(base != MAP_FAILED);
	void *a = ::mmap(base, 3 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, rfd, off_t(off1));
	void *b = ::mmap(base + 3 * 4096, 2 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, rfd, off_t(off2));
	CHECK(a == base && b == base + 3 * 4096);
	const uint64_t lo = uint64_t(uintptr_t(base)), hi = lo + 5 * 4096;

	for (const char *file : {"maps", "smaps"}) {
		for (const std::string &who : {std::string("self"), std::to_string(::getpid())}) {
			const auto ls = lines_in(read_raw("/proc/" + who + "/" + file), lo, hi);
			if (!CHECK_EQ(ls.size(), size_t(2)))
				continue;
			CHECK_EQ(ls[0].start, lo);
			CHECK_EQ(ls[0].end, lo + 3 * 4096);
			CHECK_EQ(ls[0].off, off1);
			CHECK_EQ(ls[1].start, lo + 3 * 4096);
			CHECK_EQ(ls[1].end, hi);
			CHECK_EQ(ls[1].off, off2);
			for (const auto &l : ls) {
				CHECK_EQ(l.path, node);
				CHECK_EQ(l.maj, major(nst.st_dev));
				CHECK_EQ(l.min, minor(nst.st_dev));
				CHECK_EQ(l.ino, uint64_t(nst.st_ino));
			}
		}
	}
	// smaps keeps each piece's other lines (CRIU reads VmFlags).
	const std::string sm = read_raw("/proc/self/smaps");
	const size_t at = sm.find(node);
	CHECK(at != std::string::npos && sm.find("VmFlags:", at) != std::string::npos);

	// map_files: opened as the device, named by its path, and the path
	// seen from a root directory fd is the same file.
	char range[64];
	std::snprintf(range, sizeof range, "%" PRIx64 "-%" PRIx64, lo + 3 * 4096, hi);
	const std::string mf = "/proc/" + std::to_string(::getpid()) + "/map_files/" + range;
	const int dir = ::open(("/proc/" + std::to_string(::getpid()) + "/map_files").c_str(),
			       O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	const int vf = ::openat(dir, range, O_RDONLY | O_CLOEXEC);
	struct stat vst {};
	if (CHECK(vf >= 0) && CHECK(::fstat(vf, &vst) == 0)) {
		CHECK(S_ISCHR(vst.st_mode));
		CHECK_EQ(vst.st_rdev, nst.st_rdev);
		CHECK_EQ(vst.st_dev, nst.st_dev);
		CHECK_EQ(vst.st_ino, nst.st_ino);
		char link[256] = {};
		CHECK(::readlink(("/proc/self/fd/" + std::to_string(vf)).c_str(), link, sizeof link - 1) > 0);
		CHECK_EQ(std::string(link), node);
	}
	char link[256] = {};
	CHECK(::readlink(mf.c_str(), link, sizeof link - 1) > 0);
	CHECK_EQ(std::string(link), node);
	const int root = ::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct stat pst {};
	CHECK(::fstatat(root, ("." + node).c_str(), &pst, 0) == 0);
	CHECK_EQ(pst.st_ino, vst.st_ino);
	CHECK_EQ(pst.st_dev, vst.st_dev);
	::close(root);
	if (vf >= 0)
		::close(vf);
	::close(dir);

	// Not a device mapping: the kernel's answer, untouched.
	const auto anon = lines_in(read_raw("/proc/self/maps"), uint64_t(uintptr_t(&test_maps)),
				   uint64_t(uintptr_t(&test_maps)) + 1);
	CHECK(anon.size() == 1 && anon[0].path.find("/dev/") == std::string::npos);

	::munmap(base, 5 * 4096);
	CHECK(lines_in(read_raw("/proc/self/maps"), lo, hi).empty());
	::close(rfd);
}

int count_sockets()
{
	int n = 0;
	DIR *d = ::opendir("/proc/self/fd");
	while (dirent *e = d ? ::readdir(d) : nullptr) {
		char link[64] = {};
		if (::readlink(("/proc/self/fd/" + std::string(e->d_name)).c_str(), link, sizeof link - 1) > 0 &&
		    std::string_view(link).starts_with("socket:"))
			n++;
	}
	if (d)
		::closedir(d);
	return n;
}

// Run in a child exec'd with KFDEMU_CONNECT=per-call.
int per_call_child(const std::string &node)
{
	const int before = count_sockets();
	const int rfd = ::open(node.c_str(), O_RDWR | O_CLOEXEC);
	const bool ok = rfd >= 0 && gem_bo(rfd, 4096) != 0 && count_sockets() == before;
	std::printf("per-call child: %d sockets before, %d after device calls\n", before, count_sockets());
	return ok ? 0 : 1;
}

// Without per-call mode the child's first device call leaves its thread's
// connection behind, and the child fails.
void test_per_call(const std::string &node)
{
	char self[4096] = {};
	CHECK(::readlink("/proc/self/exe", self, sizeof self - 1) > 0);
	std::fflush(stdout);
	const pid_t c = ::fork();
	if (c == 0) {
		::setenv("KFDEMU_CONNECT", "per-call", 1);
		::execl(self, self, "--per-call-child", node.c_str(), nullptr);
		::_exit(3);
	}
	int status = 0;
	::waitpid(c, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

} // namespace

int main(int argc, char **argv)
{
	if (argc == 3 && std::string_view(argv[1]) == "--per-call-child")
		return per_call_child(argv[2]);
	if (!std::getenv("KFDEMU_SOCKET")) {
		std::puts("NOT RUN: not under kfd-emu (KFDEMU_SOCKET unset)");
		return 77;
	}
	std::string node;
	DIR *d = ::opendir("/dev/dri");
	while (dirent *e = d ? ::readdir(d) : nullptr)
		if (std::string_view(e->d_name).starts_with("renderD") && node.empty())
			node = std::string("/dev/dri/") + e->d_name;
	if (d)
		::closedir(d);
	if (node.empty()) {
		std::puts("NOT RUN: the machine has no render node");
		return 77;
	}
	run("maps/smaps/map_files show device mappings as the kernel shows a GPU's", [&] { test_maps(node); });
	run("KFDEMU_CONNECT=per-call leaves no daemon connection", [&] { test_per_call(node); });
	return summary();
}
