// SPDX-License-Identifier: GPL-2.0-only
#include "image/shared_chunks.h"

#include <algorithm>
#include <cstring>

namespace amdcr {

SharedChunkReads::SharedChunkReads(std::span<const ChainPages *const> streams)
{
	for (const ChainPages *p : streams) {
		if (!p || !p->dedup_chunks)
			continue;
		for (const PagesSegment &s : p->segments) {
			const ChainPages::File &f = p->files[s.file];
			const auto &all = *p->dedup_chunks;
			for (auto it = all.lower_bound({f.dir, f.name, s.offset}); it != all.end(); ++it) {
				const auto &[dir, name, offset] = it->first;
				if (dir != f.dir || name != f.name || offset + it->second.length > s.offset + s.length)
					break;
				Chunk &c = chunks_[it->first];
				c.length = it->second.length;
				c.holders++;
			}
		}
	}
	std::erase_if(chunks_, [](const auto &kv) { return kv.second.holders < 2; });
	for (const auto &[key, c] : chunks_)
		chunk_bytes_ += c.length;
}

bool SharedChunkReads::same_file(Map::const_iterator it, const std::string &dir, const std::string &name) const
{
	return it != chunks_.end() && std::get<0>(it->first) == dir && std::get<1>(it->first) == name;
}

SharedChunkReads::Map::iterator SharedChunkReads::first_from(const std::string &dir, const std::string &name,
							     uint64_t offset)
{
	auto it = chunks_.upper_bound({dir, name, offset});
	if (it != chunks_.begin()) {
		auto prev = std::prev(it);
		if (same_file(prev, dir, name) && std::get<2>(prev->first) + prev->second.length > offset)
			return prev;
	}
	return it;
}

void SharedChunkReads::holder_done(Chunk &c)
{
	if (c.holders > 0)
		c.holders--;
	if (c.holders == 0 && c.state == State::Held) {
		c.bytes.reset();
		c.state = State::Unread;
		held_ -= c.length;
	}
}

Status SharedChunkReads::read_chunk(std::unique_lock<std::mutex> &lk, Chunk &c, uint64_t chunk_offset, uint64_t at,
				    uint8_t *out, size_t n, const FileRead &from_file)
{
	cv_.wait(lk, [&] { return c.state != State::Reading; });
	if (c.state == State::Unread && c.holders > 1 && held_ + c.length <= budget_) {
		c.state = State::Reading;
		held_ += c.length;
		peak_ = std::max(peak_, held_);
		lk.unlock();
		std::shared_ptr<uint8_t[]> bytes(new uint8_t[c.length]);
		auto st = from_file(chunk_offset, bytes.get(), c.length);
		lk.lock();
		if (!st) {
			c.state = State::Unread;
			held_ -= c.length;
			cv_.notify_all();
			return st;
		}
		c.bytes = std::move(bytes);
		c.state = State::Held;
		cv_.notify_all();
		std::memcpy(out, c.bytes.get() + (at - chunk_offset), n);
		return ok_status();
	}
	if (c.state == State::Held) {
		const std::shared_ptr<const uint8_t[]> bytes = c.bytes;
		memory_bytes_ += n;
		lk.unlock();
		std::memcpy(out, bytes.get() + (at - chunk_offset), n);
		lk.lock();
		return ok_status();
	}
	lk.unlock();
	auto st = from_file(at, out, n);
	lk.lock();
	return st;
}

Status SharedChunkReads::read(const std::string &dir, const std::string &name, uint64_t offset, void *buf,
			      size_t len, const FileRead &from_file)
{
	auto *out = static_cast<uint8_t *>(buf);
	const uint64_t end = offset + len;
	uint64_t at = offset;
	std::unique_lock lk(mu_);
	for (auto it = first_from(dir, name, at); at < end; ++it) {
		const uint64_t start = same_file(it, dir, name) ? std::get<2>(it->first) : end;
		if (start > at) { // bytes no other stream holds
			const size_t n = static_cast<size_t>(std::min(start, end) - at);
			lk.unlock();
			if (auto st = from_file(at, out, n); !st)
				return st;
			lk.lock();
			at += n;
			out += n;
			if (at == end)
				break;
		}
		Chunk &c = it->second;
		const size_t n = static_cast<size_t>(std::min(end, start + c.length) - at);
		if (auto st = read_chunk(lk, c, start, at, out, n, from_file); !st)
			return st;
		at += n;
		out += n;
		if (at == start + c.length)
			holder_done(c);
	}
	return ok_status();
}

void SharedChunkReads::pass(const std::string &dir, const std::string &name, uint64_t offset, uint64_t len)
{
	std::lock_guard lk(mu_);
	for (auto it = first_from(dir, name, offset); same_file(it, dir, name); ++it) {
		const uint64_t last = std::get<2>(it->first) + it->second.length;
		if (last > offset + len)
			break;
		holder_done(it->second);
	}
}

uint64_t SharedChunkReads::memory_bytes() const
{
	std::lock_guard lk(mu_);
	return memory_bytes_;
}

uint64_t SharedChunkReads::peak_bytes() const
{
	std::lock_guard lk(mu_);
	return peak_;
}

} // namespace amdcr
