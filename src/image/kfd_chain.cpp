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
#include "image/shared_chunks.h"

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

// The chunk size of a BO with chunks outside its pages file (0: none).
uint32_t split_chunk_bytes(const KfdBo &b)
{
	return b.from_parent ? b.from_parent->chunk_bytes : b.dedup ? b.dedup->chunk_bytes : 0;
}

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
		at += b.stored_bytes();
		const uint32_t cb = split_chunk_bytes(b);
		if (cb == 0)
			continue;
		auto &r = l.rank[i];
		const uint64_t chunks = chunk_count(b.size, cb);
		r.resize(static_cast<size_t>(chunks));
		uint64_t stored = 0;
		for (uint64_t k = 0; k < chunks; k++) {
			r[k] = stored;
			const bool elsewhere = (b.from_parent && b.from_parent->has(k)) || (b.dedup && b.dedup->find(k));
			stored += elsewhere ? 0 : 1;
		}
	}
	return l;
}

// The index in out.files of `name` in the directory of link `l`, added if
// new (sealed as the link's own files: one dump wrote them all).
uint32_t file_index(ChainPages &out, const KfdChain::Link &l, const std::string &name)
{
	for (size_t f = 0; f < out.files.size(); f++)
		if (out.files[f].dir == l.dir && out.files[f].name == name)
			return static_cast<uint32_t>(f);
	out.files.push_back({l.dir, name, pages_seal(l.img.binding)});
	return static_cast<uint32_t>(out.files.size() - 1);
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
		out.files.push_back({l.dir, kfd_pages_image_name(l.id, gpu_id), pages_seal(l.img.binding)});
		layouts.push_back(layout_of(l.img, gpu_id));
	}
	const KfdImage &top = links_.front().img;
	for (size_t i = 0; i < top.bos.size(); i++) {
		const KfdBo &b = top.bos[i];
		if (b.gpu_id != gpu_id || !b.has_contents())
			continue;
		const uint32_t cb = split_chunk_bytes(b);
		if (cb == 0) {
			append(out, 0, layouts[0].start.at(i), b.size);
			continue;
		}
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
			const uint64_t len = std::min<uint64_t>(cb, b.size - k * cb);
			const auto &d = links_[link].img.bos[bo].dedup;
			if (const ChunkRef *ref = d ? d->find(k) : nullptr) { // stored elsewhere in that checkpoint
				append(out, file_index(out, links_[link], ref->file), ref->offset, len);
				continue;
			}
			const auto &ranks = layouts[link].rank;
			const auto r = ranks.find(bo);
			const uint64_t stored_before = r == ranks.end() ? k : r->second[k];
			append(out, static_cast<uint32_t>(link), layouts[link].start.at(bo) + stored_before * cb, len);
		}
	}
	return out;
}

namespace {

bool has_dedup(const KfdImage &img)
{
	return std::any_of(img.bos.begin(), img.bos.end(), [](const KfdBo &b) { return b.dedup.has_value(); });
}

// "BO 3 at 0x7f0000400000 (gpu 0x2222) chunks 0, 1, 2" for every BO of the
// chain with a chunk that refers to `name` in link directory `dir` at a
// payload offset whose chunk does not end by `payload` bytes (any offset
// when `payload` is 0: the file is missing); up to 8 chunks shown per BO.
std::string referrers(const KfdChain &chain, const std::string &dir, const std::string &name, uint64_t payload)
{
	std::string out;
	for (const auto &l : chain.links()) {
		if (l.dir != dir)
			continue;
		for (size_t i = 0; i < l.img.bos.size(); i++) {
			const KfdBo &b = l.img.bos[i];
			if (!b.dedup)
				continue;
			std::string chunks;
			size_t n = 0;
			for (const ChunkRef &r : b.dedup->refs) {
				const uint32_t cb = b.dedup->chunk_bytes;
				const uint64_t len = std::min<uint64_t>(cb, b.size - r.chunk * cb);
				if (r.file != name || (payload && r.offset + len <= payload))
					continue;
				if (n++ < 8)
					chunks += strprintf("%s%" PRIu64, chunks.empty() ? "" : ", ", r.chunk);
			}
			if (n > 8)
				chunks += strprintf(" and %zu more", n - 8);
			if (n)
				out += strprintf("%sBO %zu at 0x%" PRIx64 " (gpu 0x%04x) chunk%s %s", out.empty() ? "" : "; ",
						 i, b.addr, b.gpu_id, n == 1 ? "" : "s", chunks.c_str());
		}
	}
	return out;
}

std::shared_ptr<const ChainPages::DedupChunks> dedup_chunks(const KfdChain &chain)
{
	auto chunks = std::make_shared<ChainPages::DedupChunks>();
	for (const auto &l : chain.links())
		for (size_t i = 0; i < l.img.bos.size(); i++) {
			const KfdBo &b = l.img.bos[i];
			if (!b.dedup)
				continue;
			const uint32_t cb = b.dedup->chunk_bytes;
			for (const ChunkRef &r : b.dedup->refs) {
				auto &c = (*chunks)[{l.dir, r.file, r.offset}];
				c.length = std::max<uint64_t>(c.length, std::min<uint64_t>(cb, b.size - r.chunk * cb));
				c.users.push_back(strprintf("%sBO %zu at 0x%" PRIx64 " (gpu 0x%04x) chunk %" PRIu64,
							  l.dir.empty() ? "" : (l.dir + "'s ").c_str(), i, b.addr, b.gpu_id,
							  r.chunk));
			}
		}
	return chunks;
}

// Every pages file a deduplicated chunk refers to is there and long enough,
// before any GPU state changes: refused naming the file, the chunk and
// every BO that uses it.
Status check_referenced_files(const ImageDir &top, const KfdChain &chain,
			      const std::map<uint32_t, ChainPages> &pages)
{
	struct Need {
		uint64_t bytes = 0; // of payload
		std::optional<DumpId> seal;
	};
	std::map<std::pair<std::string, std::string>, Need> need; // by (dir, name)
	for (const auto &[gpu, p] : pages)
		for (const PagesSegment &s : p.segments) {
			const ChainPages::File &f = p.files[s.file];
			Need &n = need[{f.dir, f.name}];
			n.bytes = std::max(n.bytes, s.offset + s.length);
			n.seal = f.seal;
		}
	for (const auto &[file, n] : need) {
		const auto &[dir, name] = file;
		const uint64_t bytes = n.bytes;
		std::optional<ImageDir> sub;
		if (!dir.empty()) {
			auto d = ImageDir::open_sub(top, dir);
			if (!d)
				return std::move(d).error();
			sub.emplace(std::move(*d));
		}
		auto r = PagesReader::open(sub ? *sub : top, name, n.seal);
		const std::string shown = join(dir, name.c_str());
		if (!r)
			return make_error(r.error().code(), "%s, where deduplicated chunks are stored, cannot be read (%s); "
							    "the chunks stored there are those of %s",
					  shown.c_str(), r.error().message().c_str(),
					  referrers(chain, dir, name, 0).c_str());
		if (r->payload_size() < bytes)
			return make_error(EINVAL, "%s holds %" PRIu64 " bytes, short of the deduplicated chunks stored "
						  "there of %s",
					  shown.c_str(), r->payload_size(),
					  referrers(chain, dir, name, r->payload_size()).c_str());
	}
	return ok_status();
}

} // namespace

