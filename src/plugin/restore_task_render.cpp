// SPDX-License-Identifier: GPL-2.0-only
//
// In a restored task, at RESTORE_EXT_FILE: a render node file, restored
// onto its mapped local GPU. Each GEM buffer object recreated under its
// checkpointed handle (in handle order, device/gem.h GemHandleSlot) with
// its metadata, mapped at its GPU VAs, its
// contents copied in (plugin/restore_contents.h) or handed over to CRIU's
// main process (parallel restore), and its CPU mappings recorded to be
// moved to the new mmap offsets (UPDATE_VMA_MAP).
#include "plugin/restore_task.h"

#include <fcntl.h>

#include <algorithm>
#include <cinttypes>

#include "base/drm.h"
#include "base/log.h"
#include "copy/gpu_copy.h"
#include "device/gem.h"
#include "device/system.h"
#include "image/image_names.h"
#include "image/image_set.h"
#include "image/render_image.h"
#include "plugin/restore_contents.h"
#include "plugin/summary.h"

namespace amdcr {

namespace {

// Maps `h` (of `bo` in `fd`, at its checkpointed handle) at its VAs. The
// handle is closed again (with its mappings) if anything fails.
Result<GemHandle> map_bo(int fd, const DrmBo &bo, GemHandle h)
{
	for (const DrmVm &vm : bo.vms)
		if (auto st = gem_va_map(fd, bo.handle, gem_va_address_to_restore(vm.addr), vm.size, vm.offset,
					 gem_va_flags_to_restore(static_cast<uint32_t>(vm.flags)));
		    !st)
			return std::move(st).error();
	return h;
}

// Creates `bo` in `fd` (at the file's lowest free handle).
Result<GemHandle> recreate_bo(int fd, const DrmBo &bo)
{
	return create_gem_bo(fd, bo.size, bo.alignment, bo.preferred_domains, bo.alloc_flags, bo.metadata);
}

// The positions of `bos` in ascending handle order: the order in which
// GemHandleSlot can give each its handle.
std::vector<size_t> by_handle(const std::vector<DrmBo> &bos)
{
	std::vector<size_t> order(bos.size());
	for (size_t i = 0; i < order.size(); i++)
		order[i] = i;
	std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return bos[a].handle < bos[b].handle; });
	return order;
}

} // namespace

Result<GemHandle> create_gem_bo(int render_fd, uint64_t size, uint64_t alignment, uint32_t domains,
				uint64_t flags, const std::optional<GemMetadata> &metadata)
{
	auto h = GemHandle::create(render_fd, size, alignment, domains, flags);
	if (!h || !metadata)
		return h;
	if (auto st = gem_set_metadata(render_fd, h->get(), *metadata); !st)
		return std::move(st).error().context("restoring the BO's metadata");
	return h;
}

Result<GemHandle> TaskRestore::attach_shared_bo(const ImageDir &images, const DrmBo &bo, const GpuMapEntry &m,
					       int render_fd, const std::string &holder)
{
	std::optional<GemHandle> created;
	// The file that holds the contents has their checksums in its own BO
	// entry; the files dumped after it, in their shared BO entries.
	SharedBo s = *bo.shared;
	if (!s.checksum && !bo.is_import)
		s.checksum = bo.checksum;
	auto dmabuf = shared_dmabuf(images, s, m, render_fd, holder, &created);
	if (!dmabuf)
		return std::move(dmabuf).error();
	if (created)
		return std::move(*created);
	return GemHandle::import(render_fd, dmabuf->get());
}

