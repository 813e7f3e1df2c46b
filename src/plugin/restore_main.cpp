// SPDX-License-Identifier: GPL-2.0-only
#include "plugin/restore_main.h"

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <vector>

#include "device/kfd.h"
#include "image/image_names.h"
#include "plugin/restore_contents.h"

namespace amdcr {

int MainRestore::post_forking()
{
	// Always -ENOTSUP on success: the plugins after us get the hook too.
	ParallelRestore *parallel = fabric_.parallel();
	if (!parallel)
		return -ENOTSUP;
	if (auto st = parallel->start(); !st) {
		log_error("%s", st.error().message().c_str());
		return st.error().neg();
	}
	return -ENOTSUP;
}

int MainRestore::resume_devices_late(int pid)
{
	// -ENOTSUP unless the parallel restore failed: CRIU ignores this
	// hook's result (it only logs it at debug level), and a plugin loaded
	// after us may have GPUs of its own in the same process. Failures are
	// logged here.
	if (fabric_.parallel())
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
			fabric_.task_resumed(pid);
		return -ENOTSUP;
	}
	log_debug("pid %d: GPU queues resumed", pid);
	fabric_.task_resumed(pid);
	return -ENOTSUP;
}

Status MainRestore::copy_handed_over(const HandOver &h, const std::atomic<bool> &cancel, DeferredLog &log) const
{
	std::vector<int> fds;
	for (const auto &f : h.dmabufs)
		fds.push_back(f.get());
	std::vector<GpuCopyJob> jobs;
	if (h.kind == HandOverKind::Kfd) {
		const KfdImage *img = plan_.kfd_image(h.file_id);
		if (!img)
			return make_error(EINVAL, "file %d is not a KFD file of this checkpoint", h.file_id);
		auto j = kfd_copy_jobs(env_, h.file_id, *img, plan_.gpu_map(), plan_.kfd_chain(h.file_id), fds);
		if (!j)
			return std::move(j).error();
		jobs = std::move(*j);
	} else {
		const RenderNodeImage *img = plan_.render_image(h.file_id);
		if (!img)
			return make_error(EINVAL, "file %d is not a render node file of this checkpoint", h.file_id);
		const GpuMapEntry *m = mapping_for_render(*img, plan_.kfd_images(), plan_.gpu_map());
		if (!m)
			return make_error(EINVAL, "%s: its GPU has no local GPU", render_image_name(h.file_id).c_str());
		auto j = render_copy_job(env_, h.file_id, *img, *m, plan_, fds);
		if (!j)
			return std::move(j).error();
		jobs.push_back(std::move(*j));
	}
	auto images = session_image_dir(env_);
	if (!images)
		return std::move(images).error();
	return fill_from_images(*images, jobs, copy_settings(env_, fabric_.shared_copies(), &cancel, &log));
}

Status MainRestore::check_parallel(pid_t pid)
{
	std::vector<pid_t> senders;
	const bool first = !parallel_checked_;
	parallel_checked_ = true;
	auto st = fabric_.parallel()->finish(&senders);
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
