// SPDX-License-Identifier: GPL-2.0-only
//
// ImageDir: the image directory, as a directory fd. Every image file is
// opened relative to it. The plugin passes CRIU's criu_get_image_dir()
// (borrowed: CRIU owns that fd); tests and tools open a path (owned).
//
// Writing is atomic per file: AtomicFile writes to a hidden temporary name
// in the same directory (".<name>.tmp-XXXXXXXX", mode 0600: GPU memory may
// hold secrets) and renameat()s it onto the final name in commit(). An
// AtomicFile destroyed (or abort()ed) before commit() unlinks its temporary,
// so a file under a final name is always complete.
//
// fsync policy: by default commit() does not fsync. CRIU does not fsync its
// own images either; a dump's durability is the caller's business (sync
// after criu dump). The rename still orders "all data written" before "name
// visible" for readers on this system. With ImageDir::Sync::Full, commit()
// fsyncs the file before the rename and the directory after it, which also
// makes the file crash-safe, at the cost of a flush per file.
//
// Streaming (criu --stream, see image_stream.h): an ImageDir given an
// ImageStreamer (set_streamer) opens every file through it and never
// touches the directory. create() then yields an AtomicFile that is the
// streamer's pipe: written once in order, commit() closes it (checking the
// close), abort() or destruction before commit() closes it early, leaving
// the streamer a truncated file (CRIU fails that dump anyway); nothing is
// renamed or unlinked. open_read() yields the pipe's read end. exists(),
// file_size(), names(), ids_with_prefix() and remove() cannot be answered without
// consuming a file, and fail with ENOTSUP naming the stream mode.
// can_punch_holes() is false: a pipe has no holes, so runs of zeros must be
// written (AtomicFile::write_zeros does either).
//
// Threads: ImageDir's methods are const and only make syscalls, so one
// ImageDir may serve several threads (one pages file per GPU in parallel).
// Each AtomicFile, PagesWriter or PagesReader belongs to one thread at a
// time (PagesReader::read_at is const and safe to share).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"
#include "image/image_stream.h"

namespace amdcr {

class AtomicFile;

// The hidden name a commit keeps the file it replaces under
// (".<name>.old-<random>", ImageDir::set_commit_observer), and back: the
// final name whose older file `hidden` keeps (nullopt: not such a name).
std::string kept_name(const std::string &name, const std::string &suffix);
std::optional<std::string> kept_original(std::string_view hidden);

class ImageDir {
public:
	enum class Sync { None, Full };

	// Largest metadata image (kfd/renderD/dmabuf) that read_image_file
	// accepts. The largest real ones are priv_data of processes with many
	// queues: megabytes, not gigabytes.
	static constexpr uint64_t kDefaultMaxMetadataSize = 256ull << 20;

	// Borrows `dirfd` (not closed by ImageDir). The caller keeps it open
	// while this ImageDir and every AtomicFile made from it are alive.
	static ImageDir borrow(int dirfd, Sync sync = Sync::None);
	// Opens `path` as a directory; owns the fd.
	static Result<ImageDir> open(const std::string &path, Sync sync = Sync::None);
	// Opens the directory `rel` (relative to `dir`, symlinks followed: a
	// checkpoint's `parent` link); owns the fd. Not when streaming.
	static Result<ImageDir> open_sub(const ImageDir &dir, const std::string &rel);

	ImageDir(ImageDir &&) noexcept = default;
	ImageDir &operator=(ImageDir &&) noexcept = default;
	ImageDir(const ImageDir &) = delete;
	ImageDir &operator=(const ImageDir &) = delete;
	~ImageDir() = default;

	int fd() const { return fd_; }
	Sync sync() const { return sync_; }
	uint64_t max_metadata_size() const { return max_metadata_size_; }
	void set_max_metadata_size(uint64_t bytes) { max_metadata_size_ = bytes; }

	// Stream mode: every file goes through `streamer` from now on.
	void set_streamer(ImageStreamer streamer) { streamer_ = streamer; }
	const std::optional<ImageStreamer> &streamer() const { return streamer_; }
	bool streaming() const { return streamer_.has_value(); }
	// Whether a file of this directory may have holes (false when
	// streaming: zeros must be written).
	bool can_punch_holes() const { return !streaming(); }

