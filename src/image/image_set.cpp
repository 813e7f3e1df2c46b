// SPDX-License-Identifier: GPL-2.0-only
#include "image/image_set.h"

#include <cerrno>
#include <cinttypes>

#include "image/image_names.h"
#include "image/pages_file.h"

namespace amdcr {

namespace {

// The pages file `name` must exist with a payload of exactly `expected`
// bytes, sealed with `seal` when given (pages_file.h). With
// `may_be_missing`, absence is fine.
Status check_pages_file(const ImageDir &dir, const std::string &name, uint64_t expected,
			bool may_be_missing, const char *what, const std::optional<DumpId> &seal)
{
	// Streamed: a file can be read only once, so its header is checked
	// against the BO table when the copy reads it, and its end when the
	// last byte is read (pages_file.h).
	if (dir.streaming())
		return ok_status();
	if (may_be_missing) {
		auto present = dir.exists(name);
		if (!present)
			return std::move(present).error();
		if (!*present)
			return ok_status();
	}
	auto reader = PagesReader::open(dir, name, seal);
	if (!reader) {
		if (reader.error().code() == ENOENT)
			return make_error(ENOENT, "%s: missing (%s, %" PRIu64 " bytes of contents)",
					  name.c_str(), what, expected);
		return std::move(reader).error();
	}
	if (reader->payload_size() != expected)
		return make_error(EINVAL,
				  "%s: holds %" PRIu64 " bytes but %s needs %" PRIu64, name.c_str(),
				  reader->payload_size(), what, expected);
	return ok_status();
}

} // namespace

Status validate_kfd_image_set(const ImageDir &dir, int id, const KfdImage &img)
{
	auto st = validate_kfd_image(img, kfd_image_name(id));
	if (!st)
		return st;
	for (const KfdDevice &d : img.devices) {
		if (!d.is_gpu())
			continue;
		auto expected = img.pages_size(d.gpu_id);
		if (!expected)
			return std::move(expected).error().context(kfd_image_name(id));
		const std::string what =
			strprintf("the VRAM/GTT BOs of gpu 0x%04x in %s", d.gpu_id,
				  kfd_image_name(id).c_str());
		st = check_pages_file(dir, kfd_pages_image_name(id, d.gpu_id), *expected,
				      *expected == 0, what.c_str(), pages_seal(img.binding));
		if (!st)
			return st;
	}
	return ok_status();
}

Status validate_render_image_set(const ImageDir &dir, int id, const RenderNodeImage &img)
{
	auto st = validate_render_image(img, render_image_name(id));
	if (!st)
		return st;
	for (size_t i = 0; i < img.bos.size(); i++) {
		const DrmBo &bo = img.bos[i];
		if (!bo.has_contents())
			continue;
		const std::string what = strprintf("BO %zu of %s", i, render_image_name(id).c_str());
		st = check_pages_file(dir,
				      drm_pages_image_name(id, img.drm_render_minor,
							   static_cast<uint32_t>(i)),
				      bo.size, false, what.c_str(), pages_seal(img.binding));
		if (!st)
			return st;
	}
	return ok_status();
}

Status validate_dmabuf_image_set(const ImageDir &dir, int id, const DmabufImage &img)
{
	if (!img.shared || !img.shared->has_contents() || img.shared->contents_id != static_cast<uint32_t>(id))
		return ok_status();
	const SharedBo &s = *img.shared;
	const std::string what = strprintf("the BO of %s", dmabuf_image_name(id).c_str());
	return check_pages_file(dir, drm_pages_image_name(id, s.contents_minor, s.contents_index), s.size, false,
				what.c_str(), pages_seal(img.binding));
}

Status check_imports_held(const std::string &name, const RenderNodeImage &img,
			  const std::function<uint32_t(uint32_t)> &holders)
{
	for (const DrmBo &bo : img.bos)
		if (bo.is_import && !(bo.shared && holders(bo.shared->id) > 1))
			return make_error(ENOTSUP,
					  "%s: GEM handle %u is an imported dma-buf that names no BO of the checkpoint "
					  "(an image of upstream's plugin); this plugin restores shared BOs of its "
					  "own images only",
					  name.c_str(), bo.handle);
	return ok_status();
}

void RestorableMappings::add(const KfdImage &img)
{
	for (const KfdDevice &d : img.devices)
		if (d.is_gpu())
			minors_.emplace(d.gpu_id, d.drm_render_minor);
	for (const KfdBo &b : img.bos)
		if (b.has_contents())
			if (const KfdDevice *d = img.find_gpu(b.gpu_id))
				offsets_.emplace(d->drm_render_minor, b.offset);
}

void RestorableMappings::add(const std::string &name, const RenderNodeImage &img)
{
	Render r{name, img.gpu_id, img.drm_render_minor, img.bos.size(), {}};
	for (const DrmBo &bo : img.bos)
		if (bo.offset != 0)
			r.offsets.push_back(bo.offset);
	renders_.push_back(std::move(r));
}

Status RestorableMappings::check(const std::vector<CriuRenderMapping> &mappings,
				 const CriuRenderMapping **uncovered) const
{
	std::set<std::pair<uint32_t, uint64_t>> covered = offsets_;
	std::map<uint32_t, std::string> named; // render minor -> its images, for the message
	for (const Render &r : renders_) {
		auto kfd_minor = minors_.find(r.gpu_id);
		const uint32_t minor = r.minor ? r.minor : kfd_minor != minors_.end() ? kfd_minor->second : 0;
		for (uint64_t off : r.offsets)
			covered.emplace(minor, off);
		std::string &text = named[minor];
		text += strprintf("%s%s with %zu BOs", text.empty() ? "" : ", ", r.name.c_str(), r.bos);
	}
	for (const CriuRenderMapping &m : mappings) {
		if (covered.count({m.minor, m.pgoff}) || covered.count({0, m.pgoff}))
			continue;
		if (uncovered)
			*uncovered = &m;
		auto images = named.find(m.minor);
		const std::string where =
			images == named.end()
				? strprintf("no render image of renderD%u, no KFD BO at that offset", m.minor)
				: images->second + ": none has a BO at that offset, nor has a KFD image";
		return make_error(EINVAL,
				  "mm-%u.img: task %u maps %s at 0x%llx-0x%llx (offset 0x%llx, CRIU file %u), "
				  "which no GPU image of the checkpoint gives back (%s): restored, the process "
				  "would find the mapping gone and fault on it (a checkpoint of a plugin that "
				  "does not dump a render node's GEM BOs, such as upstream's of CRIU 4.0-4.2.1, "
				  "whose render images have none)",
				  m.pid, m.pid, m.path.c_str(), static_cast<unsigned long long>(m.start),
				  static_cast<unsigned long long>(m.end), static_cast<unsigned long long>(m.pgoff),
				  m.file_id, where.c_str());
	}
	return ok_status();
}

} // namespace amdcr
