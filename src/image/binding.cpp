// SPDX-License-Identifier: GPL-2.0-only
#include "image/binding.h"
#include "image/binding_pb.h"

#include <sys/random.h>

#include <algorithm>
#include <cerrno>

namespace amdcr {

Result<DumpId> new_dump_id()
{
	DumpId id{};
	size_t got = 0;
	while (got < id.size()) {
		const ssize_t n = ::getrandom(id.data() + got, id.size() - got, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno_error(errno, "getrandom for the dump's identity");
		got += static_cast<size_t>(n);
	}
	return id;
}

std::string dump_id_text(const DumpId &id)
{
	std::string out;
	for (uint8_t b : id)
		out += strprintf("%02x", b);
	return out;
}

Status check_one_dump(const std::vector<BoundImage> &images, size_t *differing)
{
	const BoundImage *first = nullptr;
	for (size_t i = 0; i < images.size(); i++) {
		const BoundImage &img = images[i];
		if (!first) {
			first = &img;
			continue;
		}
		if (differing)
			*differing = i;
		if (img.binding.has_value() != first->binding.has_value()) {
			const BoundImage &ours = img.binding ? img : *first, &bare = img.binding ? *first : img;
			return make_error(EINVAL,
					  "%s and %s come from different checkpoints: %s carries this plugin's "
					  "dump identity %s, %s none (an image of upstream's plugin, or of a dump "
					  "before identities): files of two checkpoints are mixed",
					  first->name.c_str(), img.name.c_str(), ours.name.c_str(),
					  dump_id_text(ours.binding->dump_id).c_str(), bare.name.c_str());
		}
		if (img.binding && img.binding->dump_id != first->binding->dump_id)
			return make_error(EINVAL,
					  "%s and %s come from different dumps (identities %s and %s): files of "
					  "two checkpoints are mixed",
					  first->name.c_str(), img.name.c_str(),
					  dump_id_text(first->binding->dump_id).c_str(),
					  dump_id_text(img.binding->dump_id).c_str());
	}
	return ok_status();
}

Status check_file_id(uint32_t dumped_for, int id, const std::string &name)
{
	if (dumped_for != static_cast<uint32_t>(id))
		return make_error(EINVAL,
				  "%s: the image was dumped for CRIU file id %u, not for file %d that it is read "
				  "as (renamed, or copied from another file or checkpoint)",
				  name.c_str(), dumped_for, id);
	return ok_status();
}

Status check_binding_file(const std::optional<DumpBinding> &b, int id, const std::string &name)
{
	return b ? check_file_id(b->file_id, id, name) : ok_status();
}

void to_binding_entry(const DumpBinding &b, ::DumpBinding *e)
{
	dump_binding__init(e);
	e->dump_id.len = b.dump_id.size();
	e->dump_id.data = const_cast<uint8_t *>(b.dump_id.data());
	e->file_id = b.file_id;
}

Result<std::optional<DumpBinding>> from_binding_entry(const ::DumpBinding *e, const std::string &name)
{
	if (!e)
		return std::optional<DumpBinding>();
	DumpBinding b;
	if (e->dump_id.len != b.dump_id.size())
		return make_error(EINVAL, "%s: a dump identity of %zu bytes, not %zu", name.c_str(), e->dump_id.len,
				  b.dump_id.size());
	std::copy(e->dump_id.data, e->dump_id.data + e->dump_id.len, b.dump_id.begin());
	b.file_id = e->file_id;
	return std::optional<DumpBinding>(b);
}

} // namespace amdcr
