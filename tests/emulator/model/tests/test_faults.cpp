// SPDX-License-Identifier: GPL-2.0-only
// Fault injection: the Nth matching call fails before doing anything;
// CRIU sub-ops; "*"; "sdma" Fail. Plus the counters that record calls.
#include "harness.h"

#include <criterion/criterion.h>

using namespace kfdemu;
using namespace kfdemu::testing;

Test(faults, nth_ioctl_by_name)
{
	Rig rig(make_machine({0x1111}));
	FakeCaller c(1000);
	int fd = rig.open_render(c, 128);
	rig.model->set_faults({FaultRule{"DRM_IOCTL_AMDGPU_GEM_CREATE", 2, ENOSPC}});
	long r;
	cr_assert_eq(rig.gem_create(c, fd, 4096, abi::drm::DOMAIN_VRAM, &r), 1);
	rig.gem_create(c, fd, 4096, abi::drm::DOMAIN_VRAM, &r);
	cr_assert_eq(r, -ENOSPC);
	// Nothing was done: the next handle is 2, and the rule fired once.
	cr_assert_eq(rig.gem_create(c, fd, 4096, abi::drm::DOMAIN_VRAM, &r), 2);
	cr_assert_eq(rig.gem_create(c, fd, 4096, abi::drm::DOMAIN_VRAM, &r), 3);
	std::string cnt = rig.model->introspect("counters");
	cr_assert(cnt.find("\"DRM_IOCTL_AMDGPU_GEM_CREATE\":4") != std::string::npos, "%s", cnt.c_str());
}

// `every`: the Nth matching call and each one after it fails (what a
// kernel that disables an ioctl answers), other ioctls do not.
Test(faults, every_call_from_the_nth)
{
	Rig rig(make_machine({0x1111}));
	FakeCaller c(1000);
	int fd = rig.open_render(c, 128);
	FaultRule rule{"DRM_IOCTL_GEM_CHANGE_HANDLE", 2, EINVAL};
	rule.every = true;
	rig.model->set_faults({rule});
	long r;
	cr_assert_eq(rig.gem_create(c, fd, 4096, abi::drm::DOMAIN_GTT, &r), 1);
	abi::drm::GemChangeHandle ch{1, 5};
	cr_assert_eq(rig.drm(c, fd, abi::drm::GEM_CHANGE_HANDLE, &ch), 0, "the first call is not the 2nd");
	for (uint32_t to : {6u, 7u, 8u}) {
		ch = abi::drm::GemChangeHandle{5, to};
		cr_assert_eq(rig.drm(c, fd, abi::drm::GEM_CHANGE_HANDLE, &ch), -EINVAL, "call to %u", to);
	}
	cr_assert_eq(rig.gem_create(c, fd, 4096, abi::drm::DOMAIN_GTT, &r), 1, "other ioctls unaffected");
	cr_assert_neq(rig.gem_mmap_offset(c, fd, 5), 0u, "the BO stayed at 5");
}

Test(faults, star_and_reset)
{
	Rig rig(make_machine({0x1111}));
	FakeCaller c(1000);
	int fd = rig.open_render(c, 128);
	rig.model->set_faults({FaultRule{"*", 3}});
	abi::drm::GetCap cap{abi::drm::CAP_PRIME, 0};
	cr_assert_eq(rig.drm(c, fd, abi::drm::GET_CAP, &cap), 0);
	cr_assert_eq(rig.drm(c, fd, abi::drm::GET_CAP, &cap), 0);
	cr_assert_eq(rig.drm(c, fd, abi::drm::GET_CAP, &cap), -EIO);
	cr_assert_eq(rig.drm(c, fd, abi::drm::GET_CAP, &cap), 0);
	rig.model->set_faults({FaultRule{"*", 1}});
	rig.model->set_faults({});
	cr_assert_eq(rig.drm(c, fd, abi::drm::GET_CAP, &cap), 0, "rules replaced");
}

