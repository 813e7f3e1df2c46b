// SPDX-License-Identifier: GPL-2.0-only
//
// A restored task's RESTORE_EXT_FILE dispatch (streamed images too) and
// UPDATE_VMA_MAP, over its parts (plugin/restore_task.h).
#include "plugin/restore_task.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/log.h"
#include "image/image_names.h"
#include "image/image_set.h"
#include "plugin/restore_contents.h"

namespace amdcr {

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
	TaskState &task = own();
	if (task.reported_to_guardian)
		return;
	task.reported_to_guardian = true;
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
	// A deduplicated chunk is read from wherever the dump stored it (this
	// process's file of another GPU, another process's file): a stream
	// gives each file once, in the dump's order, so a reference cannot be
	// followed. The dump writes none under --stream.
	if (const auto b = std::find_if(img.bos.begin(), img.bos.end(), [](const KfdBo &x) { return x.dedup.has_value(); });
	    b != img.bos.end())
		return make_error(EINVAL,
				  "%s: this image is deduplicated (BO %zu and maybe others refer to chunks stored "
				  "in other pages files, KFD_DEDUP), and a streamed restore (criu --stream) reads "
				  "each file once, in order: restore it from its images directory, or write a "
				  "complete checkpoint with `amdgpu-img flatten` and stream that; no GPU state was "
				  "created for this file",
				  kfd_image_name(id).c_str(), static_cast<size_t>(b - img.bos.begin()));
	if (auto st = validate_kfd_image_set(images, id, img); !st)
		return std::move(st).error();
	return own().devices.add_streamed(id, std::move(img));
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
	const TaskDevices &devices = own().devices;
	resolve_render_minor(*render, devices.kfd_images());
	if (!devices.mapping_for(*render))
		return make_error(EINVAL,
				  "%s: gpu 0x%04x (%s) is not mapped: with streamed images (criu "
				  "--stream) the GPUs are mapped when the task's /dev/kfd file is restored, and "
				  "CRIU restored this render node file before it",
				  render_image_name(id).c_str(), render->gpu_id, render_node_label(*render).c_str());
	return restore_render(images, id, *render, out);
}

// ---- mappings -----------------------------------------------------------------

int TaskRestore::update_vma_map(const char *path, uint64_t old_pgoff, uint64_t *new_pgoff, int *plugin_fd)
{
	const auto file = MappedGpuFile::of_path(path);
	if (!file)
		return -ENOTSUP;
	TaskState &task = own();
	task.files.borrow_from_task();
	const VmaMove *v = task.mappings.find(*file, old_pgoff);
	if (!v)
		return -ENOTSUP;
	int fd = -1;
	if (!v->kfd) {
		fd = ::fcntl(task.files.fd(v->local_minor, v->file_id), F_DUPFD_CLOEXEC, 0);
		if (fd < 0) {
			const int err = errno;
			log_error("mapping of %s at offset 0x%llx: dup: %s", path,
				  static_cast<unsigned long long>(old_pgoff), std::strerror(err));
			return -err;
		}
	}
	*new_pgoff = v->new_offset;
	*plugin_fd = fd;
	return 1;
}

// ---- contents ---------------------------------------------------------------

Status TaskRestore::copy_contents(const ImageDir &images, HandOverKind kind, int id,
				  const std::vector<GpuCopyJob> &jobs, std::span<const int> dmabufs)
{
	if (dmabufs.empty())
		return ok_status();
	ParallelRestore *parallel = fabric_.parallel();
	if (parallel && !own().devices.remapped())
		return parallel->hand_over(kind, id, dmabufs);
	if (parallel)
		log_info("file %d: copied in the task: its GPUs were mapped again in the task, CRIU's main "
			 "process knows the first mapping only",
			 id);
	return fill_from_images(images, jobs, copy_settings(env_, fabric_.shared_copies()));
}

} // namespace amdcr
