// SPDX-License-Identifier: GPL-2.0-only
#include "inspect/diff.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <map>
#include <memory>

#include "image/kfd_chain.h"
#include "image/pages_file.h"
#include "inspect/flags.h"

namespace amdcr::inspect {

namespace {

std::string hex(uint64_t v)
{
	return strprintf("0x%" PRIx64, v);
}

// The readers of the pages files of one side, opened once each.
class PagesCache {
public:
	explicit PagesCache(const ImageDir &dir) : dir_(dir) {}
	Result<const PagesReader *> get(const std::string &file)
	{
		auto it = open_.find(file);
		if (it == open_.end()) {
			auto r = PagesReader::open(dir_, file);
			if (!r)
				return std::move(r).error();
			it = open_.emplace(file, std::make_unique<PagesReader>(std::move(*r))).first;
		}
		return it->second.get();
	}

private:
	const ImageDir &dir_;
	std::map<std::string, std::unique_ptr<PagesReader>> open_;
};

bool deduplicated(const KfdImage &img)
{
	return std::any_of(img.bos.begin(), img.bos.end(), [](const KfdBo &b) { return b.dedup.has_value(); });
}

// One side's KFD image: where each BO's bytes are. A deduplicated image's
// BOs are read through its GPUs' streams (ChainSource: a referenced chunk
// from the file storing it), the others from their own pages file.
struct KfdSide {
	const ImageDir *dir = nullptr;
	const KfdImage *img = nullptr;
	std::vector<std::optional<PagesLocation>> whole; // not deduplicated
	std::map<uint32_t, ChainPages> streams;		  // deduplicated: by gpu_id
	std::vector<uint64_t> stream_at;		  // each BO's first byte in its GPU's stream

	static Result<KfdSide> of(const ImageDir &dir, const Loaded<KfdImage> &l)
	{
		KfdSide s{&dir, &*l.image, kfd_pages_layout(*l.image, l.id), {}, {}};
		if (!deduplicated(*l.image))
			return s;
		auto pages = resolve_chain_pages(dir, l.id, *l.image, Verify::Off);
		if (!pages)
			return std::move(pages).error();
		s.streams = std::move(*pages);
		std::map<uint32_t, uint64_t> at;
		for (const KfdBo &b : l.image->bos) {
			s.stream_at.push_back(at[b.gpu_id]);
			if (b.has_contents())
				at[b.gpu_id] += b.size;
		}
		return s;
	}
	// BO i's bytes as a sequential source (nullptr: it has none).
	Result<std::unique_ptr<ByteSource>> bo(size_t i, PagesCache &cache) const;
};

// The payload of one pages file from an offset on, as a sequential source.
class AtSource final : public ByteSource {
public:
	AtSource(const PagesReader &r, uint64_t at) : r_(r), at_(at) {}
	Status read(void *buf, size_t len) override
	{
		auto st = r_.read_at(at_, buf, len);
		at_ += len;
		return st;
	}
	Status skip(uint64_t len) override
	{
		at_ += len;
		return ok_status();
	}
	uint64_t remaining() const override { return r_.payload_size() - at_; }

private:
	const PagesReader &r_;
	uint64_t at_;
};

Result<std::unique_ptr<ByteSource>> KfdSide::bo(size_t i, PagesCache &cache) const
{
	const KfdBo &b = img->bos[i];
	if (!b.has_contents())
		return std::unique_ptr<ByteSource>();
	if (streams.empty()) {
		if (!whole[i])
			return std::unique_ptr<ByteSource>();
		auto r = cache.get(whole[i]->file);
		if (!r)
			return std::move(r).error();
		return std::unique_ptr<ByteSource>(std::make_unique<AtSource>(**r, whole[i]->offset));
	}
	auto src = std::make_unique<ChainSource>(*dir, streams.at(b.gpu_id));
	if (auto st = src->skip(stream_at[i]); !st)
		return std::move(st).error();
	return std::unique_ptr<ByteSource>(std::move(src));
}

class Differ {
public:
	Differ(const Checkpoint &a, const Checkpoint &b, const DiffOptions &opt)
		: a_(a), b_(b), pa_(a.dir), pb_(b.dir), chunk_(opt.chunk_bytes),
		  ba_(opt.chunk_bytes), bb_(opt.chunk_bytes)
	{
	}

	Result<std::vector<std::string>> run() &&
	{
		if (auto st = kfd_images(); !st)
			return std::move(st).error();
		if (auto st = render_images(); !st)
			return std::move(st).error();
		if (auto st = dmabuf_images(); !st)
			return std::move(st).error();
		return std::move(out_);
	}

private:
	void say(const std::string &where, const std::string &what) { out_.push_back(where + ": " + what); }

