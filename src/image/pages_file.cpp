// SPDX-License-Identifier: GPL-2.0-only
#include "image/pages_file.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>
#include <utility>

#include "base/checksum.h"
#include "base/file_io.h"
#include "image/framing.h"
#include "image/image_names.h"

namespace amdcr {

namespace {

constexpr char kPagesSealMagic[8] = {'A', 'M', 'D', 'C', 'R', 'P', 'S', '1'};
constexpr size_t kSealIdAt = sizeof(kPagesSealMagic);
constexpr size_t kSealNameAt = kSealIdAt + sizeof(DumpId);
static_assert(kSealNameAt + sizeof(uint64_t) == kPagesSealSize);

uint64_t name_checksum(const std::string &name)
{
	return checksum64(name.data(), name.size());
}

void encode_seal(const DumpId &id, const std::string &name, uint8_t out[kPagesSealSize])
{
	std::memcpy(out, kPagesSealMagic, sizeof(kPagesSealMagic));
	std::memcpy(out + kSealIdAt, id.data(), id.size());
	const uint64_t sum = name_checksum(name);
	for (size_t i = 0; i < sizeof(sum); i++)
		out[kSealNameAt + i] = static_cast<uint8_t>(sum >> (8 * i));
}

// A seal's identity, and whether it names `name` (nullopt: `len` bytes
// that are no seal).
struct ParsedSeal {
	DumpId id{};
	bool names = false;
};
std::optional<ParsedSeal> parse_seal(const uint8_t *bytes, size_t len, const std::string &name)
{
	if (len != kPagesSealSize || std::memcmp(bytes, kPagesSealMagic, sizeof(kPagesSealMagic)) != 0)
		return std::nullopt;
	ParsedSeal p;
	std::memcpy(p.id.data(), bytes + kSealIdAt, p.id.size());
	uint64_t sum = 0;
	for (size_t i = 0; i < sizeof(sum); i++)
		sum |= static_cast<uint64_t>(bytes[kSealNameAt + i]) << (8 * i);
	p.names = sum == name_checksum(name);
	return p;
}

Error unsealed_error(const std::string &name)
{
	return make_error(EINVAL,
			  "%s: not sealed, but its image says its dump sealed every pages file: a pages "
			  "file of another checkpoint, or of a dump before seals (this check is made with "
			  "KFD_VERIFY=0 too)",
			  name.c_str());
}

} // namespace

Result<PagesWriter> PagesWriter::create(const ImageDir &dir, const std::string &name,
					uint64_t payload_size, std::optional<DumpId> seal)
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
	bool reserved = false;
	if (payload_size > 0 && !file->streamed()) {
		reserved = ::fallocate(file->fd(), FALLOC_FL_KEEP_SIZE, kImageHeaderSize,
				       static_cast<off_t>(payload_size)) == 0;
		if (!reserved && errno != EOPNOTSUPP && errno != ENOSYS && errno != EINTR)
			return errno_error(errno, "reserving " + std::to_string(payload_size) + " bytes for " + name);
		// The final length now: filesystems punch holes only below it
		// (ext4 ignores a punch past the end), and zeros are skipped.
		if (reserved && ::ftruncate(file->fd(), static_cast<off_t>(kImageHeaderSize + payload_size)) != 0)
			return errno_error(errno, "setting the length of " + name);
	}
	PagesWriter w(std::move(*file), payload_size, reserved);
	w.seal_ = seal;
	return w;
}

Result<PagesWriter> PagesWriter::create_open_ended(const ImageDir &dir, const std::string &name,
						  uint64_t max_payload, bool reserve, std::optional<DumpId> seal)
{
	if (dir.streaming())
		return make_error(ESPIPE, "%s: a pages file of unknown size cannot be streamed", name.c_str());
	// The header's size is written at commit.
	auto w = create(dir, name, reserve ? max_payload : 0, seal);
	if (!w)
		return w;
	w->payload_size_ = max_payload;
	w->open_ended_ = true;
	return w;
}

namespace {

bool all_zero(const uint8_t *p, size_t n)
{
	// memcmp against itself shifted by one byte: glibc's vectorised
	// compare, stopping at the first byte that differs.
	return n == 0 || (p[0] == 0 && std::memcmp(p, p + 1, n - 1) == 0);
}

} // namespace