Result<std::map<uint32_t, ChainPages>> resolve_chain_pages(const ImageDir &dir, int id, const KfdImage &img,
							   Verify verify)
{
	std::map<uint32_t, ChainPages> out;
	if (!img.parent && !has_dedup(img))
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
	if (auto st = check_referenced_files(dir, *chain, out); !st)
		return std::move(st).error();
	if (has_dedup(img)) {
		auto chunks = dedup_chunks(*chain);
		for (auto &[gpu, p] : out)
			p.dedup_chunks = chunks;
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
		auto p = PagesReader::open(*top_, f.name, f.seal);
		if (!p)
			return std::move(p).error();
		r.emplace(std::move(*p));
		return &*r;
	}
	auto dir = ImageDir::open_sub(*top_, f.dir);
	if (!dir)
		return std::move(dir).error();
	auto p = PagesReader::open(*dir, f.name, f.seal);
	if (!p)
		return std::move(p).error().context("the parent checkpoint " + describe_link(*top_, f.dir));
	r.emplace(std::move(*p));
	return &*r;
}

Status ChainSource::read_segment(const PagesSegment &s, uint64_t seg_off, uint8_t *out, size_t n)
{
	auto r = reader(s.file);
	if (!r)
		return std::move(r).error();
	const ChainPages::File &f = pages_->files[s.file];
	auto from_file = [&](uint64_t offset, void *buf, size_t len) {
		auto st = (*r)->read_at(offset, buf, len);
		if (!st)
			return f.dir.empty() ? st
					     : std::move(st).error().context("the parent checkpoint " +
									     describe_link(*top_, f.dir));
		file_bytes_ += len;
		return st;
	};
	if (shared_)
		return shared_->read(f.dir, f.name, s.offset + seg_off, out, n, from_file);
	return from_file(s.offset + seg_off, out, n);
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
		if (auto st = read_segment(s, seg_off_, out, n); !st)
			return st;
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
			const uint64_t off = s.offset + (offset - at);
			std::string out = strprintf("%s at payload offset 0x%" PRIx64, join(f.dir, f.name.c_str()).c_str(), off);
			if (!pages_->dedup_chunks)
				return out;
			const auto u = pages_->dedup_chunks->find({f.dir, f.name, off});
			if (u == pages_->dedup_chunks->end())
				return out;
			const auto &users = u->second.users;
			out += ", a deduplicated chunk that ";
			for (size_t k = 0; k < users.size(); k++)
				out += (k ? ", " : "") + users[k];
			return out + (users.size() == 1 ? " refers to" : " refer to");
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
		const PagesSegment &s = pages_->segments[seg_];
		const uint64_t n = std::min<uint64_t>(len, s.length - seg_off_);
		if (shared_) {
			const ChainPages::File &f = pages_->files[s.file];
			shared_->pass(f.dir, f.name, s.offset + seg_off_, n);
		}
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
