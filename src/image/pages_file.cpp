// SPDX-License-Identifier: GPL-2.0-only
#include "image/pages_file.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>

#include "base/file_io.h"
#include "image/framing.h"
#include "image/image_names.h"

namespace amdcr {

Result<PagesWriter> PagesWriter::create(const ImageDir &dir, const std::string &name,
					uint64_t payload_size)
{
	auto file = dir.create(name);
	if (!file)
		return std::move(file).error();
	uint8_t header[kImageHeaderSize];
	encode_image_header(payload_size, header);
	auto st = file->write(header, sizeof(header));
	if (!st)
		return std::move(st).error();
	// Reserve the space now, so that a full disk is reported before any GPU
	// memory is copied. Without fallocate support, find out while writing.
	if (payload_size > 0 && !file->streamed() &&
	    ::fallocate(file->fd(), FALLOC_FL_KEEP_SIZE, kImageHeaderSize,
			static_cast<off_t>(payload_size)) != 0 &&
	    errno != EOPNOTSUPP && errno != ENOSYS && errno != EINTR)
		return errno_error(errno, "reserving " + std::to_string(payload_size) + " bytes for " + name);
	return PagesWriter(std::move(*file), payload_size);
}

Status PagesWriter::write(const void *buf, size_t len)
{
	if (len > payload_size_ - written_)
		return make_error(EINVAL,
				  "%s: writing %zu bytes at %" PRIu64 " overruns the declared %" PRIu64
				  " bytes",
				  name().c_str(), len, written_, payload_size_);
	auto st = file_.write(buf, len);
	if (!st)
		return st;
	written_ += len;
	return ok_status();
}

Status PagesWriter::commit()
{
	if (written_ != payload_size_)
		return make_error(EINVAL, "%s: %" PRIu64 " of the declared %" PRIu64 " bytes written",
				  name().c_str(), written_, payload_size_);
	return file_.commit();
}

Result<PagesReader> PagesReader::open(const ImageDir &dir, const std::string &name)
{
	auto file = open_framed_image(dir, name);
	if (!file)
		return std::move(file).error();
	// Restore reads each pages file once, front to back.
	if (!file->streamed)
		::posix_fadvise(file->fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
	return PagesReader(name, std::move(file->fd), file->payload_size, file->streamed);
}

Result<PagesReader> PagesReader::open_kfd(const ImageDir &dir, int id, uint32_t gpu_id)
{
	return open(dir, kfd_pages_image_name(id, gpu_id));
}

Status PagesReader::read_at(uint64_t payload_offset, void *buf, size_t len) const
{
	if (streamed_)
		return make_error(ESPIPE, "%s: streamed (criu --stream): no random access at %" PRIu64,
				  name_.c_str(), payload_offset);
	if (payload_offset > payload_size_ || len > payload_size_ - payload_offset)
		return make_error(EINVAL,
				  "%s: reading %zu bytes at %" PRIu64 " is past the end (%" PRIu64
				  " bytes)",
				  name_.c_str(), len, payload_offset, payload_size_);
	auto n = pread_full(fd_.get(), buf, len, kImageHeaderSize + payload_offset);
	if (!n)
		return std::move(n).error().context(name_);
	if (*n != len)
		return make_error(EIO, "%s: file shrank: %zu of %zu bytes at %" PRIu64, name_.c_str(),
				  *n, len, payload_offset);
	return ok_status();
}

Status PagesReader::read_next(void *buf, size_t len)
{
	if (len > payload_size_ - pos_)
		return make_error(EINVAL,
				  "%s: reading %zu bytes at %" PRIu64 " is past the end (%" PRIu64
				  " bytes)",
				  name_.c_str(), len, pos_, payload_size_);
	auto n = read_full(fd_.get(), buf, len);
	if (!n)
		return std::move(n).error().context(name_);
	if (*n != len)
		return make_error(EINVAL, "%s: truncated: the stream ended after %" PRIu64 " of %" PRIu64
				  " payload bytes",
				  name_.c_str(), pos_ + *n, payload_size_);
	pos_ += len;
	if (pos_ == payload_size_)
		return expect_stream_end(fd_.get(), name_, payload_size_);
	return ok_status();
}

Status PagesReader::read(void *buf, size_t len)
{
	if (streamed_)
		return read_next(buf, len);
	auto st = read_at(pos_, buf, len);
	if (!st)
		return st;
	pos_ += len;
	return ok_status();
}

Status PagesReader::skip(uint64_t len)
{
	if (len > payload_size_ - pos_)
		return make_error(EINVAL,
				  "%s: skipping %" PRIu64 " bytes at %" PRIu64 " is past the end (%" PRIu64
				  " bytes)",
				  name_.c_str(), len, pos_, payload_size_);
	if (streamed_) {
		uint8_t drop[64 << 10];
		while (len > 0) {
			const size_t n = static_cast<size_t>(std::min<uint64_t>(len, sizeof(drop)));
			if (auto st = read_next(drop, n); !st)
				return st;
			len -= n;
		}
		return ok_status();
	}
	pos_ += len;
	return ok_status();
}

} // namespace amdcr
