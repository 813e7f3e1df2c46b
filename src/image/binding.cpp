// SPDX-License-Identifier: GPL-2.0-only
#include "image/binding.h"
#include "image/binding_pb.h"

#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <span>

#include "image/framing.h"
#include "image/image_names.h"
#include "image/pages_file.h"

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

std::optional<DumpId> bound_dump_id(const std::vector<BoundImage> &images)
{
	if (images.empty() || !images.front().binding)
		return std::nullopt;
	return images.front().binding->dump_id;
}

std::string bound_names(const std::vector<BoundImage> &images)
{
	constexpr size_t kNamed = 2;
	std::string out;
	for (size_t i = 0; i < images.size() && i < kNamed; i++)
		out += (i ? ", " : "") + images[i].name;
	if (images.size() > kNamed)
		out += strprintf(" and %zu more", images.size() - kNamed);
	return out;
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
	e->has_pages_sealed = b.pages_sealed;
	e->pages_sealed = b.pages_sealed;
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
	b.pages_sealed = e->has_pages_sealed && e->pages_sealed;
	return std::optional<DumpBinding>(b);
}

std::optional<DumpId> pages_seal(const std::optional<DumpBinding> &b)
{
	if (!b || !b->pages_sealed)
		return std::nullopt;
	return b->dump_id;
}

namespace {

struct ManifestDeleter {
	void operator()(::DumpManifest *m) const { dump_manifest__free_unpacked(m, nullptr); }
};

Result<DumpManifest> unpack_manifest(std::span<const uint8_t> payload)
{
	std::unique_ptr<::DumpManifest, ManifestDeleter> msg(
		dump_manifest__unpack(nullptr, payload.size(), payload.data()));
	if (!msg)
		return make_error(EINVAL, "%s: not a valid dump_manifest message (%zu bytes)", kDumpManifestName,
				  payload.size());
	DumpManifest m;
	if (msg->dump_id.len != m.dump_id.size())
		return make_error(EINVAL, "%s: a dump identity of %zu bytes, not %zu", kDumpManifestName,
				  msg->dump_id.len, m.dump_id.size());
	std::copy(msg->dump_id.data, msg->dump_id.data + msg->dump_id.len, m.dump_id.begin());
	for (size_t i = 0; i < msg->n_criu_images; i++) {
		const ::CriuImageDigest *d = msg->criu_images[i];
		m.criu_images.push_back({d->name, d->size, d->checksum});
	}
	for (size_t i = 0; i < msg->n_gpu_files; i++)
		m.gpu_files.emplace_back(msg->gpu_files[i]);
	return m;
}

// A varint of `msg` at `at` (advanced past it); nullopt: cut short.
std::optional<uint64_t> read_varint(std::span<const uint8_t> msg, size_t &at)
{
	uint64_t v = 0;
	for (unsigned shift = 0; shift < 64 && at < msg.size(); shift += 7) {
		const uint8_t b = msg[at++];
		v |= static_cast<uint64_t>(b & 0x7f) << shift;
		if (!(b & 0x80))
			return v;
	}
	return std::nullopt;
}

// The bytes of the top-level length-delimited field `field` of the packed
// message `msg` (the last one, as a decoder merges them); nullopt: none,
// or a message that does not parse.
std::optional<std::span<const uint8_t>> find_bytes_field(std::span<const uint8_t> msg, uint32_t field)
{
	std::optional<std::span<const uint8_t>> found;
	size_t at = 0;
	while (at < msg.size()) {
		const auto key = read_varint(msg, at);
		if (!key)
			return std::nullopt;
		uint64_t skip = 0;
		switch (*key & 7) {
		case 0:
			if (!read_varint(msg, at))
				return std::nullopt;
			continue;
		case 1:
			skip = 8;
			break;
		case 5:
			skip = 4;
			break;
		case 2: {
			const auto len = read_varint(msg, at);
			if (!len || *len > msg.size() - at)
				return std::nullopt;
			if ((*key >> 3) == field)
				found = msg.subspan(at, static_cast<size_t>(*len));
			skip = *len;
			break;
		}
		default:
			return std::nullopt;
		}
		if (skip > msg.size() - at)
			return std::nullopt;
		at += static_cast<size_t>(skip);
	}
	return found;
}

struct BindingDeleter {
	void operator()(::DumpBinding *b) const { dump_binding__free_unpacked(b, nullptr); }
};

std::string digest_text(const CriuImageDigest &d)
{
	return strprintf("%llu bytes, checksum %016llx", static_cast<unsigned long long>(d.size),
			 static_cast<unsigned long long>(d.checksum));
}

// The first difference between CRIU's images as the manifest lists them
// and as they are now, as a sentence; empty when none.
std::string first_difference(const std::vector<CriuImageDigest> &then, const std::vector<CriuImageDigest> &now)
{
	auto by_name = [](const CriuImageDigest &a, const CriuImageDigest &b) { return a.name < b.name; };
	for (const CriuImageDigest &d : then) {
		auto it = std::lower_bound(now.begin(), now.end(), d, by_name);
		if (it == now.end() || it->name != d.name)
			return strprintf("CRIU's %s is missing", d.name.c_str());
		if (*it != d)
			return strprintf("CRIU's %s is not the one of that dump (%s then, %s now)", d.name.c_str(),
					 digest_text(d).c_str(), digest_text(*it).c_str());
	}
	for (const CriuImageDigest &d : now)
		if (!std::binary_search(then.begin(), then.end(), d, by_name))
			return strprintf("CRIU's %s was not part of that dump", d.name.c_str());
	return {};
}

} // namespace

