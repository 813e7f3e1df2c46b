// SPDX-License-Identifier: GPL-2.0-only
#include "image/from_parent.h"

#include <algorithm>
#include <cinttypes>
#include <cstring>
#include <system_error>
#include <thread>
#include <utility>

namespace amdcr {

void FromParent::set(size_t k)
{
	if (in_parent.size() <= k / 8)
		in_parent.resize(k / 8 + 1);
	in_parent[k / 8] = static_cast<uint8_t>(in_parent[k / 8] | (1u << (k % 8)));
}

uint64_t chunk_count(uint64_t size, uint32_t chunk_bytes)
{
	return size / chunk_bytes + (size % chunk_bytes ? 1 : 0);
}

Status check_from_parent(const FromParent &f, uint64_t size)
{
	if (f.chunk_bytes == 0)
		return make_error(EINVAL, "parent chunk size 0");
	const uint64_t chunks = chunk_count(size, f.chunk_bytes);
	const uint64_t bytes = chunks / 8 + (chunks % 8 ? 1 : 0);
	if (f.in_parent.size() != bytes)
		return make_error(EINVAL, "%zu bytes of parent chunk bits for %" PRIu64 " chunks (expected %" PRIu64 ")",
				  f.in_parent.size(), chunks, bytes);
	if (chunks % 8 && (f.in_parent.back() >> (chunks % 8)) != 0)
		return make_error(EINVAL, "parent chunk bits set past the last of %" PRIu64 " chunks", chunks);
	return ok_status();
}

uint64_t stored_bytes(uint64_t size, const std::optional<FromParent> &f)
{
	if (!f)
		return size;
	uint64_t n = 0;
	const uint64_t chunks = chunk_count(size, f->chunk_bytes);
	for (uint64_t k = 0; k < chunks; k++)
		if (!f->has(k))
			n += std::min<uint64_t>(f->chunk_bytes, size - k * f->chunk_bytes);
	return n;
}

namespace {

std::vector<ChunkWalker::Bo> walker_bos(const std::vector<DeltaSink::Bo> &bos, uint32_t chunk_bytes)
{
	std::vector<ChunkWalker::Bo> out;
	for (const auto &b : bos)
		out.push_back({b.size, chunk_bytes});
	return out;
}

} // namespace

DeltaSink::DeltaSink(ByteSink &inner, std::vector<Bo> bos, uint32_t chunk_bytes, unsigned hash_threads, DeltaDedup dedup)
	: inner_(inner), bos_(std::move(bos)), chunk_bytes_(chunk_bytes), walker_(walker_bos(bos_, chunk_bytes)),
	  dedup_(std::move(dedup))
{
	const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
	hash_threads_ = hash_threads ? hash_threads : std::min(kMaxHashThreads, cores);
	uint64_t at = 0;
	for (const auto &b : bos_) {
		bo_start_.push_back(at);
		at += b.size;
	}
	out_.checksums.resize(bos_.size());
	out_.from_parent.resize(bos_.size());
	out_.dedup.resize(bos_.size());
	for (size_t i = 0; i < bos_.size(); i++) {
		out_.checksums[i].chunk_bytes = chunk_bytes;
		out_.checksums[i].chunks.reserve(chunk_count(bos_[i].size, chunk_bytes));
	}
}

uint64_t DeltaSink::zero_checksum(uint64_t n)
{
	if (auto it = zero_sums_.find(n); it != zero_sums_.end())
		return it->second;
	static constexpr uint8_t kZeros[64 << 10] = {};
	StreamingChecksum sum;
	for (uint64_t left = n; left > 0;) {
		const size_t take = static_cast<size_t>(std::min<uint64_t>(left, sizeof(kZeros)));
		sum.update(kZeros, take);
		left -= take;
	}
	return zero_sums_[n] = sum.digest();
}

Status DeltaSink::chunk_bytes(const ChunkWalker::Chunk &c, const uint8_t *buf, uint64_t buf_start, uint64_t from,
			      void *dst, size_t n) const
{
	auto *d = static_cast<uint8_t *>(dst);
	while (n > 0) {
		const uint64_t s = c.stream_offset + from;
		size_t m = n;
		if (s < buf_start) { // forwarded by an earlier write: the file's last bytes
			m = static_cast<size_t>(std::min<uint64_t>(n, buf_start - s));
			if (auto st = read_indexed(*dedup_.file, out_.written_bytes + (s - c.stream_offset), d, m); !st)
				return st;
		} else {
			std::memcpy(d, buf + (s - buf_start), m);
		}
		d += m;
		n -= m;
		from += m;
	}
	return ok_status();
}

Result<ChunkIndex::Found> DeltaSink::look_up(const ChunkWalker::Chunk &c, const uint8_t *buf, uint64_t buf_start)
{
	if (!dedup_.index || !dedup_.file || c.checksum == zero_checksum(c.bytes))
		return ChunkIndex::Found{}; // not deduplicated (a chunk of zeros is a hole)
	return dedup_.index->find(c.checksum, c.bytes, [&](uint64_t from, void *dst, size_t n) {
		return chunk_bytes(c, buf, buf_start, from, dst, n);
	});
}

Status DeltaSink::chunk_done(const ChunkWalker::Chunk &c, const uint8_t *buf, uint64_t buf_start)
{
	out_.checksums[c.bo].chunks.push_back(c.checksum);
	const BoChecksum *parent = bos_[c.bo].parent;
	const bool same = parent && parent->chunk_bytes == chunk_bytes_ && c.index < parent->chunks.size() &&
			  parent->chunks[c.index] == c.checksum;
	done_to_ = c.stream_offset + c.bytes;
	if (same) {
		auto &f = out_.from_parent[c.bo];
		if (!f)
			f = FromParent{chunk_bytes_, {}};
		f->set(c.index);
		out_.parent_bytes += c.bytes;
		// Its bytes of earlier writes went through: the file's last ones.
		return inner_.retract(std::exchange(forwarded_, 0));
	}
	auto found = look_up(c, buf, buf_start);
	if (!found)
		return std::move(found).error();
	if (found->place) { // written before: referenced, its bytes taken back as above
		auto &r = out_.dedup[c.bo];
		if (!r)
			r = ChunkRefs{chunk_bytes_, {}};
		r->refs.push_back({c.index, std::move(found->place->file), found->place->offset});
		out_.dedup_bytes += c.bytes;
		return inner_.retract(std::exchange(forwarded_, 0));
	}
	const uint64_t at = out_.written_bytes; // its payload offset in the file
	out_.written_bytes += c.bytes;
	Status st = ok_status();
	std::span<const uint8_t> whole; // its bytes, when all in this write (kept to compare with)
	if (c.stream_offset < buf_start) { // began in an earlier write, forwarded then
		forwarded_ = 0;
		st = inner_.write(buf, static_cast<size_t>(done_to_ - buf_start));
	} else {
		whole = {buf + (c.stream_offset - buf_start), static_cast<size_t>(c.bytes)};
		st = inner_.write(whole.data(), whole.size());
	}
	if (st && found->claim)
		found->claim.publish(dedup_.file, at, whole);
	return st;
}

std::vector<std::pair<uint64_t, uint64_t>> DeltaSink::whole_chunks(uint64_t start, uint64_t len)
{
	std::vector<std::pair<uint64_t, uint64_t>> out;
	const uint64_t end = start + len;
	while (bo_cursor_ < bos_.size() && bo_start_[bo_cursor_] + bos_[bo_cursor_].size <= start)
		bo_cursor_++;
	for (size_t bo = bo_cursor_; bo < bos_.size() && bo_start_[bo] < end; bo++) {
		const uint64_t bs = bo_start_[bo], be = bs + bos_[bo].size;
		const uint64_t from = std::max(start, bs) - bs;
		for (uint64_t cs = bs + (from + chunk_bytes_ - 1) / chunk_bytes_ * chunk_bytes_; cs < std::min(be, end);) {
			const uint64_t ce = std::min(cs + chunk_bytes_, be);
			if (ce > end)
				break;
			out.emplace_back(cs, ce - cs);
			cs = ce;
		}
	}
	return out;
}

std::vector<uint64_t> DeltaSink::hash(const uint8_t *buf, uint64_t start,
				      const std::vector<std::pair<uint64_t, uint64_t>> &chunks)
{
	std::vector<uint64_t> sums(chunks.size());
	auto run = [&](size_t from, size_t to) {
		for (size_t i = from; i < to; i++)
			sums[i] = checksum64(buf + (chunks[i].first - start), static_cast<size_t>(chunks[i].second));
	};
	const size_t threads = std::min<size_t>(hash_threads_, chunks.size());
	if (threads <= 1) {
		run(0, chunks.size());
		return sums;
	}
	const size_t per = (chunks.size() + threads - 1) / threads;
	{
		std::vector<std::jthread> helpers;
		for (size_t t = 1; t < threads && t * per < chunks.size(); t++) {
			try {
				helpers.emplace_back(run, t * per, std::min(chunks.size(), (t + 1) * per));
			} catch (const std::system_error &) {
				run(t * per, chunks.size()); // no thread to be had: the rest here
				break;
			}
		}
		out_.hash_threads = std::max<unsigned>(out_.hash_threads, static_cast<unsigned>(helpers.size() + 1));
		run(0, std::min(per, chunks.size()));
	} // joined
	return sums;
}

Status DeltaSink::write(const void *buf, size_t len)
{
	const auto *p = static_cast<const uint8_t *>(buf);
	const uint64_t start = walker_.position();
	const auto chunks = whole_chunks(start, len);
	const auto sums = hash(p, start, chunks);
	size_t next = 0; // the walker meets the whole chunks in order
	auto whole = [&](const uint8_t *q, size_t n, uint64_t at) {
		if (next < chunks.size() && chunks[next].first == at && chunks[next].second == n)
			return sums[next++];
		return checksum64(q, n);
	};
	auto st = walker_.feed(
		p, len, [&](const ChunkWalker::Chunk &c) { return chunk_done(c, p, start); }, whole);
	if (!st)
		return st;
	const uint64_t end = start + len;
	if (done_to_ < end) { // the unfinished chunk's bytes of this write
		const uint64_t from = std::max(done_to_, start);
		if (auto st = inner_.write(p + (from - start), static_cast<size_t>(end - from)); !st)
			return st;
		forwarded_ += end - from;
	}
	return ok_status();
}

Result<DeltaSink::Out> DeltaSink::take()
{
	if (!walker_.finished())
		return make_error(EINVAL, "checksums taken before every BO byte was written (%" PRIu64 " bytes so far)",
				  walker_.position());
	for (size_t i = 0; i < out_.from_parent.size(); i++) {
		auto &f = out_.from_parent[i];
		if (f) // every chunk's bit, in whole bytes
			f->in_parent.resize(static_cast<size_t>((chunk_count(bos_[i].size, chunk_bytes_) + 7) / 8));
	}
	for (auto &c : out_.checksums)
		c.whole = whole_checksum(c.chunks);
	return std::move(out_);
}

} // namespace amdcr
