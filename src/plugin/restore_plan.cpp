// SPDX-License-Identifier: GPL-2.0-only
#include "plugin/restore_plan.h"

#include <algorithm>
#include <cerrno>
#include <string>
#include <utility>
#include <vector>

#include "base/log.h"
#include "device/system.h"
#include "image/binding.h"
#include "image/image_names.h"
#include "image/image_set.h"
#include "plugin/criu_api.h"
#include "topology/device_entries.h"

namespace amdcr {
namespace {

// Says once per image what its integrity check covered: an image without
// checksums (upstream's plugin wrote it) is restored unverified, and so are
// BOs dumped with KFD_VERIFY=0 (`unchecked_bos` of them have contents but
// no checksums).
void log_integrity(const std::string &name, Integrity integrity, size_t unchecked_bos)
{
	switch (integrity) {
	case Integrity::Unsealed:
		log_info("%s has no checksums (written by another amdgpu plugin): its GPU memory is "
			 "restored unverified",
			 name.c_str());
		break;
	case Integrity::Verified:
		if (unchecked_bos > 0)
			log_info("%s: %zu BOs have no content checksums (dumped with KFD_VERIFY=0): their "
				 "contents are restored unverified",
				 name.c_str(), unchecked_bos);
		break;
	case Integrity::Unchecked:
		log_info("%s: checksums not checked (KFD_VERIFY=0)", name.c_str());
		break;
	}
}

template <typename Bo>
size_t count_unchecked(const std::vector<Bo> &bos)
{
	return static_cast<size_t>(
		std::count_if(bos.begin(), bos.end(), [](const Bo &b) { return b.has_contents() && !b.checksum; }));
}

Verify verify_of(const Config &config) { return config.verify ? Verify::On : Verify::Off; }

// The same for a dma-buf image (the checksums of its shared BO).
Result<DmabufImage> read_checked_dmabuf_image(const ImageDir &images, int id, const Config &config)
{
	Integrity integrity = Integrity::Unchecked;
	auto img = read_dmabuf_image(images, id, verify_of(config), &integrity);
	if (img)
		log_integrity(dmabuf_image_name(id), integrity,
			      img->shared && img->shared->has_contents() && !img->shared->checksum ? 1 : 0);
	return img;
}

} // namespace

Result<KfdImage> read_checked_kfd_image(const ImageDir &images, int id, const Config &config)
{
	Integrity integrity = Integrity::Unchecked;
	auto img = read_kfd_image(images, id, verify_of(config), &integrity);
	if (img)
		log_integrity(kfd_image_name(id), integrity, count_unchecked(img->bos));
	return img;
}

Result<RenderNodeImage> read_checked_render_image(const ImageDir &images, int id, const Config &config)
{
	Integrity integrity = Integrity::Unchecked;
	auto img = read_render_image(images, id, verify_of(config), &integrity);
	if (img)
		log_integrity(render_image_name(id), integrity, count_unchecked(img->bos));
	return img;
}

// The ids of the plugin's images in the directory, and CRIU's facts.
struct RestorePlan::Ids {
	std::vector<int> kfd, render, dmabuf;
	std::optional<CriuCheckpointFacts> criu;
	bool empty() const { return kfd.empty() && render.empty() && dmabuf.empty(); }

