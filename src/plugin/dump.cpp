// SPDX-License-Identifier: GPL-2.0-only
#include "plugin/dump.h"

#include <fcntl.h>
#include <unistd.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cerrno>

#include "base/log.h"
#include "copy/gpu_copy.h"
#include "device/hsakmt_shm.h"
#include "image/image_names.h"
#include "image/kfd_image.h"
#include "image/render_image.h"
#include "plugin/criu_api.h"
#include "plugin/summary.h"
#include "topology/device_entries.h"

namespace amdcr {

DumpSession::DumpSession(SessionEnv env) : env_(std::move(env)), devs_(DeviceNumbers::probe(env_.paths))
{
	auto t = SharedMemory<CopyStage>::create("the dump's copy totals");
	if (t)
		stage_.emplace(std::move(*t));
	else
		log_debug("no summary line for this dump: %s", t.error().message().c_str());
}

DumpSession::~DumpSession()
{
	if (!paused_.empty())
		(void)unpause_all();
}

const Topology *DumpSession::topology()
{
	if (!topo_)
		topo_.emplace(parse_topology(env_.paths.sys_root));
	return topo_->ok() ? &topo_->value() : nullptr;
}

const TopologyNode *DumpSession::amd_render_gpu(const struct stat &st)
{
	const Topology *topo = topology();
	if (!topo)
		return nullptr;
	const TopologyNode *gpu = topo->gpu_by_render_minor(minor(st.st_rdev));
	return gpu && gpu->accessible ? gpu : nullptr;
}

void DumpSession::claim()
{
	if (claimed_)
		return;
	claimed_ = true;
	criu::add_inventory_plugin(kPluginName);
}

Result<DumpBinding> DumpSession::binding_for(int id)
{
	if (!dump_id_) {
		auto drawn = new_dump_id();
		if (!drawn)
			return std::move(drawn).error();
		dump_id_ = *drawn;
		log_debug("dump identity %s", dump_id_text(*dump_id_).c_str());
	}
	return DumpBinding{*dump_id_, static_cast<uint32_t>(id)};
}

int DumpSession::handle_device_vma(int /*fd*/, const struct stat &st)
{
	switch (classify_device(st, devs_)) {
	case DeviceFile::Kfd:
		claim();
		return 0;
	case DeviceFile::Render:
		if (amd_render_gpu(st)) {
			claim();
			return 0;
		}
		break;
	case DeviceFile::Other:
		break;
	}
	return -ENOTSUP;
}

int DumpSession::dump_ext_file(int fd, int id)
{
	struct stat st {};
	if (::fstat(fd, &st) != 0) {
		log_debug("file %d: fstat: errno %d; not ours", id, errno);
		return -ENOTSUP;
	}
	Status status;
	switch (classify_device(st, devs_)) {
	case DeviceFile::Kfd:
		status = dump_kfd(fd, id);
		break;
	case DeviceFile::Render:
		if (const TopologyNode *gpu = amd_render_gpu(st)) {
			status = dump_render(fd, id, *gpu);
			break;
		}
		log_debug("file %d: render node %u is not an AMD GPU's", id, minor(st.st_rdev));
		return -ENOTSUP;
	case DeviceFile::Other: {
		bool ours = false;
		status = dump_dmabuf(fd, id, &ours);
		if (status && !ours)
			return -ENOTSUP;
		break;
	}
	}
	if (!status) {
		log_error("dump of file %d failed: %s", id, status.error().message().c_str());
		discard_created("a GPU file's dump failed");
		return status.error().neg();
	}
	claim();
	return 0;
}

Status DumpSession::unpause_all()
{
	// A process left paused is the worst outcome of a dump, so a failed
	// UNPAUSE is tried again a few times before it is reported.
	constexpr int kAttempts = 3;
	Status first;
	for (auto &p : paused_) {
		Status st;
		for (int attempt = 1; attempt <= kAttempts; attempt++) {
			st = p.kfd.unpause();
			if (st)
				break;
			log_warn("pid %u: GPU queues not resumed, attempt %d/%d: %s", p.pid, attempt, kAttempts,
				 st.error().message().c_str());
			if (attempt < kAttempts)
				::usleep(10000u << attempt);
		}
		if (!st) {
			log_error("pid %u: GPU queues could not be resumed: %s", p.pid, st.error().message().c_str());
			if (first)
				first = std::move(st);
		} else {
			log_debug("pid %u: GPU queues resumed", p.pid);
		}
		if (guardian_ && p.host_pid > 0)
			if (auto g = guardian_->unpaused(p.host_pid); !g)
				guardian_error(g.error().context(strprintf("pid %u", p.pid)));
	}
	paused_.clear();
	return first;
}

int DumpSession::dump_devices_late(int /*root_pid*/)
{
	if (auto st = unpause_all(); !st)
		return st.error().neg();
	// Not 0: the other plugins must see this hook too.
	return -ENOTSUP;
}

Result<ImageDir> DumpSession::image_dir()
{
	auto dir = session_image_dir(env_);
	if (dir) {
		tell_guardian_temp_files(*dir);
		created_.watch(*dir);
	}
	return dir;
}

void DumpSession::start_guardian()
{
	if (guardian_ || guardian_failed_)
		return;
	std::optional<int> dir_fd;
	if (auto dir = session_image_dir(env_); dir && !dir->streaming())
		dir_fd = dir->fd();
	auto g = Guardian::start(Guardian::Stage::Dump, dir_fd.value_or(-1));
	if (!g) {
		guardian_failed_ = true;
		log_warn("no guardian: if CRIU is killed during this dump, paused GPU queues stay paused and "
			 "temporary files stay: %s",
			 g.error().message().c_str());
		return;
	}
	guardian_.emplace(std::move(*g));
	log_debug("guardian started (pid %d)", static_cast<int>(guardian_->pid()));
}

void DumpSession::tell_guardian_temp_files(ImageDir &dir) const
{
	if (!guardian_ || dir.streaming())
		return;
	const Guardian *g = &*guardian_;
	dir.set_temp_observer([this, g](const std::string &temp) {
		if (auto st = g->temp_file(temp); !st)
			guardian_error(st.error());
	});
}

void DumpSession::guardian_error(const Error &e) const
{
	if (!guardian_ || !guardian_->ended()) {
		log_debug("%s", e.message().c_str());
		return;
	}
	if (guardian_lost_.exchange(true))
		return;
	log_warn("the guardian (pid %d) ended during the dump (killed?): if CRIU is killed now, paused GPU "
		 "queues stay paused and temporary image files stay (%s)",
		 static_cast<int>(guardian_->pid()), e.message().c_str());
}

void DumpSession::discard_created(const char *why)
{
	const size_t created = created_.size();
	if (created == 0)
		return;
	auto images = image_dir();
	if (!images) {
		log_error("%s, but its %zu image files cannot be removed: %s", why, created,
			  images.error().message().c_str());
		return;
	}
	if (images->streaming()) {
		// The streamer has them; CRIU fails the whole streamed dump.
		created_.clear();
		return;
	}
	const CreatedFiles::Removal r = created_.remove_all(*images, why);
	log_info("%s: removed the %zu GPU image files it had written (%zu replaced since, %zu gone, %zu not "
		 "removed) and put back the %zu older ones they had replaced; no other file of the directory "
		 "was touched",
		 why, r.removed, r.replaced, r.gone, r.failed, r.put_back);
}

void DumpSession::drop_replaced()
{
	auto images = image_dir();
	if (images && !images->streaming())
		created_.drop_kept(*images);
}

void DumpSession::write_manifest()
{
	if (!dump_id_ || created_.size() == 0)
		return;
	auto dir = image_dir();
	if (dir && dir->streaming()) {
		log_debug("streamed: no %s (CRIU's images reach the streamer only)", kDumpManifestName);
		return;
	}
	Status st = dir ? ok_status() : Status(std::move(dir).error());
	if (st) {
		auto criu = digest_criu_images(*dir);
		std::vector<std::string> gpu = created_.names();
		std::sort(gpu.begin(), gpu.end());
		gpu.erase(std::unique(gpu.begin(), gpu.end()), gpu.end());
		st = criu ? write_dump_manifest(*dir, DumpManifest{*dump_id_, std::move(*criu), std::move(gpu)})
			  : Status(std::move(criu).error());
	}
	if (!st)
		log_error("writing %s: %s: a restore of this checkpoint will refuse its GPU images",
			  kDumpManifestName, st.error().message().c_str());
	else
		log_debug("%s binds dump %s to CRIU's images", kDumpManifestName, dump_id_text(*dump_id_).c_str());
}

void DumpSession::finish(int ret)
{
	if (!paused_.empty()) {
		log_debug("dump ended (%d) before DUMP_DEVICES_LATE: resuming %zu paused processes", ret,
			  paused_.size());
		(void)unpause_all();
	}
	if (ret != 0) {
		discard_created("the dump failed");
	} else {
		write_manifest();
		drop_replaced();
	}
	if (ret == 0 && stage_ && (*stage_)->totals.files > 0)
		log_notice("%s", summary_line((*stage_)->totals, true, env_.config).c_str());
	if (guardian_) {
		if (guardian_->ended())
			guardian_error(Error(ESRCH, "found at the end of the dump"));
		if (auto st = guardian_->finish(); !st)
			log_warn("%s", st.error().message().c_str());
		guardian_.reset();
	}
}

} // namespace amdcr
