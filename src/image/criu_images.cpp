// SPDX-License-Identifier: GPL-2.0-only
#include "image/criu_images.h"

#include <cerrno>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>

#include "base/file_io.h"

namespace amdcr {

namespace {

constexpr uint32_t kImgCommonMagic = 0x54564319;
constexpr uint32_t kFilesMagic = 0x56303138;
constexpr uint32_t kPstreeMagic = 0x50273030;
constexpr uint32_t kFileTypeExt = 16; // fd_types.EXT

uint32_t le32(std::string_view b, size_t at)
{
	uint32_t v = 0;
	for (size_t i = 0; i < 4; i++)
		v |= static_cast<uint32_t>(static_cast<uint8_t>(b[at + i])) << (8 * i);
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

// Calls `entry` with each entry of CRIU image `name` (file magic `magic`);
// false: no such file.
Result<bool> each_entry(const ImageDir &dir, const char *name, uint32_t magic,
			const std::function<Status(std::string_view)> &entry)
{
	auto text = read_text_file(dir.fd(), name, size_t{256} << 20);
	if (!text) {
		if (text.error().code() == ENOENT)
			return false;
		return std::move(text).error().context(name);
	}
	const std::string_view b = *text;
	size_t at = 0;
	if (b.size() >= 4 && le32(b, 0) == kImgCommonMagic)
		at = 4;
	if (b.size() < at + 4 || le32(b, at) != magic)
		return make_error(EINVAL, "%s: not a CRIU image of magic 0x%08x", name, magic);
	at += 4;
	while (at < b.size()) {
		if (b.size() - at < 4)
			return make_error(EINVAL, "%s: an entry's size is cut short at byte %zu", name, at);
		const uint32_t size = le32(b, at);
		at += 4;
		if (size > b.size() - at)
			return make_error(EINVAL, "%s: an entry of %u bytes at byte %zu runs past the end", name, size,
					  at);
		if (auto st = entry(b.substr(at, size)); !st)
			return std::move(st).error();
		at += size;
	}
	return true;
}

} // namespace

Result<std::optional<CriuCheckpointFacts>> read_criu_facts(const ImageDir &dir)
{
	if (dir.streaming())
		return std::optional<CriuCheckpointFacts>();
	CriuCheckpointFacts facts;
	auto files = each_entry(dir, "files.img", kFilesMagic, [&](std::string_view m) -> Status {
		std::optional<uint64_t> type, id;
		if (!first_two_fields(m, type, id) || !type || !id)
			return make_error(EINVAL, "files.img: a file_entry without type and id");
		if (*type == kFileTypeExt)
			facts.ext_file_ids.insert(static_cast<uint32_t>(*id));
		return ok_status();
	});
	if (!files)
		return std::move(files).error();
	auto tasks = each_entry(dir, "pstree.img", kPstreeMagic, [&](std::string_view m) -> Status {
		std::optional<uint64_t> pid, ppid;
		if (!first_two_fields(m, pid, ppid) || !pid)
			return make_error(EINVAL, "pstree.img: a pstree_entry without pid");
		facts.pids.insert(static_cast<uint32_t>(*pid));
		return ok_status();
	});
	if (!tasks)
		return std::move(tasks).error();
	if (!*files || !*tasks)
		return std::optional<CriuCheckpointFacts>();
	return std::optional<CriuCheckpointFacts>(std::move(facts));
}

} // namespace amdcr