	template <typename T>
	void field(const std::string &where, const char *name, const T &x, const T &y)
	{
		if (x != y)
			say(where, strprintf("%s %s -> %s", name, hex(x).c_str(), hex(y).c_str()));
	}

	// A BO's metadata (bo_metadata) on each side: none, or its fields.
	void metadata(const std::string &where, const std::optional<GemMetadata> &x,
		      const std::optional<GemMetadata> &y)
	{
		if (!x || !y) {
			if (x || y)
				say(where, strprintf("metadata %s -> %s", x ? "present" : "none", y ? "present" : "none"));
			return;
		}
		field(where, "metadata flags", x->flags, y->flags);
		field(where, "metadata tiling_info", x->tiling_info, y->tiling_info);
		if (x->data != y->data)
			say(where, strprintf("metadata data differ (%zu -> %zu bytes)", x->data.size(), y->data.size()));
	}

	// Pairs images of the two sides: same id; then a lone one on each side.
	template <typename Image, typename Each>
	Status pair(const std::vector<Loaded<Image>> &as, const std::vector<Loaded<Image>> &bs,
		    bool pair_lone, Each each)
	{
		std::vector<const Loaded<Image> *> only_a, only_b;
		for (const auto &x : as) {
			auto y = std::find_if(bs.begin(), bs.end(), [&](const auto &l) { return l.id == x.id; });
			if (y == bs.end())
				only_a.push_back(&x);
		}
		for (const auto &y : bs)
			if (std::none_of(as.begin(), as.end(), [&](const auto &l) { return l.id == y.id; }))
				only_b.push_back(&y);
		auto both = [&](const Loaded<Image> &x, const Loaded<Image> &y) -> Status {
			if (!x.image)
				return Error(x.image.error()).context(a_.path);
			if (!y.image)
				return Error(y.image.error()).context(b_.path);
			const std::string where =
				x.file == y.file ? x.file : x.file + " vs " + y.file;
			return each(where, x, y);
		};
		for (const auto &x : as) {
			auto y = std::find_if(bs.begin(), bs.end(), [&](const auto &l) { return l.id == x.id; });
			if (y != bs.end())
				if (auto st = both(x, *y); !st)
					return st;
		}
		if (pair_lone && only_a.size() == 1 && only_b.size() == 1)
			return both(*only_a[0], *only_b[0]);
		for (const auto *x : only_a)
			say(x->file, "only in " + a_.path);
		for (const auto *y : only_b)
			say(y->file, "only in " + b_.path);
		return ok_status();
	}

	// Compares `size` bytes of two pages files chunk by chunk.
	Status contents(const std::string &where, const PagesLocation &x, const PagesLocation &y,
			uint64_t size)
	{
		auto rx = pa_.get(x.file);
		if (!rx)
			return std::move(rx).error().context(a_.path);
		auto ry = pb_.get(y.file);
		if (!ry)
			return std::move(ry).error().context(b_.path);
		AtSource sx(**rx, x.offset), sy(**ry, y.offset);
		return contents(where, sx, sy, size);
	}

	// Compares the next `size` bytes of two sources chunk by chunk.
	Status contents(const std::string &where, ByteSource &rx, ByteSource &ry, uint64_t size)
	{
		std::vector<std::pair<uint64_t, uint64_t>> ranges; // differing [from, to)
		uint64_t chunks = 0;
		size_t differing = 0;
		for (uint64_t off = 0; off < size; off += chunk_, chunks++) {
			const size_t n = static_cast<size_t>(std::min<uint64_t>(chunk_, size - off));
			if (auto st = rx.read(ba_.data(), n); !st)
				return std::move(st).error().context(a_.path);
			if (auto st = ry.read(bb_.data(), n); !st)
				return std::move(st).error().context(b_.path);
			if (std::memcmp(ba_.data(), bb_.data(), n) == 0)
				continue;
			differing++;
			if (!ranges.empty() && ranges.back().second == off)
				ranges.back().second = off + n;
			else
				ranges.push_back({off, off + n});
		}
		if (differing == 0)
			return ok_status();
		std::string list;
		for (size_t i = 0; i < ranges.size() && i < 8; i++)
			list += strprintf("%s[%s, %s)", i ? " " : "", hex(ranges[i].first).c_str(),
					  hex(ranges[i].second).c_str());
		if (ranges.size() > 8)
			list += strprintf(" and %zu more ranges", ranges.size() - 8);
		say(where, strprintf("contents differ in %zu of %" PRIu64 " chunks of %s: %s", differing,
				     chunks, format_size(chunk_).c_str(), list.c_str()));
		return ok_status();
	}

