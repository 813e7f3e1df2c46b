// SPDX-License-Identifier: GPL-2.0-only
#include "plugin/dump.h"

#include <unistd.h>
#include <sys/sysmacros.h>

#include <cerrno>

#include "base/log.h"
#include "copy/gpu_copy.h"
#include "device/hsakmt_shm.h"
#include "image/image_names.h"
#include "image/kfd_image.h"
#include "image/render_image.h"
#include "plugin/summary.h"
#include "topology/device_entries.h"

namespace amdcr {

DumpSession::DumpSession(SessionEnv env)
	: env_(std::move(env)), devs_(DeviceNumbers::probe(env_.paths)), ledger_(env_),
	  files_(env_, [this](ImageDir &dir) { ledger_.watch_temp_files(dir); })
{
	auto t = SharedMemory<SharedCopies>::create("the dump's copy totals");
	if (t)
		shared_copies_.emplace(std::move(*t));
	else
		log_debug("no summary line for this dump: %s", t.error().message().c_str());
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

int DumpSession::handle_device_vma(int /*fd*/, const struct stat &st)
{
	switch (classify_device(st, devs_)) {
	case DeviceFile::Kfd:
		files_.add_to_inventory();
		return 0;
	case DeviceFile::Render:
		if (amd_render_gpu(st)) {
			files_.add_to_inventory();
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
		files_.discard_created("a GPU file's dump failed");
		return status.error().neg();
	}
	files_.add_to_inventory();
	return 0;
}

int DumpSession::dump_devices_late(int /*root_pid*/)
{
	if (auto st = ledger_.unpause_all(); !st)
		return st.error().neg();
	// Not 0: the other plugins must see this hook too.
	return -ENOTSUP;
}

void DumpSession::finish(int ret)
{
	ledger_.resume_left(ret);
	if (ret != 0) {
		files_.discard_created("the dump failed");
	} else {
		files_.write_manifest();
		files_.drop_replaced();
	}
	if (ret == 0 && shared_copies_ && (*shared_copies_)->totals.files > 0)
		log_notice("%s", summary_line((*shared_copies_)->totals, true, env_.config).c_str());
	ledger_.finish_guardian();
}

} // namespace amdcr
