// SPDX-License-Identifier: GPL-2.0-only
//
// TaskDevices (plugin/restore_task_devices.h): in a restored task, at
// RESTORE_EXT_FILE, before its first GPU file, the devices it can reach.
#include "plugin/restore_task_devices.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/log.h"
#include "image/image_names.h"
#include "topology/device_entries.h"
#include "topology/topology.h"

namespace amdcr {
namespace {

// One mapped GPU the task cannot open, and why.
struct MissingNode {
	GpuMapEntry entry;
	std::string path;
	std::string why; // "absent" or the open error
};

std::string describe(const std::vector<MissingNode> &missing)
{
	std::string s;
	for (const auto &m : missing) {
		if (!s.empty())
			s += "; ";
		s += strprintf("%s (local gpu 0x%04x, for checkpointed gpu 0x%04x): %s", m.path.c_str(),
			       m.entry.local_gpu_id, m.entry.checkpointed_gpu_id, m.why.c_str());
	}
	return s;
}

// How a runtime passes a device in, besides podman's and docker's
// --device: an OCI spec (containerd, CRI-O, Kubernetes' device plugins)
// lists it in linux.devices and allows it in the device cgroup; a
// checkpoint's /dev also comes from CRIU's image of it.
constexpr const char *kOciDevices = "; in an OCI spec: linux.devices and the device cgroup's allow list, and "
				    "the container's /dev";

std::string device_options(const std::vector<MissingNode> &missing)
{
	std::string s;
	for (const auto &m : missing)
		s += (s.empty() ? "--device " : " --device ") + m.path;
	return s;
}

} // namespace

Status TaskDevices::fit(bool kfd_file)
{
	if (fitted_)
		return ok_status();
	const pid_t self = ::getpid();
	const std::string kfd = env_.paths.kfd_path();
	struct stat st {};
	if (kfd_file && ::stat(kfd.c_str(), &st) != 0) {
		const int err = errno;
		if (err == ENOENT)
			return make_error(ENOENT,
					  "%s is absent in the restored task's mount namespace (pid %d): "
					  "the container runtime must pass it in (--device %s%s)",
					  kfd.c_str(), static_cast<int>(self), kfd.c_str(), kOciDevices);
		return errno_error(err, "stat " + kfd + " in the restored task");
	}

	std::vector<MissingNode> missing;
	for (const auto &e : map_.entries()) {
		auto fd = open_render_node(env_.paths, e.local_render_minor);
		if (fd)
			continue;
		MissingNode m{e, env_.paths.render_path(e.local_render_minor), ""};
		m.why = ::stat(m.path.c_str(), &st) != 0 && errno == ENOENT ? "absent"
									     : fd.error().message();
		missing.push_back(std::move(m));
	}
	if (missing.empty()) {
		fitted_ = true;
		return ok_status();
	}
	log_info("restored task %d cannot use %s: mapping the checkpoint again onto the GPUs it can use",
		 static_cast<int>(self), describe(missing).c_str());
	auto remapped = map_for_task();
	if (!remapped)
		return make_error(ENOENT,
				  "the restored task (pid %d in its pid namespace) cannot use %s, and the "
				  "GPUs its mount namespace and device cgroup let it use do not take the "
				  "checkpoint's instead (%s): "
				  "the container runtime must pass %s in (%s%s)",
				  static_cast<int>(self), describe(missing).c_str(),
				  remapped.error().message().c_str(), missing.size() > 1 ? "them" : "it",
				  device_options(missing).c_str(), kOciDevices);
	map_ = std::move(*remapped);
	remapped_ = true;
	for (const auto &e : map_.entries())
		log_gpu(LogLevel::Info, e.checkpointed_gpu_id,
			"restoring onto local gpu 0x%04x (renderD%u), as restored task %d sees the GPUs",
			e.local_gpu_id, e.local_render_minor, static_cast<int>(self));
	fitted_ = true;
	return ok_status();
}

Result<GpuMap> TaskDevices::map_for_task() const
{
	const CheckpointedGpus gpus = CheckpointedGpus::of(kfd_images());
	// A render node without /dev/kfd is restored onto the GPU with its
	// checkpointed gpu_id (map_checkpoint): nothing to choose.
	std::vector<GpuMapEntry> entries;
	for (const auto &e : map_.entries())
		if (!gpus.held.count(e.checkpointed_gpu_id))
			entries.push_back(e);
	for (const auto &e : entries)
		if (!open_render_node(env_.paths, e.local_render_minor))
			return make_error(ENOENT,
					  "gpu 0x%04x has no KFD image, so it is restored onto the GPU with its "
					  "gpu_id only",
					  e.checkpointed_gpu_id);
	if (gpus.held.empty())
		return GpuMap(entries);

	// The task's view: a GPU its device cgroup denies reads EPERM in
	// the topology (not accessible), an absent node does not open.
	auto local = parse_topology(env_.paths.sys_root);
	if (!local)
		return std::move(local).error().context("the KFD topology as the restored task sees it");
	auto map = map_held_gpus(env_, gpus, *local);
	if (!map)
		return std::move(map).error();
	entries.insert(entries.begin(), map->entries().begin(), map->entries().end());
	return GpuMap(std::move(entries));
}

Result<const KfdImage *> TaskDevices::add_streamed(int id, KfdImage img)
{
	CheckpointedGpus gpus;
	gpus.add(img);
	if (map_.entries().empty()) {
		auto map = map_checkpoint(env_, gpus, {}, {});
		if (!map)
			return std::move(map).error();
		map_ = std::move(*map);
	} else {
		for (uint32_t g : gpus.held)
			if (!map_.find_checkpointed(g))
				return make_error(EINVAL,
						  "%s: gpu 0x%04x is not among the GPUs this task's first KFD image "
						  "mapped (streamed images are mapped one KFD file at a time)",
						  kfd_image_name(id).c_str(), g);
	}
	return &(streamed_kfd_.insert_or_assign(id, std::move(img)).first->second);
}

} // namespace amdcr
