// SPDX-License-Identifier: GPL-2.0-only
//
// RESTORE_INIT decides everything that can fail before any GPU state is
// created: whether the images are ours, whether the image set is complete,
// and whether the checkpointed GPUs fit onto this machine's.
#include <criterion/criterion.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "../common/captured_stderr.h"
#include "base/unique_fd.h"
#include "image/image_dir.h"
#include "image/kfd_image.h"
#include "image/image_names.h"
#include "image/pages_file.h"
#include "image/render_image.h"
#include "topology/device_entries.h"
#include "plugin/restore.h"

using namespace amdcr;
namespace fs = std::filesystem;

namespace {

std::string fixture(const char *name)
{
	return std::string(AMDCR_SOURCE_DIR) + "/tests/fixtures/topology/" + name;
}

// A scratch tree: images/, dev/dri/renderD128.. (plain files: opening them
// is all the mapping's "usable" check does), shm/.
struct Scratch {
	fs::path root;
	UniqueFd images;

	Scratch()
	{
		char tmpl[] = "/tmp/amdcr-restore-init-XXXXXX";
		cr_assert_not_null(mkdtemp(tmpl));
		root = tmpl;
		fs::create_directories(root / "images");
		fs::create_directories(root / "dev/dri");
		fs::create_directories(root / "shm");
		for (int m = 128; m < 136; m++)
			close(open((root / "dev/dri" / ("renderD" + std::to_string(m))).c_str(),
				   O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
		images.reset(open((root / "images").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
		cr_assert(images.valid());
	}
	~Scratch() { fs::remove_all(root); }

	SessionEnv env(const char *local_fixture, Config config = {}) const
	{
		SessionEnv e;
		e.config = config;
		e.paths.dev_dir = (root / "dev").string();
		e.paths.sys_root = fixture(local_fixture);
		e.paths.shm_dir = (root / "shm").string();
		e.image_dir_fd = images.get();
		return e;
	}
};

// Writes a checkpoint of a process that held every GPU of `fixture_name`,
// with one VRAM BO per GPU, as file id `id`. `pages_delta` bytes are added
// to the first pages file (to corrupt it).
void write_checkpoint(const Scratch &s, const char *fixture_name, int id, int pages_delta = 0)
{
	auto topo = parse_topology(fixture(fixture_name));
	cr_assert(topo.ok());
	KfdImage img;
	img.pid = 4242;
	img.priv_data = {1, 2, 3, 4};
	for (const auto &n : topo->nodes())
		img.devices.push_back(device_from_node(*topo, n, n.gpu_id));
	uint64_t va = 0x7f0000000000;
	for (const TopologyNode *g : topo->gpus()) {
		img.bos.push_back({va, 8192, 0x100000000ull + va, kKfdAllocVram, g->gpu_id, 0});
		va += 0x100000;
	}
	ImageDir dir = ImageDir::borrow(s.images.get());
	cr_assert(write_kfd_image(dir, id, img).ok());
	bool first = true;
	for (const TopologyNode *g : topo->gpus()) {
		const uint64_t size = 8192 + (first ? pages_delta : 0);
		first = false;
		auto w = PagesWriter::create(dir, kfd_pages_image_name(id, g->gpu_id), size);
		cr_assert(w.ok());
		std::string bytes(size, 'x');
		cr_assert(w->write(bytes.data(), bytes.size()).ok());
		cr_assert(w->commit().ok());
	}
}


} // namespace

Test(restore_init, no_images_of_ours_declines)
{
	Scratch s;
	RestoreSession r(s.env("2xmi210"));
	cr_expect_eq(r.prepare(), -ENOTSUP);
	cr_expect_not(r.active());
	bool retry = true;
	cr_expect_eq(r.restore_ext_file(3, &retry), -ENOTSUP);
	cr_expect_not(retry);
	cr_expect_eq(r.resume_devices_late(1), -ENOTSUP);
}

Test(restore_init, maps_onto_another_machine)
{
	Scratch s;
	write_checkpoint(s, "2xmi210", 7);
	RestoreSession r(s.env("2xmi210-other"));
	cr_assert_eq(r.prepare(), 0);
	cr_assert(r.active());
	auto ckpt = parse_topology(fixture("2xmi210"));
	auto local = parse_topology(fixture("2xmi210-other"));
	cr_assert_eq(r.gpu_map().entries().size(), ckpt->gpus().size());
	for (const auto &e : r.gpu_map().entries()) {
		cr_expect_not_null(ckpt->gpu(e.checkpointed_gpu_id));
		const TopologyNode *l = local->gpu(e.local_gpu_id);
		cr_assert_not_null(l, "mapped to unknown local gpu 0x%x", e.local_gpu_id);
		cr_expect_eq(l->drm_render_minor, e.local_render_minor);
	}
}

Test(restore_init, fewer_gpus_is_refused_with_reason, .init = amdcr::test::redirect_stderr)
{
	Scratch s;
	write_checkpoint(s, "2xmi210", 7);
	RestoreSession r(s.env("mi100"));
	const int ret = r.prepare();
	cr_expect_lt(ret, 0);
	cr_expect_neq(ret, -ENOTSUP, "a checkpoint with GPU state must not be silently skipped");
	cr_expect_not(r.active());
	const std::string err = amdcr::test::captured_stderr();
	cr_expect(err.find("before any GPU state was changed") != std::string::npos, "%s", err.c_str());
	cr_expect(err.find("2 GPUs") != std::string::npos, "says how many GPUs are missing: %s", err.c_str());
}

Test(restore_init, other_gpu_model_is_refused_with_reason, .init = amdcr::test::redirect_stderr)
{
	Scratch s;
	write_checkpoint(s, "mi100", 7);
	RestoreSession r(s.env("2xmi210"));
	cr_expect_lt(r.prepare(), 0);
	cr_expect_not(r.active());
	const std::string err = amdcr::test::captured_stderr();
	auto ckpt = parse_topology(fixture("mi100"));
	const uint32_t id = ckpt->gpus().front()->gpu_id;
	char hex[32];
	snprintf(hex, sizeof(hex), "%04x", id);
	cr_expect(err.find(hex) != std::string::npos || err.find(std::to_string(id)) != std::string::npos,
		  "names the checkpointed GPU %u: %s", id, err.c_str());
	cr_expect(err.find("device_id") != std::string::npos, "names the property: %s", err.c_str());
}

Test(restore_init, short_pages_file_is_refused, .init = amdcr::test::redirect_stderr)
{
	Scratch s;
	write_checkpoint(s, "2xmi210", 9, -4096);
	RestoreSession r(s.env("2xmi210"));
	cr_expect_lt(r.prepare(), 0);
	cr_expect_not(r.active());
	const std::string err = amdcr::test::captured_stderr();
	cr_expect(err.find("amdgpu-pages-9-") != std::string::npos, "names the pages file: %s", err.c_str());
}

Test(restore_init, no_local_kfd_topology_is_refused, .init = amdcr::test::redirect_stderr)
{
	Scratch s;
	write_checkpoint(s, "mi100", 2);
	SessionEnv e = s.env("mi100");
	e.paths.sys_root = s.root.string(); // no sys/class/kfd here
	RestoreSession r(e);
	cr_expect_lt(r.prepare(), 0);
	const std::string err = amdcr::test::captured_stderr();
	cr_expect(err.find("KFD topology") != std::string::npos, "%s", err.c_str());
}

// Restores render image `rimg` (file 9) of the last GPU of a 2xmi210
// checkpoint on 2xmi210-other, before the process's /dev/kfd file: the fd
// must be the render node of the GPU the mapping chose (RESTORE_INIT
// computed it), not the checkpointed minor.
namespace {
void expect_render_first_opens_mapped_gpu(RenderNodeImage rimg)
{
	Scratch s;
	write_checkpoint(s, "2xmi210", 7);
	auto ckpt = parse_topology(fixture("2xmi210"));
	const TopologyNode *gpu = ckpt->gpus().back();
	rimg.gpu_id = gpu->gpu_id;
	ImageDir dir = ImageDir::borrow(s.images.get());
	cr_assert(write_render_image(dir, 9, rimg).ok());

	RestoreSession r(s.env("2xmi210-other"));
	cr_assert_eq(r.prepare(), 0);
	const GpuMapEntry *m = r.gpu_map().find_checkpointed(gpu->gpu_id);
	cr_assert_not_null(m);
	cr_assert_neq(m->local_render_minor, gpu->drm_render_minor,
		      "the fixtures must give the GPU another minor for this test to mean anything");

	bool retry = true;
	const int fd = r.restore_ext_file(9, &retry);
	cr_assert_geq(fd, 0, "render node restore failed: %d", fd);
	cr_expect_not(retry);
	char link[512] = {};
	cr_assert_gt(readlink(("/proc/self/fd/" + std::to_string(fd)).c_str(), link, sizeof(link) - 1), 0);
	const std::string want = (s.root / "dev/dri" / ("renderD" + std::to_string(m->local_render_minor))).string();
	cr_expect_eq(std::string(link), want, "opened %s, expected %s", link, want.c_str());
	close(fd);
}
} // namespace

// CRIU may restore a process's files in either order.
Test(restore_init, render_node_first_opens_the_mapped_gpu)
{
	auto ckpt = parse_topology(fixture("2xmi210"));
	RenderNodeImage rimg;
	rimg.id = 9;
	rimg.drm_render_minor = ckpt->gpus().back()->drm_render_minor;
	expect_render_first_opens_mapped_gpu(rimg);
}

// CRIU 4.0-4.2.1's render image names its GPU only: its checkpointed minor
// is the KFD image's.
Test(restore_init, gpu_id_only_render_image_opens_the_mapped_gpu)
{
	RenderNodeImage rimg;
	rimg.gpu_id_only = true;
	expect_render_first_opens_mapped_gpu(rimg);
}

// ... and one whose GPU no KFD image lists, on a machine without that
// gpu_id, is refused naming the file, the GPU and what the image lacks.
Test(restore_init, gpu_id_only_render_image_of_an_unknown_gpu_is_refused, .init = amdcr::test::redirect_stderr)
{
	Scratch s;
	RenderNodeImage rimg;
	rimg.gpu_id = 0x4242;
	rimg.gpu_id_only = true;
	ImageDir dir = ImageDir::borrow(s.images.get());
	cr_assert(write_render_image(dir, 9, rimg).ok());
	RestoreSession r(s.env("2xmi210"));
	cr_expect_lt(r.prepare(), 0);
	const std::string err = amdcr::test::captured_stderr();
	for (const char *want : {"amdgpu-renderD-9.img: gpu 0x4242 (render minor unknown) is in no KFD image",
				 "of CRIU 4.0-4.2.1's plugin, names its GPU only"})
		cr_expect(err.find(want) != std::string::npos, "no '%s' in: %s", want, err.c_str());
}

// In the restored task (a container: its own /dev), before its first GPU
// file changes any state: a mapped GPU's render node that does not open
// there, with no other GPU to take its place, is refused naming the node
// and the --device that passes it in.
Test(restore_init, task_without_a_mapped_render_node_is_refused_naming_it,
     .init = amdcr::test::redirect_stderr)
{
	Scratch s;
	write_checkpoint(s, "2xmi210", 7);
	close(open((s.root / "dev/kfd").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
	RestoreSession r(s.env("2xmi210-other"));
	cr_assert_eq(r.prepare(), 0);
	const GpuMapEntry &m = r.gpu_map().entries().back();
	const std::string node = (s.root / "dev/dri" / ("renderD" + std::to_string(m.local_render_minor))).string();
	cr_assert_eq(unlink(node.c_str()), 0);

	bool retry = true;
	cr_expect_eq(r.restore_ext_file(7, &retry), -ENOENT);
	const std::string err = amdcr::test::captured_stderr();
	cr_expect(err.find("cannot use " + node) != std::string::npos, "names the node: %s", err.c_str());
	cr_expect(err.find("absent") != std::string::npos, "%s", err.c_str());
	cr_expect(err.find("the container runtime must pass it in (--device " + node + "; in an OCI spec: linux.devices") != std::string::npos,
		  "says the runtime must pass it in: %s", err.c_str());
	cr_expect(err.find("KFD state recreated") == std::string::npos, "%s", err.c_str());
}

Test(restore_init, task_without_dev_kfd_is_refused_naming_it, .init = amdcr::test::redirect_stderr)
{
	Scratch s; // no dev/kfd in it
	write_checkpoint(s, "2xmi210", 7);
	RestoreSession r(s.env("2xmi210-other"));
	cr_assert_eq(r.prepare(), 0);
	bool retry = true;
	cr_expect_eq(r.restore_ext_file(7, &retry), -ENOENT);
	const std::string kfd = (s.root / "dev/kfd").string();
	const std::string err = amdcr::test::captured_stderr();
	cr_expect(err.find(kfd + " is absent in the restored task's mount namespace") != std::string::npos, "%s",
		  err.c_str());
	cr_expect(err.find("the container runtime must pass it in (--device " + kfd + "; in an OCI spec: linux.devices") != std::string::npos,
		  "%s", err.c_str());
}

// A task CRIU forks inherits the TaskRestore of its parent (CRIU's main
// process, or its parent task), then closes every fd it inherited
// (close_old_fds) before its files are restored: it must restore with
// render files of its own, not the numbers its parent opened. Here the
// parent restores render image 9 first, then a forked task does, after
// closing the render node files it inherited.
Test(restore_init, a_forked_task_restores_into_render_files_of_its_own)
{
	Scratch s;
	write_checkpoint(s, "2xmi210", 7);
	auto ckpt = parse_topology(fixture("2xmi210"));
	RenderNodeImage rimg;
	rimg.id = 9;
	rimg.gpu_id = ckpt->gpus().back()->gpu_id;
	rimg.drm_render_minor = ckpt->gpus().back()->drm_render_minor;
	ImageDir dir = ImageDir::borrow(s.images.get());
	cr_assert(write_render_image(dir, 9, rimg).ok());
	RestoreSession r(s.env("2xmi210-other"));
	cr_assert_eq(r.prepare(), 0);
	const std::string dri = (s.root / "dev/dri").string();
	auto is_render_file = [&](int fd) {
		char link[512] = {};
		return readlink(("/proc/self/fd/" + std::to_string(fd)).c_str(), link, sizeof(link) - 1) > 0 &&
		       std::string(link).rfind(dri, 0) == 0;
	};
	const int first = r.restore_ext_file(9, nullptr);
	cr_assert_geq(first, 0, "render node restore failed in the parent: %d", first);
	close(first);

	const pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		for (const auto &e : fs::directory_iterator("/proc/self/fd")) // as close_old_fds
			if (const int fd = std::stoi(e.path().filename()); is_render_file(fd))
				close(fd);
		const int fd = r.restore_ext_file(9, nullptr);
		_exit(fd >= 0 && is_render_file(fd) ? 0 : 1);
	}
	int status = 0;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		  "the forked task's restore of the render file failed (status 0x%x)", status);
}
