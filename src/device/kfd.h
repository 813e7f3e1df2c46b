// SPDX-License-Identifier: GPL-2.0-only
//
// Typed wrapper over /dev/kfd: GET_VERSION and the five CRIU_OP operations.
//
// Every call goes through one ioctl chokepoint (Kfd::ioctl) that returns 0
// or -errno and retries EINTR/EAGAIN a bounded number of times. Each wrapper
// zero-initialises the kernel struct, fills it, calls the chokepoint and
// returns a domain type; the raw kernel structs stay in kfd.cpp.
//
// dma-buf fds the kernel installs in our fd table (CHECKPOINT, RESTORE) are
// owned by the returned objects as UniqueFds; KFD_INVALID_FD becomes an
// invalid UniqueFd.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "base/unique_fd.h"

namespace amdcr {

struct KfdVersion {
	uint32_t major = 0;
	uint32_t minor = 0;
};

// PROCESS_INFO's answer (the target's queues are paused from then on).
struct KfdProcessInfo {
	uint32_t pid = 0; // in the target's own pid namespace
	uint32_t num_devices = 0;
	uint32_t num_bos = 0;
	uint32_t num_objects = 0;
	uint64_t priv_data_size = 0;
};

struct KfdDeviceBucket {
	uint32_t user_gpu_id = 0;
	uint32_t actual_gpu_id = 0;
	// RESTORE only: a render-node fd (not owned here) for actual_gpu_id.
	// -1 when unused (CHECKPOINT does not fill it).
	int drm_fd = -1;
};

struct KfdBoBucket {
	uint64_t addr = 0;
	uint64_t size = 0;
	uint64_t offset = 0;
	uint64_t restored_offset = 0; // RESTORE output
	uint32_t gpu_id = 0;	      // the user gpu_id
	uint32_t alloc_flags = 0;
	// The dma-buf the kernel installed for a VRAM/GTT BO (CHECKPOINT and
	// RESTORE outputs); invalid for other BO types. Ignored as an input.
	UniqueFd dmabuf;
};

struct KfdCheckpoint {
	std::vector<KfdDeviceBucket> devices;
	std::vector<KfdBoBucket> bos;
	std::vector<uint8_t> priv_data; // opaque, stored verbatim in the image
};

// What RESTORE needs: the saved buckets (BO dmabuf fields are ignored), the
// opaque priv data and the saved object count.
struct KfdRestoreRequest {
	std::span<const KfdDeviceBucket> devices;
	std::span<const KfdBoBucket> bos;
	std::span<const uint8_t> priv_data;
	uint32_t num_objects = 0;
};

// RESTORE's outputs, one per requested BO bucket, in the same order:
// every field as the kernel wrote it back (restored_offset, dmabuf).
struct KfdRestored {
	std::vector<KfdBoBucket> bos;
};

class Kfd {
public:
	static constexpr const char *kDefaultPath = "/dev/kfd";
	// Bounded retries of EINTR/EAGAIN in the chokepoint.
	static constexpr int kMaxRetries = 200;

	// Opens the KFD node (path injectable for tests).
	static Result<Kfd> open(const std::string &path = kDefaultPath);
	// Takes ownership of an fd already open on KFD (e.g. a dup of the fd
	// drained from the target).
	static Kfd adopt(UniqueFd fd) { return Kfd(std::move(fd)); }

	Kfd(Kfd &&) noexcept = default;
	Kfd &operator=(Kfd &&) noexcept = default;

	int fd() const { return fd_.get(); }

	// The chokepoint: 0 or -errno. Does not log.
	int ioctl(unsigned long request, void *arg) const;

	Result<KfdVersion> get_version() const;

	// CRIU_OP PROCESS_INFO (pauses the target's queues).
	Result<KfdProcessInfo> process_info() const;
	// CRIU_OP CHECKPOINT, sized by a preceding process_info().
	Result<KfdCheckpoint> checkpoint(const KfdProcessInfo &info) const;
	// CRIU_OP UNPAUSE.
	Status unpause() const;
	// CRIU_OP RESTORE, in the restored process on its own KFD fd.
	Result<KfdRestored> restore(const KfdRestoreRequest &req) const;
	// CRIU_OP RESUME of `pid` (in the caller's pid namespace). ESRCH means
	// the pid has no KFD process.
	Status resume(uint32_t pid) const;

private:
	explicit Kfd(UniqueFd fd) : fd_(std::move(fd)) {}
	UniqueFd fd_;
};

} // namespace amdcr
