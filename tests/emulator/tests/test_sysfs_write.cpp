// SPDX-License-Identifier: GPL-2.0-only
//
// Hermeticity: a program that writes an emulated GPU's PCI sysfs files
// (its `remove`, the bus's `rescan`, the driver's `unbind`), creates files
// there, or reaches them through "..", the host's /sys as a directory fd
// or as its working directory, gets the emulator's answers (sysfs_write.cpp)
// and changes nothing but what the emulated sysfs lets it write.
//
// Run it where the host's /sys is read-only (ro_sys.sh makes a read-only
// bind in a private mount namespace): a write that reached the host would
// fail with EROFS instead of the emulator's errno, and could not change
// it. The set of files in the emulator's root is compared before and after.
//
// Usage (under kfd-emu): test_sysfs_write --machine NAME
#include "check.h"

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>

#include <cerrno>

using namespace kfdemu;
using namespace kfdemu::test;

namespace {

// 0 when `path` opened with `flags` (relative to `dirfd`), -errno when not.
int try_open(const std::string &path, int flags, int dirfd = AT_FDCWD)
{
	const int fd = ::openat(dirfd, path.c_str(), flags | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	::close(fd);
	return 0;
}

// The same through stdio.
int try_fopen(const std::string &path, const char *mode)
{
	FILE *f = std::fopen(path.c_str(), mode);
	if (!f)
		return -errno;
	std::fclose(f);
	return 0;
}

// Every path under the root (the daemon's socket directory excluded).
std::set<std::string> g_tree;
std::set<std::string> tree(const std::string &root)
{
	g_tree.clear();
	// nftw runs natively: the root is a real directory of the host.
	::nftw(root.c_str(),
	       [](const char *p, const struct stat *, int, struct FTW *) {
		       if (!std::strstr(p, "/.kfdemu/") && !std::strstr(p, "/kfd/kfd/proc"))
			       g_tree.insert(p);
		       return 0;
	       },
	       32, FTW_PHYS);
	return g_tree;
}

void test_pci_actions(const NodeDesc &g)
{
	const std::string dev = "/sys/bus/pci/devices/" + g.pci_slot;
	CHECK_EQ(try_open(dev + "/remove", O_WRONLY), -EACCES);
	CHECK_EQ(try_open(dev + "/reset", O_WRONLY), -EACCES);
	CHECK_EQ(try_open("/sys/devices/pci0000:00/" + g.pci_slot + "/rescan", O_WRONLY), -EACCES);
	CHECK_EQ(try_open("/sys/class/drm/card" + std::to_string(g.card_index) + "/device/remove", O_WRONLY), -EACCES);
	CHECK_EQ(try_open("/sys/bus/pci/rescan", O_WRONLY), -EACCES);
	CHECK_EQ(try_fopen("/sys/bus/pci/rescan", "w"), -EACCES);
	CHECK_EQ(try_open("/sys/bus/pci/drivers/amdgpu/unbind", O_WRONLY), -EACCES);
	// The host's other PCI buses are not the emulated machine's.
	CHECK_EQ(try_open("/sys/class/pci_bus/0000:00/rescan", O_WRONLY), -ENOENT);
	// The files still read as the kernel's do: present, write-only.
	struct stat st;
	CHECK(::stat((dev + "/remove").c_str(), &st) == 0 && (st.st_mode & 0777) == 0200);
}

void test_attributes(const NodeDesc &g)
{
	const std::string dev = "/sys/devices/pci0000:00/" + g.pci_slot;
	CHECK_EQ(try_open(dev + "/vendor", O_WRONLY), -EACCES);
	CHECK_EQ(try_open(dev + "/config", O_RDWR), -EACCES);
	CHECK_EQ(try_fopen(dev + "/device", "r+"), -EACCES);
	CHECK_EQ(try_open(dev + "/new_file", O_WRONLY | O_CREAT), -EACCES);
	CHECK_EQ(try_fopen(dev + "/new_file", "a"), -EACCES);
	CHECK_EQ(try_open(dev + "/no_dir/new_file", O_WRONLY | O_CREAT), -ENOENT);
	CHECK_EQ(try_open(dev, O_WRONLY), -EISDIR);
	CHECK_EQ(slurp(dev + "/vendor"), "0x1002\n");
	// A settable attribute keeps what is written.
	const std::string level = dev + "/power_dpm_force_performance_level";
	FILE *f = std::fopen(level.c_str(), "w");
	CHECK(f != nullptr);
	if (f) {
		std::fputs("manual\n", f);
		std::fclose(f);
	}
	CHECK_EQ(slurp(level), "manual\n");
	CHECK_EQ(slurp("/sys/class/drm/card" + std::to_string(g.card_index) + "/device/power_dpm_force_performance_level"),
		 "manual\n");
}

void test_ways_around(const NodeDesc &g)
{
	// ".." out of the root: the path they name lexically, emulated too.
	CHECK_EQ(try_open("/sys/bus/pci/../../../../sys/bus/pci/rescan", O_WRONLY), -EACCES);
	CHECK_EQ(try_open("/sys/bus/pci/devices/" + g.pci_slot + "/../../../../../../sys/bus/pci/rescan", O_WRONLY),
		 -EACCES);
	// Through the host's /sys as a directory fd, and as the working directory.
	const int sys = ::open("/sys/bus", O_PATH | O_DIRECTORY | O_CLOEXEC);
	CHECK(sys >= 0);
	if (sys >= 0) {
		CHECK_EQ(try_open("pci/rescan", O_WRONLY, sys), -EACCES);
		CHECK_EQ(try_open("pci/devices/" + g.pci_slot + "/remove", O_WRONLY, sys), -EACCES);
		::close(sys);
	}
	char cwd[4096];
	CHECK(::getcwd(cwd, sizeof cwd) != nullptr);
	if (::chdir("/sys/bus") == 0) {
		CHECK_EQ(try_open("pci/rescan", O_WRONLY), -EACCES);
		CHECK_EQ(try_fopen("pci/rescan", "w"), -EACCES);
		CHECK_EQ(::chdir(cwd), 0);
	} else {
		std::printf("  note: no /sys/bus on this host, working-directory case skipped\n");
	}
}

} // namespace

int main(int argc, char **argv)
{
	const MachineDesc m = machine_from_args(argc, argv);
	const auto gpus = gpu_nodes(m);
	const char *root = std::getenv("KFDEMU_ROOT");
	if (gpus.empty() || !root) {
		std::printf("NOT RUN: needs a machine with a GPU, under kfd-emu\n");
		return 77;
	}
	const std::set<std::string> before = tree(root);
	run("PCI device, bus and driver actions are refused (EACCES), never reach the host",
	    [&] { test_pci_actions(*gpus.front()); });
	run("read-only attributes and new files are refused, settable ones keep their value",
	    [&] { test_attributes(*gpus.front()); });
	run("'..', a host /sys dirfd and a host working directory lead to the same answers",
	    [&] { test_ways_around(*gpus.front()); });
	run("no file appeared or vanished in the emulator's root", [&] { CHECK(tree(root) == before); });
	return summary();
}
