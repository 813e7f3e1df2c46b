// SPDX-License-Identifier: GPL-2.0-only
#include "plugin/restore.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include "base/log.h"
#include "base/scoped.h"
#include "copy/gpu_copy.h"
#include "device/kfd.h"
#include "image/criu_images.h"
#include "image/image_names.h"
#include "image/image_set.h"
#include "image/render_image.h"
#include "plugin/criu_api.h"
#include "plugin/hsakmt_shm.h"
#include "topology/device_entries.h"

namespace amdcr {
namespace {

// An fd number above those the restored task will use: CRIU's own choice
// when it exports one, else high in the fd table.
Result<UniqueFd> move_fd_high(UniqueFd fd)
{
	int base = criu::unused_fd_of_task(static_cast<int>(::getpid())).value_or(-1);
	if (base < 0) { // not under CRIU, or CRIU does not know the task
		struct rlimit rl {};
		const rlim_t cur = ::getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : 1024;
		base = static_cast<int>(std::min<rlim_t>(cur > 1024 ? cur - 512 : cur / 2, 1 << 20));
	}
	const int high = ::fcntl(fd.get(), F_DUPFD_CLOEXEC, base);
	if (high < 0)
		return errno_error(errno, "moving an fd above the restored task's fds");
	return UniqueFd(high);
}

// "/dev/dri/renderD<N>" -> N; 0 when the path is not a render node.
uint32_t render_minor_of_path(const char *path)
{
	const char *p = std::strstr(path, "renderD");
	if (!p)
		return 0;
	char *end = nullptr;
	const unsigned long m = std::strtoul(p + 7, &end, 10);
	return end != p + 7 ? static_cast<uint32_t>(m) : 0;
}

// Another fd of this process that refers to the same open file as `fd`
// (kcmp KCMP_FILE), or -1.
int find_same_open_file(int fd)
{
	DIR *d = ::opendir("/proc/self/fd");
	if (!d)
		return -1;
	ScopeExit closer([d] { ::closedir(d); });
	const pid_t self = ::getpid();
	while (const dirent *e = ::readdir(d)) {
		char *end = nullptr;
		const long n = std::strtol(e->d_name, &end, 10);
		if (end == e->d_name || *end || n == fd || n == ::dirfd(d))
			continue;
		if (::syscall(SYS_kcmp, self, self, KCMP_FILE, fd, n) == 0)
			return static_cast<int>(n);
	}
	return -1;
}

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

// A KFD image with its checksum checked (unless KFD_VERIFY=0; its BOs'
// checksums then stay unread too).
Result<KfdImage> read_checked_kfd_image(const ImageDir &images, int id, const Config &config)
{
	Integrity integrity = Integrity::Unchecked;
	auto img = read_kfd_image(images, id, config.verify ? Verify::On : Verify::Off, &integrity);
	if (img)
		log_integrity(kfd_image_name(id), integrity, count_unchecked(img->bos));
	return img;
}

// The same for a render node image.
Result<RenderNodeImage> read_checked_render_image(const ImageDir &images, int id, const Config &config)
{
	Integrity integrity = Integrity::Unchecked;
	auto img = read_render_image(images, id, config.verify ? Verify::On : Verify::Off, &integrity);
	if (img)
		log_integrity(render_image_name(id), integrity, count_unchecked(img->bos));
	return img;
}

// The same for a dma-buf image (the checksums of its shared BO).
Result<DmabufImage> read_checked_dmabuf_image(const ImageDir &images, int id, const Config &config)
{
	Integrity integrity = Integrity::Unchecked;
	auto img = read_dmabuf_image(images, id, config.verify ? Verify::On : Verify::Off, &integrity);
	if (img)
		log_integrity(dmabuf_image_name(id), integrity,
			      img->shared && img->shared->has_contents() && !img->shared->checksum ? 1 : 0);
	return img;
}

bool is_kfd_path(const char *path)
{
	const size_t n = std::strlen(path);
	return n >= 4 && std::strcmp(path + n - 4, "/kfd") == 0;
}

} // namespace

RestoreSession::RestoreSession(SessionEnv env) : env_(std::move(env)) {}

Status RestoreSession::load_and_map()
{
	auto images = session_image_dir(env_);
	if (!images) {
		// No image directory: there are no images of ours to restore.
		log_debug("restore: %s", images.error().message().c_str());
		state_ = State::Inactive;
		return ok_status();
	}
	if (images->streaming()) {
		// No directory to list: each image is requested when CRIU
		// restores its file (restore_streamed).
		if (!criu::consume_inventory_entry(kPluginName)) {
			log_debug("the checkpoint's inventory does not name %s: nothing of ours to restore",
				  kPluginName);
			state_ = State::Inactive;
			return ok_status();
		}
		streamed_ = true;
		state_ = State::Active;
		log_debug("restore: the images are streamed (criu --stream): each GPU image is read when "
			  "CRIU restores its file");
		return ok_status();
	}
	auto kfd_ids = images->ids_with_prefix(kKfdImagePrefix);
	if (!kfd_ids)
		return std::move(kfd_ids).error();
	auto render_ids = images->ids_with_prefix(kRenderImagePrefix);
	if (!render_ids)
		return std::move(render_ids).error();
	auto dmabuf_ids = images->ids_with_prefix(kDmabufImagePrefix);
	if (!dmabuf_ids)
		return std::move(dmabuf_ids).error();
	// Consumed whatever the images say: a loaded plugin satisfies CRIU's
	// check of the inventory's plugin list.
	const bool listed = criu::consume_inventory_entry(kPluginName);
	if (kfd_ids->empty() && render_ids->empty() && dmabuf_ids->empty()) {
		state_ = State::Inactive;
		return ok_status();
	}
	if (!listed) {
		log_warn("the image directory has GPU images, but the checkpoint's inventory does not name "
			 "%s: they are not restored",
			 kPluginName);
		state_ = State::Inactive;
		return ok_status();
	}

	// What binds the images to this checkpoint (CRIU's files.img and
	// pstree.img): images of files CRIU does not restore are not part of
	// it; the others must come from one dump, their tasks from this one.
	if (auto facts = read_criu_facts(*images); facts)
		criu_facts_ = *facts;
	else
		log_warn("the images cannot be checked against CRIU's (%s): the files of another checkpoint "
			 "mixed into this one would go unnoticed",
			 facts.error().message().c_str());
	using ImageName = std::string (*)(int);
	for (auto [ids, name] : {std::pair<std::vector<int> *, ImageName>{&*kfd_ids, kfd_image_name},
				 {&*render_ids, render_image_name},
				 {&*dmabuf_ids, dmabuf_image_name}})
		std::erase_if(*ids, [&, name = name](int id) {
			if (!criu_facts_ || criu_facts_->ext_file_ids.contains(static_cast<uint32_t>(id)))
				return false;
			log_warn("%s: CRIU restores no file %d "
				 "from this checkpoint (files.img): the image is not part of it and is ignored",
				 name(id).c_str(), id);
			return true;
		});
	std::vector<BoundImage> bound;

	// Every image set must be complete before any GPU state is created.
	std::map<uint32_t, KfdDevice> devices; // by node id, union of images
	std::set<uint32_t> held;
	for (int id : *kfd_ids) {
		auto img = read_checked_kfd_image(*images, id, env_.config);
		if (!img)
			return std::move(img).error();
		if (criu_facts_ && !criu_facts_->pids.contains(img->pid))
			return make_error(EINVAL,
					  "%s: dumped from pid %u, which is no task of this checkpoint (pstree.img): "
					  "the image comes from another checkpoint",
					  kfd_image_name(id).c_str(), img->pid);
		bound.push_back({kfd_image_name(id), img->binding});
		if (auto st = validate_kfd_image_set(*images, id, *img); !st)
			return st;
		auto chain = resolve_chain_pages(*images, id, *img, env_.config.verify ? Verify::On : Verify::Off);
		if (!chain)
			return std::move(chain).error();
		if (!chain->empty())
			kfd_chains_.emplace(id, std::move(*chain));
		for (const auto &d : img->devices) {
			devices.emplace(d.node_id, d);
			if (d.is_gpu())
				held.insert(d.gpu_id);
		}
		kfd_images_.emplace(id, std::move(*img));
	}
	std::vector<std::pair<int, RenderNodeImage>> renders;
	for (int id : *render_ids) {
		auto img = read_checked_render_image(*images, id, env_.config);
		if (!img)
			return std::move(img).error();
		if (auto st = validate_render_image_set(*images, id, *img); !st)
			return st;
		resolve_render_minor(*img);
		bound.push_back({render_image_name(id), img->binding});
		for (const DrmBo &bo : img->bos)
			if (bo.shared)
				shared_holders_[bo.shared->id]++;
		renders.emplace_back(id, std::move(*img));
	}
	for (int id : *dmabuf_ids) {
		auto img = read_checked_dmabuf_image(*images, id, env_.config);
		if (!img)
			return std::move(img).error();
		bound.push_back({dmabuf_image_name(id), img->binding});
		if (img->shared)
			shared_holders_[img->shared->id]++;
		dmabuf_ids_.insert(id);
	}
	if (auto st = check_one_dump(bound); !st)
		return st;
	// Memory every restored task shares: made here, before CRIU forks them.
	uint32_t max_shared = 0;
	for (const auto &[sid, holders] : shared_holders_)
		if (holders > 1)
			max_shared = std::max(max_shared, sid);
	if (max_shared) {
		auto table = SharedBoTable::create(max_shared);
		if (!table)
			return std::move(table).error();
		shared_table_.emplace(std::move(*table));
	}

	if (auto st = map_loaded_images(devices, held, renders); !st)
		return st;
	for (auto &[id, r] : renders)
		render_images_.emplace(id, std::move(r));
	state_ = State::Active;
	return ok_status();
}

Result<GpuMap> RestoreSession::map_held_gpus(const std::map<uint32_t, KfdDevice> &devices,
					     const std::set<uint32_t> &held, const Topology &local) const
{
	std::vector<KfdDevice> dev_list;
	for (auto &[node, d] : devices)
		dev_list.push_back(d);
	auto ckpt = topology_from_devices(dev_list);
	if (!ckpt)
		return std::move(ckpt).error().context("checkpointed topology");
	MappingInput in;
	in.checkpointed = &*ckpt;
	in.local = &local;
	in.held_gpu_ids.assign(held.begin(), held.end());
	in.config = env_.config;
	const SystemPaths paths = env_.paths;
	in.usable = [paths](const TopologyNode &n) { return open_render_node(paths, n.drm_render_minor).ok(); };
	return map_gpus(in);
}

Status RestoreSession::map_loaded_images(const std::map<uint32_t, KfdDevice> &devices,
					 const std::set<uint32_t> &held,
					 const std::vector<std::pair<int, RenderNodeImage>> &renders)
{
	auto local = parse_topology(env_.paths.sys_root);
	if (!local)
		return std::move(local).error().context(
			"the checkpoint holds AMD GPU state, but this machine's KFD topology is unusable");
	if (!held.empty()) {
		auto map = map_held_gpus(devices, held, *local);
		if (!map)
			return std::move(map).error();
		map_ = std::move(*map);
	}
	// A render node of a process without /dev/kfd: its image names the GPU
	// by gpu_id only (no properties to match), so it is restored onto the
	// local GPU with that gpu_id.
	std::vector<GpuMapEntry> entries = map_.entries();
	for (const auto &[id, r] : renders) {
		if (mapping_for_render(r) || map_.find_checkpointed(r.gpu_id))
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
		map_ = GpuMap(entries);
	}
	for (const auto &e : map_.entries())
		log_gpu(LogLevel::Debug, e.checkpointed_gpu_id, "restoring onto local gpu 0x%04x (renderD%u)",
			e.local_gpu_id, e.local_render_minor);
	return ok_status();
}

Status RestoreSession::load_streamed_kfd(const ImageDir &images, int id, const KfdImage &img)
{
	if (auto st = validate_kfd_image_set(images, id, img); !st)
		return st;
	std::map<uint32_t, KfdDevice> devices;
	std::set<uint32_t> held;
	for (const auto &d : img.devices) {
		devices.emplace(d.node_id, d);
		if (d.is_gpu())
			held.insert(d.gpu_id);
	}
	if (map_.entries().empty()) {
		if (auto st = map_loaded_images(devices, held, {}); !st)
			return st;
	} else {
		for (uint32_t g : held)
			if (!map_.find_checkpointed(g))
				return make_error(EINVAL,
						  "%s: gpu 0x%04x is not among the GPUs this task's first KFD image "
						  "mapped (streamed images are mapped one KFD file at a time)",
						  kfd_image_name(id).c_str(), g);
	}
	kfd_images_.insert_or_assign(id, img);
	return ok_status();
}

Status RestoreSession::restore_streamed(const ImageDir &images, int id, UniqueFd *out, bool *ours)
{
	*ours = true;
	auto kfd = read_checked_kfd_image(images, id, env_.config);
	if (kfd) {
		if (auto st = load_streamed_kfd(images, id, *kfd); !st)
			return st;
		return restore_kfd(images, id, out);
	}
	if (kfd.error().code() != ENOENT)
		return std::move(kfd).error();
	auto render = read_checked_render_image(images, id, env_.config);
	if (!render) {
		if (render.error().code() != ENOENT)
			return std::move(render).error();
		*ours = false;
		return ok_status();
	}
	if (auto st = validate_render_image_set(images, id, *render); !st)
		return st;
	resolve_render_minor(*render);
	if (!mapping_for_render(*render))
		return make_error(EINVAL,
				  "%s: gpu 0x%04x (%s) is not mapped: with streamed images (criu "
				  "--stream) the GPUs are mapped when the task's /dev/kfd file is restored, and "
				  "CRIU restored this render node file before it",
				  render_image_name(id).c_str(), render->gpu_id, render_node_label(*render).c_str());
	streamed_renders_.insert_or_assign(id, std::move(*render));
	return restore_render(images, id, out);
}

Result<RenderNodeImage> RestoreSession::take_render_image(const ImageDir &images, int id)
{
	if (auto it = streamed_renders_.find(id); it != streamed_renders_.end()) {
		RenderNodeImage img = std::move(it->second);
		streamed_renders_.erase(it);
		return img;
	}
	// Read (and its integrity logged) by prepare() already: quietly again.
	auto img = read_render_image(images, id, env_.config.verify ? Verify::On : Verify::Off);
	if (img)
		resolve_render_minor(*img);
	return img;
}

int RestoreSession::prepare()
{
	const int ret = prepare_checkpoint();
	if (ret == 0 && !guardian_)
		start_guardian(); // before CRIU forks any task
	return ret;
}

int RestoreSession::prepare_checkpoint()
{
	if (state_ == State::Unprepared) {
		if (auto st = load_and_map(); !st) {
			log_error("restore refused before any GPU state was changed: %s",
				  st.error().message().c_str());
			state_ = State::Inactive;
			return st.error().neg();
		}
		if (active())
			set_up_parallel();
	}
	if (active() && !totals_) {
		// Before CRIU forks the tasks that restore the files.
		auto t = StageTotals::create();
		if (t)
			totals_.emplace(std::move(*t));
		else
			log_debug("no summary line for this restore: %s", t.error().message().c_str());
	}
	return active() ? 0 : -ENOTSUP;
}

void RestoreSession::resolve_render_minor(RenderNodeImage &img) const
{
	for (const auto &[id, kfd] : kfd_images_)
		if (amdcr::resolve_render_minor(img, kfd))
			return;
}

uint32_t RestoreSession::checkpointed_minor(uint32_t image_gpu_id) const
{
	for (const auto &[id, img] : kfd_images_)
		if (const KfdDevice *d = img.find_gpu(image_gpu_id))
			return d->drm_render_minor;
	return 0;
}

const GpuMapEntry *RestoreSession::mapping_for_render(const RenderNodeImage &img) const
{
	if (const GpuMapEntry *m = map_.find_checkpointed(img.gpu_id))
		return m;
	// The render image names the GPU by its id on the checkpointed
	// machine; the KFD images may know it under the process's id (after an
	// earlier restore elsewhere): match by the checkpointed render minor.
	if (img.drm_render_minor == 0)
		return nullptr;
	for (const auto &[id, k] : kfd_images_)
		for (const auto &d : k.devices)
			if (d.is_gpu() && d.drm_render_minor == img.drm_render_minor)
				return map_.find_checkpointed(d.gpu_id);
	return nullptr;
}

Result<UniqueFd> RestoreSession::open_render_file(uint32_t minor) const
{
	auto fd = open_render_node(env_.paths, minor);
	if (!fd)
		return std::move(fd).error();
	return move_fd_high(std::move(*fd));
}

Result<int> RestoreSession::local_render_fd(uint32_t minor)
{
	if (auto it = render_files_.find(minor); it != render_files_.end())
		return it->second.fd();
	auto high = open_render_file(minor);
	if (!high)
		return std::move(high).error();
	const int raw = high->get();
	render_files_.emplace(minor, RenderFile{std::move(*high), -1});
	return raw;
}

Result<std::pair<int, int>> RestoreSession::render_file_for(uint32_t minor, int id, const RenderNodeImage &img)
{
	if (auto it = extra_render_files_.find(id); it != extra_render_files_.end())
		return std::pair{it->second.second.fd(), id}; // CRIU asked again (retry)
	RenderFileUse &use = render_file_use_[minor];
	bool clash = false;
	for (const DrmBo &bo : img.bos) {
		clash |= use.handles.count(bo.handle) != 0;
		for (const DrmVm &vm : bo.vms) {
			auto next = use.vas.lower_bound(vm.addr);
			clash |= next != use.vas.end() && next->first < vm.addr + vm.size;
			clash |= next != use.vas.begin() && std::prev(next)->second > vm.addr;
		}
	}
	if (use.ids.count(id) || !clash) {
		auto fd = local_render_fd(minor);
		if (!fd)
			return std::move(fd).error();
		if (use.ids.insert(id).second)
			for (const DrmBo &bo : img.bos) {
				use.handles.insert(bo.handle);
				for (const DrmVm &vm : bo.vms)
					use.vas.emplace(vm.addr, vm.addr + vm.size);
			}
		return std::pair{*fd, -1};
	}
	auto high = open_render_file(minor);
	if (!high)
		return std::move(high).error();
	const int raw = high->get();
	extra_render_files_.emplace(id, std::pair{minor, RenderFile{std::move(*high), -1}});
	log_debug("%s: its GEM handles or GPU VAs clash with those of another file of renderD%u in this task: "
		  "restored as an open file of its own",
		  render_image_name(id).c_str(), minor);
	return std::pair{raw, id};
}

int RestoreSession::restore_ext_file(int id, bool *retry_needed)
{
	if (retry_needed)
		*retry_needed = false;
	if (state_ == State::Unprepared)
		(void)prepare_checkpoint(); // in a task: no guardian from here
	if (!active())
		return -ENOTSUP;
	UniqueFd out;
	Status st;
	// Asked at each hook: CRIU moves its service fds (the image directory's
	// among them) in every restored task.
	if (auto images = session_image_dir(env_); !images) {
		st = std::move(images).error();
	} else if (streamed_) {
		bool ours = true;
		report_task_to_guardian(); // too soon for a file not ours: harmless
		st = restore_streamed(*images, id, &out, &ours);
		if (st && !ours)
			return -ENOTSUP; // not a file of ours
	} else if (kfd_images_.count(id)) {
		report_task_to_guardian();
		st = restore_kfd(*images, id, &out);
	} else if (dmabuf_ids_.count(id)) {
		report_task_to_guardian();
		st = restore_dmabuf(*images, id, &out);
	} else if (auto exists = images->exists(render_image_name(id)); !exists) {
		st = std::move(exists).error();
	} else if (!*exists) {
		// Not ours, or ours with its image lost: only CRIU's "Unable to
		// restore" would follow, so say which files were looked for.
		log_warn("CRIU file %d: this checkpoint has GPU images but none for this file (%s, %s and %s are "
			 "absent): if it was /dev/kfd or a render node, its image is missing from the image "
			 "directory; if it is another device's, another plugin restores it",
			 id, kfd_image_name(id).c_str(), render_image_name(id).c_str(), dmabuf_image_name(id).c_str());
		return -ENOTSUP;
	} else {
		report_task_to_guardian();
		st = restore_render(*images, id, &out);
	}
	if (!st) {
		log_error("restore of file %d failed: %s", id, st.error().message().c_str());
		return st.error().neg();
	}
	return out.release();
}

void RestoreSession::hand_render_files_to_task()
{
	if (handed_over_)
		return;
	handed_over_ = true;
	auto borrow = [](uint32_t minor, RenderFile &file) {
		const int theirs = find_same_open_file(file.ours.get());
		if (theirs < 0)
			return; // the task holds none: ours stays (as upstream's does)
		file.borrowed = theirs;
		file.ours.reset();
		log_debug("renderD%u: mapped through the task's own fd %d", minor, theirs);
	};
	for (auto &[minor, file] : render_files_)
		borrow(minor, file);
	for (auto &[id, file] : extra_render_files_)
		borrow(file.first, file.second);
}

int RestoreSession::update_vma_map(const char *path, uint64_t /*addr*/, uint64_t old_pgoff,
				   uint64_t *new_pgoff, int *plugin_fd)
{
	if (!active() || !path)
		return -ENOTSUP;
	const bool kfd = is_kfd_path(path);
	const uint32_t minor = render_minor_of_path(path);
	if (!kfd && minor == 0)
		return -ENOTSUP;
	hand_render_files_to_task();
	for (const auto &v : vmas_) {
		if (v.old_offset != old_pgoff || v.kfd != kfd || (!kfd && v.old_minor != minor))
			continue;
		int fd = -1;
		if (!v.kfd) {
			const RenderFile &file = v.file_id < 0 ? render_files_.at(v.local_minor)
							       : extra_render_files_.at(v.file_id).second;
			fd = ::fcntl(file.fd(), F_DUPFD_CLOEXEC, 0);
			if (fd < 0) {
				const int err = errno;
				log_error("mapping of %s at offset 0x%llx: dup: %s", path,
					  static_cast<unsigned long long>(old_pgoff), std::strerror(err));
				return -err;
			}
		}
		*new_pgoff = v.new_offset;
		*plugin_fd = fd;
		return 1;
	}
	return -ENOTSUP;
}

int RestoreSession::post_forking()
{
	// Always -ENOTSUP on success: the plugins after us get the hook too.
	if (!parallel_)
		return -ENOTSUP;
	if (auto st = parallel_->start(); !st) {
		log_error("%s", st.error().message().c_str());
		return st.error().neg();
	}
	return -ENOTSUP;
}

int RestoreSession::resume_devices_late(int pid)
{
	// -ENOTSUP unless the parallel restore failed: CRIU ignores this
	// hook's result (it only logs it at debug level), and a plugin loaded
	// after us may have GPUs of its own in the same process. Failures are
	// logged here.
	if (!active())
		return -ENOTSUP;
	if (parallel_)
		if (auto st = check_parallel(pid); !st)
			return st.error().neg();
	auto kfd = Kfd::open(env_.paths.kfd_path());
	if (!kfd) {
		log_error("pid %d: GPU queues not resumed: %s", pid, kfd.error().message().c_str());
		return -ENOTSUP;
	}
	auto st = kfd->resume(static_cast<uint32_t>(pid));
	if (!st) {
		if (st.error().code() != ESRCH) // ESRCH: no GPU state in that process
			log_error("pid %d: GPU queues not resumed: %s", pid, st.error().message().c_str());
		else
			tell_guardian_resumed(pid);
		return -ENOTSUP;
	}
	log_debug("pid %d: GPU queues resumed", pid);
	tell_guardian_resumed(pid);
	return -ENOTSUP;
}

void RestoreSession::finish(int ret)
{
	parallel_.reset(); // a thread still copying stops after its current file
	vmas_.clear();
	render_files_.clear();
	extra_render_files_.clear();
	render_file_use_.clear();
	finish_guardian();
	if (ret == 0 && totals_ && totals_->any())
		log_notice("%s", totals_->line(false, env_.config).c_str());
}

// ---- parallel restore ------------------------------------------------------

void RestoreSession::set_up_parallel()
{
	const char *why = nullptr;
	if (!env_.config.parallel_restore)
		why = "KFD_PARALLEL_RESTORE=0";
	else if (!env_.post_forking)
		why = "this CRIU has no POST_FORKING hook (CRIU 4.0/4.1)";
	else if (streamed_)
		why = "the images are streamed (criu --stream): only the tasks can read them";
	if (!why) {
		auto p = ParallelRestore::create([this](const HandOver &h, const std::atomic<bool> &cancel, DeferredLog &log) {
				return copy_handed_over(h, cancel, log);
			});
		if (p) {
			parallel_ = std::move(*p);
			return;
		}
		log_info("restore: no parallel restore: %s; each task copies its own GPU memory",
			 p.error().message().c_str());
		return;
	}
	log_info("restore: no parallel restore (%s): each task copies its own GPU memory", why);
}

Result<std::vector<GpuCopyJob>> RestoreSession::kfd_copy_jobs(int id, std::span<const int> dmabufs) const
{
	auto it = kfd_images_.find(id);
	if (it == kfd_images_.end())
		return make_error(EINVAL, "file %d is not a KFD file of this checkpoint", id);
	const KfdImage &img = it->second;
	std::vector<GpuCopyJob> jobs;
	for (const auto &d : img.devices) {
		if (!d.is_gpu())
			continue;
		const GpuMapEntry *m = map_.find_checkpointed(d.gpu_id);
		if (!m)
			return make_error(EINVAL, "gpu 0x%04x has no local GPU", d.gpu_id);
		GpuCopyJob job;
		job.image_gpu_id = d.gpu_id;
		job.render_path = env_.paths.render_path(m->local_render_minor);
		job.pages_file = kfd_pages_image_name(id, d.gpu_id);
		if (auto c = kfd_chains_.find(id); c != kfd_chains_.end())
			job.chain = &c->second.at(d.gpu_id); // an incremental checkpoint
		jobs.push_back(std::move(job));
	}
	size_t k = 0;
	for (size_t i = 0; i < img.bos.size(); i++) {
		const KfdBo &b = img.bos[i];
		if (!b.has_contents())
			continue;
		auto job = std::find_if(jobs.begin(), jobs.end(),
					[&](const GpuCopyJob &j) { return j.image_gpu_id == b.gpu_id; });
		if (job == jobs.end())
			return make_error(EINVAL, "BO %zu at 0x%llx is on gpu 0x%04x, which the image lists no device for",
					  i, static_cast<unsigned long long>(b.addr), b.gpu_id);
		if (k >= dmabufs.size())
			break;
		job->bos.push_back({dmabufs[k++], b.size, b.checksum ? &*b.checksum : nullptr,
				    strprintf("BO %zu at 0x%llx", i, static_cast<unsigned long long>(b.addr))});
	}
	const size_t want = static_cast<size_t>(
		std::count_if(img.bos.begin(), img.bos.end(), [](const KfdBo &b) { return b.has_contents(); }));
	if (want != dmabufs.size())
		return make_error(EINVAL, "%s: %zu buffers with contents, %zu dma-bufs given",
				  kfd_image_name(id).c_str(), want, dmabufs.size());
	return jobs;
}

Result<GpuCopyJob> RestoreSession::render_copy_job(int id, const RenderNodeImage &img, const GpuMapEntry &m,
						   std::span<const int> dmabufs) const
{
	GpuCopyJob job;
	job.image_gpu_id = img.gpu_id;
	job.render_path = env_.paths.render_path(m.local_render_minor);
	const std::string name = render_image_name(id);
	size_t k = 0;
	for (size_t i = 0; i < img.bos.size(); i++) {
		const DrmBo &bo = img.bos[i];
		// A BO other files hold too is filled by its first holder
		// restored (attach_shared_bo), not through this file.
		if (!bo.has_contents() || (bo.shared && shared_among_files(bo.shared->id)))
			continue;
		if (k == dmabufs.size())
			return make_error(EINVAL, "%s: more buffers with contents than the %zu dma-bufs given",
					  name.c_str(), dmabufs.size());
		std::string file = drm_pages_image_name(id, img.drm_render_minor, static_cast<uint32_t>(i));
		job.bos.push_back({dmabufs[k++], bo.size, bo.checksum ? &*bo.checksum : nullptr,
				   strprintf("%s: BO %zu (GEM handle %u) of %s", file.c_str(), i, bo.handle,
					     name.c_str())});
		job.bo_files.push_back(std::move(file));
	}
	if (k != dmabufs.size())
		return make_error(EINVAL, "%s: %zu buffers with contents, %zu dma-bufs given",
				  render_image_name(id).c_str(), k, dmabufs.size());
	return job;
}

Status RestoreSession::copy_contents(const ImageDir &images, HandOverKind kind, int id,
				     const std::vector<GpuCopyJob> &jobs, std::span<const int> dmabufs)
{
	if (dmabufs.empty())
		return ok_status();
	if (parallel_ && !remapped_in_task_)
		return parallel_->hand_over(kind, id, dmabufs);
	if (parallel_)
		log_info("file %d: copied in the task: its GPUs were mapped again in the task, CRIU's main "
			 "process knows the first mapping only",
			 id);
	auto copied = run_gpu_copies(Direction::FileToGpu, images, jobs, copy_settings(env_, stage()));
	if (!copied)
		return std::move(copied).error();
	return ok_status();
}

Status RestoreSession::copy_handed_over(const HandOver &h, const std::atomic<bool> &cancel,
					DeferredLog &log) const
{
	std::vector<int> fds;
	for (const auto &f : h.dmabufs)
		fds.push_back(f.get());
	std::vector<GpuCopyJob> jobs;
	if (h.kind == HandOverKind::Kfd) {
		auto j = kfd_copy_jobs(h.file_id, fds);
		if (!j)
			return std::move(j).error();
		jobs = std::move(*j);
	} else {
		auto it = render_images_.find(h.file_id);
		if (it == render_images_.end())
			return make_error(EINVAL, "file %d is not a render node file of this checkpoint", h.file_id);
		const GpuMapEntry *m = mapping_for_render(it->second);
		if (!m)
			return make_error(EINVAL, "%s: its GPU has no local GPU", render_image_name(h.file_id).c_str());
		auto j = render_copy_job(h.file_id, it->second, *m, fds);
		if (!j)
			return std::move(j).error();
		jobs.push_back(std::move(*j));
	}
	auto images = session_image_dir(env_);
	if (!images)
		return std::move(images).error();
	auto copied = run_gpu_copies(Direction::FileToGpu, *images, jobs, copy_settings(env_, stage(), &cancel, &log));
	if (!copied)
		return std::move(copied).error();
	return ok_status();
}

Status RestoreSession::check_parallel(pid_t pid)
{
	std::vector<pid_t> senders;
	const bool first = !parallel_checked_;
	parallel_checked_ = true;
	auto st = parallel_->finish(&senders);
	if (st) {
		if (first && !senders.empty())
			log_info("parallel restore: the GPU memory of %zu task(s) is restored and checked", senders.size());
		return st;
	}
	// CRIU resumes every task after this hook whatever it returns, and
	// these tasks' GPU memory is not what was checkpointed. Killed, they
	// cannot be resumed: CRIU's detach from them fails, and so does the
	// restore.
	std::string killed;
	if (std::find(senders.begin(), senders.end(), pid) == senders.end())
		senders.push_back(pid);
	for (pid_t p : senders) {
		if (p <= 0 || (!first && p != pid))
			continue;
		if (::kill(p, SIGKILL) == 0)
			killed += strprintf("%s%d", killed.empty() ? "" : ", ", p);
	}
	if (first)
		log_error("%s; killed the restored task(s) %s so that none resumes with wrong GPU memory",
			  st.error().message().c_str(), killed.c_str());
	else
		log_error("task %d killed: the parallel restore failed", pid);
	return st;
}

} // namespace amdcr
