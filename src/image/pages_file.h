// SPDX-License-Identifier: GPL-2.0-only
//
// Pages files: the contents of BOs, in upstream's framing (8-byte size
// header, then the raw bytes). A KFD pages file (amdgpu-pages-<id>-<gpu>.img)
// holds the VRAM/GTT BOs of one GPU concatenated in BO-table order; a DRM
// pages file (amdgpu-drm-pages-<id>-<minor>-<index>.img, upstream's
// layout) holds one render-node BO (read and written as a series,
// pages_series.h).
//
// PagesWriter is the copy engine's ByteSink on dump, PagesReader its
// ByteSource on restore. Both do large I/O straight on the fd (no stdio).
// Streamed (ImageDir::streaming()): the same bytes in the same order go
// through the streamer's pipe; PagesReader then reads strictly in order
// (read_at only at the current position, skip() reads and drops) and
// checks, once the last payload byte is read, that the pipe ends there.
//
// Sparse: PagesWriter looks at the payload in pieces cut at kHoleUnit
// boundaries of the file offset and skips every piece that is all zeros,
// where the directory allows holes (AtomicFile::can_punch_holes; streamed
// files get the zeros written), punching the space it reserved for them;
// zeros covering whole filesystem blocks so become holes. A hole reads as zeros, so every
// reader, upstream's too, sees the same bytes. PagesReader finds the holes
// with SEEK_DATA/SEEK_HOLE and fills them with zeros instead of reading.
//
// Sealed (this project's): kPagesSealSize bytes follow the payload, which
// upstream's reader never reaches (it reads what the header announces):
//   offset 0:  "AMDCRPS1"
//   offset 8:  the dump identity (dump_binding.dump_id, image/binding.h) of
//              the dump that wrote the file
//   offset 24: checksum64 (base/checksum.h) of the file's name, little-endian
// The dump seals every pages file it writes and says so in its images'
// dump_binding (pages_sealed); the restore and `amdgpu-img verify` then
// require each pages file of such an image to carry the image's identity
// (image_set.h), KFD_VERIFY=0 or not, so a pages file of another dump, of
// the same size too, or of another name is refused naming it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "base/result.h"
#include "base/unique_fd.h"
#include "base/byte_stream.h"
#include "image/binding.h"
#include "image/image_dir.h"

namespace amdcr {

inline constexpr size_t kPagesSealSize = 32;

// 64 KiB: 16 filesystem blocks of 4 KiB, and one seek per run of zeros at
// most every 64 KiB.
inline constexpr uint64_t kHoleUnit = 64 << 10;

class PagesWriter final : public ByteSink {
public:
	// Starts `name` (under a temporary name) for exactly `payload_size`
	// bytes; the size goes into the header first. With `seal`, commit()
	// appends the seal with that dump identity.
	static Result<PagesWriter> create(const ImageDir &dir, const std::string &name,
					  uint64_t payload_size, std::optional<DumpId> seal = std::nullopt);
	// Starts `name` for at most `max_payload` bytes, the size unknown yet
	// (an incremental or deduplicated dump's pages file: only the chunks
	// that changed, or not written before); commit() puts the size written
	// into the header and cuts the file there, then appends the seal (with
	// `seal`) right after the payload. With `reserve`, the
	// maximum is reserved and the file given that length first, as
	// create() does (a deduplicated complete dump: with no chunk taken
	// back, it writes what create() would); without, the file grows as it
	// is written (an incremental dump, which may need a small part). Not
	// streamed (the header is rewritten in place): ESPIPE.
	static Result<PagesWriter> create_open_ended(const ImageDir &dir, const std::string &name,
						     uint64_t max_payload, bool reserve = false,
						     std::optional<DumpId> seal = std::nullopt);

	PagesWriter(PagesWriter &&) noexcept = default;
	PagesWriter &operator=(PagesWriter &&) noexcept = default;
	~PagesWriter() override = default; // uncommitted: the temporary goes

