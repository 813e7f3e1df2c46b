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
#include <map>
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
constexpr uint32_t kMmMagic = 0x57492820;
constexpr uint32_t kIdsMagic = 0x54432030;
constexpr uint32_t kFdinfoMagic = 0x56213732;
constexpr uint32_t kFileTypeReg = 1;  // fd_types.REG
constexpr uint32_t kFileTypeExt = 16; // fd_types.EXT
constexpr uint64_t kVmaExtPlugin = uint64_t{1} << 27; // vma_entry.status: a device mapping a plugin claimed
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

// One field of a packed protobuf message: a varint's or fixed field's value
// in `value`, a length-delimited field's contents in `bytes`.
struct PbField {
	uint64_t number = 0;
	bool delimited = false;
	uint64_t value = 0;
	std::string_view bytes;
};

// Calls `field` with each field of a packed message; false: the message is
// malformed.
bool each_field(std::string_view m, const std::function<void(const PbField &)> &field)
{
	size_t at = 0;
	while (at < m.size()) {
		uint64_t key = 0, v = 0;
		if (!varint(m, at, key))
			return false;
		std::string_view bytes;
		switch (key & 7) {
		case 0:
			if (!varint(m, at, v))
				return false;
			break;
		case 1:
		case 5: {
			const size_t n = (key & 7) == 1 ? 8 : 4;
			if (n > m.size() - at)
				return false;
			for (size_t i = 0; i < n; i++)
				v |= static_cast<uint64_t>(static_cast<uint8_t>(m[at + i])) << (8 * i);
			at += n;
			break;
		}
		case 2:
			if (!varint(m, at, v) || v > m.size() - at)
				return false;
			bytes = m.substr(at, v);
			at += v;
			break;
		default:
			return false;
		}
		field({key >> 3, (key & 7) == 2, v, bytes});
	}
	return true;
}

// The varint fields numbered 1 and 2 of a packed message; others skipped.
bool first_two_fields(std::string_view m, std::optional<uint64_t> &f1, std::optional<uint64_t> &f2)
{
	return each_field(m, [&](const PbField &f) {
		if (f.delimited)
			return;
		if (f.number == 1)
			f1 = f.value;
		else if (f.number == 2)
			f2 = f.value;
	});
}

// A CRIU image read front to back through a buffer that holds one entry
// at most: the memory a file costs is its largest entry, not its size.
// The buffer is kReadChunk, or the file's size (`size`, its fstat) when
// smaller: a task's ids image is tens of bytes, and a tree of many tasks
// has one per task.
class EntryStream {
public:
	EntryStream(UniqueFd fd, const char *name, uint64_t size)
		: fd_(std::move(fd)), name_(name), chunk_(static_cast<size_t>(std::min<uint64_t>(size, kReadChunk)))
	{
	}

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
		if (buf_.size() < std::max(n, chunk_))
			buf_.resize(std::max(n, chunk_));
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
	size_t chunk_; // what one read asks for at least
	std::vector<char> buf_;
	size_t pos_ = 0, end_ = 0;
	uint64_t read_ = 0, offset_ = 0;
};

