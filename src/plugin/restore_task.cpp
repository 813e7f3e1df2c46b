// SPDX-License-Identifier: GPL-2.0-only
//
// A restored task's RESTORE_EXT_FILE dispatch (streamed images too), its
// render node files and UPDATE_VMA_MAP.
#include "plugin/restore_task.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/log.h"
#include "device/processes.h"
#include "image/image_names.h"
#include "image/image_set.h"
#include "plugin/criu_api.h"
#include "plugin/restore_contents.h"

namespace amdcr {
namespace {

// An fd number above those the restored task will use: CRIU's own choice
// when it exports one, else high in the fd table.
Result<UniqueFd> move_fd_high(UniqueFd fd)
{
	int base = criu::unused_fd_of_task(static_cast<int>(::getpid())).value_or(-1);
	if (base < 0) { // not under CRIU, or CRIU does not know the task
		struct rlimit rl {};
		const rlim_t cur = ::getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : 1024;
		base = static_cast<int>(std::min<rlim_t>(cur > 1024 ? cur - 512 : cur / 2, 1 << 20));
	}
	const int high = ::fcntl(fd.get(), F_DUPFD_CLOEXEC, base);
	if (high < 0)
		return errno_error(errno, "moving an fd above the restored task's fds");
	return UniqueFd(high);
}

bool is_kfd_path(const char *path)
{
	const size_t n = std::strlen(path);
	return n >= 4 && std::strcmp(path + n - 4, "/kfd") == 0;
}

} // namespace

int TaskRestore::restore_ext_file(int id)
{
	UniqueFd out;
	bool ours = true;
	Status st;
	// Asked at each hook: CRIU moves its service fds (the image directory's
	// among them) in every restored task.
	if (auto images = session_image_dir(env_); !images)
		st = std::move(images).error();
	else
		st = restore_file(*images, id, &out, &ours);
	if (st && !ours)
		return -ENOTSUP; // not a file of ours
	if (!st) {
		log_error("restore of file %d failed: %s", id, st.error().message().c_str());
		return st.error().neg();
	}
	return out.release();
}

Status TaskRestore::restore_file(const ImageDir &images, int id, UniqueFd *out, bool *ours)
{
	*ours = true;
	if (plan_.streamed()) {
		report_to_guardian(); // too soon for a file not ours: harmless
		return restore_streamed(images, id, out, ours);
	}
	if (const KfdImage *img = plan_.kfd_image(id)) {
		report_to_guardian();
		return restore_kfd(images, id, *img, out);
	}
	if (const DmabufImage *img = plan_.dmabuf_image(id)) {
		report_to_guardian();
		return restore_dmabuf(images, id, *img, out);
	}
	if (const RenderNodeImage *img = plan_.render_image(id)) {
		report_to_guardian();
		return restore_render(images, id, *img, out);
	}
	// Not ours, or ours with its image lost: only CRIU's "Unable to
	// restore" would follow, so say which files were looked for.
	log_warn("CRIU file %d: this checkpoint has GPU images but none for this file (%s, %s and %s are "
		 "absent): if it was /dev/kfd or a render node, its image is missing from the image "
		 "directory; if it is another device's, another plugin restores it",
		 id, kfd_image_name(id).c_str(), render_image_name(id).c_str(), dmabuf_image_name(id).c_str());
	*ours = false;
	return ok_status();
}

void TaskRestore::report_to_guardian()
{
	const pid_t me = ::getpid();
	if (reported_to_guardian_ == me)
		return;
	reported_to_guardian_ = me;
	fabric_.report_task();
}

// ---- streamed images -------------------------------------------------------

Result<const KfdImage *> TaskRestore::load_streamed_kfd(const ImageDir &images, int id, KfdImage img)
{
	// A chain's link needs its parent checkpoint's pages files, which a
	// stream (one directory's files, each read once, in order) cannot
	// reach: refused before this file's GPU state is made.
	if (img.parent)
		return make_error(EINVAL,
				  "%s: this image is one link of an incremental checkpoint (a chain: some of its "
				  "BOs' chunks are in its parent checkpoint), and a streamed restore (criu "
				  "--stream) reads only this checkpoint's files: restore it from its images "
				  "directory, or write a complete checkpoint with `amdgpu-img flatten` and stream "
				  "that; no GPU state was created for this file",
				  kfd_image_name(id).c_str());
	if (auto st = validate_kfd_image_set(images, id, img); !st)
		return std::move(st).error();
	CheckpointedGpus gpus;
	gpus.add(img);
	if (map_.entries().empty()) {
		auto map = map_checkpoint(env_, gpus, {}, {});
		if (!map)
			return std::move(map).error();
		map_ = std::move(*map);
	} else {
		for (uint32_t g : gpus.held)
			if (!map_.find_checkpointed(g))
				return make_error(EINVAL,
						  "%s: gpu 0x%04x is not among the GPUs this task's first KFD image "
						  "mapped (streamed images are mapped one KFD file at a time)",
						  kfd_image_name(id).c_str(), g);
	}
	return &(streamed_kfd_.insert_or_assign(id, std::move(img)).first->second);
}

Status TaskRestore::restore_streamed(const ImageDir &images, int id, UniqueFd *out, bool *ours)
{
	auto kfd = read_checked_kfd_image(images, id, env_.config);
	if (kfd) {
		auto loaded = load_streamed_kfd(images, id, std::move(*kfd));
		if (!loaded)
			return std::move(loaded).error();
		return restore_kfd(images, id, **loaded, out);
	}
	if (kfd.error().code() != ENOENT)
		return std::move(kfd).error();
	auto render = read_checked_render_image(images, id, env_.config);
	if (!render) {
		if (render.error().code() != ENOENT)
			return std::move(render).error();
		*ours = false;
		return ok_status();
	}
	if (auto st = validate_render_image_set(images, id, *render); !st)
		return st;
	resolve_render_minor(*render, kfd_images());
	if (!mapping_for(*render))
		return make_error(EINVAL,
				  "%s: gpu 0x%04x (%s) is not mapped: with streamed images (criu "
				  "--stream) the GPUs are mapped when the task's /dev/kfd file is restored, and "
				  "CRIU restored this render node file before it",
				  render_image_name(id).c_str(), render->gpu_id, render_node_label(*render).c_str());
	return restore_render(images, id, *render, out);
}

// ---- render node files -------------------------------------------------------

Result<UniqueFd> TaskRestore::open_render_file(uint32_t minor) const
{
	auto fd = open_render_node(env_.paths, minor);
	if (!fd)
		return std::move(fd).error();
	return move_fd_high(std::move(*fd));
}

Result<int> TaskRestore::local_render_fd(uint32_t minor)
{
	if (auto it = render_files_.find(minor); it != render_files_.end())
		return it->second.fd();
	auto high = open_render_file(minor);
	if (!high)
		return std::move(high).error();
	const int raw = high->get();
	render_files_.emplace(minor, RenderFile{std::move(*high), -1});
	return raw;
}

Result<std::pair<int, int>> TaskRestore::render_file_for(uint32_t minor, int id, const RenderNodeImage &img)
{
	if (auto it = extra_render_files_.find(id); it != extra_render_files_.end())
		return std::pair{it->second.second.fd(), id}; // CRIU asked again (retry)
	RenderFileUse &use = render_file_use_[minor];
	bool clash = false;
	for (const DrmBo &bo : img.bos) {
		clash |= use.handles.count(bo.handle) != 0;
		for (const DrmVm &vm : bo.vms) {
			auto next = use.vas.lower_bound(vm.addr);
			clash |= next != use.vas.end() && next->first < vm.addr + vm.size;
			clash |= next != use.vas.begin() && std::prev(next)->second > vm.addr;
		}
	}
	if (use.ids.count(id) || !clash) {
		auto fd = local_render_fd(minor);
		if (!fd)
			return std::move(fd).error();
		if (use.ids.insert(id).second)
			for (const DrmBo &bo : img.bos) {
				use.handles.insert(bo.handle);
				for (const DrmVm &vm : bo.vms)
					use.vas.emplace(vm.addr, vm.addr + vm.size);
			}
		return std::pair{*fd, -1};
	}
	auto high = open_render_file(minor);
	if (!high)
		return std::move(high).error();
	const int raw = high->get();
	extra_render_files_.emplace(id, std::pair{minor, RenderFile{std::move(*high), -1}});
	log_debug("%s: its GEM handles or GPU VAs clash with those of another file of renderD%u in this task: "
		  "restored as an open file of its own",
		  render_image_name(id).c_str(), minor);
	return std::pair{raw, id};
}

void TaskRestore::borrow_task_render_files()
{
	if (borrowed_from_task_)
		return;
	borrowed_from_task_ = true;
	auto borrow = [](uint32_t minor, RenderFile &file) {
		const auto theirs = fd_on_same_file(0, file.ours.get());
		if (!theirs)
			return; // the task holds none: ours stays (as upstream's does)
		file.borrowed = *theirs;
		file.ours.reset();
		log_debug("renderD%u: mapped through the task's own fd %d", minor, *theirs);
	};
	for (auto &[minor, file] : render_files_)
		borrow(minor, file);
	for (auto &[id, file] : extra_render_files_)
		borrow(file.first, file.second);
}

int TaskRestore::update_vma_map(const char *path, uint64_t old_pgoff, uint64_t *new_pgoff, int *plugin_fd)
{
	if (!path)
		return -ENOTSUP;
	const bool kfd = is_kfd_path(path);
	const uint32_t minor = render_minor_of_path(path);
	if (!kfd && minor == 0)
		return -ENOTSUP;
	borrow_task_render_files();
	for (const auto &v : vmas_) {
		if (v.old_offset != old_pgoff || v.kfd != kfd || (!kfd && v.old_minor != minor))
			continue;
		int fd = -1;
		if (!v.kfd) {
			const RenderFile &file = v.file_id < 0 ? render_files_.at(v.local_minor)
							       : extra_render_files_.at(v.file_id).second;
			fd = ::fcntl(file.fd(), F_DUPFD_CLOEXEC, 0);
			if (fd < 0) {
				const int err = errno;
				log_error("mapping of %s at offset 0x%llx: dup: %s", path,
					  static_cast<unsigned long long>(old_pgoff), std::strerror(err));
				return -err;
			}
		}
		*new_pgoff = v.new_offset;
		*plugin_fd = fd;
		return 1;
	}
	return -ENOTSUP;
}

// ---- contents ---------------------------------------------------------------

Status TaskRestore::copy_contents(const ImageDir &images, HandOverKind kind, int id,
				  const std::vector<GpuCopyJob> &jobs, std::span<const int> dmabufs)
{
	if (dmabufs.empty())
		return ok_status();
	ParallelRestore *parallel = fabric_.parallel();
	if (parallel && !remapped_in_task_)
		return parallel->hand_over(kind, id, dmabufs);
	if (parallel)
		log_info("file %d: copied in the task: its GPUs were mapped again in the task, CRIU's main "
			 "process knows the first mapping only",
			 id);
	return fill_from_images(images, jobs, copy_settings(env_, fabric_.shared_copies()));
}

} // namespace amdcr
