// SPDX-License-Identifier: GPL-2.0-only
#include "device/hsakmt_shm.h"

#include <fcntl.h>
#include <semaphore.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/file_io.h"

namespace amdcr {
namespace {

constexpr const char *kShmName = "hsakmt_shared_mem";
constexpr const char *kSemName = "hsakmt_semaphore";

} // namespace

Result<HsakmtShm> read_hsakmt_shm(const std::string &shm_dir)
{
	const std::string path = shm_dir + "/" + kShmName;
	auto fd = open_at(AT_FDCWD, path, O_RDONLY);
	if (!fd) {
		if (fd.error().code() == ENOENT)
			return HsakmtShm{};
		return std::move(fd).error();
	}
	struct stat st {};
	if (::fstat(fd->get(), &st) != 0)
		return errno_error(errno, "stat " + path);
	HsakmtShm s;
	s.size = static_cast<uint64_t>(st.st_size);
	if (s.size >= sizeof(s.magic)) {
		auto n = read_full(fd->get(), &s.magic, sizeof(s.magic));
		if (!n)
			return std::move(n).error().context(path);
	}
	return s;
}

Status restore_hsakmt_shm(const std::string &shm_dir, const HsakmtShm &state)
{
	if (state.size == 0)
		return ok_status();
	const std::string path = shm_dir + "/" + kShmName;
	auto fd = open_at(AT_FDCWD, path, O_RDWR | O_CREAT | O_EXCL, 0666);
	if (fd) {
		if (::ftruncate(fd->get(), static_cast<off_t>(state.size)) != 0)
			return errno_error(errno, "ftruncate " + path);
		if (auto st = pwrite_full(fd->get(), &state.magic, sizeof(state.magic), 0); !st)
			return std::move(st).error().context(path);
	} else if (fd.error().code() != EEXIST) {
		return std::move(fd).error();
	}
	sem_t *sem = ::sem_open(kSemName, O_CREAT, 0666, 1);
	if (sem == SEM_FAILED)
		return errno_error(errno, std::string("sem_open ") + kSemName);
	::sem_close(sem);
	return ok_status();
}

} // namespace amdcr
