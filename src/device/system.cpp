// SPDX-License-Identifier: GPL-2.0-only
#include "device/system.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstring>
#include <sys/sysmacros.h>

#include "base/file_io.h"
#include "device/kfd.h"
#include "base/drm.h"

namespace amdcr {

std::string SystemPaths::render_path(uint32_t minor) const
{
	return dev_dir + "/dri/renderD" + std::to_string(minor);
}

DeviceNumbers DeviceNumbers::probe(const SystemPaths &paths)
{
	DeviceNumbers d;
	struct stat st {};
	if (::stat(paths.kfd_path().c_str(), &st) == 0 && S_ISCHR(st.st_mode))
		d.kfd = st.st_rdev;
	if (::stat(paths.render_path(kFirstRenderMinor).c_str(), &st) == 0 && S_ISCHR(st.st_mode))
		d.drm_major = major(st.st_rdev);
	return d;
}

DeviceFile classify_device(const struct stat &st, const DeviceNumbers &devs)
{
	if (!S_ISCHR(st.st_mode))
		return DeviceFile::Other;
	if (devs.kfd && major(st.st_rdev) == major(*devs.kfd) && minor(st.st_rdev) == 0)
		return DeviceFile::Kfd;
	if (devs.drm_major && major(st.st_rdev) == *devs.drm_major &&
	    minor(st.st_rdev) >= kFirstRenderMinor && minor(st.st_rdev) <= kLastRenderMinor)
		return DeviceFile::Render;
	return DeviceFile::Other;
}

namespace {
// KFD ioctl interface versions with the CRIU op.
constexpr uint32_t kKfdMajor = 1;
constexpr uint32_t kKfdMinCriuMinor = 8;
} // namespace

Status check_kfd_criu_support(const SystemPaths &paths)
{
	auto own = Kfd::open(paths.kfd_path());
	if (!own)
		return std::move(own).error();
	auto v = own->get_version();
	if (!v)
		return std::move(v).error();
	if (v->major != kKfdMajor || v->minor < kKfdMinCriuMinor)
		return make_error(EPROTONOSUPPORT,
				  "CR not supported by the kernel driver: KFD ioctl interface %u.%u, "
				  "checkpoint/restore needs %u.%u or newer",
				  v->major, v->minor, kKfdMajor, kKfdMinCriuMinor);
	return ok_status();
}

Status ensure_fd_room(uint64_t more)
{
	struct rlimit rl {};
	if (::getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return errno_error(errno, "getrlimit(RLIMIT_NOFILE)");
	// How many fds are open, from /proc/self/fd (cheap next to what
	// follows); the count includes ".", ".." and the directory's own fd.
	uint64_t open_fds = 0;
	if (DIR *d = ::opendir("/proc/self/fd")) {
		while (::readdir(d))
			open_fds++;
		::closedir(d);
	}
	const uint64_t need = open_fds + more + 64;
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur >= need)
		return ok_status();
	const rlim_t hard = rl.rlim_max;
	rl.rlim_cur = need;
	if (hard != RLIM_INFINITY && hard < need)
		rl.rlim_max = need; // allowed with CAP_SYS_RESOURCE, as CRIU runs
	if (::setrlimit(RLIMIT_NOFILE, &rl) != 0)
		return make_error(EMFILE,
				  "%llu more file descriptors are needed (one dma-buf per GPU buffer), "
				  "but RLIMIT_NOFILE's hard limit is %llu and cannot be raised: %s "
				  "(raise it, e.g. ulimit -Hn %llu)",
				  static_cast<unsigned long long>(more), static_cast<unsigned long long>(hard),
				  std::strerror(errno), static_cast<unsigned long long>(need));
	return ok_status();
}

Result<UniqueFd> open_render_node(const SystemPaths &paths, uint32_t minor)
{
	return open_at(AT_FDCWD, paths.render_path(minor), O_RDWR);
}

} // namespace amdcr
