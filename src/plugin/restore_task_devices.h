// SPDX-License-Identifier: GPL-2.0-only
//
// TaskDevices: the GPUs one restored task restores onto (a part of
// TaskRestore, plugin/restore_task.h; restore_task_devices.cpp).
//
// The plan maps the checkpointed GPUs in CRIU's main process, on the host
// (plugin/restore_plan.h); the task that gets the files may be in a
// container (its mount namespace, its device cgroup) that has only some of
// the host's render nodes. So before its first GPU file changes any state
// (fit), the task opens the mapped GPUs' nodes: when one is missing, the
// checkpoint is mapped again onto the GPUs the task can use, and when none
// fit, the restore is refused naming each missing node and that the
// runtime must pass it in. With streamed images (criu --stream) the task
// maps the GPUs itself, at its first /dev/kfd file (add_streamed).
#pragma once

#include "base/result.h"
#include "image/kfd_image.h"
#include "image/render_image.h"
#include "plugin/restore_plan.h"
#include "plugin/session.h"
#include "topology/mapping.h"

namespace amdcr {

class TaskDevices {
public:
	TaskDevices(const SessionEnv &env, const RestorePlan &plan) : env_(env), plan_(plan), map_(plan.gpu_map()) {}

	// The GPU map the task restores onto: the plan's, unless fit() mapped
	// it again (remapped()) or the task mapped streamed images.
	const GpuMap &map() const { return map_; }
	// fit() mapped the task's GPUs anew: CRIU's main process holds the
	// other mapping, so the task copies its own buffers.
	bool remapped() const { return remapped_; }
	// The KFD images the task restores from: the plan's, or with streamed
	// images those the task has read (add_streamed).
	const KfdImages &kfd_images() const { return plan_.streamed() ? streamed_kfd_ : plan_.kfd_images(); }
	const GpuMapEntry *mapping_for(const RenderNodeImage &img) const
	{
		return mapping_for_render(img, kfd_images(), map_);
	}

	// Before the task's first GPU file changes any state: /dev/kfd (for a
	// KFD file, `kfd_file`) and every mapped GPU's render node must open in
	// the task's mount namespace and device cgroup; if a render node does
	// not, the map is made again onto the GPUs the task can use, and if none
	// fit, the error names each missing node and the --device that passes
	// it in. Once it succeeded, it is not done again in this task.
	Status fit(bool kfd_file);
	// Streamed images: KFD image `img` of CRIU file `id`, read and checked
	// by the caller, kept; the GPUs are mapped at the task's first one, and
	// a later one's must be among them. Returns the image kept.
	Result<const KfdImage *> add_streamed(int id, KfdImage img);

private:
	Result<GpuMap> map_for_task() const;

	const SessionEnv &env_;
	const RestorePlan &plan_;
	GpuMap map_;
	KfdImages streamed_kfd_; // criu --stream: the KFD images this task read
	bool fitted_ = false;
	bool remapped_ = false;
};

} // namespace amdcr
