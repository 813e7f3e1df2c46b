// SPDX-License-Identifier: GPL-2.0-only
#include "image/chunk_index.h"

#include <algorithm>
#include <array>
#include <cinttypes>
#include <cstring>

#include <nettle/sha2.h>

#include "base/file_io.h"
#include "image/framing.h"
#include "image/from_parent.h"

namespace amdcr {

const ChunkRef *ChunkRefs::find(uint64_t k) const
{
	auto it = std::lower_bound(refs.begin(), refs.end(), k,
				   [](const ChunkRef &r, uint64_t chunk) { return r.chunk < chunk; });
	return it != refs.end() && it->chunk == k ? &*it : nullptr;
}

uint64_t ChunkRefs::bytes(uint64_t size) const
{
	uint64_t n = 0;
	for (const ChunkRef &r : refs)
		if (r.chunk * chunk_bytes < size)
			n += std::min<uint64_t>(chunk_bytes, size - r.chunk * chunk_bytes);
	return n;
}

Status check_chunk_refs(const ChunkRefs &r, uint64_t size, const FromParent *f)
{
	if (r.chunk_bytes == 0)
		return make_error(EINVAL, "deduplicated chunks of size 0");
	if (f && f->chunk_bytes != r.chunk_bytes)
		return make_error(EINVAL, "deduplicated chunks of %u bytes, parent chunks of %u", r.chunk_bytes,
				  f->chunk_bytes);
	const uint64_t chunks = chunk_count(size, r.chunk_bytes);
	for (size_t i = 0; i < r.refs.size(); i++) {
		const ChunkRef &c = r.refs[i];
		if (c.chunk >= chunks)
			return make_error(EINVAL, "a reference for chunk %" PRIu64 " of a BO of %" PRIu64 " chunks",
					  c.chunk, chunks);
		if (i > 0 && c.chunk <= r.refs[i - 1].chunk)
			return make_error(EINVAL, "references not in ascending chunk order (chunk %" PRIu64
						  " after %" PRIu64 ")",
					  c.chunk, r.refs[i - 1].chunk);
		if (f && f->has(c.chunk))
			return make_error(EINVAL, "chunk %" PRIu64 " both in the parent and referenced", c.chunk);
		if (c.file.empty() || c.file.find('/') != std::string::npos)
			return make_error(EINVAL, "chunk %" PRIu64 " refers to the file name '%s'", c.chunk,
					  c.file.c_str());
		if (c.offset > UINT64_MAX - r.chunk_bytes)
			return make_error(EINVAL, "chunk %" PRIu64 " refers to offset %" PRIu64 " (overflow)",
					  c.chunk, c.offset);
	}
	return ok_status();
}

Status read_indexed(const IndexedFile &f, uint64_t offset, void *buf, size_t n)
{
	auto got = pread_full(f.fd.get(), buf, n, kImageHeaderSize + offset);
	if (!got)
		return std::move(got).error().context("reading back " + f.name);
	std::memset(static_cast<uint8_t *>(buf) + *got, 0, n - *got); // held-back zeros
	return ok_status();
}

ChunkIndex::Claim::Claim(Claim &&o) noexcept
	: index_(std::exchange(o.index_, nullptr)), key_(o.key_), len_(o.len_), slot_(o.slot_)
{
}

ChunkIndex::Claim &ChunkIndex::Claim::operator=(Claim &&o) noexcept
{
	if (this != &o) {
		if (index_)
			index_->settle({key_, len_}, slot_, nullptr, 0, nullptr);
		index_ = std::exchange(o.index_, nullptr);
		key_ = o.key_;
		len_ = o.len_;
		slot_ = o.slot_;
	}
	return *this;
}

ChunkIndex::Claim::~Claim()
{
	if (index_)
		index_->settle({key_, len_}, slot_, nullptr, 0, nullptr);
}

void ChunkIndex::Claim::publish(std::shared_ptr<const IndexedFile> file, uint64_t offset,
				std::span<const uint8_t> bytes)
{
	if (!index_)
		return;
	// Copied into the cache outside the index's lock.
	auto kept = bytes.empty() ? nullptr : index_->cache_buffer({key_, len_}, slot_, bytes.size());
	if (kept)
		kept->assign(bytes.begin(), bytes.end());
	std::exchange(index_, nullptr)->settle({key_, len_}, slot_, std::move(file), offset, std::move(kept));
}

void ChunkIndex::settle(const Key &k, size_t slot, std::shared_ptr<const IndexedFile> file, uint64_t offset,
			std::shared_ptr<std::vector<uint8_t>> kept)
{
	{
		std::lock_guard lk(mu_);
		Entry &e = entries_.at(k).at(slot);
		const bool published = file != nullptr;
		if (published) {
			e.file = std::move(file);
			e.offset = offset;
			published_++;
		} else {
			e.withdrawn = true;
		}
		if (kept && published) {
			e.bytes = std::move(kept);
			cached_.emplace_back(k, slot);
		} else if (kept) {
			spare_.push_back(std::move(kept));
		}
	}
	cv_.notify_all();
}

std::shared_ptr<std::vector<uint8_t>> ChunkIndex::cache_buffer(const Key &k, size_t slot, size_t n)
{
	std::lock_guard lk(mu_);
	const bool wanted = entries_.at(k).at(slot).waiters > 0 ||
			    (matched_ && published_ - match_mark_ < kKeepAfterMatch);
	if (n > budget_ || !wanted)
		return nullptr;
	// A spare buffer, a new one within the budget, or the oldest kept
	// chunk's.
	for (;;) {
		if (!spare_.empty()) {
			auto buf = std::move(spare_.back());
			spare_.pop_back();
			held_ = held_ - buf->size() + n; // n bytes once filled
			peak_ = std::max(peak_, held_);
			return buf;
		}
		if (held_ + n <= budget_) {
			held_ += n;
			peak_ = std::max(peak_, held_);
			return std::make_shared<std::vector<uint8_t>>();
		}
		if (cached_.empty())
			return nullptr; // the budget is in buffers being filled or compared with
		auto [k, slot] = cached_.front();
		cached_.pop_front();
		auto old = std::move(entries_.at(k).at(slot).bytes);
		// A comparison reading it keeps it until done, then frees it.
		if (old.use_count() == 1)
			spare_.push_back(std::const_pointer_cast<std::vector<uint8_t>>(std::move(old)));
		else
			held_ -= old->size();
	}
}

void ChunkIndex::trim()
{
	while (held_ > budget_ && !spare_.empty()) {
		held_ -= spare_.back()->size();
		spare_.pop_back();
	}
	while (held_ > budget_ && !cached_.empty()) {
		auto [k, slot] = cached_.front();
		cached_.pop_front();
		auto old = std::move(entries_.at(k).at(slot).bytes);
		held_ -= old->size();
	}
}

void ChunkIndex::set_cache_budget(uint64_t bytes)
{
	std::lock_guard lk(mu_);
	budget_ = bytes;
	trim();
	peak_ = held_;
}

uint64_t ChunkIndex::cache_peak() const
{
	std::lock_guard lk(mu_);
	return peak_;
}

namespace {

static_assert(std::tuple_size_v<ChunkIndex::Digest> == SHA256_DIGEST_SIZE);
using Digest = ChunkIndex::Digest;

// SHA-256 of `len` bytes that `read(at, buf, n)` gives, 64 KiB at a time.
template <typename Read>
Result<Digest> digest_of(uint64_t len, Read &&read)
{
	constexpr size_t kPiece = 64 << 10;
	std::vector<uint8_t> buf(static_cast<size_t>(std::min<uint64_t>(kPiece, len)));
	sha256_ctx ctx;
	sha256_init(&ctx);
	for (uint64_t at = 0; at < len;) {
		const size_t n = static_cast<size_t>(std::min<uint64_t>(kPiece, len - at));
		if (auto st = read(at, buf.data(), n); !st)
			return std::move(st).error();
		sha256_update(&ctx, n, buf.data());
		at += n;
	}
	Digest d{};
	sha256_digest(&ctx, d.size(), d.data());
	return d;
}

Digest digest_of(const std::vector<uint8_t> &kept)
{
	sha256_ctx ctx;
	sha256_init(&ctx);
	sha256_update(&ctx, kept.size(), kept.data());
	Digest d{};
	sha256_digest(&ctx, d.size(), d.data());
	return d;
}

// Whether the `len` bytes `read` gives equal `kept`, 64 KiB at a time.
Result<bool> equal_bytes(const std::vector<uint8_t> &kept, uint64_t len, const ChunkIndex::ChunkBytes &read)
{
	if (kept.size() != len)
		return false;
	constexpr size_t kPiece = 64 << 10;
	std::vector<uint8_t> buf(static_cast<size_t>(std::min<uint64_t>(kPiece, len)));
	for (uint64_t at = 0; at < len;) {
		const size_t n = static_cast<size_t>(std::min<uint64_t>(kPiece, len - at));
		if (auto st = read(at, buf.data(), n); !st)
			return std::move(st).error();
		if (std::memcmp(buf.data(), kept.data() + at, n) != 0)
			return false;
		at += n;
	}
	return true;
}

} // namespace

ChunkIndex::Compare ChunkIndex::wait_for_entry(std::unique_lock<std::mutex> &lk, const Key &k, size_t i)
{
	// A map node and the list's slot: looked up again after every wait,
	// as the list may grow meanwhile.
	auto entry = [&]() -> Entry & { return entries_[k][i]; };
	// Another job writes an equal-keyed chunk now: wait for it (its bytes
	// are kept for the comparison).
	if (!entry().file && !entry().withdrawn) {
		entry().waiters++;
		cv_.wait(lk, [&] { return entry().file || entry().withdrawn; });
		entry().waiters--;
	}
	// Not kept, and another lookup takes its digest: wait for it (a kept
	// one is compared meanwhile).
	cv_.wait(lk, [&] { return entry().bytes || !entry().reading; });
	Entry &e = entry();
	if (e.withdrawn)
		return Compare::Skip;
	if (e.bytes) {
		// The first lookup that compares it in memory also takes its
		// digest, from the kept bytes: once dropped from the cache, it
		// is compared by digest without a read.
		if (e.digest || e.reading)
			return Compare::Bytes;
		e.reading = true;
		return Compare::BytesAndDigest;
	}
	if (e.digest)
		return Compare::Digest;
	e.reading = true; // one read back, the other lookups wait for its digest
	read_backs_++;
	return Compare::ReadBack;
}

Result<ChunkIndex::Found> ChunkIndex::find(uint64_t key, uint64_t len, const ChunkBytes &bytes)
{
	const Key k{key, len};
	std::optional<Digest> mine; // the chunk looked up, once a candidate needs it
	std::unique_lock lk(mu_);
	for (size_t i = 0;; i++) {
		if (i == entries_[k].size()) {
			entries_[k].push_back({});
			Found out;
			out.claim = Claim(this, key, len, i);
			return out;
		}
		const Compare how = wait_for_entry(lk, k, i);
		if (how == Compare::Skip)
			continue;
		const Entry e = entries_[k][i]; // holds its cached bytes while compared
		lk.unlock();
		auto same = compare(e, how, len, bytes, mine);
		lk.lock();
		Entry &cur = entries_[k][i];
		if (how == Compare::BytesAndDigest || how == Compare::ReadBack) {
			if (same && same->theirs)
				cur.digest = same->theirs;
			cur.reading = false;
			cv_.notify_all();
		}
		if (!same)
			return std::move(same).error();
		if (how != Compare::Digest && how != Compare::ReadBack)
			byte_compares_++;
		if (same->equal) {
			matched_ = true;
			match_mark_ = published_;
			Found out;
			out.place = Place{e.file->name, e.offset};
			return out;
		}
		collisions_++;
	}
}

Result<ChunkIndex::Outcome> ChunkIndex::compare(const Entry &e, Compare how, uint64_t len, const ChunkBytes &bytes,
						std::optional<Digest> &mine)
{
	Outcome out;
	if (how == Compare::Bytes || how == Compare::BytesAndDigest) {
		auto eq = equal_bytes(*e.bytes, len, bytes);
		if (!eq)
			return std::move(eq).error();
		out.equal = *eq;
		if (how == Compare::BytesAndDigest && out.equal)
			out.theirs = digest_of(*e.bytes);
		return out;
	}
	if (how == Compare::ReadBack) {
		auto theirs = digest_of(len, [&](uint64_t at, void *p, size_t n) {
			return read_indexed(*e.file, e.offset + at, p, n);
		});
		if (!theirs)
			return std::move(theirs).error();
		out.theirs = *theirs;
	} else {
		out.theirs = *e.digest;
	}
	if (!mine) {
		auto d = digest_of(len, bytes);
		if (!d)
			return std::move(d).error();
		mine = *d;
	}
	out.equal = *out.theirs == *mine;
	return out;
}

size_t ChunkIndex::size() const
{
	std::lock_guard lk(mu_);
	return published_;
}

uint64_t ChunkIndex::collisions() const
{
	std::lock_guard lk(mu_);
	return collisions_;
}

uint64_t ChunkIndex::byte_compares() const
{
	std::lock_guard lk(mu_);
	return byte_compares_;
}

uint64_t ChunkIndex::read_backs() const
{
	std::lock_guard lk(mu_);
	return read_backs_;
}

} // namespace amdcr
