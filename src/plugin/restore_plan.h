// SPDX-License-Identifier: GPL-2.0-only
//
// RestorePlan: what the restore knows before any GPU state changes.
//
// Runs in CRIU's main process, at init(RESTORE) (RestorePlan::load), before
// CRIU forks the restored tasks; read-only afterwards: every task reads its
// inherited copy, and the parallel restore's thread reads the main
// process's. It holds every GPU image of the checkpoint (KFD, render node,
// dma-buf), read once and validated, its pages files complete; whether
// they were checked against CRIU's own files.img and pstree.img; the GPU map
// (the checkpointed GPUs onto this machine's); and how many files hold each
// shared BO.
//
// With streamed images (criu --stream), which can be neither listed nor
// read twice, the plan holds no image: each task reads the images of its
// files when CRIU restores them (plugin/restore_task.h).
//
// The functions below the class serve the plan and the tasks alike (a task
// maps the checkpoint again when its container lacks a GPU of the plan's,
// and maps streamed images itself).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>

#include "base/result.h"
#include "image/criu_images.h"
#include "image/image_dir.h"
#include "image/kfd_chain.h"
#include "image/kfd_image.h"
#include "image/render_image.h"
#include "plugin/session.h"
#include "topology/mapping.h"
#include "topology/topology.h"

namespace amdcr {

using KfdImages = std::map<int, KfdImage>; // by CRIU file id
// Where each GPU's bytes of a KFD image that is a link of a chain are
// (image/kfd_chain.h), by gpu_id.
using KfdChainPages = std::map<uint32_t, ChainPages>;

class RestorePlan {
public:
	// The checkpoint in `env`'s image directory, its CRIU inventory entry
	// consumed (a loaded plugin satisfies CRIU's check of the inventory's
	// plugin list). nullopt: nothing of ours to restore; an error: the
	// restore is refused (nothing changed yet).
	static Result<std::optional<RestorePlan>> load(const SessionEnv &env);

	// criu --stream: the tasks read each image when CRIU restores its file.
	bool streamed() const { return streamed_; }
	const KfdImages &kfd_images() const { return kfd_images_; }
	const KfdImage *kfd_image(int id) const;
	// nullptr unless KFD image `id` is a link of a chain (an incremental
	// checkpoint), resolved and checked at init.
	const KfdChainPages *kfd_chain(int id) const;
	// Its render minor resolved from the KFD images (resolve_render_minor).
	const RenderNodeImage *render_image(int id) const;
	const DmabufImage *dmabuf_image(int id) const;
	// The images were checked against CRIU's files.img and pstree.img, so
	// a KFD image must be restored in the task it was dumped from.
	bool bound_to_criu() const { return bound_to_criu_; }
	const GpuMap &gpu_map() const { return map_; }
	// How many files of the checkpoint hold shared BO `id`: with several,
	// they get it through the SharedBoTable (else its one render file
	// recreates it as a BO of its own).
	uint32_t holder_count(uint32_t id) const;
	bool shared_among_files(uint32_t id) const { return holder_count(id) > 1; }
	// The largest id of a BO shared among files (0: none): the size of
	// the SharedBoTable.
	uint32_t max_shared_id() const;

private:
	struct Ids;
	RestorePlan() = default;
	Status load_images(const SessionEnv &env, const ImageDir &images, Ids &ids);
	// What the task's RESTORE_EXT_FILE and UPDATE_VMA_MAP would find only
	// once GPU state exists: an import no file of the checkpoint holds, a
	// render node mapping of CRIU's (`criu`: its facts) no image gives
	// back.
	Status check_restorable(const ImageDir &images, const std::optional<CriuCheckpointFacts> &criu) const;

	bool streamed_ = false;
	bool bound_to_criu_ = false;
	KfdImages kfd_images_;
	std::map<int, KfdChainPages> kfd_chains_; // by CRIU file id
	std::map<int, RenderNodeImage> render_images_; // by CRIU file id
	std::map<int, DmabufImage> dmabuf_images_;     // by CRIU file id
	GpuMap map_;
	std::map<uint32_t, uint32_t> holder_counts_; // shared BO id -> files holding it
};

// The devices of some KFD images (by node id, their union) and the GPUs
// among them with state.
struct CheckpointedGpus {
	std::map<uint32_t, KfdDevice> devices;
	std::set<uint32_t> held;
	void add(const KfdImage &img);
	static CheckpointedGpus of(const KfdImages &images);
};

// The GPUs `gpus` holds mapped onto `local`, a local GPU being usable when
// its render node opens.
Result<GpuMap> map_held_gpus(const SessionEnv &env, const CheckpointedGpus &gpus, const Topology &local);
// The GPU mapping of a checkpoint onto this machine: the GPUs `gpus`
// holds, and the GPU of each render image of a process without /dev/kfd
// (`renders`; `kfd`: the KFD images) onto the local GPU with its gpu_id.
Result<GpuMap> map_checkpoint(const SessionEnv &env, const CheckpointedGpus &gpus, const KfdImages &kfd,
			      const std::map<int, RenderNodeImage> &renders);
// The mapping of the GPU a render image names (by gpu_id, else by its
// checkpointed minor in the KFD images `kfd`); nullptr when there is none.
const GpuMapEntry *mapping_for_render(const RenderNodeImage &img, const KfdImages &kfd, const GpuMap &map);
// The checkpointed minor a GPU had, from the KFD images (0: unknown).
uint32_t checkpointed_minor(const KfdImages &kfd, uint32_t image_gpu_id);
// A gpu_id-only render image (CRIU 4.0-4.2.1's) gets its render minor from
// the KFD images that list its GPU.
void resolve_render_minor(RenderNodeImage &img, const KfdImages &kfd);

// The images read with their checksums checked (unless KFD_VERIFY=0; the
// BOs' checksums then stay unread too), saying once per image what the
// check covered.
Result<KfdImage> read_checked_kfd_image(const ImageDir &images, int id, const Config &config);
Result<RenderNodeImage> read_checked_render_image(const ImageDir &images, int id, const Config &config);

} // namespace amdcr
