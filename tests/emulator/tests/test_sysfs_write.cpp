// SPDX-License-Identifier: GPL-2.0-only
//
// Hermeticity: a program that writes an emulated GPU's PCI sysfs files
// (its `remove`, the bus's `rescan`, the driver's `unbind`), creates files
// there, unlinks, renames, links, chmods or truncates them, makes
// directories, or reaches them through "..", the host's /sys as a directory
// fd or as its working directory, gets the emulator's answers
// (sysfs_write.cpp, path_change.cpp) and changes nothing but what the
// emulated sysfs lets it write; /dev/dri changes happen in the root's /dev.
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
#include <linux/fs.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/xattr.h>

#include <atomic>
#include <cerrno>
#include <thread>

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

// pp_od_clk_voltage where amdgpu creates it whatever amdgpu.ppfeaturemask
// says: on aldebaran (its SMU turns overdrive on) the GFXCLK and MCLK
// levels as pp_dpm_sclk and pp_dpm_mclk print them; not on arcturus (its
// SMU turns overdrive off). Writes, the kernel's s/r/c commands, are not
// run: refused.
void test_overdrive_table(const NodeDesc &g)
{
	const std::string dev = "/sys/devices/pci0000:00/" + g.pci_slot;
	const std::string od = dev + "/pp_od_clk_voltage";
	struct stat st;
	if (g.name != "aldebaran") {
		CHECK(::stat(od.c_str(), &st) != 0 && errno == ENOENT);
		return;
	}
	CHECK_EQ(slurp(od), "GFXCLK:\n" + slurp(dev + "/pp_dpm_sclk") + "MCLK:\n" + slurp(dev + "/pp_dpm_mclk"));
	CHECK_EQ(slurp(dev + "/pp_dpm_mclk"), "0: 400Mhz \n1: 700Mhz \n2: 1200Mhz \n3: 1600Mhz *\n");
	CHECK_EQ(try_open(od, O_WRONLY), -EACCES);
}

// write(2) on an open attribute fd: 0 or -errno.
ssize_t write_str(int fd, const std::string &v)
{
	const ssize_t n = ::write(fd, v.data(), v.size());
	return n < 0 ? -errno : n;
}

