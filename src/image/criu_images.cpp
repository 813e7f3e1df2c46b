// SPDX-License-Identifier: GPL-2.0-only
#include "image/criu_images.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>

#include "base/checksum.h"
#include "base/file_io.h"
#include "base/unique_fd.h"

namespace amdcr {

namespace {

constexpr uint32_t kImgCommonMagic = 0x54564319;
constexpr uint32_t kFilesMagic = 0x56303138;
constexpr uint32_t kPstreeMagic = 0x50273030;
constexpr uint32_t kFileTypeExt = 16; // fd_types.EXT
constexpr size_t kReadChunk = size_t{1} << 20;

uint32_t le32(const char *b)
{
	uint32_t v = 0;
	for (size_t i = 0; i < 4; i++)
		v |= static_cast<uint32_t>(static_cast<uint8_t>(b[i])) << (8 * i);
	return v;
}

bool varint(std::string_view m, size_t &at, uint64_t &v)
{
	v = 0;
	for (unsigned shift = 0; shift < 64 && at < m.size(); shift += 7) {
		const auto byte = static_cast<uint8_t>(m[at++]);
		v |= static_cast<uint64_t>(byte & 0x7f) << shift;
		if (!(byte & 0x80))
			return true;
	}
	return false;
}

// The varint fields numbered 1 and 2 of a packed message; others skipped.
bool first_two_fields(std::string_view m, std::optional<uint64_t> &f1, std::optional<uint64_t> &f2)
{
	size_t at = 0;
	while (at < m.size()) {
		uint64_t key = 0, v = 0;
		if (!varint(m, at, key))
			return false;
		switch (key & 7) {
		case 0:
			if (!varint(m, at, v))
				return false;
			if (key >> 3 == 1)
				f1 = v;
			else if (key >> 3 == 2)
				f2 = v;
			break;
		case 1:
			at += 8;
			break;
		case 2:
			if (!varint(m, at, v) || v > m.size() - std::min(at, m.size()))
				return false;
			at += v;
			break;
		case 5:
			at += 4;
			break;
		default:
			return false;
		}
	}
	return at == m.size();
}

// A CRIU image read front to back through a buffer that holds one entry
// at most: the memory a file costs is its largest entry, not its size.
class EntryStream {
public:
	EntryStream(UniqueFd fd, const char *name) : fd_(std::move(fd)), name_(name) {}

