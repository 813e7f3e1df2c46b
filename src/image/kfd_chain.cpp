// SPDX-License-Identifier: GPL-2.0-only
#include "image/kfd_chain.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <map>
#include <tuple>

#include "image/image_names.h"
#include "image/image_set.h"

namespace amdcr {

namespace {

std::string join(const std::string &dir, const char *name)
{
	return dir.empty() ? name : dir + "/" + name;
}

using BoKey = std::tuple<uint64_t, uint64_t, uint32_t, uint32_t>;

BoKey key_of(const KfdBo &b)
{
	return {b.addr, b.size, b.alloc_flags, b.gpu_id};
}

} // namespace

std::string describe_link(const ImageDir &top, const std::string &rel)
{
	char target[4096];
	const ssize_t n = ::readlinkat(top.fd(), rel.c_str(), target, sizeof(target) - 1);
	if (n <= 0)
		return "'" + rel + "'";
	return "'" + rel + "' (-> " + std::string(target, static_cast<size_t>(n)) + ")";
}

const KfdBo *same_bo(const KfdImage &parent, const KfdBo &bo)
{
	for (const KfdBo &p : parent.bos)
		if (p.has_contents() && key_of(p) == key_of(bo))
			return &p;
	return nullptr;
}

Result<std::optional<ParentKfdImage>> find_parent_kfd_image(const ImageDir &dir, uint32_t pid, std::string *why)
{
	auto say = [why](std::string s) {
		if (why)
			*why = std::move(s);
		return std::optional<ParentKfdImage>();
	};
	if (dir.streaming())
		return say("the images are streamed");
	auto present = dir.exists(kParentLink);
	if (!present)
		return std::move(present).error();
	if (!*present)
		return say("no parent checkpoint");
	auto sub = ImageDir::open_sub(dir, kParentLink);
	if (!sub)
		return std::move(sub).error().context("the parent checkpoint " + describe_link(dir, kParentLink));
	auto ids = sub->ids_with_prefix(kKfdImagePrefix);
	if (!ids)
		return std::move(ids).error();
	for (int id : *ids) {
		auto img = read_kfd_image(*sub, id, Verify::On);
		if (!img)
			return std::move(img).error().context("the parent checkpoint " + describe_link(dir, kParentLink));
		if (img->pid != pid)
			continue;
		if (!img->binding)
			return say(kfd_image_name(id) + " of the parent checkpoint is not this plugin's");
		if (auto st = validate_kfd_image_set(*sub, id, *img); !st)
			return std::move(st).error().context("the parent checkpoint " + describe_link(dir, kParentLink));
		return std::optional<ParentKfdImage>(ParentKfdImage{id, std::move(*img)});
	}
	return say(strprintf("the parent checkpoint has no KFD image of pid %u", pid));
}

Result<KfdChain> KfdChain::resolve(const ImageDir &dir, int id, const KfdImage &img, Verify verify)
{
	KfdChain chain;
	chain.links_.push_back({"", id, img});
	while (const auto &parent = chain.links_.back().img.parent) {
		const Link &child = chain.links_.back();
		const std::string child_name = join(child.dir, kfd_image_name(child.id).c_str());
		if (chain.links_.size() >= kMaxChainDepth)
			return make_error(ELOOP, "%s: a chain of more than %zu checkpoints (a loop of parent links?)",
					  child_name.c_str(), kMaxChainDepth);
		const std::string rel = join(child.dir, kParentLink);
		const std::string what =
			strprintf("%s is an incremental checkpoint whose parent checkpoint %s", child_name.c_str(),
				  describe_link(dir, rel).c_str());
		auto sub = ImageDir::open_sub(dir, rel);
		if (!sub)
			return make_error(sub.error().code(), "%s cannot be opened: %s", what.c_str(),
					  sub.error().message().c_str());
		const std::string name = kfd_image_name(static_cast<int>(parent->file_id));
		auto pimg = read_kfd_image(*sub, static_cast<int>(parent->file_id), verify);
		if (!pimg)
			return make_error(pimg.error().code(), "%s lacks a readable %s: %s", what.c_str(), name.c_str(),
					  pimg.error().message().c_str());
		if (!pimg->binding || pimg->binding->dump_id != parent->dump_id)
			return make_error(EINVAL, "%s holds a %s of another dump (%s, not %s): the parent was replaced",
					  what.c_str(), name.c_str(),
					  pimg->binding ? dump_id_text(pimg->binding->dump_id).c_str() : "none",
					  dump_id_text(parent->dump_id).c_str());
		if (pimg->pid != child.img.pid)
			return make_error(EINVAL, "%s: its %s is of pid %u, not %u", what.c_str(), name.c_str(),
					  pimg->pid, child.img.pid);
		if (auto st = validate_kfd_image_set(*sub, static_cast<int>(parent->file_id), *pimg); !st)
			return make_error(st.error().code(), "%s: %s", what.c_str(), st.error().message().c_str());
		chain.links_.push_back({rel, static_cast<int>(parent->file_id), std::move(*pimg)});
	}
	return chain;
}

namespace {

// One link's BOs of one GPU as its pages file lays them out.
struct LinkLayout {
	std::map<BoKey, size_t> by_key;		 // BO table index of each BO with contents
	std::map<size_t, uint64_t> start;	 // its first byte in the pages file
	std::map<size_t, std::vector<uint64_t>> rank; // chunk k's offset in the BO's stored bytes / chunk size
};

LinkLayout layout_of(const KfdImage &img, uint32_t gpu_id)
{
	LinkLayout l;
	uint64_t at = 0;
	for (size_t i = 0; i < img.bos.size(); i++) {
		const KfdBo &b = img.bos[i];
		if (b.gpu_id != gpu_id || !b.has_contents())
			continue;
		l.by_key.emplace(key_of(b), i);
		l.start[i] = at;
		at += stored_bytes(b.size, b.from_parent);
		if (!b.from_parent)
			continue;
		auto &r = l.rank[i];
		const uint64_t chunks = chunk_count(b.size, b.from_parent->chunk_bytes);
		r.resize(static_cast<size_t>(chunks));
		uint64_t stored = 0;
		for (uint64_t k = 0; k < chunks; k++) {
			r[k] = stored;
			stored += b.from_parent->has(k) ? 0 : 1;
		}
	}
	return l;
}

void append(ChainPages &out, uint32_t file, uint64_t offset, uint64_t length)
{
	if (!out.segments.empty()) {
		PagesSegment &last = out.segments.back();
		if (last.file == file && last.offset + last.length == offset) {
			last.length += length;
			out.total += length;
			return;
		}
	}
	out.segments.push_back({file, offset, length});
	out.total += length;
}

} // namespace

Result<ChainPages> KfdChain::pages(uint32_t gpu_id) const
{
	ChainPages out;
	std::vector<LinkLayout> layouts;
	for (const Link &l : links_) {
		out.files.push_back({l.dir, kfd_pages_image_name(l.id, gpu_id)});
		layouts.push_back(layout_of(l.img, gpu_id));
	}
	const KfdImage &top = links_.front().img;
	for (size_t i = 0; i < top.bos.size(); i++) {
		const KfdBo &b = top.bos[i];
		if (b.gpu_id != gpu_id || !b.has_contents())
			continue;
		if (!b.from_parent) {
			append(out, 0, layouts[0].start.at(i), b.size);
			continue;
		}
		const uint32_t cb = b.from_parent->chunk_bytes;
		const uint64_t chunks = chunk_count(b.size, cb);
		for (uint64_t k = 0; k < chunks; k++) {
			size_t link = 0, bo = i;
			while (links_[link].img.bos[bo].from_parent && links_[link].img.bos[bo].from_parent->has(k)) {
				const auto found = link + 1 < links_.size() ? layouts[link + 1].by_key.find(key_of(b))
									  : layouts[link].by_key.end();
				if (link + 1 >= links_.size() || found == layouts[link + 1].by_key.end())
					return make_error(EINVAL,
							  "%s: chunk %" PRIu64 " of BO %zu at 0x%" PRIx64
							  " is in the parent checkpoint, whose %s has no such BO",
							  join(links_[link].dir, kfd_image_name(links_[link].id).c_str()).c_str(),
							  k, i, b.addr,
							  link + 1 < links_.size()
								  ? join(links_[link + 1].dir,
									 kfd_image_name(links_[link + 1].id).c_str()).c_str()
								  : "image");
				link++;
				bo = found->second;
				const auto &f = links_[link].img.bos[bo].from_parent;
				if (f && f->chunk_bytes != cb)
					return make_error(EINVAL, "%s: BO at 0x%" PRIx64 " in chunks of %u, its child in chunks of %u",
							  join(links_[link].dir, kfd_image_name(links_[link].id).c_str()).c_str(),
							  b.addr, f->chunk_bytes, cb);
			}
			const auto &ranks = layouts[link].rank;
			const auto r = ranks.find(bo);
			const uint64_t stored_before = r == ranks.end() ? k : r->second[k];
			append(out, static_cast<uint32_t>(link), layouts[link].start.at(bo) + stored_before * cb,
			       std::min<uint64_t>(cb, b.size - k * cb));
		}
	}
	return out;
}

Result<std::map<uint32_t, ChainPages>> resolve_chain_pages(const ImageDir &dir, int id, const KfdImage &img,
							   Verify verify)
{
	std::map<uint32_t, ChainPages> out;
	if (!img.parent)
		return out;
	auto chain = KfdChain::resolve(dir, id, img, verify);
	if (!chain)
		return std::move(chain).error();
	for (const KfdDevice &d : img.devices) {
		if (!d.is_gpu())
			continue;
		auto p = chain->pages(d.gpu_id);
		if (!p)
			return std::move(p).error();
		out.emplace(d.gpu_id, std::move(*p));
	}
	return out;
}

Result<const PagesReader *> ChainSource::reader(uint32_t file)
{
	if (readers_.size() < pages_->files.size())
		readers_.resize(pages_->files.size());
	auto &r = readers_.at(file);
	if (r)
		return &*r;
	const ChainPages::File &f = pages_->files[file];
	if (f.dir.empty()) {
		auto p = PagesReader::open(*top_, f.name);
		if (!p)
			return std::move(p).error();
		r.emplace(std::move(*p));
		return &*r;
	}
	auto dir = ImageDir::open_sub(*top_, f.dir);
	if (!dir)
		return std::move(dir).error();
	auto p = PagesReader::open(*dir, f.name);
	if (!p)
		return std::move(p).error().context("the parent checkpoint " + describe_link(*top_, f.dir));
	r.emplace(std::move(*p));
	return &*r;
}

Status ChainSource::read(void *buf, size_t len)
{
	if (len > remaining())
		return make_error(EINVAL, "reading %zu bytes at %" PRIu64 " of a chain's %" PRIu64 " bytes", len, pos_,
				  pages_->total);
	auto *out = static_cast<uint8_t *>(buf);
	while (len > 0) {
		const PagesSegment &s = pages_->segments[seg_];
		const size_t n = static_cast<size_t>(std::min<uint64_t>(len, s.length - seg_off_));
		auto r = reader(s.file);
		if (!r)
			return std::move(r).error();
		if (auto st = (*r)->read_at(s.offset + seg_off_, out, n); !st) {
			const std::string &dir = pages_->files[s.file].dir;
			return dir.empty() ? st : std::move(st).error().context("the parent checkpoint " +
										describe_link(*top_, dir));
		}
		out += n;
		len -= n;
		pos_ += n;
		seg_off_ += n;
		if (seg_off_ == s.length) {
			seg_++;
			seg_off_ = 0;
		}
	}
	return ok_status();
}

std::string ChainSource::locate(uint64_t offset) const
{
	uint64_t at = 0;
	for (const PagesSegment &s : pages_->segments) {
		if (offset < at + s.length) {
			const ChainPages::File &f = pages_->files[s.file];
			return strprintf("%s at payload offset 0x%" PRIx64, join(f.dir, f.name.c_str()).c_str(),
					 s.offset + (offset - at));
		}
		at += s.length;
	}
	return {};
}

Status ChainSource::skip(uint64_t len)
{
	if (len > remaining())
		return make_error(EINVAL, "skipping %" PRIu64 " bytes at %" PRIu64 " of a chain's %" PRIu64 " bytes", len,
				  pos_, pages_->total);
	pos_ += len;
	while (len > 0) {
		const uint64_t n = std::min<uint64_t>(len, pages_->segments[seg_].length - seg_off_);
		len -= n;
		seg_off_ += n;
		if (seg_off_ == pages_->segments[seg_].length) {
			seg_++;
			seg_off_ = 0;
		}
	}
	return ok_status();
}

} // namespace amdcr