Result<std::vector<GemHandle>> TaskRestore::make_render_bos(const ImageDir &images, const RenderNodeImage &img,
							    const GpuMapEntry &m, int render_fd,
							    const std::string &name)
{
	// In handle order, each made the file's lowest free handle first;
	// the placeholders that took the gaps are closed on return.
	GemHandleSlot slot(render_fd);
	std::vector<std::optional<GemHandle>> made(img.bos.size());
	for (size_t i : by_handle(img.bos)) {
		const DrmBo &bo = img.bos[i];
		// A BO other files hold too: the first holder restored makes it.
		const bool shared = bo.shared && plan_.shared_among_files(bo.shared->id);
		const std::string what = strprintf("%s: BO %zu", name.c_str(), i);
		if (auto st = slot.make_next(bo.handle); !st)
			return std::move(st).error().context(what);
		auto h = shared ? attach_shared_bo(images, bo, m, render_fd, name) : recreate_bo(render_fd, bo);
		if (h)
			h = slot.check(std::move(*h), bo.handle);
		if (h)
			h = map_bo(render_fd, bo, std::move(*h));
		if (!h)
			return std::move(h).error().context(what);
		made[i].emplace(std::move(*h));
	}
	if (slot.placeholders() != 0)
		log_debug("%s: %zu placeholder BOs held the free handles below its highest GEM handle", name.c_str(),
			  slot.placeholders());
	std::vector<GemHandle> out;
	out.reserve(made.size());
	for (auto &h : made)
		out.push_back(std::move(*h));
	return out;
}

Status TaskRestore::restore_render(const ImageDir &images, int id, const RenderNodeImage &img, UniqueFd *out)
{
	TaskState &task = own();
	if (auto st = task.devices.fit(false); !st)
		return st;
	const std::string name = render_image_name(id);
	const GpuMapEntry *m = task.devices.mapping_for(img);
	if (!m)
		return make_error(EINVAL, "%s: gpu 0x%04x (%s) has no local GPU", name.c_str(), img.gpu_id,
				  render_node_label(img).c_str());
	// Checked at init too (RestorePlan), but for streamed images.
	if (auto st = check_imports_held(name, img, [this](uint32_t s) { return plan_.holder_count(s); }); !st)
		return st;
	// The same open file as KFD's RESTORE uses (in either order): the
	// driver lets only that file map the process's BOs. A further file of
	// the same node in this process whose handles or VAs would clash there
	// gets an open file of its own (TaskRenderFiles::file_for).
	auto file = task.files.file_for(m->local_render_minor, id, img);
	if (!file)
		return std::move(file).error();
	const int render_fd = file->first;
	const int file_id = file->second;
	if (auto st = ensure_fd_room(img.bos.size()); !st)
		return st;

	auto created = make_render_bos(images, img, *m, render_fd, name);
	if (!created)
		return std::move(created).error();
	std::vector<UniqueFd> dmabufs; // open until the copy is done
	std::vector<VmaMove> updates;
	std::vector<int> contents; // the dma-bufs of the BOs with contents, in image order
	for (const DrmBo &bo : img.bos) {
		if (bo.offset != 0) {
			auto offset = gem_mmap_offset(render_fd, bo.handle);
			if (!offset)
				return std::move(offset).error().context(name);
			updates.push_back({false, img.drm_render_minor, m->local_render_minor, bo.offset, *offset,
					   file_id});
		}
		if (bo.has_contents() && !(bo.shared && plan_.shared_among_files(bo.shared->id))) {
			auto dmabuf = gem_export_dmabuf(render_fd, bo.handle);
			if (!dmabuf)
				return std::move(dmabuf).error().context(name);
			contents.push_back(dmabuf->get());
			dmabufs.push_back(std::move(*dmabuf));
		}
	}
	auto job = render_copy_job(env_, id, img, *m, plan_, contents);
	if (!job)
		return std::move(job).error();
	if (auto st = copy_contents(images, HandOverKind::Render, id, {*job}, contents); !st)
		return std::move(st).error().context(name);

	*out = UniqueFd(::fcntl(render_fd, F_DUPFD_CLOEXEC, 0));
	if (!out->valid())
		return errno_error(errno, "dup of the render node file");
	// The BOs are the restored process's now.
	for (auto &h : *created)
		(void)h.release();
	task.mappings.add(updates);
	log_gpu(LogLevel::Debug, img.gpu_id, "render node %s restored as renderD%u (%zu BOs, %zu with contents)",
		render_node_label(img).c_str(), m->local_render_minor, img.bos.size(), contents.size());
	if (SharedCopies *copies = fabric_.shared_copies())
		count_file(copies->totals, img.bos.size(), img.gpu_id);
	return ok_status();
}

} // namespace amdcr