Test(faults, criu_sub_op)
{
	Rig rig(make_machine({0x1111}));
	FakeCaller app(1000), dumper(500, true);
	dumper.traced.insert(1000);
	int kfd = rig.open_kfd(app);
	rig.model->set_faults({FaultRule{"CRIU_OP:CHECKPOINT", 1, EAGAIN}});
	abi::kfd::CriuArgs info{};
	info.op = abi::kfd::CRIU_PROCESS_INFO;
	cr_assert_eq(rig.kfd(dumper, kfd, abi::kfd::CRIU_OP, &info), 0, "another sub-op is not matched");
	std::vector<abi::kfd::CriuDeviceBucket> devs(info.num_devices);
	std::vector<uint8_t> priv(info.priv_data_size);
	abi::kfd::CriuArgs a = info;
	a.op = abi::kfd::CRIU_CHECKPOINT;
	a.devices = reinterpret_cast<uint64_t>(devs.data());
	a.bos = reinterpret_cast<uint64_t>(devs.data());
	a.priv_data = reinterpret_cast<uint64_t>(priv.data());
	cr_assert_eq(rig.kfd(dumper, kfd, abi::kfd::CRIU_OP, &a), -EAGAIN);
	cr_assert_eq(rig.kfd(dumper, kfd, abi::kfd::CRIU_OP, &a), 0, "retry succeeds");
	std::string cnt = rig.model->introspect("counters");
	cr_assert(cnt.find("\"CRIU_OP:CHECKPOINT\":2") != std::string::npos, "%s", cnt.c_str());
}

Test(faults, sdma_fail)
{
	Rig rig(make_machine({0x1111}));
	FakeCaller c(1000);
	int fd = rig.open_render(c, 128);
	uint32_t src = rig.gem_create(c, fd, 4096), dst = rig.gem_create(c, fd, 4096);
	uint32_t ibh = rig.gem_create(c, fd, 4096, abi::drm::DOMAIN_GTT);
	cr_assert_eq(rig.gem_va(c, fd, src, abi::drm::VA_OP_MAP, 0x100000000ull, 4096), 0);
	cr_assert_eq(rig.gem_va(c, fd, dst, abi::drm::VA_OP_MAP, 0x100001000ull, 4096), 0);
	cr_assert_eq(rig.gem_va(c, fd, ibh, abi::drm::VA_OP_MAP, 0x100002000ull, 4096), 0);
	auto *ib = static_cast<uint32_t *>(rig.map(c, fd, rig.gem_mmap_offset(c, fd, ibh), 4096));
	auto *d = static_cast<uint8_t *>(rig.map(c, fd, rig.gem_mmap_offset(c, fd, dst), 4096));
	auto *s = static_cast<uint8_t *>(rig.map(c, fd, rig.gem_mmap_offset(c, fd, src), 4096));
	std::memset(s, 7, 4096);
	std::vector<uint32_t> v;
	pkt_copy(v, 0x100000000ull, 0x100001000ull, 4096);
	pad_ib(v);
	std::memcpy(ib, v.data(), v.size() * 4);
	uint32_t ctx = rig.ctx_alloc(c, fd);
	rig.model->set_faults({FaultRule{"sdma", 2, EIO}});
	long r;
	uint64_t status;
	uint64_t q1 = rig.submit(c, fd, ctx, 0x100002000ull, static_cast<uint32_t>(v.size() * 4), &r);
	cr_assert_eq(rig.wait_cs(c, fd, ctx, q1, ~0ull, &status), 0);
	std::memset(d, 0, 4096);
	uint64_t q2 = rig.submit(c, fd, ctx, 0x100002000ull, static_cast<uint32_t>(v.size() * 4), &r);
	cr_assert_eq(r, 0, "the submission itself succeeds");
	cr_assert_eq(rig.wait_cs(c, fd, ctx, q2, ~0ull, &status), -EIO);
	cr_assert_eq(d[0], 0, "a failed job copies nothing");
	uint64_t q3 = rig.submit(c, fd, ctx, 0x100002000ull, static_cast<uint32_t>(v.size() * 4), &r);
	cr_assert_eq(rig.wait_cs(c, fd, ctx, q3, ~0ull, &status), 0);
	cr_assert_eq(d[4095], 7);
	munmap(ib, 4096);
	munmap(d, 4096);
	munmap(s, 4096);
}

Test(faults, open_is_injectable)
{
	Rig rig(make_machine({0x1111}));
	FakeCaller c(1000);
	rig.model->set_faults({FaultRule{"open:/dev/kfd", 1, EAGAIN}});
	cr_assert_eq(rig.open_kfd(c), -EAGAIN);
	cr_assert_geq(rig.open_kfd(c), 0);
}