	// Appends; more than the declared size in total is EINVAL.
	Status write(const void *buf, size_t len) override;
	// Open-ended only (ENOTSUP otherwise): takes back the last `len` bytes
	// accepted (held-back zeros first, then the file's end).
	Status retract(uint64_t len) override;
	// Requires exactly the declared size written (open-ended: writes the
	// size written into the header and cuts the file after that payload),
	// appends the seal, then renames into place.
	Status commit();
	// A read-only fd of the file being written (a deduplicating dump reads
	// its chunks back, image/chunk_index.h); not streamed (ESPIPE).
	Result<UniqueFd> open_reader() const;
	// Payload bytes left as holes so far (retract() does not lower it).
	uint64_t hole_bytes() const { return hole_bytes_; }
	void abort() { file_.abort(); }

	const std::string &name() const { return file_.name(); }
	uint64_t payload_size() const { return payload_size_; }
	uint64_t written() const { return written_; }
	uint64_t remaining() const { return payload_size_ - written_; }

private:
	PagesWriter(AtomicFile file, uint64_t payload_size, bool reserved)
		: file_(std::move(file)), payload_size_(payload_size), reserved_(reserved)
	{
	}
	// The zeros held back so far become a hole (or written zeros).
	Status flush_zeros();

	AtomicFile file_;
	uint64_t payload_size_ = 0;
	uint64_t written_ = 0;	      // accepted, pending zeros included
	uint64_t pending_zeros_ = 0; // the last bytes accepted, not yet in the file
	uint64_t hole_bytes_ = 0;
	bool reserved_ = false; // fallocate reserved the payload: holes are punched
	bool open_ended_ = false; // payload_size_ is a maximum (create_open_ended)
	std::optional<DumpId> seal_{};
};

class PagesReader final : public ByteSource {
public:
	// Opens `name` and checks its header against the file size. A seal,
	// when there is one, must name `name` (EINVAL naming the file). With
	// `seal`, the file must be sealed with that dump identity (EINVAL
	// naming the file, both identities and that KFD_VERIFY=0 does not
	// skip this). Streamed, the seal is checked when the last payload
	// byte is read.
	static Result<PagesReader> open(const ImageDir &dir, const std::string &name,
					std::optional<DumpId> seal = std::nullopt);
	static Result<PagesReader> open_kfd(const ImageDir &dir, int id, uint32_t gpu_id,
					    std::optional<DumpId> seal = std::nullopt);

	PagesReader(PagesReader &&) noexcept = default;
	PagesReader &operator=(PagesReader &&) noexcept = default;
	~PagesReader() override = default;

	// Sequential: reads the next `len` bytes; past the end is an Error
	// naming the file.
	Status read(void *buf, size_t len) override;
	Status skip(uint64_t len) override;
	uint64_t remaining() const override { return payload_size_ - pos_; }

	// Random access within the payload (does not move the position).
	// Streamed: ESPIPE (a pipe has no random access).
	Status read_at(uint64_t payload_offset, void *buf, size_t len) const;
	bool streamed() const { return streamed_; }

	const std::string &name() const { return name_; }
	uint64_t payload_size() const { return payload_size_; }
	uint64_t position() const { return pos_; }
	// The dump identity the file is sealed with (nullopt: unsealed, or
	// streamed and not read to its end yet).
	const std::optional<DumpId> &seal() const { return found_; }

private:
	PagesReader(std::string name, UniqueFd fd, uint64_t payload_size, bool streamed,
		    std::optional<DumpId> expect)
		: name_(std::move(name)), fd_(std::move(fd)), payload_size_(payload_size), streamed_(streamed),
		  expect_(expect)
	{
	}
	// Streamed: the next `len` bytes from the pipe; at the payload's end,
	// the seal and the pipe's end are checked.
	Status read_next(void *buf, size_t len);
	// The seal's bytes as read: checked against the name and expect_,
	// kept in found_.
	Status take_seal(const uint8_t *bytes, size_t len);
	// Streamed, after the payload: the seal (if any) and the pipe's end.
	Status finish_stream();

	std::string name_;
	UniqueFd fd_;
	uint64_t payload_size_ = 0;
	uint64_t pos_ = 0;
	bool streamed_ = false;
	std::optional<DumpId> expect_{};
	std::optional<DumpId> found_{};
};

// The dump identity `file` is sealed with as the pages file `as` (a copy
// of it under another name, e.g. kept_name(as, ...)); nullopt: no seal
// naming `as`.
Result<std::optional<DumpId>> read_pages_seal(const ImageDir &dir, const std::string &file, const std::string &as);

} // namespace amdcr
