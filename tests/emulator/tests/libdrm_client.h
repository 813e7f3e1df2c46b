// SPDX-License-Identifier: GPL-2.0-only
//
// libdrm_amdgpu client helpers shared by the emulator's libdrm tests: a GPU
// opened through libdrm, BOs mapped into its GPU VA space, and SDMA linear
// copies submitted with amdgpu_cs_submit on the DMA IP.
#pragma once

#include "check.h"

#include <amdgpu.h>
#include <amdgpu_drm.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "testcommon/sdma_copy.h"

namespace kfdemu::test {

constexpr uint64_t kMaxPacket = testcommon::kSdmaMaxCopy; // the most one SDMA copy packet moves

struct Dev {
	const NodeDesc *desc = nullptr;
	int fd = -1;
	amdgpu_device_handle dev = nullptr;
	amdgpu_gpu_info info{};
};

// A Dev (not opened yet) for each GPU of `m`; a machine without one ends the
// test (exit 1).
inline std::vector<Dev> gpu_devs(const MachineDesc &m)
{
	std::vector<Dev> devs;
	for (const NodeDesc *g : gpu_nodes(m))
		devs.push_back(Dev{g});
	if (devs.empty()) {
		std::printf("machine has no GPU\n");
		std::exit(1);
	}
	return devs;
}

// A BO mapped into the device's GPU VA space.
struct Mapped {
	amdgpu_bo_handle bo = nullptr;
	amdgpu_va_handle va_handle = nullptr;
	uint64_t va = 0, size = 0;
	void *cpu = nullptr;	// CPU view (GTT map or the user pages)
	bool ok = false;

	void map_va(amdgpu_device_handle dev)
	{
		ok = CHECK_EQ(amdgpu_va_range_alloc(dev, amdgpu_gpu_va_range_general, size, 4096, 0, &va,
						    &va_handle, 0), 0) &&
		     CHECK_EQ(amdgpu_bo_va_op(bo, 0, size, va, 0, AMDGPU_VA_OP_MAP), 0);
	}
	void release(bool cpu_mapped)
	{
		if (va_handle) {
			amdgpu_bo_va_op(bo, 0, size, va, 0, AMDGPU_VA_OP_UNMAP);
			amdgpu_va_range_free(va_handle);
		}
		if (cpu_mapped && bo)
			amdgpu_bo_cpu_unmap(bo);
		if (bo)
			CHECK_EQ(amdgpu_bo_free(bo), 0);
	}
};

inline Mapped gtt(amdgpu_device_handle dev, uint64_t size)
{
	Mapped m;
	m.size = size;
	amdgpu_bo_alloc_request req{};
	req.alloc_size = size;
	req.phys_alignment = 4096;
	req.preferred_heap = AMDGPU_GEM_DOMAIN_GTT;
	if (!CHECK_EQ(amdgpu_bo_alloc(dev, &req, &m.bo), 0))
		return m;
	if (!CHECK_EQ(amdgpu_bo_cpu_map(m.bo, &m.cpu), 0))
		return m;
	m.map_va(dev);
	return m;
}

inline Mapped userptr(amdgpu_device_handle dev, void *mem, uint64_t size)
{
	Mapped m;
	m.size = size;
	m.cpu = mem;
	if (!CHECK_EQ(amdgpu_create_bo_from_user_mem(dev, mem, size, &m.bo), 0))
		return m;
	m.map_va(dev);
	return m;
}

// Runs one SDMA linear copy of `n` bytes from `src` to `dst` (GPU VAs)
// on `d`'s DMA ring (testcommon::sdma_copy_ib), and waits for it.
inline bool sdma_copy(Dev &d, const std::vector<amdgpu_bo_handle> &bos, uint64_t src, uint64_t dst, uint64_t n)
{
	const uint64_t ib_dw = testcommon::sdma_copy_ib_dwords(n);
	Mapped ib = gtt(d.dev, (ib_dw * 4 + 4095) / 4096 * 4096);
	if (!ib.ok)
		return false;
	testcommon::sdma_copy_ib(static_cast<uint32_t *>(ib.cpu), src, dst, n);
	std::vector<amdgpu_bo_handle> all = bos;
	all.push_back(ib.bo);
	amdgpu_bo_list_handle list = nullptr;
	amdgpu_context_handle ctx = nullptr;
	bool ok = CHECK_EQ(amdgpu_bo_list_create(d.dev, uint32_t(all.size()), all.data(), nullptr, &list), 0) &&
		  CHECK_EQ(amdgpu_cs_ctx_create(d.dev, &ctx), 0);
	if (ok) {
		amdgpu_cs_ib_info ibi{};
		ibi.ib_mc_address = ib.va;
		ibi.size = uint32_t(ib_dw);
		amdgpu_cs_request req{};
		req.ip_type = AMDGPU_HW_IP_DMA;
		req.resources = list;
		req.number_of_ibs = 1;
		req.ibs = &ibi;
		ok = CHECK_EQ(amdgpu_cs_submit(ctx, 0, &req, 1), 0);
		CHECK(req.seq_no >= 1);
		amdgpu_cs_fence f{};
		f.context = ctx;
		f.ip_type = AMDGPU_HW_IP_DMA;
		f.fence = req.seq_no;
		uint32_t expired = 0;
		ok = ok && CHECK_EQ(amdgpu_cs_query_fence_status(&f, AMDGPU_TIMEOUT_INFINITE, 0, &expired), 0) &&
		     CHECK_EQ(expired, 1u);
	}
	if (ctx)
		amdgpu_cs_ctx_free(ctx);
	if (list)
		amdgpu_bo_list_destroy(list);
	ib.release(true);
	return ok;
}

inline void *pages(uint64_t size)
{
	void *p = nullptr;
	if (posix_memalign(&p, 4096, size))
		return nullptr;
	return p;
}


} // namespace kfdemu::test