Status write_dump_manifest(const ImageDir &dir, const DumpManifest &m)
{
	std::vector<::CriuImageDigest> entries(m.criu_images.size());
	std::vector<::CriuImageDigest *> ptrs;
	for (size_t i = 0; i < m.criu_images.size(); i++) {
		criu_image_digest__init(&entries[i]);
		entries[i].name = const_cast<char *>(m.criu_images[i].name.c_str());
		entries[i].size = m.criu_images[i].size;
		entries[i].checksum = m.criu_images[i].checksum;
		ptrs.push_back(&entries[i]);
	}
	::DumpManifest msg;
	dump_manifest__init(&msg);
	msg.dump_id.len = m.dump_id.size();
	msg.dump_id.data = const_cast<uint8_t *>(m.dump_id.data());
	msg.n_criu_images = ptrs.size();
	msg.criu_images = ptrs.data();
	std::vector<char *> gpu;
	for (const std::string &n : m.gpu_files)
		gpu.push_back(const_cast<char *>(n.c_str()));
	msg.n_gpu_files = gpu.size();
	msg.gpu_files = gpu.data();
	std::vector<uint8_t> out(dump_manifest__get_packed_size(&msg));
	if (dump_manifest__pack(&msg, out.data()) != out.size())
		return make_error(EIO, "packing %s", kDumpManifestName);
	return write_image_payload(dir, kDumpManifestName, out);
}

Result<std::optional<DumpManifest>> read_dump_manifest(const ImageDir &dir)
{
	auto payload = read_image_payload(dir, kDumpManifestName);
	if (!payload) {
		if (payload.error().code() == ENOENT)
			return std::optional<DumpManifest>();
		return std::move(payload).error();
	}
	auto m = unpack_manifest(*payload);
	if (!m)
		return std::move(m).error();
	return std::optional<DumpManifest>(std::move(*m));
}

