// SPDX-License-Identifier: GPL-2.0-only
//
// The verifier criu-host runs inside each task restored from the
// dmabuf-tree process tree (tests/e2e/dmabuf_e2e.py):
//
//   criu-host restore ... --verifier libdmabuf_verify.so:verify_dmabuf
//                         --verifier-arg DIR
//
// The task's role is the one of fds 100 (exporter), 101 (importer), 102
// (holder) it holds (dmabuf_tree.cpp). Through the raw uapi, not the
// plugin's code:
//   exporter, importer: fd 100/101 is a render node file holding exactly
//     one GEM handle, the HANDLE of DIR/<role>, of SIZE bytes; the pattern
//     of seed 1 is readable at CPU (the mapping the restore moved);
//   holder: fd 102 is a dma-buf of SIZE bytes (fstat) whose mmap shows the
//     pattern of seed 1.
// Each writes the identity of its BO's dma-buf (st_dev, st_ino of
// PRIME_HANDLE_TO_FD of HANDLE, or of fd 102) to DIR/inode.<role>: the
// kernel gives a BO one dma-buf, so the three are equal only when the
// three tasks hold one BO. Returns 0 when everything holds; prints what
// does not.
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "drm_uapi.h"
#include "gpu_workload.h"
#include "testcommon/pattern.h"

namespace {

using namespace e2e_drm;

constexpr int kRoleFd[3] = {100, 101, 102};
const char *const kRoles[3] = {"exporter", "importer", "holder"};

bool pattern_ok(const void *p, uint64_t size, uint64_t seed)
{
	const int64_t bad = testcommon::check_pattern(p, size, seed);
	if (bad >= 0)
		std::printf("dmabuf_verify: byte %" PRId64 " differs from seed %" PRIu64 "'s pattern\n", bad, seed);
	return bad < 0;
}

bool write_inode(const std::string &dir, int role, int fd)
{
	struct stat st {};
	if (::fstat(fd, &st) != 0)
		return false;
	std::ofstream out(dir + "/inode." + kRoles[role]);
	out << st.st_dev << " " << st.st_ino << "\n";
	return static_cast<bool>(out);
}

int verify_bo_role(const std::string &dir, int role)
{
	std::ifstream in(dir + "/" + kRoles[role]);
	std::string line, key;
	uint32_t handle = 0;
	uint64_t cpu = 0, size = 0;
	while (std::getline(in, line)) {
		std::istringstream l(line);
		l >> key;
		if (key == "bo")
			l >> handle >> cpu >> size;
	}
	if (!handle || !cpu || !size) {
		std::printf("dmabuf_verify: %s: no bo line in %s/%s\n", kRoles[role], dir.c_str(), kRoles[role]);
		return 1;
	}
	const int fd = kRoleFd[role];
	std::vector<ListEntry> e(8);
	ListHandles lh{reinterpret_cast<uintptr_t>(e.data()), 8, 0};
	if (::ioctl(fd, kListHandles, &lh) != 0 || lh.num_entries != 1 || e[0].gem_handle != handle ||
	    e[0].size != size) {
		std::printf("dmabuf_verify: %s: fd %d should hold exactly GEM handle %u of %" PRIu64
			    " bytes (%u handles, first %u)\n",
			    kRoles[role], fd, handle, size, lh.num_entries, lh.num_entries ? e[0].gem_handle : 0);
		return 1;
	}
	if (!pattern_ok(reinterpret_cast<const void *>(cpu), size, 1))
		return 1;
	PrimeHandle ph{handle, kCloexec, -1};
	if (::ioctl(fd, kPrimeHandleToFd, &ph) != 0 || !write_inode(dir, role, ph.fd)) {
		std::printf("dmabuf_verify: %s: no dma-buf of handle %u\n", kRoles[role], handle);
		return 1;
	}
	::close(ph.fd);
	std::printf("dmabuf_verify: %s: handle %u, %" PRIu64 " bytes at 0x%" PRIx64 ": ok\n", kRoles[role], handle,
		    size, cpu);
	return 0;
}

int verify_holder(const std::string &dir)
{
	std::ifstream in(dir + "/holder");
	std::string key;
	int fd = -1;
	uint64_t size = 0;
	in >> key >> fd >> size;
	struct stat st {};
	if (key != "dmabuf" || ::fstat(kRoleFd[2], &st) != 0 || static_cast<uint64_t>(st.st_size) != size) {
		std::printf("dmabuf_verify: holder: fd %d is not a dma-buf of %" PRIu64 " bytes\n", kRoleFd[2], size);
		return 1;
	}
	void *p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, kRoleFd[2], 0);
	if (p == MAP_FAILED) {
		std::printf("dmabuf_verify: holder: mmap of the dma-buf failed\n");
		return 1;
	}
	const bool ok = pattern_ok(p, size, 1);
	::munmap(p, size);
	if (!ok || !write_inode(dir, 2, kRoleFd[2]))
		return 1;
	std::printf("dmabuf_verify: holder: dma-buf of %" PRIu64 " bytes: ok\n", size);
	return 0;
}

} // namespace

extern "C" __attribute__((visibility("default"))) int verify_dmabuf(const char *dir)
{
	for (int role = 0; role < 3; role++)
		if (::fcntl(kRoleFd[role], F_GETFD) != -1)
			return role == 2 ? verify_holder(dir) : verify_bo_role(dir, role);
	std::printf("dmabuf_verify: the task holds none of fds 100, 101, 102\n");
	return 1;
}
