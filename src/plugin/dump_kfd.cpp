// SPDX-License-Identifier: GPL-2.0-only
//
// The dump of a /dev/kfd file: the process's KFD state (CRIU_OP) and its
// buffers' contents.
#include "plugin/dump.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <string>

#include "base/log.h"
#include "copy/gpu_copy.h"
#include "device/hsakmt_shm.h"
#include "device/processes.h"
#include "image/image_names.h"
#include "image/kfd_chain.h"
#include "image/kfd_image.h"
#include "plugin/summary.h"
#include "topology/device_entries.h"

namespace amdcr {

namespace {

// KFD recreates a process's state only in the process that opens /dev/kfd
// at restore (its open makes the opener's KFD process), and CRIU restores
// a file several dumped processes hold in the one of lowest pid (the
// others receive it from that one). So the file `holders` hold
// (traced_processes_holding), paused as process `owner`'s (PROCESS_INFO's pid, in its own namespace,
// as pstree.img has it), can be restored only when no process of lower
// pid that CRIU dumps holds it too (one it was sent to over a Unix
// socket). Refused now, while the processes can run on, instead of at the
// restore.
Status check_restorable_in_owner(const std::vector<pid_t> &holders, uint32_t owner)
{
	pid_t first = static_cast<pid_t>(owner);
	for (pid_t holder : holders) {
		auto st = read_proc_status(holder);
		if (st && st->innermost > 0 && st->innermost < first)
			first = st->innermost;
	}
	if (first == static_cast<pid_t>(owner))
		return ok_status();
	return make_error(ENOTSUP,
			  "pid %u's /dev/kfd file is also held by pid %d, which CRIU would restore it in (of the "
			  "processes holding a file, the one of lowest pid opens it); KFD recreates GPU state only "
			  "in the process that opens /dev/kfd, so this checkpoint could not be restored",
			  owner, static_cast<int>(first));
}

// The GPUs of checkpoint `ck` (of CRIU file `id`) as devices of `img`, in
// the order `topo`'s nodes directory lists them (after the CPUs already
// there), and the copy job of each.
Result<std::vector<GpuCopyJob>> add_gpus(const SessionEnv &env, const Topology &topo, const KfdCheckpoint &ck, int id,
					 KfdImage &img)
{
	std::vector<GpuCopyJob> jobs;
	for (const auto &b : ck.devices) {
		const TopologyNode *gpu = topo.gpu(b.actual_gpu_id);
		if (!gpu || !gpu->accessible)
			return make_error(ENODEV,
					  "the driver reports gpu 0x%04x (user id 0x%04x), which the KFD "
					  "topology does not list as accessible",
					  b.actual_gpu_id, b.user_gpu_id);
		img.devices.push_back(device_from_node(topo, *gpu, b.user_gpu_id));
		GpuCopyJob job;
		job.image_gpu_id = b.user_gpu_id;
		job.render_path = env.paths.render_path(gpu->drm_render_minor);
		job.pages_file = kfd_pages_image_name(id, b.user_gpu_id);
		job.checksums = env.config.verify;
		jobs.push_back(std::move(job));
	}
	// In the order the nodes directory lists them, as upstream's plugin
	// writes them: its restore takes the first compatible local GPU in
	// that listing for each entry, so on the machine of the dump each GPU
	// keeps its identity only when the entries come in this order (node
	// order swapped 2 GPUs where readdir lists them in reverse). Our
	// restore does not depend on the order.
	auto listed = [&topo](const KfdDevice &d) {
		const TopologyNode *n = topo.node(d.node_id);
		return n ? n->listing_index : UINT32_MAX;
	};
	std::stable_sort(img.devices.begin(), img.devices.end(),
			 [&](const KfdDevice &a, const KfdDevice &b) { return listed(a) < listed(b); });
	return jobs;
}

// The BOs of checkpoint `ck` into `img`'s BO table, those with contents
// into the job of their GPU; for each job, the BO table index of each of
// its BOs.
Result<std::vector<std::vector<size_t>>> add_bos(const KfdCheckpoint &ck, std::vector<GpuCopyJob> &jobs, KfdImage &img)
{
	std::vector<std::vector<size_t>> job_bo_index(jobs.size());
	for (size_t i = 0; i < ck.bos.size(); i++) {
		const KfdBoBucket &b = ck.bos[i];
		KfdBo bo{b.addr, b.size, b.offset, b.alloc_flags, b.gpu_id, kNoGemHandle, std::nullopt};
		if (bo.has_contents()) {
			auto job = std::find_if(jobs.begin(), jobs.end(), [&](const GpuCopyJob &j) {
				return j.image_gpu_id == b.gpu_id;
			});
			if (job == jobs.end())
				return make_error(EINVAL, "BO %zu at 0x%llx is on gpu 0x%04x, which has no device bucket",
						  i, static_cast<unsigned long long>(b.addr), b.gpu_id);
			if (!b.dmabuf.valid())
				return make_error(EINVAL, "BO %zu at 0x%llx: the driver gave no dma-buf for it",
						  i, static_cast<unsigned long long>(b.addr));
			job->bos.push_back({b.dmabuf.get(), b.size});
			job_bo_index[static_cast<size_t>(job - jobs.begin())].push_back(i);
		}
		img.bos.push_back(bo);
	}
	return job_bo_index;
}

} // namespace

Result<std::optional<ChainParent>> DumpSession::compare_with_parent(const ImageDir &images, uint32_t pid,
								  const KfdImage &img,
								  const std::vector<std::vector<size_t>> &job_bo_index,
								  std::vector<GpuCopyJob> &jobs,
								  std::optional<ParentKfdImage> &prev) const
{
	if (!env_.config.verify)
		return std::optional<ChainParent>(); // no checksums to compare: written whole
	std::string why;
	auto found = find_parent_kfd_image(images, pid, &why);
	if (!found) {
		log_warn("pid %u: every byte is written, the parent checkpoint is not used: %s", pid,
			 found.error().message().c_str());
		return std::optional<ChainParent>();
	}
	if (!*found) {
		log_debug("pid %u: a complete dump: %s", pid, why.c_str());
		return std::optional<ChainParent>();
	}
	prev = std::move(**found); // holds the checksums the jobs point to
	for (size_t j = 0; j < jobs.size(); j++)
		for (size_t i : job_bo_index[j]) {
			const KfdBo *same = same_bo(prev->img, img.bos[i]);
			jobs[j].parent_checksums.push_back(same && same->checksum ? &*same->checksum : nullptr);
		}
	log_debug("pid %u: incremental dump: compared with %s of the parent checkpoint", pid,
		  kfd_image_name(prev->id).c_str());
	return std::optional<ChainParent>(ChainParent{prev->img.binding->dump_id, static_cast<uint32_t>(prev->id)});
}

Status DumpSession::dump_kfd(int fd, int id)
{
	if (auto st = check_kfd_criu_support(env_.paths); !st)
		return st;
	ledger_.start_guardian();
	auto images = files_.image_dir();
	if (!images)
		return std::move(images).error();

	// Our own reference to the target's KFD file: it outlives CRIU's copy
	// and is what UNPAUSE goes through later.
	const int dup_fd = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (dup_fd < 0)
		return errno_error(errno, "dup of the /dev/kfd file");
	Kfd target = Kfd::adopt(UniqueFd(dup_fd));
	// The processes CRIU dumps that hold the file: frozen, so the same
	// before and after the pause.
	const std::vector<pid_t> holders = traced_processes_holding(target.fd());
	auto info = ledger_.pause(std::move(target), id, holders);
	if (!info)
		return std::move(info).error();
	const Kfd &kfd = ledger_.paused_kfd();
	if (auto st = check_restorable_in_owner(holders, info->pid); !st)
		return st;

	const Topology *topo = topology();
	if (!topo)
		return topo_->error().context("KFD topology");

	if (auto st = ensure_fd_room(info->num_bos); !st)
		return st;
	auto ck = kfd.checkpoint(*info);
	if (!ck)
		return std::move(ck).error();

	KfdImage img;
	img.pid = info->pid;
	img.num_of_objects = info->num_objects;
	img.priv_data = std::move(ck->priv_data);
	for (const TopologyNode *cpu : topo->cpus())
		img.devices.push_back(device_from_node(*topo, *cpu, 0));

	auto jobs = add_gpus(env_, *topo, *ck, id, img);
	if (!jobs)
		return std::move(jobs).error();
	auto job_bo_index = add_bos(*ck, *jobs, img);
	if (!job_bo_index)
		return std::move(job_bo_index).error();

	auto shm = read_hsakmt_shm(env_.paths.shm_dir);
	if (!shm)
		return std::move(shm).error().context("hsakmt shared memory");
	img.shared_mem_size = shm->size;
	img.shared_mem_magic = shm->magic;

	const std::string name = kfd_image_name(id);
	if (auto st = validate_kfd_image(img, name); !st)
		return st;

	std::optional<ParentKfdImage> prev;
	auto parent = compare_with_parent(*images, info->pid, img, *job_bo_index, *jobs, prev);
	if (!parent)
		return std::move(parent).error();
	// Deduplicated: needs the checksums (KFD_VERIFY) and a file to read
	// chunks back from (not streamed: a pipe cannot).
	if (env_.config.dedup && env_.config.verify && !images->streaming())
		for (auto &job : *jobs)
			job.dedup = &chunks_;

	// Contents first, metadata last: a KFD image under its final name
	// implies its pages files are complete. The files are the session's
	// once committed (DumpFiles, by inode): a dump that fails later
	// removes them (finish()), and no file it did not write.
	auto binding = files_.binding_for(id);
	if (!binding)
		return std::move(binding).error();
	for (auto &job : *jobs)
		job.pages_seal = binding->dump_id;
	auto copied = run_gpu_copies(Direction::GpuToFile, *images, *jobs, copy_settings(env_, shared_copies()));
	if (!copied)
		return std::move(copied).error();
	for (size_t j = 0; j < jobs->size(); j++) {
		auto &sums = (*copied)[j].checksums;
		if (!(*jobs)[j].checksums)
			continue; // KFD_VERIFY=0: the image says nothing of its contents
		if (sums.size() != (*job_bo_index)[j].size())
			return make_error(EIO, "gpu 0x%04x: %zu checksums for %zu BOs", (*jobs)[j].image_gpu_id,
					  sums.size(), (*job_bo_index)[j].size());
		for (size_t k = 0; k < sums.size(); k++)
			img.bos[(*job_bo_index)[j][k]].checksum = std::move(sums[k]);
		const auto &from = (*copied)[j].from_parent;
		for (size_t k = 0; k < from.size() && k < (*job_bo_index)[j].size(); k++)
			if (from[k]) {
				img.bos[(*job_bo_index)[j][k]].from_parent = from[k];
				img.parent = *parent; // a link of a chain only when a chunk is in the parent
			}
		const auto &dedup = (*copied)[j].dedup;
		for (size_t k = 0; k < dedup.size() && k < (*job_bo_index)[j].size(); k++)
			img.bos[(*job_bo_index)[j][k]].dedup = dedup[k];
	}
	img.binding = *binding;
	if (auto st = write_kfd_image(*images, id, img); !st)
		return st;
	log_debug("pid %u: wrote %s (%zu devices, %zu BOs)", info->pid, name.c_str(), img.devices.size(),
		  img.bos.size());
	if (shared_copies_)
		count_file((*shared_copies_)->totals, img.bos.size());
	if (!env_.dump_devices_late)
		return ledger_.unpause_all(); // no later hook will (CRIU 4.0-4.2.1)
	return ok_status();
}

} // namespace amdcr