Status PagesWriter::flush_zeros()
{
	if (pending_zeros_ == 0)
		return ok_status();
	const uint64_t n = std::exchange(pending_zeros_, 0);
	const uint64_t file_off = kImageHeaderSize + written_ - n;
	if (auto st = file_.write_zeros(n); !st)
		return st;
	if (!file_.can_punch_holes())
		return ok_status(); // written as zeros
	hole_bytes_ += n;
	// Space fallocate reserved stays allocated under a seek: give it back.
	// A filesystem that cannot punch keeps it, reading as zeros.
	if (reserved_)
		(void)::fallocate(file_.fd(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				  static_cast<off_t>(file_off), static_cast<off_t>(n));
	return ok_status();
}

Status PagesWriter::write(const void *buf, size_t len)
{
	if (len > payload_size_ - written_)
		return make_error(EINVAL,
				  "%s: writing %zu bytes at %" PRIu64 " overruns the declared %" PRIu64
				  " bytes",
				  name().c_str(), len, written_, payload_size_);
	const auto *p = static_cast<const uint8_t *>(buf);
	if (!file_.can_punch_holes()) {
		if (auto st = file_.write(p, len); !st)
			return st;
		written_ += len;
		return ok_status();
	}
	// Cut at kHoleUnit boundaries of the file offset (a unit may also be
	// cut by the end of a call); a piece of zeros is held back
	// (pending_zeros_), data is written in runs. The file is new, so the
	// skipped bytes read as zeros wherever they fall.
	size_t data_from = 0, data_len = 0;
	for (size_t i = 0; i < len;) {
		const uint64_t pos = kImageHeaderSize + written_;
		const size_t n = static_cast<size_t>(std::min<uint64_t>(len - i, kHoleUnit - pos % kHoleUnit));
		if (all_zero(p + i, n)) {
			if (data_len > 0) {
				if (auto st = file_.write(p + data_from, data_len); !st)
					return st;
				data_len = 0;
			}
			pending_zeros_ += n;
		} else {
			if (auto st = flush_zeros(); !st)
				return st;
			if (data_len == 0)
				data_from = i;
			data_len += n;
		}
		written_ += n;
		i += n;
	}
	if (data_len > 0)
		return file_.write(p + data_from, data_len);
	return ok_status();
}

Status PagesWriter::retract(uint64_t len)
{
	if (!open_ended_)
		return make_error(ENOTSUP, "%s: only a pages file of unknown size takes bytes back", name().c_str());
	if (len > written_)
		return make_error(EINVAL, "%s: taking back %" PRIu64 " bytes of %" PRIu64 " written", name().c_str(),
				  len, written_);
	const uint64_t zeros = std::min(len, pending_zeros_);
	pending_zeros_ -= zeros;
	if (len > zeros) {
		if (auto st = file_.rewind(len - zeros); !st)
			return st;
	}
	written_ -= len;
	return ok_status();
}

Result<UniqueFd> PagesWriter::open_reader() const
{
	if (file_.streamed())
		return make_error(ESPIPE, "%s: a streamed pages file cannot be read back", name().c_str());
	// Through /proc: the temporary's name may change (commit), the fd's
	// file does not, and the fd is write-only.
	const std::string self = "/proc/self/fd/" + std::to_string(file_.fd());
	const int fd = ::open(self.c_str(), O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno_error(errno, "reopening " + name() + " for reading");
	return UniqueFd(fd);
}

Status PagesWriter::commit()
{
	if (open_ended_) {
		uint8_t header[kImageHeaderSize];
		encode_image_header(written_, header);
		if (auto st = pwrite_full(file_.fd(), header, sizeof(header), 0); !st)
			return std::move(st).error().context(name());
		// A reserved file has the maximum's length until now.
		if (reserved_ && ::ftruncate(file_.fd(), static_cast<off_t>(kImageHeaderSize + written_)) != 0)
			return errno_error(errno, "setting the length of " + name());
		payload_size_ = written_;
	}
	if (written_ != payload_size_)
		return make_error(EINVAL, "%s: %" PRIu64 " of the declared %" PRIu64 " bytes written",
				  name().c_str(), written_, payload_size_);
	if (auto st = flush_zeros(); !st)
		return st;
	if (seal_) {
		uint8_t seal[kPagesSealSize];
		encode_seal(*seal_, name(), seal);
		if (auto st = file_.write(seal, sizeof(seal)); !st)
			return st;
	}
	return file_.commit();
}

Status PagesReader::take_seal(const uint8_t *bytes, size_t len)
{
	const auto seal = parse_seal(bytes, len, name_);
	if (!seal)
		return make_error(EINVAL,
				  "%s: %zu bytes of trailing garbage after the %" PRIu64
				  "-byte payload the header announces",
				  name_.c_str(), len, payload_size_);
	if (!seal->names)
		return make_error(EINVAL,
				  "%s: sealed under another name: a pages file renamed or copied over this "
				  "one (this check is made with KFD_VERIFY=0 too)",
				  name_.c_str());
	if (expect_ && seal->id != *expect_)
		return make_error(EINVAL,
				  "%s: sealed by dump %s, but its image is of dump %s: a pages file of another "
				  "checkpoint (this check is made with KFD_VERIFY=0 too)",
				  name_.c_str(), dump_id_text(seal->id).c_str(), dump_id_text(*expect_).c_str());
	found_ = seal->id;
	return ok_status();
}

Result<PagesReader> PagesReader::open(const ImageDir &dir, const std::string &name, std::optional<DumpId> seal)
{
	auto file = open_framed_image(dir, name, std::nullopt, kPagesSealSize);
	if (!file)
		return std::move(file).error();
	// Restore reads each pages file once, front to back.
	if (!file->streamed)
		::posix_fadvise(file->fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
	PagesReader r(name, std::move(file->fd), file->payload_size, file->streamed, seal);
	if (r.streamed_)
		return r; // sealed or not: seen at the payload's end
	if (file->trailing > 0) {
		uint8_t bytes[kPagesSealSize];
		auto n = pread_full(r.fd_.get(), bytes, sizeof(bytes), kImageHeaderSize + r.payload_size_);
		if (!n)
			return std::move(n).error().context(name);
		if (auto st = r.take_seal(bytes, *n); !st)
			return std::move(st).error();
	}
	if (seal && !r.found_)
		return unsealed_error(name);
	return r;
}

Result<PagesReader> PagesReader::open_kfd(const ImageDir &dir, int id, uint32_t gpu_id, std::optional<DumpId> seal)
{
	return open(dir, kfd_pages_image_name(id, gpu_id), seal);
}

Result<std::optional<DumpId>> read_pages_seal(const ImageDir &dir, const std::string &file, const std::string &as)
{
	auto framed = open_framed_image(dir, file, std::nullopt, kPagesSealSize);
	if (!framed)
		return std::move(framed).error();
	if (framed->streamed || framed->trailing == 0)
		return std::optional<DumpId>();
	uint8_t bytes[kPagesSealSize];
	auto n = pread_full(framed->fd.get(), bytes, sizeof(bytes), kImageHeaderSize + framed->payload_size);
	if (!n)
		return std::move(n).error().context(file);
	const auto seal = parse_seal(bytes, *n, as);
	if (!seal || !seal->names)
		return std::optional<DumpId>();
	return std::optional<DumpId>(seal->id);
}

Status PagesReader::finish_stream()
{
	// The seal, when there is one, then the pipe's end (one read more
	// than a seal: anything else is trailing garbage).
	uint8_t bytes[kPagesSealSize + 1];
	auto n = read_full(fd_.get(), bytes, sizeof(bytes));
	if (!n)
		return std::move(n).error().context(name_);
	if (*n > 0) {
		if (*n > kPagesSealSize) {
			(void)expect_stream_end(fd_.get(), name_, payload_size_); // drains the rest
			return make_error(EINVAL,
					  "%s: more than a seal's %zu bytes of trailing garbage after the %" PRIu64
					  "-byte payload the header announces",
					  name_.c_str(), kPagesSealSize, payload_size_);
		}
		if (auto st = take_seal(bytes, *n); !st)
			return st;
	}
	if (expect_ && !found_)
		return unsealed_error(name_);
	return ok_status();
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
	// Holes (sparse pages files) are filled with zeros, not read.
	auto *out = static_cast<uint8_t *>(buf);
	uint64_t off = kImageHeaderSize + payload_offset;
	const uint64_t end = off + len;
	while (off < end) {
		// The next data at or after `off` (ENXIO: none, the rest is a
		// hole); a filesystem without SEEK_DATA reports all data.
		const off_t d = ::lseek(fd_.get(), static_cast<off_t>(off), SEEK_DATA);
		const uint64_t data = d >= 0 ? static_cast<uint64_t>(d) : (errno == ENXIO ? end : off);
		if (data > off) {
			const uint64_t z = std::min(data, end) - off;
			std::memset(out, 0, static_cast<size_t>(z));
			out += z;
			off += z;
			continue;
		}
		const off_t h = ::lseek(fd_.get(), static_cast<off_t>(off), SEEK_HOLE);
		const uint64_t hole = h >= 0 ? std::max(static_cast<uint64_t>(h), off + 1) : end;
		const size_t want = static_cast<size_t>(std::min(hole, end) - off);
		auto n = pread_full(fd_.get(), out, want, off);
		if (!n)
			return std::move(n).error().context(name_);
		if (*n != want)
			return make_error(EIO, "%s: file shrank: %zu of %zu bytes at %" PRIu64, name_.c_str(),
					  *n, want, off - kImageHeaderSize);
		out += want;
		off += want;
	}
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
		return finish_stream();
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