Result<std::optional<DumpId>> carried_dump_id(const ImageDir &dir, const std::string &file, const std::string &as)
{
	if (as.starts_with(kPagesImagePrefix) || as.starts_with(kDrmPagesImagePrefix))
		return read_pages_seal(dir, file, as);
	const bool manifest = as == kDumpManifestName;
	if (!manifest && !as.starts_with(kKfdImagePrefix) && !as.starts_with(kRenderImagePrefix) &&
	    !as.starts_with(kDmabufImagePrefix))
		return std::optional<DumpId>();
	auto payload = read_image_payload(dir, file);
	if (!payload)
		return std::move(payload).error();
	if (manifest) {
		auto m = unpack_manifest(*payload);
		return m ? std::optional<DumpId>(m->dump_id) : std::optional<DumpId>();
	}
	const auto bytes = find_bytes_field(*payload, kBindingField);
	if (!bytes)
		return std::optional<DumpId>();
	std::unique_ptr<::DumpBinding, BindingDeleter> msg(dump_binding__unpack(nullptr, bytes->size(), bytes->data()));
	auto b = from_binding_entry(msg.get(), file);
	if (!b || !*b)
		return std::optional<DumpId>();
	return std::optional<DumpId>((*b)->dump_id);
}

Status check_bound_to_criu(const ImageDir &dir, const std::optional<DumpId> &dump, const std::string &images,
			   bool require_manifest, std::string *warning)
{
	if (dir.streaming())
		return ok_status();
	auto manifest = read_dump_manifest(dir);
	if (!manifest)
		return std::move(manifest).error();
	if (!dump) {
		if (*manifest)
			return make_error(EINVAL,
					  "%s: the manifest of dump %s beside GPU images without a dump identity "
					  "(%s): files of two checkpoints are mixed",
					  kDumpManifestName, dump_id_text((*manifest)->dump_id).c_str(), images.c_str());
		return ok_status();
	}
	if (!*manifest && !require_manifest) {
		if (warning)
			*warning = strprintf("%s is missing and KFD_REQUIRE_MANIFEST=0: the GPU images (%s) of dump "
					     "%s are restored bound to each other only, not to CRIU's images of this "
					     "checkpoint (GPU files of an earlier or later checkpoint of the process "
					     "would go unnoticed)",
					     kDumpManifestName, images.c_str(), dump_id_text(*dump).c_str());
		return ok_status();
	}
	if (!*manifest)
		return make_error(EINVAL,
				  "%s is missing: the GPU images (%s) of dump %s cannot be bound to CRIU's images "
				  "of this checkpoint (a dump that did not finish; GPU files copied from "
				  "another checkpoint without their manifest; or a copy made by a post-dump "
				  "action script, which CRIU runs before the plugin writes the manifest at its "
				  "exit: copy %s from the dump's directory once criu has exited, or restore "
				  "with KFD_REQUIRE_MANIFEST=0)",
				  kDumpManifestName, images.c_str(), dump_id_text(*dump).c_str(), kDumpManifestName);
	if ((*manifest)->dump_id != *dump)
		return make_error(EINVAL,
				  "the GPU images (%s) come from dump %s, but %s is that of dump %s: the GPU "
				  "files come from another checkpoint",
				  images.c_str(), dump_id_text(*dump).c_str(), kDumpManifestName,
				  dump_id_text((*manifest)->dump_id).c_str());
	for (const std::string &name : (*manifest)->gpu_files) {
		auto present = dir.exists(name);
		if (!present)
			return std::move(present).error();
		if (!*present)
			return make_error(ENOENT, "%s is missing: dump %s wrote it (%s lists it)", name.c_str(),
					  dump_id_text(*dump).c_str(), kDumpManifestName);
	}
	auto now = digest_criu_images(dir);
	if (!now)
		return std::move(now).error();
	if (auto diff = first_difference((*manifest)->criu_images, *now); !diff.empty())
		return make_error(EINVAL,
				  "the GPU images (%s) and %s of dump %s were not dumped with CRIU's images of "
				  "this checkpoint: %s (the GPU files come from an earlier or later checkpoint "
				  "of the process, or CRIU's images were changed)",
				  images.c_str(), kDumpManifestName, dump_id_text(*dump).c_str(), diff.c_str());
	return ok_status();
}

} // namespace amdcr