	// Images of files CRIU does not restore are not part of the
	// checkpoint: ignored, with a warning.
	void drop_foreign()
	{
		if (!criu)
			return;
		using ImageName = std::string (*)(int);
		for (auto [ids, name] : {std::pair<std::vector<int> *, ImageName>{&kfd, kfd_image_name},
					 {&render, render_image_name},
					 {&dmabuf, dmabuf_image_name}})
			std::erase_if(*ids, [&, name = name](int id) {
				if (criu->ext_file_ids.contains(static_cast<uint32_t>(id)))
					return false;
				log_warn("%s: CRIU restores no file %d "
					 "from this checkpoint (files.img): the image is not part of it and is ignored",
					 name(id).c_str(), id);
				return true;
			});
	}
};

Result<std::optional<RestorePlan>> RestorePlan::load(const SessionEnv &env)
{
	auto images = session_image_dir(env);
	if (!images) {
		// No image directory: there are no images of ours to restore.
		log_debug("restore: %s", images.error().message().c_str());
		return std::optional<RestorePlan>();
	}
	RestorePlan plan;
	if (images->streaming()) {
		// No directory to list: each image is requested when CRIU
		// restores its file (TaskRestore).
		if (!criu::consume_inventory_entry(kPluginName)) {
			log_debug("the checkpoint's inventory does not name %s: nothing of ours to restore",
				  kPluginName);
			return std::optional<RestorePlan>();
		}
		plan.streamed_ = true;
		log_debug("restore: the images are streamed (criu --stream): each GPU image is read when "
			  "CRIU restores its file");
		return std::optional<RestorePlan>(std::move(plan));
	}
	Ids ids;
	for (auto [list, prefix] : {std::pair{&ids.kfd, kKfdImagePrefix},
				    {&ids.render, kRenderImagePrefix},
				    {&ids.dmabuf, kDmabufImagePrefix}}) {
		auto found = images->ids_with_prefix(prefix);
		if (!found)
			return std::move(found).error();
		*list = std::move(*found);
	}
	// Consumed whatever the images say: a loaded plugin satisfies CRIU's
	// check of the inventory's plugin list.
	const bool listed = criu::consume_inventory_entry(kPluginName);
	if (ids.empty())
		return std::optional<RestorePlan>();
	if (!listed) {
		log_warn("the image directory has GPU images, but the checkpoint's inventory does not name "
			 "%s: they are not restored",
			 kPluginName);
		return std::optional<RestorePlan>();
	}
	if (auto st = plan.load_images(env, *images, ids); !st)
		return std::move(st).error();
	return std::optional<RestorePlan>(std::move(plan));
}

Status RestorePlan::load_images(const SessionEnv &env, const ImageDir &images, Ids &ids)
{
	// What binds the images to this checkpoint (CRIU's files.img and
	// pstree.img): images of files CRIU does not restore are not part of
	// it; the others must come from one dump, their tasks from this one.
	if (auto facts = read_criu_facts(images); facts)
		ids.criu = *facts;
	else
		log_warn("the images cannot be checked against CRIU's (%s): the files of another checkpoint "
			 "mixed into this one would go unnoticed",
			 facts.error().message().c_str());
	ids.drop_foreign();
	bound_to_criu_ = ids.criu.has_value();
	std::vector<BoundImage> bound;

	// Every image set must be complete before any GPU state is created.
	for (int id : ids.kfd) {
		auto img = read_checked_kfd_image(images, id, env.config);
		if (!img)
			return std::move(img).error();
		if (ids.criu && !ids.criu->pids.contains(img->pid))
			return make_error(EINVAL,
					  "%s: dumped from pid %u, which is no task of this checkpoint (pstree.img): "
					  "the image comes from another checkpoint",
					  kfd_image_name(id).c_str(), img->pid);
		bound.push_back({kfd_image_name(id), img->binding});
		if (auto st = validate_kfd_image_set(images, id, *img); !st)
			return st;
		auto chain = resolve_chain_pages(images, id, *img, verify_of(env.config));
		if (!chain)
			return std::move(chain).error();
		if (!chain->empty())
			kfd_chains_.emplace(id, std::move(*chain));
		kfd_images_.emplace(id, std::move(*img));
	}
	for (int id : ids.render) {
		auto img = read_checked_render_image(images, id, env.config);
		if (!img)
			return std::move(img).error();
		if (auto st = validate_render_image_set(images, id, *img); !st)
			return st;
		resolve_render_minor(*img, kfd_images_);
		bound.push_back({render_image_name(id), img->binding});
		for (const DrmBo &bo : img->bos)
			if (bo.shared)
				holder_counts_[bo.shared->id]++;
		render_images_.emplace(id, std::move(*img));
	}
	for (int id : ids.dmabuf) {
		auto img = read_checked_dmabuf_image(images, id, env.config);
		if (!img)
			return std::move(img).error();
		bound.push_back({dmabuf_image_name(id), img->binding});
		if (img->shared)
			holder_counts_[img->shared->id]++;
		dmabuf_images_.emplace(id, std::move(*img));
	}
	if (auto st = check_one_dump(bound); !st)
		return st;
	std::string unbound;
	if (auto st = check_bound_to_criu(images, bound_dump_id(bound), bound_names(bound),
					  env.config.require_manifest, &unbound);
	    !st)
		return st;
	if (!unbound.empty())
		log_warn("%s", unbound.c_str());
	if (auto st = check_restorable(images, ids.criu); !st)
		return st;
	auto map = map_checkpoint(env, CheckpointedGpus::of(kfd_images_), kfd_images_, render_images_);
	if (!map)
		return std::move(map).error();
	map_ = std::move(*map);
	return ok_status();
}

Status RestorePlan::check_restorable(const ImageDir &images, const std::optional<CriuCheckpointFacts> &criu) const
{
	for (const auto &[id, img] : render_images_)
		if (auto st = check_imports_held(render_image_name(id), img,
						 [this](uint32_t s) { return holder_count(s); });
		    !st)
			return st;
	if (!criu)
		return ok_status();
	auto mappings = read_render_mappings(images, criu->pids);
	if (!mappings)
		return std::move(mappings).error();
	RestorableMappings restorable;
	for (const auto &[id, img] : kfd_images_)
		restorable.add(img);
	for (const auto &[id, img] : render_images_)
		restorable.add(render_image_name(id), img);
	if (auto st = restorable.check(*mappings); !st)
		return st;
	log_debug("%zu render node mappings of the checkpoint's tasks (their mm images), each given back by a "
		  "GPU image", mappings->size());
	// The task each KFD file's state goes to, by CRIU's fd tables: an
	// image of another task (a tree's images renamed or edited) is refused
	// here, before the first task's GPU state exists; RESTORE_EXT_FILE
	// checks it again in the task, where CRIU's tables cannot tell.
	auto restorers = read_ext_file_restorers(images, criu->pids);
	if (!restorers)
		return std::move(restorers).error();
	if (!*restorers) {
		log_debug("a task's ids or fdinfo image is missing: each KFD file's task is checked in the task");
		return ok_status();
	}
	for (const auto &[id, img] : kfd_images_)
		if (auto st = check_kfd_file_restorer(**restorers, static_cast<uint32_t>(id), img.pid); !st)
			return std::move(st).error().context(kfd_image_name(id));
	return ok_status();
}

const KfdImage *RestorePlan::kfd_image(int id) const
{
	auto it = kfd_images_.find(id);
	return it == kfd_images_.end() ? nullptr : &it->second;
}

const KfdChainPages *RestorePlan::kfd_chain(int id) const
{
	auto it = kfd_chains_.find(id);
	return it == kfd_chains_.end() ? nullptr : &it->second;
}

const RenderNodeImage *RestorePlan::render_image(int id) const
{
	auto it = render_images_.find(id);
	return it == render_images_.end() ? nullptr : &it->second;
}

const DmabufImage *RestorePlan::dmabuf_image(int id) const
{
	auto it = dmabuf_images_.find(id);
	return it == dmabuf_images_.end() ? nullptr : &it->second;
}

uint32_t RestorePlan::holder_count(uint32_t id) const
{
	auto it = holder_counts_.find(id);
	return it == holder_counts_.end() ? 0 : it->second;
}

uint32_t RestorePlan::max_shared_id() const
{
	uint32_t max_id = 0;
	for (const auto &[id, holders] : holder_counts_)
		if (holders > 1)
			max_id = std::max(max_id, id);
	return max_id;
}

// ---- the GPU map -------------------------------------------------------------

void CheckpointedGpus::add(const KfdImage &img)
{
	for (const auto &d : img.devices) {
		devices.emplace(d.node_id, d);
		if (d.is_gpu())
			held.insert(d.gpu_id);
	}
}

CheckpointedGpus CheckpointedGpus::of(const KfdImages &images)
{
	CheckpointedGpus g;
	for (const auto &[id, img] : images)
		g.add(img);
	return g;
}

Result<GpuMap> map_held_gpus(const SessionEnv &env, const CheckpointedGpus &gpus, const Topology &local)
{
	std::vector<KfdDevice> dev_list;
	for (auto &[node, d] : gpus.devices)
		dev_list.push_back(d);
	auto ckpt = topology_from_devices(dev_list);
	if (!ckpt)
		return std::move(ckpt).error().context("checkpointed topology");
	MappingInput in;
	in.checkpointed = &*ckpt;
	in.local = &local;
	in.held_gpu_ids.assign(gpus.held.begin(), gpus.held.end());
	in.config = env.config;
	const SystemPaths paths = env.paths;
	in.usable = [paths](const TopologyNode &n) { return open_render_node(paths, n.drm_render_minor).ok(); };
	return map_gpus(in);
}

Result<GpuMap> map_checkpoint(const SessionEnv &env, const CheckpointedGpus &gpus, const KfdImages &kfd,
			      const std::map<int, RenderNodeImage> &renders)
{
	auto local = parse_topology(env.paths.sys_root);
	if (!local)
		return std::move(local).error().context(
			"the checkpoint holds AMD GPU state, but this machine's KFD topology is unusable");
	GpuMap map;
	if (!gpus.held.empty()) {
		auto held = map_held_gpus(env, gpus, *local);
		if (!held)
			return std::move(held).error();
		map = std::move(*held);
	}
	// A render node of a process without /dev/kfd: its image names the GPU
	// by gpu_id only (no properties to match), so it is restored onto the
	// local GPU with that gpu_id.
	std::vector<GpuMapEntry> entries = map.entries();
	for (const auto &[id, r] : renders) {
		if (mapping_for_render(r, kfd, map) || map.find_checkpointed(r.gpu_id))
			continue;
		const TopologyNode *n = local->gpu(r.gpu_id);
		if (!n || !n->accessible)
			return make_error(EINVAL,
					  "%s: gpu 0x%04x (%s) is in no KFD image and this machine has "
					  "no GPU with that gpu_id: a render node without /dev/kfd is "
					  "restored onto the GPU with its checkpointed gpu_id%s",
					  render_image_name(id).c_str(), r.gpu_id, render_node_label(r).c_str(),
					  r.gpu_id_only ? " (the image, of CRIU 4.0-4.2.1's plugin, names its GPU "
							  "only: no render minor or GPU properties to match)"
							: "");
		entries.push_back({r.gpu_id, n->gpu_id, n->drm_render_minor, n->node_id});
		map = GpuMap(entries);
	}
	for (const auto &e : map.entries())
		log_gpu(LogLevel::Debug, e.checkpointed_gpu_id, "restoring onto local gpu 0x%04x (renderD%u)",
			e.local_gpu_id, e.local_render_minor);
	return map;
}

void resolve_render_minor(RenderNodeImage &img, const KfdImages &kfd)
{
	for (const auto &[id, k] : kfd)
		if (amdcr::resolve_render_minor(img, k))
			return;
}

uint32_t checkpointed_minor(const KfdImages &kfd, uint32_t image_gpu_id)
{
	for (const auto &[id, img] : kfd)
		if (const KfdDevice *d = img.find_gpu(image_gpu_id))
			return d->drm_render_minor;
	return 0;
}

const GpuMapEntry *mapping_for_render(const RenderNodeImage &img, const KfdImages &kfd, const GpuMap &map)
{
	if (const GpuMapEntry *m = map.find_checkpointed(img.gpu_id))
		return m;
	// The render image names the GPU by its id on the checkpointed
	// machine; the KFD images may know it under the process's id (after an
	// earlier restore elsewhere): match by the checkpointed render minor.
	if (img.drm_render_minor == 0)
		return nullptr;
	for (const auto &[id, k] : kfd)
		for (const auto &d : k.devices)
			if (d.is_gpu() && d.drm_render_minor == img.drm_render_minor)
				return map.find_checkpointed(d.gpu_id);
	return nullptr;
}

} // namespace amdcr