	// Makes `n` bytes available at data(); false: the file ends first.
	Result<bool> fill(size_t n)
	{
		if (end_ - pos_ >= n)
			return true;
		if (pos_ > 0) {
			std::memmove(buf_.data(), buf_.data() + pos_, end_ - pos_);
			end_ -= pos_;
			pos_ = 0;
		}
		if (buf_.size() < std::max(n, kReadChunk))
			buf_.resize(std::max(n, kReadChunk));
		while (end_ < n) {
			const ssize_t got = ::read(fd_.get(), buf_.data() + end_, buf_.size() - end_);
			if (got < 0 && errno == EINTR)
				continue;
			if (got < 0)
				return errno_error(errno, std::string("read ") + name_);
			if (got == 0)
				return false;
			end_ += static_cast<size_t>(got);
			read_ += static_cast<uint64_t>(got);
			if (read_ > kMaxCriuImageBytes)
				return make_error(EFBIG, "%s: larger than %llu bytes (grew while read)", name_,
						  static_cast<unsigned long long>(kMaxCriuImageBytes));
		}
		return true;
	}
	// Reads to the end, handing each piece to `piece`.
	Status drain(const std::function<void(const char *, size_t)> &piece)
	{
		for (;;) {
			auto more = fill(1);
			if (!more)
				return std::move(more).error();
			if (!*more)
				return ok_status();
			piece(data(), end_ - pos_);
			consume(end_ - pos_);
		}
	}
	const char *data() const { return buf_.data() + pos_; }
	void consume(size_t n)
	{
		pos_ += n;
		offset_ += n;
	}
	uint64_t offset() const { return offset_; }
	bool at_end() const { return pos_ == end_; }

private:
	UniqueFd fd_;
	const char *name_;
	std::vector<char> buf_;
	size_t pos_ = 0, end_ = 0;
	uint64_t read_ = 0, offset_ = 0;
};

// Opens CRIU image `name` for reading: non-blocking (a FIFO planted under
// the name does not hang the reader), never through a symlink, a regular
// file within kMaxCriuImageBytes. nullopt: no such file.
Result<std::optional<EntryStream>> open_criu_image(const ImageDir &dir, const char *name)
{
	auto fd = open_at(dir.fd(), name, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY);
	if (!fd) {
		if (fd.error().code() == ENOENT)
			return std::optional<EntryStream>();
		if (fd.error().code() == ELOOP)
			return make_error(ELOOP, "%s: a symbolic link, not CRIU's image: refused", name);
		return std::move(fd).error();
	}
	struct stat st{};
	if (::fstat(fd->get(), &st) != 0)
		return errno_error(errno, std::string("stat ") + name);
	if (!S_ISREG(st.st_mode))
		return make_error(EINVAL, "%s: not a regular file (mode 0%o), not CRIU's image: refused", name,
				  st.st_mode & S_IFMT);
	if (static_cast<uint64_t>(st.st_size) > kMaxCriuImageBytes)
		return make_error(EFBIG, "%s: %lld bytes, more than the %llu this plugin reads of a CRIU image",
				  name, static_cast<long long>(st.st_size),
				  static_cast<unsigned long long>(kMaxCriuImageBytes));
	return std::optional<EntryStream>(EntryStream(std::move(*fd), name));
}

// Checks the magic of `in` (CRIU image `name`, file magic `magic`).
Status read_magic(EntryStream &in, const char *name, uint32_t magic)
{
	auto has = in.fill(4);
	if (!has)
		return std::move(has).error();
	uint32_t first = *has ? le32(in.data()) : 0;
	if (*has && first == kImgCommonMagic) {
		in.consume(4);
		has = in.fill(4);
		if (!has)
			return std::move(has).error();
		first = *has ? le32(in.data()) : 0;
	}
	if (!*has || first != magic)
		return make_error(EINVAL, "%s: not a CRIU image of magic 0x%08x", name, magic);
	in.consume(4);
	return ok_status();
}

// Calls `entry` with each entry of CRIU image `name` (file magic `magic`);
// false: no such file.
Result<bool> each_entry(const ImageDir &dir, const char *name, uint32_t magic,
			const std::function<Status(std::string_view)> &entry)
{
	auto opened = open_criu_image(dir, name);
	if (!opened)
		return std::move(opened).error();
	if (!*opened)
		return false;
	EntryStream &in = **opened;
	if (auto st = read_magic(in, name, magic); !st)
		return std::move(st).error();
	for (;;) {
		auto more = in.fill(1);
		if (!more)
			return std::move(more).error();
		if (!*more)
			return true;
		const uint64_t at = in.offset();
		auto head = in.fill(4);
		if (!head)
			return std::move(head).error();
		if (!*head)
			return make_error(EINVAL, "%s: an entry's size is cut short at byte %llu", name,
					  static_cast<unsigned long long>(at));
		const uint32_t size = le32(in.data());
		if (size > kMaxCriuEntryBytes)
			return make_error(EFBIG, "%s: an entry of %u bytes at byte %llu, more than the %u this plugin "
					  "reads", name, size, static_cast<unsigned long long>(at + 4), kMaxCriuEntryBytes);
		in.consume(4);
		auto body = in.fill(size);
		if (!body)
			return std::move(body).error();
		if (!*body)
			return make_error(EINVAL, "%s: an entry of %u bytes at byte %llu runs past the end", name, size,
					  static_cast<unsigned long long>(at + 4));
		if (auto st = entry(std::string_view(in.data(), size)); !st)
			return std::move(st).error();
		in.consume(size);
	}
}

// Adds `id` to `ids` (ids of kind `what` read from `name`) within
// kMaxCriuIds.
Status keep_id(std::vector<uint32_t> &ids, uint64_t id, const char *name, const char *what)
{
	if (ids.size() >= kMaxCriuIds)
		return make_error(EFBIG, "%s: more than %zu %s, the most this plugin keeps: refused", name,
				  kMaxCriuIds, what);
	ids.push_back(static_cast<uint32_t>(id));
	return ok_status();
}

bool has_affixes(const std::string &name, std::string_view prefix, std::string_view suffix)
{
	return name.size() > prefix.size() + suffix.size() && name.starts_with(prefix) && name.ends_with(suffix);
}

// The names in the directory, sorted.
Result<std::vector<std::string>> list_names(const ImageDir &dir)
{
	auto dup = open_at(dir.fd(), ".", O_RDONLY | O_DIRECTORY);
	if (!dup)
		return std::move(dup).error().context("the images directory");
	DIR *d = ::fdopendir(dup->get());
	if (!d)
		return errno_error(errno, "list the images directory");
	(void)dup->release();
	std::vector<std::string> names;
	while (const dirent *e = ::readdir(d))
		names.emplace_back(e->d_name);
	::closedir(d);
	std::sort(names.begin(), names.end());
	return names;
}

} // namespace

bool is_bound_criu_image(const std::string &name)
{
	return name == "inventory.img" || name == "pstree.img" || name == "files.img" ||
	       has_affixes(name, "timens-", ".img") || has_affixes(name, "core-", ".img");
}

Result<std::vector<CriuImageDigest>> digest_criu_images(const ImageDir &dir)
{
	if (dir.streaming())
		return make_error(ENOTSUP, "CRIU's images are not in the directory when streamed");
	auto names = list_names(dir);
	if (!names)
		return std::move(names).error();
	std::vector<CriuImageDigest> out;
	for (const std::string &name : *names) {
		if (!is_bound_criu_image(name))
			continue;
		auto opened = open_criu_image(dir, name.c_str());
		if (!opened)
			return std::move(opened).error();
		if (!*opened)
			continue; // gone since listed
		StreamingChecksum sum;
		CriuImageDigest d{name, 0, 0};
		if (auto st = (*opened)->drain([&](const char *p, size_t n) {
			    sum.update(p, n);
			    d.size += n;
		    });
		    !st)
			return std::move(st).error();
		d.checksum = sum.digest();
		out.push_back(std::move(d));
	}
	return out;
}

CriuIdSet::CriuIdSet(std::vector<uint32_t> ids) : ids_(std::move(ids))
{
	std::sort(ids_.begin(), ids_.end());
	ids_.erase(std::unique(ids_.begin(), ids_.end()), ids_.end());
	ids_.shrink_to_fit();
}

bool CriuIdSet::contains(uint32_t id) const
{
	return std::binary_search(ids_.begin(), ids_.end(), id);
}

Result<std::optional<CriuCheckpointFacts>> read_criu_facts(const ImageDir &dir)
{
	if (dir.streaming())
		return std::optional<CriuCheckpointFacts>();
	std::vector<uint32_t> ext, pids;
	auto files = each_entry(dir, "files.img", kFilesMagic, [&](std::string_view m) -> Status {
		std::optional<uint64_t> type, id;
		if (!first_two_fields(m, type, id) || !type || !id)
			return make_error(EINVAL, "files.img: a file_entry without type and id");
		return *type == kFileTypeExt ? keep_id(ext, *id, "files.img", "EXT files") : ok_status();
	});
	if (!files)
		return std::move(files).error();
	auto tasks = each_entry(dir, "pstree.img", kPstreeMagic, [&](std::string_view m) -> Status {
		std::optional<uint64_t> pid, ppid;
		if (!first_two_fields(m, pid, ppid) || !pid)
			return make_error(EINVAL, "pstree.img: a pstree_entry without pid");
		return keep_id(pids, *pid, "pstree.img", "tasks");
	});
	if (!tasks)
		return std::move(tasks).error();
	if (!*files || !*tasks)
		return std::optional<CriuCheckpointFacts>();
	return std::optional<CriuCheckpointFacts>(CriuCheckpointFacts{CriuIdSet(std::move(ext)), CriuIdSet(std::move(pids))});
}

} // namespace amdcr