// Opens CRIU image `name` for reading as open_in_dir() opens a file of a
// hostile directory: never through a symlink, a regular file only (a FIFO
// or device under the name is refused by its type before any open, so it
// neither hangs the reader nor is opened), then within kMaxCriuImageBytes.
// nullopt: no such file.
Result<std::optional<EntryStream>> open_criu_image(const ImageDir &dir, const char *name)
{
	auto fd = open_in_dir(dir.fd(), name, InDir::Read);
	if (!fd) {
		if (fd.error().code() == ENOENT)
			return std::optional<EntryStream>();
		return std::move(fd).error();
	}
	struct stat st{};
	if (::fstat(fd->get(), &st) != 0)
		return errno_error(errno, std::string("stat ") + name);
	if (static_cast<uint64_t>(st.st_size) > kMaxCriuImageBytes)
		return make_error(EFBIG, "%s: %lld bytes, more than the %llu this plugin reads of a CRIU image",
				  name, static_cast<long long>(st.st_size),
				  static_cast<unsigned long long>(kMaxCriuImageBytes));
	return std::optional<EntryStream>(EntryStream(std::move(*fd), name, static_cast<uint64_t>(st.st_size)));
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

// The REG files of files.img that are render nodes (reg_file_entry: field
// 1 id, field 6 name), by id.
Result<std::map<uint32_t, std::string>> render_node_files(const ImageDir &dir)
{
	std::map<uint32_t, std::string> out;
	auto read = each_entry(dir, "files.img", kFilesMagic, [&](std::string_view m) -> Status {
		std::optional<uint64_t> type;
		std::string_view reg;
		if (!each_field(m, [&](const PbField &f) {
			    if (!f.delimited && f.number == 1)
				    type = f.value;
			    else if (f.delimited && f.number == 3)
				    reg = f.bytes;
		    }))
			return make_error(EINVAL, "files.img: a malformed file_entry");
		if (type != kFileTypeReg || reg.empty())
			return ok_status();
		std::optional<uint64_t> id;
		std::string_view name;
		if (!each_field(reg, [&](const PbField &f) {
			    if (!f.delimited && f.number == 1)
				    id = f.value;
			    else if (f.delimited && f.number == 6)
				    name = f.bytes;
		    }) || !id)
			return make_error(EINVAL, "files.img: a malformed reg_file_entry");
		if (render_minor_of_path(name) == 0)
			return ok_status();
		if (out.size() >= kMaxCriuIds)
			return make_error(EFBIG, "files.img: more than %zu render node files, the most this plugin "
					  "keeps: refused", kMaxCriuIds);
		out.emplace(static_cast<uint32_t>(*id), std::string(name));
		return ok_status();
	});
	if (!read)
		return std::move(read).error();
	return out;
}

// The render node mappings of the VMAs of one mm_entry (field 14, each a
// vma_entry: 1 start, 2 end, 3 pgoff, 4 shmid, 7 status) of task `pid`.
Status render_vmas(std::string_view mm, uint32_t pid, const std::string &image,
		   const std::map<uint32_t, std::string> &renders, std::vector<CriuRenderMapping> &out)
{
	Status st = ok_status();
	const bool well_formed = each_field(mm, [&](const PbField &f) {
		if (!st || !f.delimited || f.number != 14)
			return;
		CriuRenderMapping v;
		v.pid = pid;
		uint64_t shmid = 0, status = 0;
		if (!each_field(f.bytes, [&](const PbField &g) {
			    const uint64_t x = g.delimited ? 0 : g.value;
			    switch (g.number) {
			    case 1: v.start = x; break;
			    case 2: v.end = x; break;
			    case 3: v.pgoff = x; break;
			    case 4: shmid = x; break;
			    case 7: status = x; break;
			    default: break;
			    }
		    })) {
			st = make_error(EINVAL, "%s: a malformed vma_entry", image.c_str());
			return;
		}
		auto file = renders.find(static_cast<uint32_t>(shmid));
		if (!(status & kVmaExtPlugin) || shmid > UINT32_MAX || file == renders.end())
			return;
		if (out.size() >= kMaxCriuIds) {
			st = make_error(EFBIG, "%s: more than %zu render node mappings in the checkpoint, the most "
					"this plugin keeps: refused", image.c_str(), kMaxCriuIds);
			return;
		}
		v.file_id = file->first;
		v.path = file->second;
		v.minor = render_minor_of_path(v.path);
		out.push_back(std::move(v));
	});
	if (!well_formed)
		return make_error(EINVAL, "%s: a malformed mm_entry", image.c_str());
	return st;
}

} // namespace

uint32_t render_minor_of_path(std::string_view path)
{
	constexpr std::string_view kPrefix = "renderD";
	const size_t slash = path.rfind('/');
	const std::string_view base = slash == std::string_view::npos ? path : path.substr(slash + 1);
	if (!base.starts_with(kPrefix) || base.size() == kPrefix.size() || base.size() > kPrefix.size() + 9)
		return 0;
	uint32_t minor = 0;
	for (char c : base.substr(kPrefix.size())) {
		if (c < '0' || c > '9')
			return 0;
		minor = minor * 10 + static_cast<uint32_t>(c - '0');
	}
	return minor;
}

