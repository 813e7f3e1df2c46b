// SPDX-License-Identifier: GPL-2.0-only
//
// TaskRenderFiles (plugin/restore_task_files.h): a restored task's render
// node files, opened above its fds, then borrowed from it.
#include "plugin/restore_task_files.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <iterator>

#include "base/log.h"
#include "device/processes.h"
#include "image/image_names.h"
#include "plugin/criu_api.h"

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

} // namespace

bool TaskRenderFiles::Use::clashes(const RenderNodeImage &img) const
{
	bool clash = false;
	for (const DrmBo &bo : img.bos) {
		clash |= handles.count(bo.handle) != 0;
		for (const DrmVm &vm : bo.vms) {
			auto next = vas.lower_bound(vm.addr);
			clash |= next != vas.end() && next->first < vm.addr + vm.size;
			clash |= next != vas.begin() && std::prev(next)->second > vm.addr;
		}
	}
	return clash;
}

void TaskRenderFiles::Use::add(int id, const RenderNodeImage &img)
{
	if (!ids.insert(id).second)
		return;
	for (const DrmBo &bo : img.bos) {
		handles.insert(bo.handle);
		for (const DrmVm &vm : bo.vms)
			vas.emplace(vm.addr, vm.addr + vm.size);
	}
}

Result<UniqueFd> TaskRenderFiles::open_file(uint32_t minor) const
{
	auto fd = open_render_node(paths_, minor);
	if (!fd)
		return std::move(fd).error();
	return move_fd_high(std::move(*fd));
}

Result<int> TaskRenderFiles::node_file(uint32_t minor)
{
	if (auto it = node_files_.find(minor); it != node_files_.end())
		return it->second.fd();
	auto high = open_file(minor);
	if (!high)
		return std::move(high).error();
	const int raw = high->get();
	node_files_.emplace(minor, File{std::move(*high), -1});
	return raw;
}

Result<std::pair<int, int>> TaskRenderFiles::file_for(uint32_t minor, int id, const RenderNodeImage &img)
{
	if (auto it = own_files_.find(id); it != own_files_.end())
		return std::pair{it->second.second.fd(), id}; // CRIU asked again (retry)
	Use &use = node_use_[minor];
	if (use.ids.count(id) || !use.clashes(img)) {
		auto fd = node_file(minor);
		if (!fd)
			return std::move(fd).error();
		use.add(id, img);
		return std::pair{*fd, -1};
	}
	auto high = open_file(minor);
	if (!high)
		return std::move(high).error();
	const int raw = high->get();
	own_files_.emplace(id, std::pair{minor, File{std::move(*high), -1}});
	log_debug("%s: its GEM handles or GPU VAs clash with those of another file of renderD%u in this task: "
		  "restored as an open file of its own",
		  render_image_name(id).c_str(), minor);
	return std::pair{raw, id};
}

int TaskRenderFiles::fd(uint32_t minor, int file_id) const
{
	return file_id < 0 ? node_files_.at(minor).fd() : own_files_.at(file_id).second.fd();
}

void TaskRenderFiles::borrow_from_task()
{
	if (borrowed_)
		return;
	borrowed_ = true;
	auto borrow = [](uint32_t minor, File &file) {
		const auto theirs = fd_on_same_file(0, file.ours.get());
		if (!theirs)
			return; // the task holds none: ours stays (as upstream's does)
		file.borrowed = *theirs;
		file.ours.reset();
		log_debug("renderD%u: mapped through the task's own fd %d", minor, *theirs);
	};
	for (auto &[minor, file] : node_files_)
		borrow(minor, file);
	for (auto &[id, file] : own_files_)
		borrow(file.first, file.second);
}

} // namespace amdcr