	// Per GPU, what deduplication saved on each side, where that differs.
	void dedup_lines(const std::string &where, const KfdImage &x, const KfdImage &y)
	{
		auto saved = [](const KfdImage &img) {
			std::map<uint32_t, std::pair<uint64_t, uint64_t>> out; // gpu -> (stored elsewhere, held)
			for (const KfdBo &b : img.bos)
				if (b.has_contents()) {
					auto &[s, h] = out[b.gpu_id];
					s += b.dedup ? b.dedup->bytes(b.size) : 0;
					h += b.size;
				}
			return out;
		};
		const auto sx = saved(x), sy = saved(y);
		std::map<uint32_t, std::pair<std::pair<uint64_t, uint64_t>, std::pair<uint64_t, uint64_t>>> both;
		for (const auto &[g, v] : sx)
			both[g].first = v;
		for (const auto &[g, v] : sy)
			both[g].second = v;
		auto text = [](std::pair<uint64_t, uint64_t> v) {
			return strprintf("%s of %s (%.1f%%)", format_size(v.first).c_str(), format_size(v.second).c_str(),
					 v.second ? 100.0 * static_cast<double>(v.first) / static_cast<double>(v.second)
						  : 0.0);
		};
		for (const auto &[g, v] : both)
			if (v.first.first != v.second.first)
				say(where, strprintf("deduplicated: GPU 0x%04x: stored once elsewhere %s -> %s", g,
						     text(v.first).c_str(), text(v.second).c_str()));
	}

	void devices(const std::string &where, const KfdImage &x, const KfdImage &y)
	{
		for (const KfdDevice &d : x.devices) {
			auto e = std::find_if(y.devices.begin(), y.devices.end(),
					      [&](const KfdDevice &o) { return o.node_id == d.node_id; });
			const std::string at = where + strprintf(": node %u", d.node_id);
			if (e == y.devices.end()) {
				say(at, "only in " + a_.path);
				continue;
			}
			field(at, "gpu_id", d.gpu_id, e->gpu_id);
#define AMDCR_DIFF(name, rule, check) field(at, #name, d.name, e->name);
			AMDCR_NODE_PROPERTIES(AMDCR_DIFF)
#undef AMDCR_DIFF
			field(at, "hive_id", d.hive_id, e->hive_id);
			field(at, "vram_public", d.vram_public, e->vram_public);
			field(at, "vram_size", d.vram_size, e->vram_size);
			if (d.iolinks != e->iolinks)
				say(at, "io links differ");
		}
		for (const KfdDevice &e : y.devices)
			if (std::none_of(x.devices.begin(), x.devices.end(),
					 [&](const KfdDevice &o) { return o.node_id == e.node_id; }))
				say(where + strprintf(": node %u", e.node_id), "only in " + b_.path);
	}

	Status kfd_pair(const std::string &where, const Loaded<KfdImage> &lx, const Loaded<KfdImage> &ly)
	{
		const KfdImage &x = *lx.image, &y = *ly.image;
		field(where, "pid", x.pid, y.pid);
		field(where, "num_of_objects", x.num_of_objects, y.num_of_objects);
		field(where, "shared_mem_size", x.shared_mem_size, y.shared_mem_size);
		field(where, "shared_mem_magic", x.shared_mem_magic, y.shared_mem_magic);
		if (x.priv_data != y.priv_data)
			say(where, strprintf("private data differs (%zu -> %zu bytes)", x.priv_data.size(),
					     y.priv_data.size()));
		devices(where, x, y);
		dedup_lines(where, x, y);
		auto sx = KfdSide::of(a_.dir, lx);
		if (!sx)
			return std::move(sx).error().context(a_.path);
		auto sy = KfdSide::of(b_.dir, ly);
		if (!sy)
			return std::move(sy).error().context(b_.path);
		auto key = [](const KfdBo &b) { return std::pair(b.gpu_id, b.addr); };
		for (size_t i = 0; i < x.bos.size(); i++) {
			const KfdBo &b = x.bos[i];
			const std::string at = where + strprintf(": BO GPU 0x%04x VA %s (%s, %s)", b.gpu_id,
								 hex(b.addr).c_str(), kfd_bo_type(b.alloc_flags),
								 format_size(b.size).c_str());
			auto it = std::find_if(y.bos.begin(), y.bos.end(),
					       [&](const KfdBo &o) { return key(o) == key(b); });
			if (it == y.bos.end()) {
				say(at, "only in " + a_.path);
				continue;
			}
			const size_t j = static_cast<size_t>(it - y.bos.begin());
			field(at, "size", b.size, it->size);
			field(at, "alloc_flags", b.alloc_flags, it->alloc_flags);
			field(at, "handle", b.handle, it->handle);
			if (b.size != it->size)
				continue;
			auto rx = sx->bo(i, pa_);
			if (!rx)
				return std::move(rx).error().context(a_.path);
			auto ry = sy->bo(j, pb_);
			if (!ry)
				return std::move(ry).error().context(b_.path);
			if (*rx && *ry)
				if (auto st = contents(at, **rx, **ry, b.size); !st)
					return st;
		}
		for (const KfdBo &b : y.bos)
			if (std::none_of(x.bos.begin(), x.bos.end(), [&](const KfdBo &o) { return key(o) == key(b); }))
				say(where + strprintf(": BO GPU 0x%04x VA %s (%s, %s)", b.gpu_id, hex(b.addr).c_str(),
						      kfd_bo_type(b.alloc_flags), format_size(b.size).c_str()),
				    "only in " + b_.path);
		return ok_status();
	}

