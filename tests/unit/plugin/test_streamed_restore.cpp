// SPDX-License-Identifier: GPL-2.0-only
//
// A streamed restore (criu restore --stream) of the KFD image of one link
// of an incremental chain: the stream holds only that checkpoint's files,
// not its parent's, so the plugin refuses the file naming it, before it
// opens /dev/kfd (no GPU state made); so it does a deduplicated image (its
// chunks stored in other files, which a stream gives once, in order). The image served comes from a
// "store" directory through this program's img_streamer_open, as the
// image streamer's pipe would; this program also exports CRIU's
// check_and_remove_inventory_plugin (ENABLE_EXPORTS, dlsym lookups).
#include <criterion/criterion.h>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include "../common/captured_stderr.h"
#include "../image/image_test_util.h"
#include "base/unique_fd.h"
#include "image/image_dir.h"
#include "image/image_names.h"
#include "image/kfd_image.h"
#include "plugin/restore.h"
#include "topology/device_entries.h"

using namespace amdcr;
using amdcr::test::TempDir;

namespace {
std::string store_dir; // where img_streamer_open finds the streamed files
} // namespace

extern "C" __attribute__((visibility("default"))) int img_streamer_open(char *filename, int flags)
{
	if (flags != O_RDONLY)
		return -EINVAL;
	const int fd = ::open((store_dir + "/" + filename).c_str(), O_RDONLY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

extern "C" __attribute__((visibility("default"))) bool check_and_remove_inventory_plugin(const char *, size_t)
{
	return true;
}

namespace {

std::string fixture(const char *name)
{
	return std::string(AMDCR_SOURCE_DIR) + "/tests/fixtures/topology/" + name;
}

// CRIU's side of a streamed restore: the streamer's socket in the image
// directory and CRIU's connection to it, kept near the top of the fd
// limit as CRIU keeps its service fds.
struct StreamedRestore {
	TempDir images, store, root;
	UniqueFd listener, connection, images_fd;

	StreamedRestore()
	{
		cr_assert(images.ok() && store.ok() && root.ok());
		store_dir = store.path();
		const std::string sock = images.file("streamer-serve.sock");
		sockaddr_un a{};
		a.sun_family = AF_UNIX;
		std::strncpy(a.sun_path, sock.c_str(), sizeof(a.sun_path) - 1);
		listener.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
		cr_assert_eq(::bind(listener.get(), reinterpret_cast<sockaddr *>(&a), sizeof(a)), 0);
		cr_assert_eq(::listen(listener.get(), 4), 0);
		const int c = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		cr_assert_eq(::connect(c, reinterpret_cast<sockaddr *>(&a), sizeof(a)), 0);
		struct rlimit rl {};
		cr_assert_eq(::getrlimit(RLIMIT_NOFILE, &rl), 0);
		connection.reset(::fcntl(c, F_DUPFD_CLOEXEC, static_cast<int>(rl.rlim_cur) - 8));
		::close(c);
		cr_assert(connection.valid());
		images_fd.reset(::open(images.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
		cr_assert(images_fd.valid());
		std::filesystem::create_directories(root.file("dri"));
		for (int m = 128; m < 136; m++)
			UniqueFd(::open(root.file("dri/renderD" + std::to_string(m)).c_str(),
					O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
	}
	~StreamedRestore()
	{
		::unlink(images.file("streamer-serve.sock").c_str());
		std::filesystem::remove_all(root.file("dri"));
	}

	// A restore environment whose /dev has the render nodes (plain files:
	// the GPU mapping only opens them) but no kfd: a restore that got as
	// far as opening it would say so.
	SessionEnv env() const
	{
		SessionEnv e;
		e.paths.dev_dir = root.path();
		e.paths.sys_root = fixture("mi100");
		e.paths.shm_dir = root.path();
		e.image_dir_fd = images_fd.get();
		return e;
	}

	// KFD image `id` of a process that held the fixture's GPU, with one
	// VRAM BO, in the store; `link`: one link of a chain; `dedup`: its
	// first chunk stored in another process's pages file.
	void write_kfd(int id, bool link, bool dedup = false) const
	{
		auto topo = parse_topology(fixture("mi100"));
		cr_assert(topo.ok());
		KfdImage img;
		img.pid = 4242;
		img.priv_data = {1, 2, 3, 4};
		for (const auto &n : topo->nodes())
			img.devices.push_back(device_from_node(*topo, n, n.gpu_id));
		const uint32_t gpu = topo->gpus().front()->gpu_id;
		img.bos.push_back({0x7f0000000000, 8192, 0x1007f0000000ull, kKfdAllocVram, gpu, 0});
		if (link)
			img.parent = ChainParent{DumpId{}, 7};
		if (dedup)
			img.bos.back().dedup = ChunkRefs{4096, {{0, kfd_pages_image_name(4, gpu), 0}}};
		UniqueFd dir(::open(store.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
		cr_assert(write_kfd_image(ImageDir::borrow(dir.get()), id, img).ok());
	}
};

} // namespace

Test(streamed_restore, a_chain_link_is_refused_naming_it_before_any_gpu_state,
     .init = amdcr::test::redirect_stderr)
{
	StreamedRestore s;
	s.write_kfd(5, true);
	RestoreSession r(s.env());
	cr_assert_eq(r.prepare(), 0, "a streamed checkpoint naming our plugin is ours");
	bool retry = true;
	const int ret = r.restore_ext_file(5, &retry);
	cr_expect_eq(ret, -EINVAL);
	const std::string err = amdcr::test::captured_stderr();
	for (const char *want : {"amdgpu-kfd-5.img: this image is one link of an incremental checkpoint",
				 "criu --stream", "amdgpu-img flatten", "no GPU state was created"})
		cr_expect(err.find(want) != std::string::npos, "no '%s' in: %s", want, err.c_str());
	cr_expect(err.find("/kfd") == std::string::npos, "the refusal must come before /dev/kfd is opened: %s",
		  err.c_str());
}

Test(streamed_restore, a_deduplicated_image_is_refused_naming_it_before_any_gpu_state,
     .init = amdcr::test::redirect_stderr)
{
	StreamedRestore s;
	s.write_kfd(5, false, true);
	RestoreSession r(s.env());
	cr_assert_eq(r.prepare(), 0);
	bool retry = true;
	cr_expect_eq(r.restore_ext_file(5, &retry), -EINVAL);
	const std::string err = amdcr::test::captured_stderr();
	for (const char *want : {"amdgpu-kfd-5.img: this image is deduplicated (BO 0", "KFD_DEDUP", "criu --stream",
				 "amdgpu-img flatten", "no GPU state was created"})
		cr_expect(err.find(want) != std::string::npos, "no '%s' in: %s", want, err.c_str());
	cr_expect(err.find("/kfd") == std::string::npos, "the refusal must come before /dev/kfd is opened: %s",
		  err.c_str());
}

// The control: the same image without its parent gets past that check and
// the GPU mapping, to the /dev/kfd this environment lacks.
Test(streamed_restore, a_complete_image_goes_on_to_open_dev_kfd, .init = amdcr::test::redirect_stderr)
{
	StreamedRestore s;
	s.write_kfd(5, false);
	RestoreSession r(s.env());
	cr_assert_eq(r.prepare(), 0);
	bool retry = true;
	cr_expect_lt(r.restore_ext_file(5, &retry), 0);
	const std::string err = amdcr::test::captured_stderr();
	cr_expect(err.find("incremental checkpoint") == std::string::npos, "%s", err.c_str());
	cr_expect(err.find(s.root.path() + "/kfd") != std::string::npos, "%s", err.c_str());
}
