// SPDX-License-Identifier: GPL-2.0-only
#include "inspect/show.h"

#include <cinttypes>

#include "image/image_names.h"
#include "inspect/flags.h"
#include "inspect/json.h"
#include "topology/topology.h"

namespace amdcr::inspect {

namespace {

const char *link_type_name(uint32_t type)
{
	switch (type) {
	case kIoLinkTypePcie: return "pcie";
	case kIoLinkTypeXgmi: return "xgmi";
	default: return "other";
	}
}

const char *integrity_name(Integrity i)
{
	switch (i) {
	case Integrity::Verified: return "verified";
	case Integrity::Unsealed: return "unsealed";
	case Integrity::Unchecked: break;
	}
	return "unchecked";
}

// ---- text -----------------------------------------------------------------

const char *seal_text(Integrity i)
{
	return i == Integrity::Verified ? "seal verified" : "no seal (upstream's image)";
}

void text_device(std::string &o, const KfdDevice &d)
{
	if (!d.is_gpu()) {
		o += strprintf("  node %u: CPU, %u cores\n", d.node_id, d.cpu_cores_count);
		return;
	}
	o += strprintf("  node %u: GPU 0x%04x, renderD%u, device_id 0x%04x, VRAM %s (%s), hive 0x%" PRIx64
		       "\n",
		       d.node_id, d.gpu_id, d.drm_render_minor, d.device_id,
		       format_size(d.vram_size).c_str(), d.vram_public ? "public" : "private",
		       d.hive_id);
	std::string props;
#define AMDCR_TEXT(name, rule, check) props += strprintf(" " #name "=%u", d.name);
	AMDCR_NODE_PROPERTIES(AMDCR_TEXT)
#undef AMDCR_TEXT
	o += "    properties:" + props + "\n";
	std::string links;
	for (const KfdIoLink &l : d.iolinks)
		links += strprintf(" %s->node%u", link_type_name(l.type), l.node_to_id);
	o += "    io links:" + (links.empty() ? std::string(" none") : links) + "\n";
}

// Per GPU of a deduplicated image: the bytes its BOs hold, those stored
// elsewhere in the checkpoint (the bytes saved) and their ratio.
void text_dedup(std::string &o, const KfdImage &img)
{
	for (const KfdDevice &d : img.devices) {
		if (!d.is_gpu())
			continue;
		uint64_t held = 0, saved = 0;
		for (const KfdBo &b : img.bos)
			if (b.gpu_id == d.gpu_id && b.has_contents()) {
				held += b.size;
				saved += b.dedup ? b.dedup->bytes(b.size) : 0;
			}
		if (saved)
			o += strprintf("  deduplicated: GPU 0x%04x: %s of %s stored once elsewhere in the checkpoint "
				       "(saved %.1f%%)\n",
				       d.gpu_id, format_size(saved).c_str(), format_size(held).c_str(),
				       100.0 * static_cast<double>(saved) / static_cast<double>(held));
	}
}

void text_kfd(std::string &o, const Loaded<KfdImage> &l)
{
	if (!l.image) {
		o += l.file + ": UNREADABLE: " + l.image.error().message() + "\n";
		return;
	}
	const KfdImage &img = *l.image;
	o += strprintf("%s: process %u, %u GPUs, %u CPU nodes, %zu BOs, %u queues+events, "
		       "private data %zu bytes, hsakmt shared memory %s (magic 0x%x), %s\n",
		       l.file.c_str(), img.pid, img.gpu_count(), img.cpu_count(), img.bos.size(),
		       img.num_of_objects, img.priv_data.size(),
		       format_size(img.shared_mem_size).c_str(), img.shared_mem_magic,
		       seal_text(l.integrity));
	if (img.parent)
		o += strprintf("  incremental: the chunks not in this checkpoint are in its parent checkpoint "
			       "(the 'parent' link), %s of dump %s\n",
			       kfd_image_name(static_cast<int>(img.parent->file_id)).c_str(),
			       dump_id_text(img.parent->dump_id).c_str());
	for (const KfdDevice &d : img.devices)
		text_device(o, d);
	text_dedup(o, img);
	const auto where = kfd_pages_layout(img, l.id);
	for (size_t i = 0; i < img.bos.size(); i++) {
		const KfdBo &b = img.bos[i];
		o += strprintf("  BO %zu: GPU 0x%04x %-10s %-12s VA 0x%012" PRIx64 " flags %s", i,
			       b.gpu_id, kfd_bo_type(b.alloc_flags), format_size(b.size).c_str(),
			       b.addr, join_flags(kfd_alloc_flag_names(b.alloc_flags)).c_str());
		if (b.handle != kNoGemHandle)
			o += strprintf(" handle %u", b.handle);
		if (where[i])
			o += strprintf(" -> %s @ 0x%" PRIx64, where[i]->file.c_str(), where[i]->offset);
		if (b.checksum)
			o += strprintf(" checksum 0x%016" PRIx64 " (%zu chunks)", b.checksum->whole,
				       b.checksum->chunks.size());
		if (b.from_parent)
			o += strprintf(" %s of it in the parent", format_size(b.size - stored_bytes(b.size, b.from_parent)).c_str());
		if (b.dedup)
			o += strprintf(" %s of it stored once elsewhere", format_size(b.dedup->bytes(b.size)).c_str());
		o += "\n";
	}
}

// A BO's metadata in a text line: " metadata N bytes flags F tiling T".
std::string metadata_text(const std::optional<GemMetadata> &m)
{
	if (!m)
		return "";
	return strprintf(" metadata %zu bytes flags 0x%" PRIx64 " tiling 0x%" PRIx64, m->data.size(), m->flags,
			 m->tiling_info);
}

void text_render(std::string &o, const Loaded<RenderNodeImage> &l)
{
	if (!l.image) {
		o += l.file + ": UNREADABLE: " + l.image.error().message() + "\n";
		return;
	}
	const RenderNodeImage &img = *l.image;
	o += strprintf("%s: render node %s of GPU 0x%04x, %zu BOs, %s%s\n", l.file.c_str(),
		       render_node_label(img).c_str(), img.gpu_id, img.bos.size(), seal_text(l.integrity),
		       img.gpu_id_only ? " (CRIU 4.0-4.2.1 image: GPU only)" : "");
	const auto where = render_pages_layout(img, l.id);
	for (size_t i = 0; i < img.bos.size(); i++) {
		const DrmBo &b = img.bos[i];
		o += strprintf("  BO %zu: %-8s %-12s VA 0x%012" PRIx64 " handle %u%s flags %s", i,
			       join_flags(gem_domain_names(b.preferred_domains)).c_str(),
			       format_size(b.size).c_str(), b.addr, b.handle,
			       b.is_import ? " imported" : "",
			       join_flags(gem_create_flag_names(b.alloc_flags)).c_str());
		if (b.shared)
			o += strprintf(" shared BO %u", b.shared->id);
		if (where[i])
			o += " -> " + where[i]->file;
		else if (b.shared && b.shared->has_contents())
			o += " -> " + drm_pages_image_name(static_cast<int>(b.shared->contents_id),
							   b.shared->contents_minor, b.shared->contents_index);
		if (b.checksum)
			o += strprintf(" checksum 0x%016" PRIx64 " (%zu chunks)", b.checksum->whole,
				       b.checksum->chunks.size());
		o += metadata_text(b.metadata) + "\n";
		for (const DrmVm &v : b.vms)
			o += strprintf("    VM 0x%012" PRIx64 "..0x%012" PRIx64 " from BO offset 0x%" PRIx64
				       " flags 0x%" PRIx64 "\n",
				       v.addr, v.addr + v.size, v.offset, v.flags);
	}
}

// ---- JSON -----------------------------------------------------------------

void json_error(JsonWriter &j, const std::string &file, const Error &e)
{
	j.begin_object().field("file", file).field("errno", static_cast<uint32_t>(e.code()));
	j.field("message", e.message()).end_object();
}

void json_strings(JsonWriter &j, const std::vector<std::string> &v)
{
	j.begin_array();
	for (const auto &s : v)
		j.value(s);
	j.end_array();
}

void json_location(JsonWriter &j, const std::optional<PagesLocation> &at)
{
	j.key("pages_file");
	if (at)
		j.value(at->file);
	else
		j.null();
	j.key("pages_offset");
	if (at)
		j.value(at->offset);
	else
		j.null();
}

void json_checksum(JsonWriter &j, const std::optional<BoChecksum> &c)
{
	j.key("checksum");
	if (c)
		j.begin_object().field("whole", c->whole).field("chunk_bytes", c->chunk_bytes)
			.field("chunks", static_cast<uint64_t>(c->chunks.size())).end_object();
	else
		j.null();
}

void json_metadata(JsonWriter &j, const std::optional<GemMetadata> &m)
{
	j.key("metadata");
	if (!m) {
		j.null();
		return;
	}
	std::string hex;
	for (uint8_t byte : m->data)
		hex += strprintf("%02x", byte);
	j.begin_object().field("flags", m->flags).field("tiling_info", m->tiling_info)
		.field("size", static_cast<uint64_t>(m->data.size())).field("data", hex).end_object();
}

void json_device(JsonWriter &j, const KfdDevice &d)
{
	j.begin_object().field("node_id", d.node_id).field("gpu_id", d.gpu_id);
	j.field("kind", d.is_gpu() ? "gpu" : "cpu");
	j.field("hive_id", d.hive_id).field("vram_public", d.vram_public != 0);
	j.field("vram_size", d.vram_size);
	j.key("properties").begin_object();
#define AMDCR_JSON(name, rule, check) j.field(#name, d.name);
	AMDCR_NODE_PROPERTIES(AMDCR_JSON)
#undef AMDCR_JSON
	j.end_object();
	j.key("iolinks").begin_array();
	for (const KfdIoLink &l : d.iolinks)
		j.begin_object().field("type", l.type).field("type_name", link_type_name(l.type))
			.field("node_to_id", l.node_to_id).end_object();
	j.end_array().end_object();
}

void json_kfd(JsonWriter &j, const Loaded<KfdImage> &l)
{
	const KfdImage &img = *l.image;
	j.begin_object().field("file", l.file).field("id", static_cast<uint32_t>(l.id));
	j.field("pid", img.pid).field("num_of_gpus", img.gpu_count()).field("num_of_cpus", img.cpu_count());
	j.field("num_of_objects", img.num_of_objects).field("shared_mem_size", img.shared_mem_size);
	j.field("shared_mem_magic", img.shared_mem_magic);
	j.field("priv_data_size", static_cast<uint64_t>(img.priv_data.size()));
	j.field("integrity", integrity_name(l.integrity));
	if (img.parent)
		j.key("parent").begin_object().field("dump_id", dump_id_text(img.parent->dump_id))
			.field("file_id", img.parent->file_id).end_object();
	j.key("devices").begin_array();
	for (const KfdDevice &d : img.devices)
		json_device(j, d);
	j.end_array();
	const auto where = kfd_pages_layout(img, l.id);
	j.key("bos").begin_array();
	for (size_t i = 0; i < img.bos.size(); i++) {
		const KfdBo &b = img.bos[i];
		j.begin_object().field("index", static_cast<uint64_t>(i)).field("gpu_id", b.gpu_id);
		j.field("type", kfd_bo_type(b.alloc_flags)).field("addr", b.addr).field("size", b.size);
		j.field("mmap_offset", b.offset).field("alloc_flags", b.alloc_flags);
		j.key("flag_names");
		json_strings(j, kfd_alloc_flag_names(b.alloc_flags));
		j.key("handle");
		if (b.handle == kNoGemHandle)
			j.null();
		else
			j.value(b.handle);
		json_location(j, where[i]);
		json_checksum(j, b.checksum);
		if (b.from_parent)
			j.field("bytes_in_parent", b.size - stored_bytes(b.size, b.from_parent));
		if (b.dedup)
			j.field("bytes_stored_elsewhere", b.dedup->bytes(b.size));
		j.end_object();
	}
	j.end_array().end_object();
}

void json_render(JsonWriter &j, const Loaded<RenderNodeImage> &l)
{
	const RenderNodeImage &img = *l.image;
	j.begin_object().field("file", l.file).field("id", static_cast<uint32_t>(l.id));
	j.field("gpu_id", img.gpu_id).field("drm_render_minor", img.drm_render_minor);
	j.field("gpu_id_only", img.gpu_id_only);
	j.field("integrity", integrity_name(l.integrity));
	const auto where = render_pages_layout(img, l.id);
	j.key("bos").begin_array();
	for (size_t i = 0; i < img.bos.size(); i++) {
		const DrmBo &b = img.bos[i];
		j.begin_object().field("index", static_cast<uint64_t>(i)).field("addr", b.addr);
		j.field("size", b.size).field("mmap_offset", b.offset).field("alloc_flags", b.alloc_flags);
		j.key("flag_names");
		json_strings(j, gem_create_flag_names(b.alloc_flags));
		j.field("alignment", b.alignment).field("preferred_domains", b.preferred_domains);
		j.key("domain_names");
		json_strings(j, gem_domain_names(b.preferred_domains));
		j.field("handle", b.handle).field("is_import", b.is_import);
		j.key("vms").begin_array();
		for (const DrmVm &v : b.vms)
			j.begin_object().field("addr", v.addr).field("size", v.size)
				.field("offset", v.offset).field("flags", v.flags).end_object();
		j.end_array();
		json_location(j, where[i]);
		json_checksum(j, b.checksum);
		json_metadata(j, b.metadata);
		j.end_object();
	}
	j.end_array().end_object();
}

} // namespace

bool all_decoded(const Checkpoint &ck)
{
	for (const auto &l : ck.kfd)
		if (!l.image)
			return false;
	for (const auto &l : ck.render)
		if (!l.image)
			return false;
	for (const auto &l : ck.dmabuf)
		if (!l.image)
			return false;
	return true;
}

std::string show_text(const Checkpoint &ck)
{
	std::string o;
	if (!ck.has_images())
		return ck.path + ": no amdgpu images\n";
	for (const auto &l : ck.kfd)
		text_kfd(o, l);
	for (const auto &l : ck.render)
		text_render(o, l);
	for (const auto &l : ck.dmabuf) {
		if (l.image && l.image->shared) {
			const SharedBo &b = *l.image->shared;
			o += strprintf("%s: dma-buf of shared BO %u (%s, GPU 0x%04x, GEM handle %u)", l.file.c_str(), b.id,
				       format_size(b.size).c_str(), b.gpu_id, l.image->gem_handle);
			if (b.has_contents())
				o += " -> " + drm_pages_image_name(static_cast<int>(b.contents_id), b.contents_minor,
								   b.contents_index);
			if (b.checksum)
				o += strprintf(" checksum 0x%016" PRIx64 " (%zu chunks)", b.checksum->whole,
					       b.checksum->chunks.size());
			o += metadata_text(b.metadata);
			o += strprintf(", %s\n", seal_text(l.integrity));
		} else if (l.image) {
			o += strprintf("%s: dma-buf of GEM handle %u, %s\n", l.file.c_str(), l.image->gem_handle,
				       seal_text(l.integrity));
		} else
			o += l.file + ": UNREADABLE: " + l.image.error().message() + "\n";
	}
	return o;
}

std::string show_json(const Checkpoint &ck)
{
	JsonWriter j;
	j.begin_object().field("format", kShowJsonFormat).field("dir", ck.path);
	j.key("kfd").begin_array();
	for (const auto &l : ck.kfd)
		if (l.image)
			json_kfd(j, l);
	j.end_array();
	j.key("render").begin_array();
	for (const auto &l : ck.render)
		if (l.image)
			json_render(j, l);
	j.end_array();
	j.key("dmabuf").begin_array();
	for (const auto &l : ck.dmabuf)
		if (l.image)
		{
			const auto &shared = l.image->shared;
			j.begin_object().field("file", l.file).field("id", static_cast<uint32_t>(l.id))
				.field("gem_handle", l.image->gem_handle)
				.field("integrity", integrity_name(l.integrity));
			j.key("shared_bo");
			if (shared)
				j.value(shared->id);
			else
				j.null();
			json_checksum(j, shared ? shared->checksum : std::nullopt);
			json_metadata(j, shared ? shared->metadata : std::nullopt);
			j.end_object();
		}
	j.end_array();
	j.key("errors").begin_array();
	auto errors = [&](const auto &list) {
		for (const auto &l : list)
			if (!l.image)
				json_error(j, l.file, l.image.error());
	};
	errors(ck.kfd);
	errors(ck.render);
	errors(ck.dmabuf);
	j.end_array().end_object();
	return j.str();
}

} // namespace amdcr::inspect
