// SPDX-License-Identifier: GPL-2.0-only
//
// The dump session without a device: which files and mappings it claims
// (and so adds the plugin to CRIU's inventory), which it leaves to other
// plugins (-ENOTSUP), and the hooks that end a dump when no process was
// paused.
//
// The session's machine is a scratch tree: dev/kfd and dev/dri/renderD128
// are links to /dev/null, so "the KFD node" is character device 1:0 and
// render nodes are 1:128..; the KFD topology is a fixture (2xmi210: GPUs on
// render minors 128 and 129). HANDLE_DEVICE_VMA is given the stat of the
// mapped file, so a mapping of a KFD or render node is tested with a stat
// of such a node; dump_ext_file needs an open file, so only files that are
// not ours are tested here (the rest runs on the emulated GPU: tests/e2e).
//
// This program exports add_inventory_plugin (ENABLE_EXPORTS), found by the
// plugin's CRIU API lookup as CRIU's own would be: `inventory` records the
// calls.
#include <criterion/criterion.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "../common/captured_stderr.h"
#include "base/log.h"
#include "base/unique_fd.h"
#include "plugin/dump.h"

using namespace amdcr;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> inventory;

} // namespace

// CRIU's add_inventory_plugin(), as the plugin looks it up (dlsym).
extern "C" __attribute__((visibility("default"))) int add_inventory_plugin(const char *name)
{
	inventory.emplace_back(name);
	return 0;
}

namespace {

std::string fixture(const char *name)
{
	return std::string(AMDCR_SOURCE_DIR) + "/tests/fixtures/topology/" + name;
}

// A scratch tree: images/, dev/ (with device links unless `devices` is
// false), shm/.
struct Scratch {
	fs::path root;
	UniqueFd images;

