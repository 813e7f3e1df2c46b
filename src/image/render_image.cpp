// SPDX-License-Identifier: GPL-2.0-only
#include "base/drm.h"
#include "image/render_image.h"

#include <cerrno>
#include <cinttypes>
#include <memory>
#include <set>

#include "criu-amdgpu.pb-c.h"
#include "image/binding_pb.h"
#include "image/framing.h"
#include "image/image_names.h"
#include "image/kfd_image.h"

namespace amdcr {

namespace {

struct RenderDeleter {
	void operator()(CriuRenderNode *p) const { criu_render_node__free_unpacked(p, nullptr); }
};
struct DmabufDeleter {
	void operator()(CriuDmabufNode *p) const { criu_dmabuf_node__free_unpacked(p, nullptr); }
};

// bo_checksum <-> BoChecksum. The entry borrows `c`'s chunk list.
void to_entry(const BoChecksum &c, ::BoChecksum *e)
{
	bo_checksum__init(e);
	e->chunk_size = c.chunk_bytes;
	e->n_chunks = c.chunks.size();
	e->chunks = const_cast<uint64_t *>(c.chunks.data());
	e->whole = c.whole;
}

// Only when the checksums are wanted (Verify::On).
std::optional<BoChecksum> from_entry(const ::BoChecksum *e, Verify verify)
{
	if (!e || verify != Verify::On)
		return std::nullopt;
	return BoChecksum{e->chunk_size, {e->chunks, e->chunks + e->n_chunks}, e->whole};
}

// bo_metadata <-> GemMetadata. The entry borrows `m`'s data.
void to_entry(const GemMetadata &m, BoMetadata *e)
{
	bo_metadata__init(e);
	e->flags = m.flags;
	e->tiling_info = m.tiling_info;
	e->data.len = m.data.size();
	e->data.data = const_cast<uint8_t *>(m.data.data());
}

std::optional<GemMetadata> from_entry(const BoMetadata *e)
{
	if (!e)
		return std::nullopt;
	return GemMetadata{e->flags, e->tiling_info, {e->data.data, e->data.data + e->data.len}};
}

Status validate_metadata(const std::optional<GemMetadata> &m, const std::string &where)
{
	if (m && m->data.size() > kMaxGemMetadataBytes)
		return make_error(EINVAL, "%s: %zu bytes of metadata, more than the %u amdgpu keeps", where.c_str(),
				  m->data.size(), kMaxGemMetadataBytes);
	return ok_status();
}

// shared_bo_entry <-> SharedBo: the one list of its fields. `sum` and `md`
// are the storage of the entry's checksum and metadata, if any.
void to_entry(const SharedBo &s, SharedBoEntry *e, ::BoChecksum *sum, BoMetadata *md)
{
	shared_bo_entry__init(e);
	e->id = s.id;
	e->gpu_id = s.gpu_id;
	e->size = s.size;
	e->alignment = s.alignment;
	e->preferred_domains = s.preferred_domains;
	e->alloc_flags = s.alloc_flags;
	e->contents_id = s.contents_id;
	e->contents_minor = s.contents_minor;
	e->contents_index = s.contents_index;
	if (s.checksum) {
		to_entry(*s.checksum, sum);
		e->checksum = sum;
	}
	if (s.metadata) {
		to_entry(*s.metadata, md);
		e->metadata = md;
	}
}

std::optional<SharedBo> from_entry(const SharedBoEntry *e, Verify verify)
{
	if (!e)
		return std::nullopt;
	return SharedBo{e->id,		      e->gpu_id,	 e->size,
			e->alignment,	      e->preferred_domains, e->alloc_flags,
			e->contents_id,	      e->contents_minor, e->contents_index,
			from_entry(e->checksum, verify), from_entry(e->metadata)};
}

} // namespace

Status validate_shared_bo(const SharedBo &s, const std::string &where)
{
	const char *w = where.c_str();
	if (s.id == 0 || s.id > kMaxSharedBoId)
		return make_error(EINVAL, "%s: shared BO id %u outside 1..%u", w, s.id, kMaxSharedBoId);
	if (s.gpu_id == 0)
		return make_error(EINVAL, "%s: shared BO %u: gpu_id 0", w, s.id);
	if (s.size == 0)
		return make_error(EINVAL, "%s: shared BO %u: size 0", w, s.id);
	if (s.has_contents() &&
	    (s.contents_minor < kFirstRenderMinor || s.contents_minor > kLastRenderMinor))
		return make_error(EINVAL, "%s: shared BO %u: contents file's render minor %u outside %u..%u", w,
				  s.id, s.contents_minor, kFirstRenderMinor, kLastRenderMinor);
	if (s.checksum && !s.has_contents())
		return make_error(EINVAL, "%s: shared BO %u: content checksums on a BO without contents", w, s.id);
	if (s.checksum)
		if (auto st = check_bo_checksum(*s.checksum, s.size); !st)
			return std::move(st).error().context(strprintf("%s: shared BO %u", w, s.id));
	if (auto st = validate_metadata(s.metadata, strprintf("%s: shared BO %u", w, s.id)); !st)
		return st;
	return ok_status();
}

bool resolve_render_minor(RenderNodeImage &img, const KfdImage &kfd)
{
	if (img.drm_render_minor != 0)
		return true;
	const KfdDevice *d = kfd.find_gpu(img.gpu_id);
	if (!d)
		return false;
	img.drm_render_minor = d->drm_render_minor;
	return true;
}

std::string render_node_label(const RenderNodeImage &img)
{
	return img.drm_render_minor ? strprintf("renderD%u", img.drm_render_minor) : "render minor unknown";
}

Status validate_render_image(const RenderNodeImage &img, const std::string &name)
{
	const char *n = name.c_str();
	const bool minor_unknown = img.gpu_id_only && img.drm_render_minor == 0;
	if (!minor_unknown && (img.drm_render_minor < kFirstRenderMinor || img.drm_render_minor > kLastRenderMinor))
		return make_error(EINVAL, "%s: render minor %u outside %u..%u", n,
				  img.drm_render_minor, kFirstRenderMinor, kLastRenderMinor);
	if (img.gpu_id == 0)
		return make_error(EINVAL, "%s: gpu_id 0", n);
	if (img.gpu_id_only && !img.bos.empty())
		return make_error(EINVAL, "%s: %zu BOs in an image without id, render minor and BO count", n,
				  img.bos.size());
	std::set<uint32_t> handles;
	for (size_t i = 0; i < img.bos.size(); i++) {
		const DrmBo &bo = img.bos[i];
		if (bo.size == 0)
			return make_error(EINVAL, "%s: BO %zu: size 0", n, i);
		if (bo.handle == 0 || bo.handle > kMaxGemHandle)
			return make_error(EINVAL, "%s: BO %zu: GEM handle %u outside 1..%u", n, i, bo.handle,
					  kMaxGemHandle);
		if (!handles.insert(bo.handle).second)
			return make_error(EINVAL, "%s: BO %zu: GEM handle %u appears twice", n, i, bo.handle);
		if (bo.addr + bo.size < bo.addr)
			return make_error(EINVAL,
					  "%s: BO %zu: address 0x%" PRIx64 " + size 0x%" PRIx64
					  " overflows",
					  n, i, bo.addr, bo.size);
		if (bo.shared) {
			if (auto st = validate_shared_bo(*bo.shared, strprintf("%s: BO %zu", n, i)); !st)
				return st;
			if (bo.shared->size != bo.size)
				return make_error(EINVAL, "%s: BO %zu: size 0x%" PRIx64 " but its shared BO %u has 0x%" PRIx64,
						  n, i, bo.size, bo.shared->id, bo.shared->size);
			if (bo.shared->metadata != bo.metadata)
				return make_error(EINVAL, "%s: BO %zu: its metadata and its shared BO %u's differ", n,
						  i, bo.shared->id);
		}
		if (auto st = validate_metadata(bo.metadata, strprintf("%s: BO %zu", n, i)); !st)
			return st;
		if (bo.vms.size() > UINT32_MAX)
			return make_error(EINVAL, "%s: BO %zu: %zu VM entries", n, i, bo.vms.size());
		for (size_t j = 0; j < bo.vms.size(); j++) {
			if (bo.vms[j].size == 0 || bo.vms[j].addr + bo.vms[j].size < bo.vms[j].addr)
				return make_error(EINVAL,
						  "%s: BO %zu: VM entry %zu at 0x%" PRIx64 " has size 0x%" PRIx64
						  " (empty or past the end of the address space)",
						  n, i, j, bo.vms[j].addr, bo.vms[j].size);
			if (bo.vms[j].flags > UINT32_MAX)
				return make_error(EINVAL,
						  "%s: BO %zu: VM entry %zu has flags 0x%" PRIx64
						  " (GEM_VA's flags are 32 bits)",
						  n, i, j, bo.vms[j].flags);
		}
		if (bo.checksum && !bo.has_contents())
			return make_error(EINVAL, "%s: BO %zu: content checksums on a BO without contents",
					  n, i);
		if (bo.checksum)
			if (auto st = check_bo_checksum(*bo.checksum, bo.size); !st)
				return std::move(st).error().context(strprintf("%s: BO %zu", n, i));
	}
	return ok_status();
}

Result<std::vector<uint8_t>> pack_render_image(const RenderNodeImage &img)
{
	size_t n_vms = 0;
	for (const auto &bo : img.bos)
		n_vms += bo.vms.size();
	std::vector<DrmVmEntry> vms(n_vms);
	std::vector<DrmVmEntry *> vm_ptrs(n_vms);
	std::vector<DrmBoEntry> bos(img.bos.size());
	std::vector<DrmBoEntry *> bo_ptrs(img.bos.size());
	std::vector<SharedBoEntry> shared(img.bos.size());
	std::vector<::BoChecksum> sums(img.bos.size()), shared_sums(img.bos.size());
	std::vector<BoMetadata> mds(img.bos.size()), shared_mds(img.bos.size());

	size_t vi = 0;
	for (size_t i = 0; i < img.bos.size(); i++) {
		const DrmBo &src = img.bos[i];
		DrmBoEntry &e = bos[i];
		drm_bo_entry__init(&e);
		e.addr = src.addr;
		e.size = src.size;
		e.offset = src.offset;
		e.alloc_flags = src.alloc_flags;
		e.alignment = src.alignment;
		e.preferred_domains = src.preferred_domains;
		e.handle = src.handle;
		e.is_import = src.is_import ? 1 : 0;
		if (src.shared) {
			to_entry(*src.shared, &shared[i], &shared_sums[i], &shared_mds[i]);
			e.shared = &shared[i];
		}
		if (src.metadata) {
			to_entry(*src.metadata, &mds[i]);
			e.metadata = &mds[i];
		}
		e.num_of_vms = static_cast<uint32_t>(src.vms.size());
		e.n_vm_entries = src.vms.size();
		e.vm_entries = src.vms.empty() ? nullptr : &vm_ptrs[vi];
		for (const auto &vm : src.vms) {
			drm_vm_entry__init(&vms[vi]);
			vms[vi].addr = vm.addr;
			vms[vi].size = vm.size;
			vms[vi].offset = vm.offset;
			vms[vi].flags = vm.flags;
			vm_ptrs[vi] = &vms[vi];
			vi++;
		}
		if (const auto &c = src.checksum) {
			to_entry(*c, &sums[i]);
			e.checksum = &sums[i];
		}
		bo_ptrs[i] = &e;
	}

	CriuRenderNode msg;
	criu_render_node__init(&msg);
	msg.gpu_id = img.gpu_id;
	// A gpu_id-only image (CRIU 4.0-4.2.1's) is written back as it was read.
	msg.has_id = msg.has_drm_render_minor = msg.has_num_of_bos = img.gpu_id_only ? 0 : 1;
	msg.id = img.id;
	msg.drm_render_minor = img.drm_render_minor;
	msg.num_of_bos = bo_ptrs.size();
	msg.n_bo_entries = bo_ptrs.size();
	msg.bo_entries = bo_ptrs.empty() ? nullptr : bo_ptrs.data();
	::DumpBinding binding;
	if (img.binding) {
		to_binding_entry(*img.binding, &binding);
		msg.binding = &binding;
	}

	std::vector<uint8_t> out(criu_render_node__get_packed_size(&msg));
	const size_t packed = criu_render_node__pack(&msg, out.data());
	if (packed != out.size())
		return make_error(EIO, "packing the render node image: %zu bytes instead of %zu",
				  packed, out.size());
	seal_payload(out, kRenderSealField);
	return out;
}

Result<RenderNodeImage> unpack_render_image(std::span<const uint8_t> payload, const std::string &name,
					    Verify verify, Integrity *integrity)
{
	const char *n = name.c_str();
	std::unique_ptr<CriuRenderNode, RenderDeleter> msg(
		criu_render_node__unpack(nullptr, payload.size(), payload.data()));
	if (!msg)
		return make_error(EINVAL, "%s: not a valid criu_render_node message (%zu bytes)", n,
				  payload.size());
	std::optional<size_t> checksummed;
	for (size_t i = 0; i < msg->n_bo_entries && !checksummed; i++)
		if (msg->bo_entries[i]->checksum)
			checksummed = i;
	auto got = check_message_seal(payload, kRenderSealField,
				      msg->has_image_checksum ? std::optional<uint64_t>(msg->image_checksum)
							      : std::nullopt,
				      checksummed, verify, name);
	if (!got)
		return std::move(got).error();
	// criu-dev's three fields come together; none of them: CRIU 4.0-4.2.1.
	const unsigned has = msg->has_id + msg->has_drm_render_minor + msg->has_num_of_bos;
	if (has != 0 && has != 3) {
		std::string some;
		for (auto [present, field] : {std::pair{msg->has_id, "id"},
					      {msg->has_drm_render_minor, "drm_render_minor"},
					      {msg->has_num_of_bos, "num_of_bos"}})
			if (present)
				some += (some.empty() ? "" : " and ") + std::string(field);
		return make_error(EINVAL,
				  "%s: has %s but not all of id, drm_render_minor and num_of_bos (an image "
				  "of CRIU 4.0-4.2.1's plugin has none, criu-dev's and ours all)",
				  n, some.c_str());
	}
	if (msg->num_of_bos != msg->n_bo_entries)
		return make_error(EINVAL, "%s: num_of_bos is %" PRIu64 " but %zu BO entries follow", n,
				  msg->num_of_bos, msg->n_bo_entries);

	RenderNodeImage img;
	img.gpu_id = msg->gpu_id;
	img.gpu_id_only = has == 0;
	img.id = msg->id;
	img.drm_render_minor = msg->drm_render_minor;
	auto binding = from_binding_entry(msg->binding, name);
	if (!binding)
		return std::move(binding).error();
	img.binding = *binding;
	img.bos.resize(msg->n_bo_entries);
	for (size_t i = 0; i < msg->n_bo_entries; i++) {
		const DrmBoEntry *e = msg->bo_entries[i];
		if (e->num_of_vms != e->n_vm_entries)
			return make_error(EINVAL, "%s: BO %zu: num_of_vms is %u but %zu VM entries follow",
					  n, i, e->num_of_vms, e->n_vm_entries);
		DrmBo &bo = img.bos[i];
		bo.addr = e->addr;
		bo.size = e->size;
		bo.offset = e->offset;
		bo.alloc_flags = e->alloc_flags;
		bo.alignment = e->alignment;
		bo.preferred_domains = e->preferred_domains;
		bo.handle = e->handle;
		bo.is_import = e->is_import != 0;
		bo.shared = from_entry(e->shared, verify);
		bo.vms.reserve(e->n_vm_entries);
		for (size_t j = 0; j < e->n_vm_entries; j++) {
			const DrmVmEntry *v = e->vm_entries[j];
			bo.vms.push_back({v->addr, v->size, v->offset, v->flags});
		}
		bo.checksum = from_entry(e->checksum, verify);
		bo.metadata = from_entry(e->metadata);
	}
	auto st = validate_render_image(img, name);
	if (!st)
		return std::move(st).error();
	if (integrity)
		*integrity = *got;
	return img;
}

Status write_render_image(const ImageDir &dir, int id, const RenderNodeImage &img)
{
	return write_message_image(dir, render_image_name(id), img, validate_render_image,
				   pack_render_image);
}

Result<RenderNodeImage> read_render_image(const ImageDir &dir, int id, Verify verify, Integrity *integrity)
{
	auto img = read_message_image(dir, render_image_name(id),
				      [verify, integrity](std::span<const uint8_t> payload, const std::string &name) {
					      return unpack_render_image(payload, name, verify, integrity);
				      });
	if (!img)
		return img;
	if (img->gpu_id_only)
		img->id = static_cast<uint32_t>(id);
	// criu-dev's images name their file too (criu_render_node.id).
	if (auto st = check_file_id(img->binding ? img->binding->file_id : img->id, id, render_image_name(id)); !st)
		return std::move(st).error();
	return img;
}

Result<std::vector<uint8_t>> pack_dmabuf_image(const DmabufImage &img)
{
	CriuDmabufNode msg;
	criu_dmabuf_node__init(&msg);
	msg.gem_handle = img.gem_handle;
	SharedBoEntry shared;
	::BoChecksum shared_sum;
	BoMetadata shared_md;
	if (img.shared) {
		to_entry(*img.shared, &shared, &shared_sum, &shared_md);
		msg.shared = &shared;
	}
	::DumpBinding binding;
	if (img.binding) {
		to_binding_entry(*img.binding, &binding);
		msg.binding = &binding;
	}
	std::vector<uint8_t> out(criu_dmabuf_node__get_packed_size(&msg));
	const size_t packed = criu_dmabuf_node__pack(&msg, out.data());
	if (packed != out.size())
		return make_error(EIO, "packing the dmabuf image: %zu bytes instead of %zu", packed,
				  out.size());
	seal_payload(out, kDmabufSealField);
	return out;
}

Result<DmabufImage> unpack_dmabuf_image(std::span<const uint8_t> payload, const std::string &name,
					Verify verify, Integrity *integrity)
{
	std::unique_ptr<CriuDmabufNode, DmabufDeleter> msg(
		criu_dmabuf_node__unpack(nullptr, payload.size(), payload.data()));
	if (!msg)
		return make_error(EINVAL, "%s: not a valid criu_dmabuf_node message (%zu bytes)",
				  name.c_str(), payload.size());
	auto got = check_message_seal(payload, kDmabufSealField,
				      msg->has_image_checksum ? std::optional<uint64_t>(msg->image_checksum)
							      : std::nullopt,
				      std::nullopt, verify, name);
	if (!got)
		return std::move(got).error();
	if (integrity)
		*integrity = *got;
	auto binding = from_binding_entry(msg->binding, name);
	if (!binding)
		return std::move(binding).error();
	DmabufImage img{msg->gem_handle, from_entry(msg->shared, verify), *binding};
	if (img.shared)
		if (auto st = validate_shared_bo(*img.shared, name); !st)
			return std::move(st).error();
	return img;
}

Status write_dmabuf_image(const ImageDir &dir, int id, const DmabufImage &img)
{
	return write_message_image(
		dir, dmabuf_image_name(id), img,
		[](const DmabufImage &d, const std::string &name) {
			return d.shared ? validate_shared_bo(*d.shared, name) : ok_status();
		},
		pack_dmabuf_image);
}

Result<DmabufImage> read_dmabuf_image(const ImageDir &dir, int id, Verify verify, Integrity *integrity)
{
	auto img = read_message_image(dir, dmabuf_image_name(id),
				      [verify, integrity](std::span<const uint8_t> payload, const std::string &name) {
					      return unpack_dmabuf_image(payload, name, verify, integrity);
				      });
	if (img)
		if (auto st = check_binding_file(img->binding, id, dmabuf_image_name(id)); !st)
			return std::move(st).error();
	return img;
}

} // namespace amdcr