// Each write(2) is the attribute's whole new value, as kernfs hands every
// write to the store: offset and O_APPEND do not matter, a shorter value
// leaves nothing of the longer one, a page at most (E2BIG).
void test_store_semantics(const NodeDesc &g)
{
	const std::string dev = "/sys/devices/pci0000:00/" + g.pci_slot;
	const std::string level = dev + "/power_dpm_force_performance_level";
	int fd = ::open(level.c_str(), O_WRONLY | O_CLOEXEC);
	CHECK(fd >= 0);
	CHECK_EQ(write_str(fd, "manual\n"), 7);
	CHECK_EQ(write_str(fd, "auto\n"), 5); // at offset 7, on a file
	CHECK_EQ(slurp(level), "auto\n");
	CHECK_EQ(::pwrite(fd, "high", 4, 100), 4);
	CHECK_EQ(slurp(level), "high\n"); // a value without its newline reads back with one
	CHECK_EQ(write_str(fd, std::string(5000, 'x')), -E2BIG);
	CHECK_EQ(slurp(level), "high\n");
	::close(fd);
	fd = ::open(level.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
	CHECK(fd >= 0);
	const std::string a = "profile_", b = "peak\n";
	const iovec iov[2] = {{const_cast<char *>(a.data()), a.size()}, {const_cast<char *>(b.data()), b.size()}};
	CHECK_EQ(::writev(fd, iov, 2), ssize_t(a.size() + b.size()));
	CHECK_EQ(slurp(level), "profile_peak\n"); // one writev is one store
	// A dup of the fd (a shell's redirection) stores too.
	const int fd2 = ::dup(fd);
	CHECK_EQ(write_str(fd2, "low\n"), 4);
	CHECK_EQ(slurp(level), "low\n");
	::close(fd2);
	::close(fd);
	const std::string cap = dev + "/hwmon/hwmon0/power1_cap"; // the first GPU's
	// A stdio stream (glibc flushes it through its own write) on each.
	for (const char *v : {"250000000\n", "5\n"}) {
		FILE *f = std::fopen(cap.c_str(), "a");
		CHECK(f != nullptr);
		if (f) {
			std::fputs(v, f);
			std::fclose(f);
		}
	}
	CHECK_EQ(slurp(cap), "5\n"); // no stray digits or newline of the longer value
	// Shell redirections: a program the shell runs on the fd (inherited
	// across exec), and the shells' builtin echo (bash's through stdio).
	for (const char *sh : {"sh", "bash"}) {
		const std::string q = "'" + level + "'";
		CHECK_EQ(std::system((std::string(sh) + " -c \"echo manual > " + q + "; echo auto > " + q + "\"").c_str()), 0);
		CHECK_EQ(slurp(level), "auto\n");
		CHECK_EQ(std::system((std::string(sh) + " -c \"echo manual >> " + q + "; /bin/echo low >> " + q + "\"").c_str()), 0);
		CHECK_EQ(slurp(level), "low\n");
	}
	FILE *f = std::fopen(level.c_str(), "w");
	if (f) {
		std::fputs("auto\n", f);
		std::fclose(f);
	}
}

// Opening an attribute through its emulated path (".." in its links)
// while another thread renames files on the host: the kernel's walk under
// RESOLVE_BENEATH sees the rename and answers EAGAIN, which the shim tries
// again; a real sysfs open never fails so (rocm-smi reported it as "an
// unknown error").
void test_open_beside_renames(const NodeDesc &g)
{
	const std::string cap = "/sys/class/drm/card" + std::to_string(g.card_index) + "/device/hwmon/hwmon0/power1_cap";
	char dir[] = "/tmp/kfdemu-renames-XXXXXX";
	CHECK(::mkdtemp(dir) != nullptr);
	const std::string a = std::string(dir) + "/a", b = std::string(dir) + "/b";
	::close(::open(a.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
	std::atomic<bool> stop{false};
	std::atomic<long> renames{0};
	std::thread renamer([&] {
		for (bool there = true; !stop.load(std::memory_order_relaxed); there = !there, renames++)
			(void)::syscall(SYS_renameat2, AT_FDCWD, there ? a.c_str() : b.c_str(), AT_FDCWD,
					there ? b.c_str() : a.c_str(), 0);
	});
	int failed = 0, first_errno = 0;
	for (int i = 0; i < 20000; i++) {
		const int fd = ::open(cap.c_str(), O_WRONLY | O_CLOEXEC);
		if (fd < 0) {
			first_errno = failed++ ? first_errno : errno;
			continue;
		}
		::close(fd);
	}
	stop = true;
	renamer.join();
	std::printf("  20000 opens of %s beside %ld renames: %d failed (first errno %d)\n", cap.c_str(),
		    renames.load(), failed, first_errno);
	CHECK_EQ(failed, 0);
	CHECK(renames.load() > 0);
	(void)::unlink(a.c_str());
	(void)::unlink(b.c_str());
	(void)::rmdir(dir);
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

// 0 when `r` (a libc call's result) is 0, else -errno.
int res(int r) { return r == 0 ? 0 : -errno; }

// unlink, rmdir, remove, mkdir, mknod, symlink, link, rename, creat on the
// emulated sysfs: kernfs's answers (path_change.cpp).
void test_sysfs_names(const NodeDesc &g)
{
	const std::string dev = "/sys/devices/pci0000:00/" + g.pci_slot, bus = "/sys/bus/pci/devices/" + g.pci_slot;
	CHECK_EQ(res(::unlink((dev + "/remove").c_str())), -EPERM);
	CHECK_EQ(res(::unlink((bus + "/vendor").c_str())), -EPERM);
	CHECK_EQ(res(::unlink(bus.c_str())), -EPERM);	// the bus's link to the device
	CHECK_EQ(res(::unlink("/sys/bus/pci/rescan")), -EPERM);
	CHECK_EQ(res(::unlink((dev + "/nothing").c_str())), -ENOENT);
	CHECK_EQ(res(::unlink(dev.c_str())), -EISDIR);
	CHECK_EQ(res(::unlinkat(AT_FDCWD, (dev + "/vendor").c_str(), 0)), -EPERM);
	CHECK_EQ(res(::unlinkat(AT_FDCWD, dev.c_str(), AT_REMOVEDIR)), -EPERM);
	CHECK_EQ(res(::rmdir(dev.c_str())), -EPERM);
	CHECK_EQ(res(::rmdir((dev + "/vendor").c_str())), -ENOTDIR);
	CHECK_EQ(res(std::remove((dev + "/remove").c_str())), -EPERM);
	CHECK_EQ(res(std::remove(dev.c_str())), -EPERM);
	CHECK_EQ(res(::mkdir((dev + "/new_dir").c_str(), 0755)), -EPERM);
	CHECK_EQ(res(::mkdir((dev + "/vendor").c_str(), 0755)), -EEXIST);
	CHECK_EQ(res(::mkdir((dev + "/no_dir/new_dir").c_str(), 0755)), -ENOENT);
	CHECK_EQ(res(::mkdir("/sys/bus/pci/drivers/new_driver", 0755)), -EPERM);
	CHECK_EQ(res(::mknod((dev + "/node").c_str(), S_IFREG | 0644, 0)), -EPERM);
	CHECK_EQ(res(::symlink("/etc/passwd", (dev + "/link").c_str())), -EPERM);
	CHECK_EQ(res(::symlink("x", (dev + "/vendor").c_str())), -EEXIST);
	CHECK_EQ(res(::link((dev + "/vendor").c_str(), (dev + "/vendor2").c_str())), -EPERM);
	CHECK_EQ(res(::link((dev + "/nothing").c_str(), (dev + "/vendor2").c_str())), -ENOENT);
	CHECK_EQ(res(::link((dev + "/vendor").c_str(), (dev + "/device").c_str())), -EEXIST);
	const int fd = ::creat((dev + "/created").c_str(), 0644);
	CHECK_EQ(fd < 0 ? -errno : 0, -EACCES);
	if (fd >= 0)
		::close(fd);

	const std::string level = dev + "/power_dpm_force_performance_level";
	CHECK_EQ(res(::rename(level.c_str(), (dev + "/renamed").c_str())), -EPERM);
	CHECK_EQ(res(::rename((dev + "/nothing").c_str(), (dev + "/renamed").c_str())), -ENOENT);
	CHECK_EQ(res(::renameat2(AT_FDCWD, (dev + "/vendor").c_str(), AT_FDCWD, (dev + "/x").c_str(), RENAME_NOREPLACE)),
		 -EPERM);
	CHECK_EQ(res(::renameat(AT_FDCWD, (dev + "/remove").c_str(), AT_FDCWD, "/sys/bus/pci/removed")), -EPERM);
	// Between mounts: another file system, the emulated /proc, /dev.
	char tmp[] = "/tmp/kfdemu-sysfs-XXXXXX";
	const int t = ::mkstemp(tmp);
	CHECK(t >= 0);
	if (t >= 0) {
		::close(t);
		CHECK_EQ(res(::rename((dev + "/vendor").c_str(), (std::string(tmp) + ".moved").c_str())), -EXDEV);
		CHECK_EQ(res(::rename(tmp, (dev + "/moved_in").c_str())), -EXDEV);
		CHECK_EQ(res(::link(tmp, (dev + "/linked_in").c_str())), -EXDEV);
		CHECK_EQ(::access(tmp, F_OK), 0);
		::unlink(tmp);
	}
	CHECK_EQ(res(::rename((dev + "/vendor").c_str(), "/dev/dri/vendor")), -EXDEV);
	CHECK_EQ(slurp(dev + "/vendor"), "0x1002\n");
}

// chmod, chown and the times are kept in the root; truncate changes nothing.
void test_sysfs_attributes(const NodeDesc &g)
{
	const std::string dev = "/sys/devices/pci0000:00/" + g.pci_slot, vendor = dev + "/vendor";
	struct stat st;
	CHECK_EQ(res(::chmod(vendor.c_str(), 0640)), 0);
	CHECK(::stat(vendor.c_str(), &st) == 0 && (st.st_mode & 0777) == 0640);
	CHECK_EQ(res(::fchmodat(AT_FDCWD, vendor.c_str(), 0444, 0)), 0);
	CHECK(::stat(vendor.c_str(), &st) == 0 && (st.st_mode & 0777) == 0444);
	CHECK_EQ(res(::chmod((dev + "/nothing").c_str(), 0644)), -ENOENT);
	CHECK_EQ(res(::chown(vendor.c_str(), 0, 0)), 0);
	CHECK_EQ(res(::lchown(("/sys/bus/pci/devices/" + g.pci_slot).c_str(), 0, 0)), 0);
	CHECK_EQ(res(::fchownat(AT_FDCWD, vendor.c_str(), 0, 0, AT_SYMLINK_NOFOLLOW)), 0);
	CHECK_EQ(res(::utimes(vendor.c_str(), nullptr)), 0);
	CHECK_EQ(res(::utimensat(AT_FDCWD, vendor.c_str(), nullptr, 0)), 0);
	const std::string level = dev + "/power_dpm_force_performance_level";
	const std::string before = slurp(level);
	CHECK(!before.empty());
	CHECK_EQ(res(::truncate(level.c_str(), 0)), 0);
	CHECK_EQ(slurp(level), before);
	CHECK_EQ(res(::truncate(dev.c_str(), 0)), -EISDIR);
	CHECK_EQ(res(::truncate((dev + "/nothing").c_str(), 0)), -ENOENT);
	CHECK_EQ(res(::truncate(level.c_str(), -1)), -EINVAL);
}

// The same calls through "..", a host /sys directory fd and working directory.
void test_names_ways_around(const NodeDesc &g)
{
	CHECK_EQ(res(::unlink("/sys/bus/pci/../../../../sys/bus/pci/rescan")), -EPERM);
	CHECK_EQ(res(::mkdir(("/tmp/../sys/devices/pci0000:00/" + g.pci_slot + "/new_dir").c_str(), 0755)), -EPERM);
	const int sys = ::open("/sys/bus", O_PATH | O_DIRECTORY | O_CLOEXEC);
	CHECK(sys >= 0);
	if (sys >= 0) {
		CHECK_EQ(res(::unlinkat(sys, "pci/rescan", 0)), -EPERM);
		CHECK_EQ(res(::mkdirat(sys, "pci/new_dir", 0755)), -EPERM);
		CHECK_EQ(res(::renameat(sys, "pci/rescan", sys, "pci/rescan2")), -EPERM);
		CHECK_EQ(res(::fchmodat(sys, "pci/drivers_autoprobe", 0644, 0)), 0);
		::close(sys);
	}
	char cwd[4096];
	CHECK(::getcwd(cwd, sizeof cwd) != nullptr);
	if (::chdir("/sys/bus") == 0) {
		CHECK_EQ(res(::unlink("pci/rescan")), -EPERM);
		CHECK_EQ(res(::rmdir("pci/devices")), -EPERM);
		CHECK_EQ(res(::symlink("/", "pci/root")), -EPERM);
		CHECK_EQ(::chdir(cwd), 0);
	} else {
		std::printf("  note: no /sys/bus on this host, working-directory case skipped\n");
	}
}

// Extended attributes: sysfs keeps trusted.* and security.* (in the root's
// file here), refuses user.* (EOPNOTSUPP). mkstemp/mkdtemp: sysfs takes no
// new file (EACCES) nor directory (EPERM); /dev's are made in the root.
void test_xattrs_and_temp_files(const NodeDesc &g, const char *root)
{
	const std::string dev = "/sys/devices/pci0000:00/" + g.pci_slot, vendor = dev + "/vendor";
	CHECK_EQ(res(::setxattr(vendor.c_str(), "user.kfdemu", "1", 1, 0)), -EOPNOTSUPP);
	CHECK_EQ(res(::lsetxattr(vendor.c_str(), "user.kfdemu", "1", 1, 0)), -EOPNOTSUPP);
	CHECK_EQ(res(::removexattr(vendor.c_str(), "user.kfdemu")), -EOPNOTSUPP);
	CHECK_EQ(res(::setxattr((dev + "/nothing").c_str(), "trusted.kfdemu", "1", 1, 0)), -ENOENT);
	// trusted.* where the root's own file system keeps it (asked without the shim).
	const std::string probe = std::string(root) + "/.kfdemu/redirects";
	if (::syscall(SYS_setxattr, probe.c_str(), "trusted.kfdemu-probe", "1", 1, 0) == 0) {
		::syscall(SYS_removexattr, probe.c_str(), "trusted.kfdemu-probe");
		CHECK_EQ(res(::setxattr(vendor.c_str(), "trusted.kfdemu", "v", 1, 0)), 0);
		char v[4] = {};
		CHECK_EQ(::getxattr(vendor.c_str(), "trusted.kfdemu", v, sizeof v), 1L);
		CHECK_EQ(std::string(v), "v");
		CHECK_EQ(res(::removexattr(vendor.c_str(), "trusted.kfdemu")), 0);
	} else {
		std::printf("  note: the root's file system keeps no trusted.* xattrs, that case skipped\n");
	}

	std::string t = dev + "/tmpXXXXXX";
	CHECK_EQ(::mkstemp(t.data()) < 0 ? -errno : 0, -EACCES);
	t = dev + "/tmpXXXXXX";
	CHECK(::mkdtemp(t.data()) == nullptr && errno == EPERM);
	t = dev + "/tmpXXX";
	CHECK_EQ(::mkstemp(t.data()) < 0 ? -errno : 0, -EINVAL);
	t = "/dev/dri/kfdemu-XXXXXX";
	const int fd = ::mkostemp(t.data(), O_CLOEXEC);
	CHECK(fd >= 0 && t != "/dev/dri/kfdemu-XXXXXX");
	if (fd >= 0) {
		::close(fd);
		CHECK_EQ(::access((std::string(root) + t).c_str(), F_OK), 0);
		CHECK_EQ(::syscall(SYS_faccessat, AT_FDCWD, t.c_str(), F_OK, 0), -1L);
		CHECK_EQ(res(::unlink(t.c_str())), 0);
	}
	t = "/dev/dri/kfdemu-XXXXXX";
	CHECK(::mkdtemp(t.data()) != nullptr);
	CHECK_EQ(res(::rmdir(t.c_str())), 0);
}

// /dev/kfd and /dev/dri are the root's /dev (devtmpfs lets root change
// it): what is made there is in the root, never in the host's /dev.
void test_dev_names(const char *root)
{
	const std::string d = "/dev/dri/kfdemu-test", d2 = d + "-renamed";
	CHECK_EQ(res(::mkdir(d.c_str(), 0755)), 0);
	CHECK_EQ(::access((std::string(root) + d).c_str(), F_OK), 0);
	// The host's /dev, asked without the shim: nothing there.
	CHECK_EQ(::syscall(SYS_faccessat, AT_FDCWD, d.c_str(), F_OK, 0), -1L);
	CHECK_EQ(res(::rename(d.c_str(), d2.c_str())), 0);
	CHECK_EQ(res(::rmdir(d2.c_str())), 0);
	CHECK_EQ(::access((std::string(root) + d2).c_str(), F_OK), -1);
	CHECK_EQ(res(::truncate("/dev/kfd", 0)), -EINVAL);
	CHECK_EQ(res(::rename("/dev/kfd", "/tmp/kfd")), -EXDEV);
	CHECK_EQ(res(::link("/dev/kfd", "/sys/bus/pci/kfd")), -EXDEV);
	CHECK_EQ(::access("/dev/kfd", F_OK), 0);
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
	run("pp_od_clk_voltage where the SMU turns overdrive on (aldebaran), read-only here; none on arcturus",
	    [&] { test_overdrive_table(*gpus.front()); });
	run("each write(2) to an attribute is its whole value (offset, O_APPEND, shorter values, shells)",
	    [&] { test_store_semantics(*gpus.front()); });
	run("'..', a host /sys dirfd and a host working directory lead to the same answers",
	    [&] { test_ways_around(*gpus.front()); });
	run("an attribute opens while the host renames files (the shim tries openat2's EAGAIN again)",
	    [&] { test_open_beside_renames(*gpus.front()); });
	run("unlink, rmdir, mkdir, mknod, symlink, link, rename, creat get sysfs's answers (EPERM, EEXIST, EXDEV)",
	    [&] { test_sysfs_names(*gpus.front()); });
	run("chmod, chown and times are kept in the root, truncate changes nothing",
	    [&] { test_sysfs_attributes(*gpus.front()); });
	run("'..', a host /sys dirfd and working directory lead to the same answers",
	    [&] { test_names_ways_around(*gpus.front()); });
	run("/dev/dri and /dev/kfd change in the root's /dev, never the host's", [&] { test_dev_names(root); });
	run("xattrs, mkstemp and mkdtemp get sysfs's answers, /dev's temporaries are in the root",
	    [&] { test_xattrs_and_temp_files(*gpus.front(), root); });
	run("no file appeared or vanished in the emulator's root", [&] { CHECK(tree(root) == before); });
	return summary();
}