	explicit Scratch(bool devices = true)
	{
		char tmpl[] = "/tmp/amdcr-dump-session-XXXXXX";
		cr_assert_not_null(mkdtemp(tmpl));
		root = tmpl;
		fs::create_directories(root / "images");
		fs::create_directories(root / "dev/dri");
		fs::create_directories(root / "shm");
		if (devices) {
			fs::create_symlink("/dev/null", root / "dev/kfd");
			fs::create_symlink("/dev/null", root / "dev/dri/renderD128");
		}
		images.reset(open((root / "images").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
		cr_assert(images.valid());
	}
	~Scratch() { fs::remove_all(root); }

	SessionEnv env(const char *topology = "2xmi210") const
	{
		SessionEnv e;
		e.paths.dev_dir = (root / "dev").string();
		e.paths.sys_root = fixture(topology);
		e.paths.shm_dir = (root / "shm").string();
		e.image_dir_fd = images.get();
		return e;
	}

	size_t image_files() const
	{
		size_t n = 0;
		for ([[maybe_unused]] const auto &f : fs::directory_iterator(root / "images"))
			n++;
		return n;
	}
};

// The stat of a character device major:minor (what CRIU passes to
// HANDLE_DEVICE_VMA for a mapping of that device).
struct stat char_device(unsigned int maj, unsigned int min)
{
	struct stat st {};
	st.st_mode = S_IFCHR | 0666;
	st.st_rdev = makedev(maj, min);
	return st;
}

// /dev/null's major: the scratch tree's KFD and DRM major.
unsigned int null_major()
{
	struct stat st {};
	cr_assert_eq(stat("/dev/null", &st), 0);
	return major(st.st_rdev);
}


} // namespace

Test(dump_session, a_regular_file_is_not_ours)
{
	Scratch s;
	DumpSession d(s.env());
	const fs::path file = s.root / "plain";
	UniqueFd fd(open(file.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600));
	cr_assert(fd.valid());
	cr_expect_eq(d.dump_ext_file(fd.get(), 3), -ENOTSUP);
	struct stat st {};
	cr_assert_eq(fstat(fd.get(), &st), 0);
	cr_expect_eq(d.handle_device_vma(fd.get(), st), -ENOTSUP);
	cr_expect_eq(d.paused_count(), 0u);
	cr_expect_eq(s.image_files(), 0u, "nothing written for a file that is not ours");
	cr_expect(inventory.empty(), "claimed the dump for a regular file");
}

Test(dump_session, a_closed_fd_is_not_ours)
{
	Scratch s;
	DumpSession d(s.env());
	cr_expect_eq(d.dump_ext_file(-1, 3), -ENOTSUP);
	cr_expect(inventory.empty());
}

// /dev/null shares its major with the scratch tree's KFD node but is not
// minor 0, nor a render minor: not ours, as a file or as a mapping.
Test(dump_session, dev_null_is_not_ours)
{
	Scratch s;
	DumpSession d(s.env());
	UniqueFd fd(open("/dev/null", O_RDWR | O_CLOEXEC));
	cr_assert(fd.valid());
	struct stat st {};
	cr_assert_eq(fstat(fd.get(), &st), 0);
	cr_assert_eq(major(st.st_rdev), null_major());
	cr_expect_eq(d.handle_device_vma(fd.get(), st), -ENOTSUP);
	cr_expect_eq(d.dump_ext_file(fd.get(), 4), -ENOTSUP);
	cr_expect_eq(d.paused_count(), 0u);
	cr_expect_eq(s.image_files(), 0u);
	cr_expect(inventory.empty(), "claimed the dump for /dev/null");
}

Test(dump_session, a_kfd_mapping_claims_the_dump_once)
{
	Scratch s;
	DumpSession d(s.env());
	const struct stat kfd = char_device(null_major(), 0);
	cr_expect_eq(d.handle_device_vma(-1, kfd), 0);
	cr_expect_eq(d.handle_device_vma(-1, kfd), 0);
	cr_assert_eq(inventory.size(), 1u, "one inventory entry, not one per mapping");
	cr_expect_eq(inventory[0], std::string(kPluginName));
	cr_expect_eq(d.paused_count(), 0u, "a mapping pauses nothing");
}

Test(dump_session, a_render_mapping_is_ours_only_for_a_gpu_of_the_topology)
{
	Scratch s;
	DumpSession d(s.env("2xmi210"));
	cr_expect_eq(d.handle_device_vma(-1, char_device(null_major(), 200)), -ENOTSUP,
		     "renderD200 is no GPU of the topology");
	cr_expect(inventory.empty());
	cr_expect_eq(d.handle_device_vma(-1, char_device(null_major(), 129)), 0);
	cr_expect_eq(inventory.size(), 1u);
}

Test(dump_session, without_a_kfd_topology_no_render_mapping_is_ours)
{
	Scratch s;
	SessionEnv e = s.env();
	e.paths.sys_root = s.root.string(); // no sys/class/kfd here
	DumpSession d(e);
	cr_expect_eq(d.handle_device_vma(-1, char_device(null_major(), 128)), -ENOTSUP);
	cr_expect(inventory.empty());
}

// No /dev/kfd, no render node: the device numbers are unknown, so not even
// a stat that looks like a KFD node's is ours.
Test(dump_session, without_device_nodes_nothing_is_ours)
{
	Scratch s(false);
	DumpSession d(s.env());
	cr_expect_eq(d.handle_device_vma(-1, char_device(null_major(), 0)), -ENOTSUP);
	cr_expect_eq(d.handle_device_vma(-1, char_device(null_major(), 128)), -ENOTSUP);
	cr_expect(inventory.empty());
}

// DUMP_DEVICES_LATE is passed on (-ENOTSUP), so that the plugins after
// this one get the hook too, also when nothing was paused.
Test(dump_session, dump_devices_late_passes_the_hook_on)
{
	Scratch s;
	SessionEnv e = s.env();
	e.dump_devices_late = true;
	DumpSession d(e);
	cr_expect_eq(d.dump_devices_late(1), -ENOTSUP);
	cr_expect_eq(d.dump_devices_late(1), -ENOTSUP, "the same on a second call");
	cr_expect_eq(d.paused_count(), 0u);
}

// exit(DUMP) with nothing paused: nothing to resume, nothing said.
Test(dump_session, finish_with_nothing_paused, .init = amdcr::test::redirect_stderr)
{
	Scratch s;
	{
		DumpSession d(s.env());
		cr_expect_eq(d.handle_device_vma(-1, char_device(null_major(), 0)), 0);
		d.finish(-1);
		cr_expect_eq(d.paused_count(), 0u);
		d.finish(0);
		cr_expect_eq(d.paused_count(), 0u);
	}
	const std::string err = amdcr::test::captured_stderr();
	cr_expect(err.find("resum") == std::string::npos, "%s", err.c_str());
	cr_expect(err.find("Error") == std::string::npos, "%s", err.c_str());
	cr_expect_eq(s.image_files(), 0u);
}
