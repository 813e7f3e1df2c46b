// SPDX-License-Identifier: GPL-2.0-only
#include "device/kfd.h"

#include <fcntl.h>
#include <linux/kfd_ioctl.h>
#include <sys/ioctl.h>

#include <cerrno>

#include "base/file_io.h"

namespace amdcr {

namespace {

static_assert(sizeof(kfd_ioctl_criu_args) == 56);
static_assert(sizeof(kfd_criu_device_bucket) == 16);
static_assert(sizeof(kfd_criu_bo_bucket) == 48);

uint64_t user_ptr(const void *p) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p)); }

const char *op_name(uint32_t op)
{
	switch (op) {
	case KFD_CRIU_OP_PROCESS_INFO:
		return "PROCESS_INFO";
	case KFD_CRIU_OP_CHECKPOINT:
		return "CHECKPOINT";
	case KFD_CRIU_OP_UNPAUSE:
		return "UNPAUSE";
	case KFD_CRIU_OP_RESTORE:
		return "RESTORE";
	case KFD_CRIU_OP_RESUME:
		return "RESUME";
	default:
		return "?";
	}
}

Status criu_op(const Kfd &kfd, kfd_ioctl_criu_args &args)
{
	const int r = kfd.ioctl(AMDKFD_IOC_CRIU_OP, &args);
	if (r < 0)
		return errno_error(r, strprintf("KFD CRIU_OP %s", op_name(args.op)));
	return ok_status();
}

// Takes ownership of every fd the kernel installed, so none leaks whatever
// happens next.
UniqueFd take_fd(uint32_t fd)
{
	if (fd == KFD_INVALID_FD || fd > static_cast<uint32_t>(INT32_MAX))
		return UniqueFd();
	return UniqueFd(static_cast<int>(fd));
}

KfdBoBucket from_kernel(const kfd_criu_bo_bucket &b)
{
	KfdBoBucket out;
	out.addr = b.addr;
	out.size = b.size;
	out.offset = b.offset;
	out.restored_offset = b.restored_offset;
	out.gpu_id = b.gpu_id;
	out.alloc_flags = b.alloc_flags;
	out.dmabuf = take_fd(b.dmabuf_fd);
	return out;
}

} // namespace

Result<Kfd> Kfd::open(const std::string &path)
{
	auto fd = open_at(AT_FDCWD, path, O_RDWR | O_CLOEXEC);
	if (!fd)
		return std::move(fd).error();
	return Kfd(std::move(*fd));
}

int Kfd::ioctl(unsigned long request, void *arg) const
{
	for (int attempt = 0;; ++attempt) {
		if (::ioctl(fd_.get(), request, arg) == 0)
			return 0;
		const int err = errno;
		if ((err != EINTR && err != EAGAIN) || attempt >= kMaxRetries)
			return -err;
	}
}

Result<KfdVersion> Kfd::get_version() const
{
	kfd_ioctl_get_version_args args = {};
	const int r = ioctl(AMDKFD_IOC_GET_VERSION, &args);
	if (r < 0)
		return errno_error(r, "KFD GET_VERSION");
	return KfdVersion{args.major_version, args.minor_version};
}

Result<KfdProcessInfo> Kfd::process_info() const
{
	kfd_ioctl_criu_args args = {};
	args.op = KFD_CRIU_OP_PROCESS_INFO;
	if (auto st = criu_op(*this, args); !st)
		return std::move(st).error();
	KfdProcessInfo info;
	info.pid = args.pid;
	info.num_devices = args.num_devices;
	info.num_bos = args.num_bos;
	info.num_objects = args.num_objects;
	info.priv_data_size = args.priv_data_size;
	return info;
}

