// SPDX-License-Identifier: GPL-2.0-only
#include "base/drm.h"
#include "image/kfd_image.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <memory>
#include <set>

#include "criu-amdgpu.pb-c.h"
#include "image/binding_pb.h"
#include "image/framing.h"
#include "image/image_names.h"

namespace amdcr {

namespace {

// KfdDevice and the protobuf-c KfdDeviceEntry have the same scalar field
// names (image/node_properties.h); this copies in either direction.
template <typename Dst, typename Src>
void copy_device_scalars(Dst &d, const Src &s)
{
	d.node_id = s.node_id;
	d.gpu_id = s.gpu_id;
#define AMDCR_COPY(name, rule, check) d.name = s.name;
	AMDCR_NODE_PROPERTIES(AMDCR_COPY)
#undef AMDCR_COPY
	d.hive_id = s.hive_id;
	d.vram_public = s.vram_public;
	d.vram_size = s.vram_size;
}

template <typename Dst, typename Src>
void copy_bo_fields(Dst &d, const Src &s)
{
	d.addr = s.addr;
	d.size = s.size;
	d.offset = s.offset;
	d.alloc_flags = s.alloc_flags;
	d.gpu_id = s.gpu_id;
	d.handle = s.handle;
}

struct CriuKfdDeleter {
	void operator()(CriuKfd *p) const { criu_kfd__free_unpacked(p, nullptr); }
};
using UnpackedKfd = std::unique_ptr<CriuKfd, CriuKfdDeleter>;

} // namespace

uint32_t KfdImage::gpu_count() const
{
	uint32_t n = 0;
	for (const auto &d : devices)
		n += d.is_gpu() ? 1 : 0;
	return n;
}

uint32_t KfdImage::cpu_count() const
{
	return static_cast<uint32_t>(devices.size()) - gpu_count();
}

const KfdDevice *KfdImage::find_gpu(uint32_t gpu_id) const
{
	if (gpu_id == 0)
		return nullptr;
	for (const auto &d : devices)
		if (d.gpu_id == gpu_id)
			return &d;
	return nullptr;
}

uint64_t KfdBo::stored_bytes() const
{
	return amdcr::stored_bytes(size, from_parent) - (dedup ? dedup->bytes(size) : 0);
}

Result<uint64_t> KfdImage::pages_size(uint32_t gpu_id) const
{
	uint64_t total = 0;
	for (size_t i = 0; i < bos.size(); i++) {
		const KfdBo &bo = bos[i];
		if (bo.gpu_id != gpu_id || !bo.has_contents())
			continue;
		if (total + bo.size < total)
			return make_error(EOVERFLOW, "gpu 0x%04x: BO sizes overflow 64 bits at BO %zu",
					  gpu_id, i);
		total += bo.stored_bytes();
	}
	return total;
}

Status validate_kfd_image(const KfdImage &img, const std::string &name)
{
	const char *n = name.c_str();
	if (img.devices.size() > UINT32_MAX)
		return make_error(EINVAL, "%s: %zu device entries", n, img.devices.size());

	std::set<uint32_t> node_ids, gpu_ids;
	for (size_t i = 0; i < img.devices.size(); i++) {
		const KfdDevice &d = img.devices[i];
		if (!node_ids.insert(d.node_id).second)
			return make_error(EINVAL, "%s: device entry %zu: duplicate node_id %u", n, i,
					  d.node_id);
		if (!d.is_gpu())
			continue;
		if (!gpu_ids.insert(d.gpu_id).second)
			return make_error(EINVAL, "%s: device entry %zu: duplicate gpu 0x%04x", n, i,
					  d.gpu_id);
		if (d.drm_render_minor < kFirstRenderMinor || d.drm_render_minor > kLastRenderMinor)
			return make_error(EINVAL,
					  "%s: gpu 0x%04x: render minor %u outside %u..%u", n,
					  d.gpu_id, d.drm_render_minor, kFirstRenderMinor,
					  kLastRenderMinor);
	}

	for (size_t i = 0; i < img.bos.size(); i++) {
		const KfdBo &bo = img.bos[i];
		if (bo.size == 0)
			return make_error(EINVAL, "%s: BO %zu: size 0", n, i);
		if (bo.addr + bo.size < bo.addr)
			return make_error(EINVAL,
					  "%s: BO %zu: address 0x%" PRIx64 " + size 0x%" PRIx64
					  " overflows",
					  n, i, bo.addr, bo.size);
		if (!gpu_ids.contains(bo.gpu_id))
			return make_error(EINVAL, "%s: BO %zu: gpu 0x%04x is not in the device list",
					  n, i, bo.gpu_id);
		if (bo.checksum && !bo.has_contents())
			return make_error(EINVAL, "%s: BO %zu: content checksums on a BO without contents",
					  n, i);
		if (bo.checksum)
			if (auto st = check_bo_checksum(*bo.checksum, bo.size); !st)
				return std::move(st).error().context(strprintf("%s: BO %zu", n, i));
		if (bo.dedup) {
			if (!bo.has_contents())
				return make_error(EINVAL, "%s: BO %zu: deduplicated chunks, but the BO has no contents", n, i);
			if (auto st = check_chunk_refs(*bo.dedup, bo.size, bo.from_parent ? &*bo.from_parent : nullptr); !st)
				return std::move(st).error().context(strprintf("%s: BO %zu", n, i));
		}
		if (!bo.from_parent)
			continue;
		if (!bo.has_contents() || !img.parent)
			return make_error(EINVAL, "%s: BO %zu: chunks in a parent checkpoint, but %s", n, i,
					  img.parent ? "the BO has no contents" : "the image names no parent");
		if (auto st = check_from_parent(*bo.from_parent, bo.size); !st)
			return std::move(st).error().context(strprintf("%s: BO %zu", n, i));
	}
	for (uint32_t gpu : gpu_ids) {
		auto total = img.pages_size(gpu);
		if (!total)
			return std::move(total).error().context(name);
	}

	if (img.priv_data.empty())
		return make_error(EINVAL, "%s: no private data", n);
	return ok_status();
}

namespace {

// kfd_bo_entry.dedup of `d`, in storage the caller keeps until packed.
::BoDedup *put_dedup(const ChunkRefs &d, ::BoDedup &msg, std::vector<::DedupRef> &refs,
		     std::vector<::DedupRef *> &ptrs)
{
	bo_dedup__init(&msg);
	msg.chunk_size = d.chunk_bytes;
	refs.resize(d.refs.size());
	ptrs.resize(d.refs.size());
	for (size_t k = 0; k < d.refs.size(); k++) {
		dedup_ref__init(&refs[k]);
		refs[k].chunk = d.refs[k].chunk;
		refs[k].file = const_cast<char *>(d.refs[k].file.c_str());
		refs[k].offset = d.refs[k].offset;
		ptrs[k] = &refs[k];
	}
	msg.n_refs = ptrs.size();
	msg.refs = ptrs.empty() ? nullptr : ptrs.data();
	return &msg;
}

ChunkRefs take_dedup(const ::BoDedup &d)
{
	ChunkRefs out{d.chunk_size, {}};
	for (size_t k = 0; k < d.n_refs; k++)
		out.refs.push_back({d.refs[k]->chunk, d.refs[k]->file ? d.refs[k]->file : "", d.refs[k]->offset});
	return out;
}

} // namespace

Result<std::vector<uint8_t>> pack_kfd_image(const KfdImage &img)
{
	// The protobuf-c structs point into these vectors; all are sized before
	// any pointer is taken.
	std::vector<KfdDeviceEntry> devs(img.devices.size());
	std::vector<KfdDeviceEntry *> dev_ptrs(img.devices.size());
	size_t n_links = 0;
	for (const auto &d : img.devices)
		n_links += d.iolinks.size() + d.p2p_links.size();
	std::vector<DevIolink> links(n_links);
	std::vector<DevIolink *> link_ptrs(n_links);

	size_t li = 0;
	// Points `field`/`count` at `src`'s links, packed from links[li].
	auto put_links = [&](const std::vector<KfdIoLink> &src, DevIolink **&field, size_t &count) {
		count = src.size();
		field = src.empty() ? nullptr : &link_ptrs[li];
		for (const auto &l : src) {
			dev_iolink__init(&links[li]);
			links[li].type = l.type;
			links[li].node_to_id = l.node_to_id;
			link_ptrs[li] = &links[li];
			li++;
		}
	};
	for (size_t i = 0; i < img.devices.size(); i++) {
		const KfdDevice &src = img.devices[i];
		KfdDeviceEntry &e = devs[i];
		kfd_device_entry__init(&e);
		copy_device_scalars(e, src);
		put_links(src.iolinks, e.iolinks, e.n_iolinks);
		put_links(src.p2p_links, e.p2p_links, e.n_p2p_links);
		dev_ptrs[i] = &e;
	}

	std::vector<KfdBoEntry> bos(img.bos.size());
	std::vector<KfdBoEntry *> bo_ptrs(img.bos.size());
	std::vector<::BoChecksum> sums(img.bos.size());
	std::vector<::BoFromParent> from_parent(img.bos.size());
	std::vector<::BoDedup> dedup(img.bos.size());
	std::vector<std::vector<::DedupRef>> refs(img.bos.size());
	std::vector<std::vector<::DedupRef *>> ref_ptrs(img.bos.size());
	for (size_t i = 0; i < img.bos.size(); i++) {
		kfd_bo_entry__init(&bos[i]);
		copy_bo_fields(bos[i], img.bos[i]);
		bos[i].has_handle = 1; // optional only for reading 4.0-4.2.1 images
		if (const auto &c = img.bos[i].checksum) {
			bo_checksum__init(&sums[i]);
			sums[i].chunk_size = c->chunk_bytes;
			sums[i].n_chunks = c->chunks.size();
			sums[i].chunks = const_cast<uint64_t *>(c->chunks.data());
			sums[i].whole = c->whole;
			bos[i].checksum = &sums[i];
		}
		if (const auto &f = img.bos[i].from_parent) {
			bo_from_parent__init(&from_parent[i]);
			from_parent[i].chunk_size = f->chunk_bytes;
			from_parent[i].in_parent.len = f->in_parent.size();
			from_parent[i].in_parent.data = const_cast<uint8_t *>(f->in_parent.data());
			bos[i].from_parent = &from_parent[i];
		}
		if (const auto &d = img.bos[i].dedup)
			bos[i].dedup = put_dedup(*d, dedup[i], refs[i], ref_ptrs[i]);
		bo_ptrs[i] = &bos[i];
	}

	CriuKfd msg;
	criu_kfd__init(&msg);
	msg.pid = img.pid;
	msg.num_of_gpus = img.gpu_count();
	msg.num_of_cpus = img.cpu_count();
	msg.n_device_entries = dev_ptrs.size();
	msg.device_entries = dev_ptrs.empty() ? nullptr : dev_ptrs.data();
	msg.num_of_bos = bo_ptrs.size();
	msg.n_bo_entries = bo_ptrs.size();
	msg.bo_entries = bo_ptrs.empty() ? nullptr : bo_ptrs.data();
	msg.num_of_objects = img.num_of_objects;
	msg.shared_mem_size = img.shared_mem_size;
	msg.shared_mem_magic = img.shared_mem_magic;
	msg.priv_data.len = img.priv_data.size();
	msg.priv_data.data = const_cast<uint8_t *>(img.priv_data.data());
	::DumpBinding binding;
	if (img.binding) {
		to_binding_entry(*img.binding, &binding);
		msg.binding = &binding;
	}
	::ChainParent parent;
	if (img.parent) {
		chain_parent__init(&parent);
		parent.dump_id.len = img.parent->dump_id.size();
		parent.dump_id.data = const_cast<uint8_t *>(img.parent->dump_id.data());
		parent.file_id = img.parent->file_id;
		msg.parent = &parent;
	}

	std::vector<uint8_t> out(criu_kfd__get_packed_size(&msg));
	const size_t packed = criu_kfd__pack(&msg, out.data());
	if (packed != out.size())
		return make_error(EIO, "packing the KFD image: %zu bytes instead of %zu", packed,
				  out.size());
	seal_payload(out, kKfdSealField);
	return out;
}

Result<KfdImage> unpack_kfd_image(std::span<const uint8_t> payload, const std::string &name,
				  Verify verify, Integrity *integrity)
{
	const char *n = name.c_str();
	UnpackedKfd msg(criu_kfd__unpack(nullptr, payload.size(), payload.data()));
	if (!msg)
		return make_error(EINVAL, "%s: not a valid criu_kfd message (%zu bytes)", n,
				  payload.size());
	std::optional<size_t> checksummed;
	for (size_t i = 0; i < msg->n_bo_entries && !checksummed; i++)
		if (msg->bo_entries[i]->checksum)
			checksummed = i;
	auto got = check_message_seal(payload, kKfdSealField,
				      msg->has_image_checksum ? std::optional<uint64_t>(msg->image_checksum)
							      : std::nullopt,
				      checksummed, verify, name);
	if (!got)
		return std::move(got).error();

	if (msg->num_of_bos != msg->n_bo_entries)
		return make_error(EINVAL, "%s: num_of_bos is %" PRIu64 " but %zu BO entries follow", n,
				  msg->num_of_bos, msg->n_bo_entries);
	if (static_cast<uint64_t>(msg->num_of_gpus) + msg->num_of_cpus != msg->n_device_entries)
		return make_error(EINVAL,
				  "%s: num_of_gpus %u + num_of_cpus %u != %zu device entries", n,
				  msg->num_of_gpus, msg->num_of_cpus, msg->n_device_entries);

	KfdImage img;
	img.pid = msg->pid;
	img.devices.resize(msg->n_device_entries);
	for (size_t i = 0; i < msg->n_device_entries; i++) {
		const KfdDeviceEntry *e = msg->device_entries[i];
		KfdDevice &d = img.devices[i];
		copy_device_scalars(d, *e);
		d.iolinks.reserve(e->n_iolinks);
		for (size_t j = 0; j < e->n_iolinks; j++)
			d.iolinks.push_back({e->iolinks[j]->type, e->iolinks[j]->node_to_id});
		d.p2p_links.reserve(e->n_p2p_links);
		for (size_t j = 0; j < e->n_p2p_links; j++)
			d.p2p_links.push_back({e->p2p_links[j]->type, e->p2p_links[j]->node_to_id});
	}
	if (img.gpu_count() != msg->num_of_gpus)
		return make_error(EINVAL, "%s: num_of_gpus is %u but %u device entries are GPUs", n,
				  msg->num_of_gpus, img.gpu_count());

	img.bos.resize(msg->n_bo_entries);
	for (size_t i = 0; i < msg->n_bo_entries; i++) {
		copy_bo_fields(img.bos[i], *msg->bo_entries[i]);
		if (!msg->bo_entries[i]->has_handle)
			img.bos[i].handle = kNoGemHandle;
		if (const ::BoChecksum *c = msg->bo_entries[i]->checksum; c && verify == Verify::On)
			img.bos[i].checksum = BoChecksum{c->chunk_size, {c->chunks, c->chunks + c->n_chunks}, c->whole};
		if (const ::BoFromParent *f = msg->bo_entries[i]->from_parent)
			img.bos[i].from_parent =
				FromParent{f->chunk_size, {f->in_parent.data, f->in_parent.data + f->in_parent.len}};
		if (const ::BoDedup *d = msg->bo_entries[i]->dedup)
			img.bos[i].dedup = take_dedup(*d);
	}
	img.num_of_objects = msg->num_of_objects;
	img.shared_mem_size = msg->shared_mem_size;
	img.shared_mem_magic = msg->shared_mem_magic;
	img.priv_data.assign(msg->priv_data.data, msg->priv_data.data + msg->priv_data.len);
	auto binding = from_binding_entry(msg->binding, name);
	if (!binding)
		return std::move(binding).error();
	img.binding = *binding;
	if (const ::ChainParent *p = msg->parent) {
		ChainParent cp;
		if (p->dump_id.len != cp.dump_id.size())
			return make_error(EINVAL, "%s: the parent's dump id has %zu bytes, not %zu", n,
					  p->dump_id.len, cp.dump_id.size());
		std::copy(p->dump_id.data, p->dump_id.data + p->dump_id.len, cp.dump_id.begin());
		cp.file_id = p->file_id;
		img.parent = cp;
	}

	auto st = validate_kfd_image(img, name);
	if (!st)
		return std::move(st).error();
	if (integrity)
		*integrity = *got;
	return img;
}

Status write_kfd_image(const ImageDir &dir, int id, const KfdImage &img)
{
	return write_message_image(dir, kfd_image_name(id), img, validate_kfd_image, pack_kfd_image);
}

Result<KfdImage> read_kfd_image(const ImageDir &dir, int id, Verify verify, Integrity *integrity)
{
	auto img = read_message_image(dir, kfd_image_name(id),
				      [verify, integrity](std::span<const uint8_t> payload, const std::string &name) {
					      return unpack_kfd_image(payload, name, verify, integrity);
				      });
	if (img)
		if (auto st = check_binding_file(img->binding, id, kfd_image_name(id)); !st)
			return std::move(st).error();
	return img;
}

} // namespace amdcr
