// SPDX-License-Identifier: GPL-2.0-only
//
// libhsakmt's shared memory: recorded at dump (size, magic), recreated at
// restore only when missing, never overwritten when present.
#include <criterion/criterion.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "device/hsakmt_shm.h"

using namespace amdcr;
namespace fs = std::filesystem;

namespace {

std::string scratch()
{
	char tmpl[] = "/tmp/amdcr-shm-XXXXXX";
	cr_assert_not_null(mkdtemp(tmpl));
	return tmpl;
}

void write_file(const std::string &path, const void *data, size_t len, off_t size)
{
	const int fd = open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0600);
	cr_assert(fd >= 0);
	cr_assert_eq(ftruncate(fd, size), 0);
	cr_assert_eq(pwrite(fd, data, len, 0), static_cast<ssize_t>(len));
	close(fd);
}

} // namespace

Test(hsakmt_shm, absent_is_size_zero)
{
	const std::string dir = scratch();
	auto s = read_hsakmt_shm(dir);
	cr_assert(s.ok());
	cr_expect_eq(s->size, 0u);
	cr_expect(restore_hsakmt_shm(dir, *s).ok(), "nothing to restore is not an error");
	cr_expect_not(fs::exists(dir + "/hsakmt_shared_mem"));
	fs::remove_all(dir);
}

Test(hsakmt_shm, recorded_and_recreated)
{
	const std::string dir = scratch();
	const uint32_t magic = 0x54415348; // HSA_PERF_MAGIC4CC
	write_file(dir + "/hsakmt_shared_mem", &magic, sizeof(magic), 8);
	auto s = read_hsakmt_shm(dir);
	cr_assert(s.ok());
	cr_expect_eq(s->size, 8u);
	cr_expect_eq(s->magic, magic);

	fs::remove(dir + "/hsakmt_shared_mem");
	cr_assert(restore_hsakmt_shm(dir, *s).ok());
	auto back = read_hsakmt_shm(dir);
	cr_assert(back.ok());
	cr_expect_eq(back->size, 8u);
	cr_expect_eq(back->magic, magic);
	fs::remove_all(dir);
}

Test(hsakmt_shm, existing_memory_is_left_alone)
{
	const std::string dir = scratch();
	const uint32_t live[2] = {0x54415348, 7}; // a counter another process uses
	write_file(dir + "/hsakmt_shared_mem", live, sizeof(live), 8);
	cr_assert(restore_hsakmt_shm(dir, {8, 0x11111111}).ok());
	const int fd = open((dir + "/hsakmt_shared_mem").c_str(), O_RDONLY | O_CLOEXEC);
	uint32_t now[2] = {};
	cr_assert_eq(pread(fd, now, sizeof(now), 0), static_cast<ssize_t>(sizeof(now)));
	close(fd);
	cr_expect_eq(now[0], live[0]);
	cr_expect_eq(now[1], 7u);
	fs::remove_all(dir);
}
