// SPDX-License-Identifier: GPL-2.0-only
#include "image/image_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cinttypes>
#include <climits>
#include <vector>
#include <cerrno>
#include <cstring>
#include <utility>

#include "base/file_io.h"
#include "base/scoped.h"

namespace amdcr {

namespace {

// Random suffix for temporary names: 8 hex digits. Collisions are handled
// by O_EXCL and a retry, so this needs no more than getrandom's best effort.
// What a streamed image directory cannot do without consuming a file.
Error not_when_streaming(const char *what, const std::string &name)
{
	return Error(ENOTSUP, strprintf("%s %s: the images are streamed (criu --stream): files can only be "
					"written or read once, in order",
					what, name.c_str()));
}

std::string random_suffix()
{
	uint32_t r = 0;
	if (::getrandom(&r, sizeof(r), GRND_NONBLOCK) != static_cast<ssize_t>(sizeof(r)))
		r = static_cast<uint32_t>(::getpid()) * 2654435761u ^
		    static_cast<uint32_t>(reinterpret_cast<uintptr_t>(&r));
	return strprintf("%08x", r);
}

constexpr std::string_view kKeptInfix = ".old-";

} // namespace

std::string kept_name(const std::string &name, const std::string &suffix)
{
	return "." + name + std::string(kKeptInfix) + suffix;
}

std::optional<std::string> kept_original(std::string_view hidden)
{
	const size_t at = hidden.rfind(kKeptInfix);
	if (!hidden.starts_with('.') || at == std::string_view::npos || at < 2 ||
	    at + kKeptInfix.size() == hidden.size() || hidden.find('/') != std::string_view::npos)
		return std::nullopt;
	return std::string(hidden.substr(1, at - 1));
}

ImageDir ImageDir::borrow(int dirfd, Sync sync)
{
	return ImageDir(dirfd, UniqueFd(), sync);
}

Result<ImageDir> ImageDir::open(const std::string &path, Sync sync)
{
	auto fd = open_at(AT_FDCWD, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (!fd)
		return std::move(fd).error().context("image directory " + path);
	const int raw = fd->get();
	return ImageDir(raw, std::move(*fd), sync);
}

Result<ImageDir> ImageDir::open_sub(const ImageDir &dir, const std::string &rel)
{
	if (dir.streaming())
		return not_when_streaming("open", rel);
	auto fd = open_at(dir.fd(), rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (!fd)
		return std::move(fd).error().context("image directory " + rel);
	const int raw = fd->get();
	return ImageDir(raw, std::move(*fd), dir.sync());
}

Result<AtomicFile> ImageDir::create(const std::string &name) const
{
	if (name.empty() || name.find('/') != std::string::npos)
		return make_error(EINVAL, "%s: not a plain image file name", name.c_str());
	if (streamer_) {
		if (streamer_->mode() != ImageStreamer::Mode::Capture)
			return not_when_streaming("create", name);
		auto pipe = streamer_->open(name);
		if (!pipe)
			return std::move(pipe).error();
		return AtomicFile(name, std::move(*pipe));
	}
	for (int attempt = 0; attempt < 16; attempt++) {
		std::string temp = "." + name + ".tmp-" + random_suffix();
		if (temp_observer_)
			temp_observer_(temp);
		auto fd = open_in_dir(fd_, temp, InDir::CreateNew);
		if (fd) {
			AtomicFile f(fd_, sync_, name, std::move(temp), std::move(*fd));
			f.observer_ = commit_observer_;
			return f;
		}
		if (fd.error().code() != EEXIST)
			return std::move(fd).error().context("create " + name);
	}
	return make_error(EEXIST, "create %s: no free temporary name", name.c_str());
}

Result<UniqueFd> ImageDir::open_read(const std::string &name) const
{
	if (streamer_) {
		if (streamer_->mode() != ImageStreamer::Mode::Serve)
			return not_when_streaming("read", name);
		return streamer_->open(name);
	}
	auto fd = open_in_dir(fd_, name, InDir::Read);
	if (!fd && fd.error().code() == ENOENT)
		return std::move(fd).error().context(name);
	return fd;
}

Result<bool> ImageDir::exists(const std::string &name) const
{
	if (streamer_)
		return not_when_streaming("stat", name);
	struct stat st = {};
	if (::fstatat(fd_, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0)
		return true;
	if (errno == ENOENT)
		return false;
	return errno_error(errno, "stat " + name);
}

Result<uint64_t> ImageDir::file_size(const std::string &name) const
{
	if (streamer_)
		return not_when_streaming("size of", name);
	struct stat st = {};
	if (::fstatat(fd_, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
		return errno_error(errno, "stat " + name);
	if (S_ISLNK(st.st_mode))
		return make_error(ELOOP, "%s: a symbolic link, not followed (files of an image directory must be "
				  "regular files)", name.c_str());
	if (!S_ISREG(st.st_mode))
		return make_error(EINVAL, "%s: not a regular file", name.c_str());
	return static_cast<uint64_t>(st.st_size);
}

Status ImageDir::remove(const std::string &name) const
{
	if (streamer_)
		return not_when_streaming("remove", name);
	if (::unlinkat(fd_, name.c_str(), 0) != 0 && errno != ENOENT)
		return errno_error(errno, "unlink " + name);
	return ok_status();
}

AtomicFile::AtomicFile(int dirfd, ImageDir::Sync sync, std::string name, std::string temp,
		       UniqueFd fd)
	: dirfd_(dirfd), sync_(sync), name_(std::move(name)), temp_(std::move(temp)),
	  fd_(std::move(fd))
{
}

AtomicFile::AtomicFile(std::string name, UniqueFd pipe)
	: name_(std::move(name)), fd_(std::move(pipe)), streamed_(true)
{
}

AtomicFile::AtomicFile(AtomicFile &&o) noexcept
	: dirfd_(o.dirfd_), sync_(o.sync_), name_(std::move(o.name_)),
	  temp_(std::exchange(o.temp_, std::string())), fd_(std::move(o.fd_)),
	  written_(o.written_), committed_(o.committed_), streamed_(o.streamed_), holes_(o.holes_),
	  observer_(std::move(o.observer_))
{
}

AtomicFile &AtomicFile::operator=(AtomicFile &&o) noexcept
{
	if (this != &o) {
		abort();
		dirfd_ = o.dirfd_;
		sync_ = o.sync_;
		name_ = std::move(o.name_);
		temp_ = std::exchange(o.temp_, std::string());
		fd_ = std::move(o.fd_);
		written_ = o.written_;
		committed_ = o.committed_;
		streamed_ = o.streamed_;
		holes_ = o.holes_;
		observer_ = std::move(o.observer_);
	}
	return *this;
}

AtomicFile::~AtomicFile()
{
	abort();
}

void AtomicFile::abort()
{
	fd_.reset();
	if (!committed_ && !temp_.empty())
		::unlinkat(dirfd_, temp_.c_str(), 0);
	temp_.clear();
}

Status AtomicFile::write(const void *buf, size_t len)
{
	if (committed_ || !fd_)
		return make_error(EBADF, "%s: write after commit or abort", name_.c_str());
	auto st = write_full(fd_.get(), buf, len);
	if (!st)
		return std::move(st).error().context(name_);
	written_ += len;
	return ok_status();
}

Status AtomicFile::write_zeros(uint64_t len)
{
	if (committed_ || !fd_)
		return make_error(EBADF, "%s: write after commit or abort", name_.c_str());
	if (can_punch_holes()) {
		if (len > static_cast<uint64_t>(INT64_MAX) - written_)
			return make_error(EFBIG, "%s: %" PRIu64 " zero bytes after %" PRIu64 " overflow a file offset",
					  name_.c_str(), len, written_);
		if (::lseek(fd_.get(), static_cast<off_t>(len), SEEK_CUR) < 0)
			return errno_error(errno, "seeking past zeros in " + name_);
		written_ += len;
		holes_ = true;
		return ok_status();
	}
	static constexpr size_t kZeros = 64 << 10;
	static const std::vector<uint8_t> zeros(kZeros, 0);
	while (len > 0) {
		const size_t n = static_cast<size_t>(std::min<uint64_t>(len, kZeros));
		if (auto st = write(zeros.data(), n); !st)
			return st;
		len -= n;
	}
	return ok_status();
}

Status AtomicFile::rewind(uint64_t len)
{
	if (committed_ || !fd_)
		return make_error(EBADF, "%s: rewind after commit or abort", name_.c_str());
	if (streamed_)
		return make_error(ESPIPE, "%s: a streamed file cannot take back bytes", name_.c_str());
	if (len > written_)
		return make_error(EINVAL, "%s: taking back %" PRIu64 " bytes of %" PRIu64 " written", name_.c_str(), len,
				  written_);
	// Cut, not only seeked: a hole later skipped past the new end must
	// read as zeros, not as the bytes taken back.
	const auto end = static_cast<off_t>(written_ - len);
	if (::ftruncate(fd_.get(), end) != 0)
		return errno_error(errno, "cutting back " + name_);
	if (::lseek(fd_.get(), end, SEEK_SET) < 0)
		return errno_error(errno, "seeking back in " + name_);
	written_ -= len;
	return ok_status();
}

Result<std::string> AtomicFile::keep_replaced() const
{
	for (int attempt = 0; attempt < 16; attempt++) {
		std::string kept = kept_name(name_, random_suffix());
		if (::linkat(dirfd_, name_.c_str(), dirfd_, kept.c_str(), 0) == 0)
			return kept;
		if (errno == ENOENT)
			return std::string(); // nothing to replace
		if (errno != EEXIST)
			return errno_error(errno, "keeping the " + name_ + " this dump replaces (link to " + kept + ")");
	}
	return make_error(EEXIST, "keeping the %s this dump replaces: no free name", name_.c_str());
}

Status AtomicFile::commit()
{
	if (committed_ || !fd_)
		return make_error(EBADF, "%s: commit after commit or abort", name_.c_str());
	if (streamed_) {
		// The streamer sees the end of the file when the pipe closes.
		committed_ = true;
		if (::close(fd_.release()) != 0)
			return errno_error(errno, "close of the streamed " + name_);
		return ok_status();
	}
	// Trailing zeros skipped by write_zeros: give the file its length.
	if (holes_ && ::ftruncate(fd_.get(), static_cast<off_t>(written_)) != 0)
		return errno_error(errno, "setting the length of " + name_);
	if (sync_ == ImageDir::Sync::Full && ::fsync(fd_.get()) != 0)
		return errno_error(errno, "fsync " + name_);
	struct stat st = {};
	if (::fstat(fd_.get(), &st) != 0)
		return errno_error(errno, "fstat " + name_);
	// close() can report a delayed write error (NFS, quota): check it.
	if (::close(fd_.release()) != 0)
		return errno_error(errno, "close " + name_);
	auto kept = observer_ ? keep_replaced() : Result<std::string>(std::string());
	if (!kept)
		return std::move(kept).error();
	if (::renameat(dirfd_, temp_.c_str(), dirfd_, name_.c_str()) != 0) {
		const int err = errno;
		if (!kept->empty())
			::unlinkat(dirfd_, kept->c_str(), 0);
		return errno_error(err, "rename " + temp_ + " to " + name_);
	}
	committed_ = true;
	temp_.clear();
	if (observer_)
		observer_(name_, st.st_dev, st.st_ino, *kept);
	if (sync_ == ImageDir::Sync::Full && ::fsync(dirfd_) != 0)
		return errno_error(errno, "fsync of the image directory after " + name_);
	return ok_status();
}

Result<std::vector<std::string>> ImageDir::names() const
{
	if (streamer_)
		return not_when_streaming("list", "the directory");
	const int fd = ::openat(fd_, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return errno_error(errno, "image directory");
	DIR *d = ::fdopendir(fd);
	if (!d) {
		const int e = errno;
		::close(fd);
		return errno_error(e, "image directory");
	}
	ScopeExit closer([d] { ::closedir(d); });
	std::vector<std::string> names;
	while (const dirent *e = ::readdir(d))
		if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
			names.emplace_back(e->d_name);
	std::sort(names.begin(), names.end());
	return names;
}

Result<std::vector<int>> ImageDir::ids_with_prefix(const char *prefix) const
{
	if (streamer_)
		return not_when_streaming("list", std::string(prefix) + "*.img");
	auto names = this->names();
	if (!names)
		return std::move(names).error();
	std::vector<int> ids;
	const size_t plen = std::strlen(prefix);
	for (const std::string &name : *names) {
		if (name.compare(0, plen, prefix) != 0 || name.size() <= plen + 4 ||
		    name.compare(name.size() - 4, 4, ".img") != 0)
			continue;
		// Digits only, within int (a longer number is no CRIU file id;
		// std::stoi would throw on it).
		const char *first = name.data() + plen;
		const char *last = name.data() + name.size() - 4;
		int id = 0;
		const auto [end, ec] = std::from_chars(first, last, id);
		if (first == last || *first == '-' || ec != std::errc() || end != last)
			continue;
		ids.push_back(id);
	}
	std::sort(ids.begin(), ids.end());
	return ids;
}

} // namespace amdcr