	// Creates the temporary file for `name` (mode 0600, O_EXCL: a name
	// taken by anything, a planted symbolic link too, is never opened).
	Result<AtomicFile> create(const std::string &name) const;
	// Called by create() with each temporary file name just before that
	// file is created (a dump's guardian removes it if CRIU dies).
	using TempObserver = std::function<void(const std::string &temp_name)>;
	void set_temp_observer(TempObserver observer) { temp_observer_ = std::move(observer); }
	// Called by AtomicFile::commit() with each file's final name and the
	// (st_dev, st_ino) of the file now under it, once the rename is done:
	// a dump records what it created, so that a failed one removes
	// exactly those files. May be called from several threads at once
	// (one pages file per GPU); the observer is copied into each
	// AtomicFile created after it is set. With an observer, a commit that
	// replaces a file keeps that file, hard-linked under a hidden name
	// (".<name>.old-<random>", made before the rename), and passes that
	// name as `kept` ("" when the name was free): the observer's owner puts
	// it back (a failed dump) or removes it (one that succeeded).
	using CommitObserver =
		std::function<void(const std::string &name, dev_t dev, ino_t ino, const std::string &kept)>;
	void set_commit_observer(CommitObserver observer) { commit_observer_ = std::move(observer); }
	// Opens `name` read-only (O_CLOEXEC), which must be a regular file:
	// open_in_dir (base/file_io.h), so a symbolic link is not followed and
	// a FIFO, socket or device is refused without blocking, naming it. A
	// missing file is ENOENT with a message naming it.
	Result<UniqueFd> open_read(const std::string &name) const;
	// Whether `name` exists, whatever it is (a symbolic link is not
	// followed); any error but ENOENT is an Error.
	Result<bool> exists(const std::string &name) const;
	// The name of every entry of the directory but "." and "..", sorted.
	Result<std::vector<std::string>> names() const;
	// The CRIU file ids of the images named <prefix><id>.img, ascending.
	Result<std::vector<int>> ids_with_prefix(const char *prefix) const;
	// Size in bytes of `name`, from fstatat; a symbolic link (not
	// followed) or anything but a regular file is an Error.
	Result<uint64_t> file_size(const std::string &name) const;
	// Removes `name`; a missing file is not an error.
	Status remove(const std::string &name) const;

private:
	ImageDir(int fd, UniqueFd owned, Sync sync) : fd_(fd), owned_(std::move(owned)), sync_(sync) {}

	int fd_ = -1;
	UniqueFd owned_;
	Sync sync_ = Sync::None;
	uint64_t max_metadata_size_ = kDefaultMaxMetadataSize;
	std::optional<ImageStreamer> streamer_;
	TempObserver temp_observer_;
	CommitObserver commit_observer_;
};

// A file being written under a temporary name; see above.
class AtomicFile {
public:
	AtomicFile(AtomicFile &&o) noexcept;
	AtomicFile &operator=(AtomicFile &&o) noexcept;
	AtomicFile(const AtomicFile &) = delete;
	AtomicFile &operator=(const AtomicFile &) = delete;
	// Unlinks the temporary file unless committed.
	~AtomicFile();

	// The final name (what error messages use).
	const std::string &name() const { return name_; }
	int fd() const { return fd_.get(); }
	uint64_t bytes_written() const { return written_; }
	// The streamer's pipe (stream mode), not a file of the directory.
	bool streamed() const { return streamed_; }
	bool can_punch_holes() const { return !streamed_; }

	// Appends all of `buf` (short writes retried; ENOSPC/EIO/EPIPE are
	// Errors naming the file).
	Status write(const void *buf, size_t len);
	// Appends `len` zero bytes: a hole (seek past them; commit() sets the
	// file's length) when can_punch_holes(), else written zeros.
	Status write_zeros(uint64_t len);
	// Cuts the last `len` bytes off the file (the next write goes where
	// they began). Not streamed: ESPIPE.
	Status rewind(uint64_t len);
	// Makes the file visible under its final name (replacing an older file
	// of that name, kept under a hidden name when the directory has a
	// commit observer). After an Error, the temporary is still removed by
	// the destructor.
	Status commit();
	// Drops the temporary file now.
	void abort();

private:
	friend class ImageDir;
	AtomicFile(int dirfd, ImageDir::Sync sync, std::string name, std::string temp, UniqueFd fd);
	// A streamed file (no directory, no temporary).
	AtomicFile(std::string name, UniqueFd pipe);
	// Links the file under the final name, if any, to a new hidden name
	// and returns that name ("": none there).
	Result<std::string> keep_replaced() const;

	int dirfd_ = -1;
	ImageDir::Sync sync_ = ImageDir::Sync::None;
	std::string name_;
	std::string temp_;
	UniqueFd fd_;
	uint64_t written_ = 0;
	bool committed_ = false;
	bool streamed_ = false;
	bool holes_ = false; // write_zeros seeked: commit() sets the length
	ImageDir::CommitObserver observer_;
};

} // namespace amdcr