Result<std::vector<CriuRenderMapping>> read_render_mappings(const ImageDir &dir, const CriuIdSet &pids)
{
	if (dir.streaming())
		return make_error(ENOTSUP, "CRIU's images are not in the directory when streamed");
	auto renders = render_node_files(dir);
	if (!renders)
		return std::move(renders).error();
	std::vector<CriuRenderMapping> out;
	if (renders->empty())
		return out;
	for (uint32_t pid : pids.sorted()) {
		const std::string image = strprintf("mm-%u.img", pid);
		auto read = each_entry(dir, image.c_str(), kMmMagic, [&](std::string_view m) {
			return render_vmas(m, pid, image, *renders, out);
		});
		if (!read)
			return std::move(read).error();
	}
	return out;
}

namespace {

// The files_id of task `pid`'s fd table (ids-<pid>.img, where CRIU's
// restore reads it: task_kobj_ids_entry, its field 2); nullopt: no such
// image.
Result<std::optional<uint32_t>> task_files_id(const ImageDir &dir, uint32_t pid)
{
	const std::string image = strprintf("ids-%u.img", pid);
	std::optional<uint64_t> vm_id, files_id;
	auto read = each_entry(dir, image.c_str(), kIdsMagic, [&](std::string_view m) -> Status {
		if (!first_two_fields(m, vm_id, files_id))
			return make_error(EINVAL, "%s: a malformed task_kobj_ids_entry", image.c_str());
		return ok_status();
	});
	if (!read)
		return std::move(read).error();
	if (!*read || !files_id || *files_id > UINT32_MAX)
		return std::optional<uint32_t>();
	return std::optional<uint32_t>(static_cast<uint32_t>(*files_id));
}

} // namespace

Result<std::optional<std::map<uint32_t, uint32_t>>> read_ext_file_restorers(const ImageDir &dir,
									    const CriuIdSet &pids)
{
	using Restorers = std::map<uint32_t, uint32_t>;
	if (dir.streaming())
		return make_error(ENOTSUP, "CRIU's images are not in the directory when streamed");
	std::map<uint32_t, std::vector<uint32_t>> tables; // files_id -> the tasks sharing it
	for (uint32_t pid : pids.sorted()) {
		auto files_id = task_files_id(dir, pid);
		if (!files_id)
			return std::move(files_id).error();
		if (!*files_id)
			return std::optional<Restorers>();
		tables[**files_id].push_back(pid);
	}
	Restorers out;
	for (const auto &[files_id, tasks] : tables) {
		const std::string image = strprintf("fdinfo-%u.img", files_id);
		// pids.sorted(): tasks.front() is the table's lowest pid (a copy:
		// clang before 16 cannot capture a structured binding).
		const uint32_t lowest = tasks.front();
		auto read = each_entry(dir, image.c_str(), kFdinfoMagic, [&](std::string_view m) -> Status {
			std::optional<uint64_t> id, type; // fdinfo_entry: 1 id, 3 type
			if (!each_field(m, [&](const PbField &f) {
				    if (!f.delimited && f.number == 1)
					    id = f.value;
				    else if (!f.delimited && f.number == 3)
					    type = f.value;
			    }) || !id)
				return make_error(EINVAL, "%s: a malformed fdinfo_entry", image.c_str());
			if (type != kFileTypeExt || *id > UINT32_MAX)
				return ok_status();
			auto [it, added] = out.emplace(static_cast<uint32_t>(*id), lowest);
			if (!added)
				it->second = std::min(it->second, lowest); // CRIU: the lower pid restores it
			if (out.size() > kMaxCriuIds)
				return make_error(EFBIG, "%s: more than %zu EXT files in the checkpoint, the most this "
						  "plugin keeps: refused", image.c_str(), kMaxCriuIds);
			return ok_status();
		});
		if (!read)
			return std::move(read).error();
		if (!*read)
			return std::optional<Restorers>();
	}
	return std::optional<Restorers>(std::move(out));
}

Status check_kfd_file_restorer(const std::map<uint32_t, uint32_t> &restorers, uint32_t id, uint32_t pid)
{
	auto it = restorers.find(id);
	if (it == restorers.end() || it->second == pid)
		return ok_status();
	return make_error(EINVAL,
			  "dumped from pid %u, but CRIU restores the file in task %u (the lowest pid of the tasks "
			  "holding it, ids-*.img and fdinfo-*.img): the image comes from another task or checkpoint",
			  pid, it->second);
}

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