Result<KfdCheckpoint> Kfd::checkpoint(const KfdProcessInfo &info) const
{
	std::vector<kfd_criu_device_bucket> devs(info.num_devices);
	std::vector<kfd_criu_bo_bucket> bos(info.num_bos);
	std::vector<uint8_t> priv(info.priv_data_size);
	for (auto &b : bos)
		b.dmabuf_fd = KFD_INVALID_FD;

	// The kernel rejects NULL arrays even when they are empty.
	kfd_criu_device_bucket dev_dummy = {};
	kfd_criu_bo_bucket bo_dummy = {};
	uint8_t priv_dummy = 0;

	kfd_ioctl_criu_args args = {};
	args.op = KFD_CRIU_OP_CHECKPOINT;
	args.devices = user_ptr(devs.empty() ? &dev_dummy : devs.data());
	args.bos = user_ptr(bos.empty() ? &bo_dummy : bos.data());
	args.priv_data = user_ptr(priv.empty() ? &priv_dummy : priv.data());
	args.priv_data_size = info.priv_data_size;
	args.num_devices = info.num_devices;
	args.num_bos = info.num_bos;
	args.num_objects = info.num_objects;
	if (auto st = criu_op(*this, args); !st)
		return std::move(st).error();

	KfdCheckpoint out;
	out.bos.reserve(bos.size());
	for (const auto &b : bos)
		out.bos.push_back(from_kernel(b));
	out.devices.reserve(devs.size());
	for (const auto &d : devs)
		out.devices.push_back(KfdDeviceBucket{d.user_gpu_id, d.actual_gpu_id, -1});
	out.priv_data = std::move(priv);
	return out;
}

Status Kfd::unpause() const
{
	kfd_ioctl_criu_args args = {};
	args.op = KFD_CRIU_OP_UNPAUSE;
	return criu_op(*this, args);
}

Result<KfdRestored> Kfd::restore(const KfdRestoreRequest &req) const
{
	std::vector<kfd_criu_device_bucket> devs(req.devices.size());
	for (size_t i = 0; i < devs.size(); ++i) {
		const auto &d = req.devices[i];
		if (d.drm_fd < 0)
			return make_error(EINVAL, "KFD CRIU_OP RESTORE: device bucket %zu (gpu 0x%04x) has no render fd",
					  i, d.actual_gpu_id);
		devs[i].user_gpu_id = d.user_gpu_id;
		devs[i].actual_gpu_id = d.actual_gpu_id;
		devs[i].drm_fd = static_cast<uint32_t>(d.drm_fd);
	}
	std::vector<kfd_criu_bo_bucket> bos(req.bos.size());
	for (size_t i = 0; i < bos.size(); ++i) {
		const auto &b = req.bos[i];
		bos[i].addr = b.addr;
		bos[i].size = b.size;
		bos[i].offset = b.offset;
		bos[i].restored_offset = b.restored_offset;
		bos[i].gpu_id = b.gpu_id;
		bos[i].alloc_flags = b.alloc_flags;
		bos[i].dmabuf_fd = KFD_INVALID_FD;
	}

	kfd_ioctl_criu_args args = {};
	args.op = KFD_CRIU_OP_RESTORE;
	args.devices = user_ptr(devs.data());
	args.bos = user_ptr(bos.empty() ? nullptr : bos.data());
	args.priv_data = user_ptr(req.priv_data.data());
	args.priv_data_size = req.priv_data.size();
	args.num_devices = static_cast<uint32_t>(devs.size());
	args.num_bos = static_cast<uint32_t>(bos.size());
	args.num_objects = req.num_objects;
	if (auto st = criu_op(*this, args); !st)
		return std::move(st).error();

	KfdRestored out;
	out.bos.reserve(bos.size());
	for (const auto &b : bos)
		out.bos.push_back(from_kernel(b));
	return out;
}

Status Kfd::resume(uint32_t pid) const
{
	kfd_ioctl_criu_args args = {};
	args.op = KFD_CRIU_OP_RESUME;
	args.pid = pid;
	return criu_op(*this, args);
}

} // namespace amdcr
