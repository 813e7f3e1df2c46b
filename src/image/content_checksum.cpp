// SPDX-License-Identifier: GPL-2.0-only
#include "image/content_checksum.h"

#include <cinttypes>

namespace amdcr {

uint64_t whole_checksum(std::span<const uint64_t> chunks)
{
	std::vector<uint8_t> le(chunks.size() * 8);
	for (size_t i = 0; i < chunks.size(); i++)
		for (size_t b = 0; b < 8; b++)
			le[i * 8 + b] = static_cast<uint8_t>(chunks[i] >> (8 * b));
	return checksum64(le);
}

Status check_bo_checksum(const BoChecksum &c, uint64_t bo_size)
{
	if (c.chunk_bytes == 0)
		return make_error(EBADMSG, "checksum chunk size 0");
	const uint64_t want = bo_size / c.chunk_bytes + (bo_size % c.chunk_bytes ? 1 : 0);
	if (c.chunks.size() != want)
		return make_error(EBADMSG,
				  "%zu chunk checksums for %" PRIu64 " bytes in chunks of %u (expected %" PRIu64 ")",
				  c.chunks.size(), bo_size, c.chunk_bytes, want);
	if (whole_checksum(c.chunks) != c.whole)
		return make_error(EBADMSG, "the chunk checksums do not match their summary 0x%016" PRIx64
				  ": the checksum list is damaged",
				  c.whole);
	return ok_status();
}

// ---- ChunkWalker --------------------------------------------------------------

ChunkWalker::ChunkWalker(std::vector<Bo> bos) : bos_(std::move(bos)) {}

bool ChunkWalker::settle()
{
	while (bo_ < bos_.size() && off_ == bos_[bo_].size) {
		++bo_;
		off_ = 0;
	}
	return bo_ < bos_.size();
}

bool ChunkWalker::finished()
{
	return !settle();
}

uint64_t ChunkWalker::chunk_end() const
{
	const Bo &b = bos_[bo_];
	const uint64_t start = off_ - off_ % b.chunk_bytes;
	return std::min<uint64_t>(b.size, start + b.chunk_bytes);
}

ChunkWalker::Chunk ChunkWalker::make_chunk(uint64_t end, uint64_t checksum) const
{
	const Bo &b = bos_[bo_];
	Chunk c;
	c.bo = bo_;
	c.index = static_cast<size_t>((end - 1) / b.chunk_bytes);
	c.bo_offset = c.index * uint64_t{b.chunk_bytes};
	c.bytes = end - c.bo_offset;
	c.stream_offset = stream_ - c.bytes;
	c.checksum = checksum;
	c.complete = !tainted_;
	return c;
}

// ---- VerifyingSource ------------------------------------------------------------

namespace {

std::vector<ChunkWalker::Bo> walker_bos(const std::vector<VerifyingSource::Bo> &bos)
{
	std::vector<ChunkWalker::Bo> out;
	out.reserve(bos.size());
	for (const auto &b : bos)
		out.push_back({b.size, b.checksum ? b.checksum->chunk_bytes : kChecksumChunkBytes});
	return out;
}

} // namespace

VerifyingSource::VerifyingSource(ByteSource &inner, std::vector<Bo> bos)
	: inner_(inner), bos_(std::move(bos)), walker_(walker_bos(bos_))
{
}

Status VerifyingSource::check(const ChunkWalker::Chunk &c)
{
	const Bo &b = bos_[c.bo];
	if (!b.checksum || !c.complete)
		return ok_status();
	// check_bo_checksum (at image read) guarantees one entry per chunk.
	if (c.index >= b.checksum->chunks.size())
		return make_error(EBADMSG, "%s: no checksum for chunk %zu", b.label.c_str(), c.index);
	const uint64_t want = b.checksum->chunks[c.index];
	if (want == c.checksum) {
		verified_ += c.bytes;
		return ok_status();
	}
	std::string where = inner_.locate(c.stream_offset); // a chain: the file holding the chunk
	if (where.empty())
		where = strprintf("payload offset 0x%" PRIx64 " of the pages file", c.stream_offset - b.file_start);
	return make_error(EBADMSG,
			  "%s: bytes 0x%" PRIx64 "..0x%" PRIx64 " of its 0x%" PRIx64
			  " (chunk %zu of %zu; %s) "
			  "do not match their checksum (image 0x%016" PRIx64 ", read 0x%016" PRIx64
			  "): the pages file is damaged (KFD_VERIFY=0 restores it unchecked)",
			  b.label.c_str(), c.bo_offset, c.bo_offset + c.bytes - 1, b.size, c.index,
			  b.checksum->chunks.size(), where.c_str(), want, c.checksum);
}

Status VerifyingSource::read(void *buf, size_t len)
{
	if (auto st = inner_.read(buf, len); !st)
		return st;
	return walker_.feed(static_cast<const uint8_t *>(buf), len,
			    [this](const ChunkWalker::Chunk &c) { return check(c); });
}

Status VerifyingSource::skip(uint64_t len)
{
	if (auto st = inner_.skip(len); !st)
		return st;
	return walker_.skip(len, [](const ChunkWalker::Chunk &) { return ok_status(); });
}

} // namespace amdcr
