// SPDX-License-Identifier: GPL-2.0-only
#include "inspect/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "image/image_names.h"

namespace amdcr::inspect {

namespace {

Result<std::vector<std::string>> list_amdgpu_files(const ImageDir &dir)
{
	auto all = dir.names();
	if (!all)
		return std::move(all).error().context("listing the image directory");
	std::vector<std::string> names;
	for (std::string &name : *all)
		if (name.starts_with("amdgpu-") || name.starts_with(".amdgpu-"))
			names.push_back(std::move(name));
	return names;
}

template <typename Image, typename Read>
Result<std::vector<Loaded<Image>>> load_all(const ImageDir &dir, const char *prefix,
					     std::string (*name)(int), Read read)
{
	auto ids = dir.ids_with_prefix(prefix);
	if (!ids)
		return std::move(ids).error();
	std::vector<Loaded<Image>> out;
	for (int id : *ids) {
		Integrity integrity = Integrity::Unchecked;
		auto image = read(dir, id, &integrity);
		out.push_back(Loaded<Image>{id, name(id), std::move(image), integrity});
	}
	return out;
}

} // namespace

Result<Checkpoint> load_checkpoint(const std::string &path)
{
	auto dir = ImageDir::open(path);
	if (!dir)
		return std::move(dir).error().context(path);
	auto files = list_amdgpu_files(*dir);
	if (!files)
		return std::move(files).error().context(path);
	auto kfd = load_all<KfdImage>(*dir, kKfdImagePrefix, kfd_image_name,
				      [](const ImageDir &d, int id, Integrity *i) {
					      return read_kfd_image(d, id, Verify::On, i);
				      });
	if (!kfd)
		return std::move(kfd).error().context(path);
	auto render = load_all<RenderNodeImage>(
		*dir, kRenderImagePrefix, render_image_name,
		[](const ImageDir &d, int id, Integrity *i) { return read_render_image(d, id, Verify::On, i); });
	if (!render)
		return std::move(render).error().context(path);
	// CRIU 4.0-4.2.1's render images name their GPU only: its render
	// minor is in the KFD images.
	for (auto &r : *render)
		for (const auto &k : *kfd)
			if (r.image && k.image && resolve_render_minor(*r.image, *k.image))
				break;
	auto dmabuf = load_all<DmabufImage>(
		*dir, kDmabufImagePrefix, dmabuf_image_name,
		[](const ImageDir &d, int id, Integrity *i) { return read_dmabuf_image(d, id, Verify::On, i); });
	if (!dmabuf)
		return std::move(dmabuf).error().context(path);
	Checkpoint ck{path, std::move(*dir), std::move(*kfd), std::move(*render),
		      std::move(*dmabuf), std::move(*files), std::nullopt, std::nullopt};
	if (auto facts = read_criu_facts(ck.dir); facts)
		ck.criu = *facts;
	else
		ck.criu_error = facts.error().message();
	return ck;
}

std::vector<std::optional<PagesLocation>> kfd_pages_layout(const KfdImage &img, int id)
{
	std::vector<std::optional<PagesLocation>> out;
	out.reserve(img.bos.size());
	std::vector<std::pair<uint32_t, uint64_t>> next; // gpu_id -> next offset
	for (const KfdBo &bo : img.bos) {
		if (!bo.has_contents()) {
			out.emplace_back(std::nullopt);
			continue;
		}
		auto it = std::find_if(next.begin(), next.end(),
				       [&](const auto &p) { return p.first == bo.gpu_id; });
		if (it == next.end())
			it = next.insert(next.end(), {bo.gpu_id, 0});
		out.push_back(PagesLocation{kfd_pages_image_name(id, bo.gpu_id), it->second});
		it->second += bo.stored_bytes(); // validated: no overflow (pages_size)
	}
	return out;
}

std::vector<std::optional<PagesLocation>> render_pages_layout(const RenderNodeImage &img, int id)
{
	std::vector<std::optional<PagesLocation>> out;
	out.reserve(img.bos.size());
	for (size_t i = 0; i < img.bos.size(); i++) {
		const DrmBo &bo = img.bos[i];
		if (!bo.has_contents())
			out.emplace_back(std::nullopt);
		else
			out.push_back(PagesLocation{
				drm_pages_image_name(id, img.drm_render_minor, static_cast<uint32_t>(i)),
				0});
	}
	return out;
}

std::string format_size(uint64_t bytes)
{
	static constexpr struct {
		unsigned shift;
		const char *unit;
	} kUnits[] = {{40, "TiB"}, {30, "GiB"}, {20, "MiB"}, {10, "KiB"}};
	for (const auto &u : kUnits)
		if (bytes >= (1ull << u.shift) && bytes % (1ull << u.shift) == 0)
			return strprintf("%llu %s", static_cast<unsigned long long>(bytes >> u.shift),
					 u.unit);
	return strprintf("%llu bytes", static_cast<unsigned long long>(bytes));
}

} // namespace amdcr::inspect