	Status render_pair(const std::string &where, const Loaded<RenderNodeImage> &lx,
			   const Loaded<RenderNodeImage> &ly)
	{
		const RenderNodeImage &x = *lx.image, &y = *ly.image;
		field(where, "gpu_id", x.gpu_id, y.gpu_id);
		field(where, "drm_render_minor", x.drm_render_minor, y.drm_render_minor);
		if (x.bos.size() != y.bos.size())
			say(where, strprintf("%zu BOs -> %zu BOs", x.bos.size(), y.bos.size()));
		const auto wx = render_pages_layout(x, lx.id), wy = render_pages_layout(y, ly.id);
		for (size_t i = 0; i < x.bos.size() && i < y.bos.size(); i++) {
			const DrmBo &p = x.bos[i], &q = y.bos[i];
			const std::string at = where + strprintf(": BO %zu", i);
			field(at, "addr", p.addr, q.addr);
			field(at, "size", p.size, q.size);
			field(at, "alloc_flags", p.alloc_flags, q.alloc_flags);
			field(at, "alignment", p.alignment, q.alignment);
			field(at, "preferred_domains", p.preferred_domains, q.preferred_domains);
			field(at, "handle", p.handle, q.handle);
			field(at, "is_import", p.is_import, q.is_import);
			if (p.vms != q.vms)
				say(at, "VM mappings differ");
			metadata(at, p.metadata, q.metadata);
			if (wx[i] && wy[i] && p.size == q.size)
				if (auto st = contents(at, *wx[i], *wy[i], p.size); !st)
					return st;
		}
		return ok_status();
	}

	Status kfd_images()
	{
		return pair(a_.kfd, b_.kfd, true, [&](const std::string &w, const auto &x, const auto &y) {
			return kfd_pair(w, x, y);
		});
	}

	Status render_images()
	{
		return pair(a_.render, b_.render, false, [&](const std::string &w, const auto &x, const auto &y) {
			return render_pair(w, x, y);
		});
	}

	Status dmabuf_images()
	{
		return pair(a_.dmabuf, b_.dmabuf, false, [&](const std::string &w, const auto &x, const auto &y) {
			field(w, "gem_handle", x.image->gem_handle, y.image->gem_handle);
			const auto &sx = x.image->shared, &sy = y.image->shared;
			metadata(w, sx ? sx->metadata : std::nullopt, sy ? sy->metadata : std::nullopt);
			return ok_status();
		});
	}

	const Checkpoint &a_, &b_;
	PagesCache pa_, pb_;
	uint64_t chunk_;
	std::vector<uint8_t> ba_, bb_;
	std::vector<std::string> out_;
};

} // namespace

Result<std::vector<std::string>> diff_checkpoints(const Checkpoint &a, const Checkpoint &b,
						  const DiffOptions &opt)
{
	if (opt.chunk_bytes == 0 || opt.chunk_bytes > kMaxDiffChunk)
		return make_error(EINVAL, "chunk size %" PRIu64 " outside 1..%" PRIu64, opt.chunk_bytes,
				  kMaxDiffChunk);
	for (const Checkpoint *ck : {&a, &b})
		for (const auto &l : ck->kfd)
			if (l.image && l.image->parent)
				return make_error(EINVAL,
						  "%s/%s is an incremental checkpoint (its parent holds some of its "
						  "chunks): diff compares complete checkpoints; amdgpu-img flatten it first",
						  ck->path.c_str(), l.file.c_str());
	return Differ(a, b, opt).run();
}

} // namespace amdcr::inspect
