// SPDX-License-Identifier: GPL-2.0-only
// Debian's libdrm_amdgpu 2.4.114 against the model (run under kfd-emu): the
// calls the plugin makes for an SDMA copy — device init, BO alloc, VA map,
// CPU map, BO list, context, CS on the DMA ring, fence wait, PRIME
// export/import — checked byte for byte. Exits non-zero on failure.
#include <amdgpu.h>
#include <amdgpu_drm.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <initializer_list>

#define CHECK(x)                                                                      \
	do {                                                                          \
		int r_ = (x);                                                         \
		if (r_ != 0) {                                                        \
			std::fprintf(stderr, "FAIL %s:%d: %s = %d\n", __FILE__, __LINE__, #x, r_); \
			return 1;                                                     \
		}                                                                     \
	} while (0)
#define EXPECT(c)                                                                     \
	do {                                                                          \
		if (!(c)) {                                                           \
			std::fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c); \
			return 1;                                                     \
		}                                                                     \
	} while (0)

int main()
{
	const uint64_t n = (5ull << 20) + 3; // beyond one packet, odd
	int fd = open("/dev/dri/renderD128", O_RDWR | O_CLOEXEC);
	EXPECT(fd >= 0);
	uint32_t maj = 0, min = 0;
	amdgpu_device_handle dev;
	CHECK(amdgpu_device_initialize(fd, &maj, &min, &dev));
	EXPECT(maj == 3);
	amdgpu_gpu_info gi{};
	CHECK(amdgpu_query_gpu_info(dev, &gi));
	EXPECT(gi.family_id >= AMDGPU_FAMILY_AI);

	amdgpu_bo_alloc_request req{};
	req.alloc_size = 8 << 20;
	req.phys_alignment = 4096;
	req.preferred_heap = AMDGPU_GEM_DOMAIN_VRAM;
	amdgpu_bo_handle src, dst, ib;
	CHECK(amdgpu_bo_alloc(dev, &req, &src));
	CHECK(amdgpu_bo_alloc(dev, &req, &dst));
	req.alloc_size = 4096;
	req.preferred_heap = AMDGPU_GEM_DOMAIN_GTT;
	CHECK(amdgpu_bo_alloc(dev, &req, &ib));
	uint64_t as, ad, ai;
	amdgpu_va_handle vs, vd, vi;
	CHECK(amdgpu_va_range_alloc(dev, amdgpu_gpu_va_range_general, 8 << 20, 4096, 0, &as, &vs, 0));
	CHECK(amdgpu_va_range_alloc(dev, amdgpu_gpu_va_range_general, 8 << 20, 4096, 0, &ad, &vd, 0));
	CHECK(amdgpu_va_range_alloc(dev, amdgpu_gpu_va_range_general, 4096, 4096, 0, &ai, &vi, 0));
	CHECK(amdgpu_bo_va_op(src, 0, 8 << 20, as, 0, AMDGPU_VA_OP_MAP));
	CHECK(amdgpu_bo_va_op(dst, 0, 8 << 20, ad, 0, AMDGPU_VA_OP_MAP));
	CHECK(amdgpu_bo_va_op(ib, 0, 4096, ai, 0, AMDGPU_VA_OP_MAP));
	void *ps, *pd, *pi;
	CHECK(amdgpu_bo_cpu_map(src, &ps));
	CHECK(amdgpu_bo_cpu_map(dst, &pd));
	CHECK(amdgpu_bo_cpu_map(ib, &pi));
	auto *s = static_cast<unsigned char *>(ps), *d = static_cast<unsigned char *>(pd);
	for (uint64_t i = 0; i < (8 << 20); ++i)
		s[i] = static_cast<unsigned char>(i * 13 + (i >> 12));
	std::memset(d, 0xcc, 8 << 20);

	// Hardware encoding (bytes - 1), at most 1<<22 bytes per packet.
	auto *w = static_cast<uint32_t *>(pi);
	uint32_t k = 0;
	for (uint64_t off = 0; off < n;) {
		uint64_t c = n - off < (1u << 22) ? n - off : (1u << 22);
		uint64_t sa = as + 1 + off, da = ad + 3 + off;
		uint32_t pkt[7] = {1, static_cast<uint32_t>(c - 1), 0, static_cast<uint32_t>(sa),
				   static_cast<uint32_t>(sa >> 32), static_cast<uint32_t>(da), static_cast<uint32_t>(da >> 32)};
		std::memcpy(w + k, pkt, sizeof pkt);
		k += 7;
		off += c;
	}
	while (k % 8)
		w[k++] = 0;

	amdgpu_context_handle ctx;
	CHECK(amdgpu_cs_ctx_create(dev, &ctx));
	amdgpu_bo_handle list[3] = {src, dst, ib};
	amdgpu_bo_list_handle bl;
	CHECK(amdgpu_bo_list_create(dev, 3, list, nullptr, &bl));
	amdgpu_cs_ib_info ibi{};
	ibi.ib_mc_address = ai;
	ibi.size = k;
	amdgpu_cs_request r{};
	r.ip_type = AMDGPU_HW_IP_DMA;
	r.number_of_ibs = 1;
	r.ibs = &ibi;
	r.resources = bl;
	CHECK(amdgpu_cs_submit(ctx, 0, &r, 1));
	EXPECT(r.seq_no == 1);
	amdgpu_cs_fence f{};
	f.context = ctx;
	f.ip_type = AMDGPU_HW_IP_DMA;
	f.fence = r.seq_no;
	uint32_t expired = 0;
	CHECK(amdgpu_cs_query_fence_status(&f, AMDGPU_TIMEOUT_INFINITE, 0, &expired));
	EXPECT(expired == 1);
	EXPECT(std::memcmp(d + 3, s + 1, n) == 0);
	EXPECT(d[2] == 0xcc && d[3 + n] == 0xcc);

	uint32_t dmabuf = 0;
	CHECK(amdgpu_bo_export(dst, amdgpu_bo_handle_type_dma_buf_fd, &dmabuf));
	EXPECT(lseek(static_cast<int>(dmabuf), 0, SEEK_END) == (8 << 20));
	amdgpu_bo_import_result ir{};
	CHECK(amdgpu_bo_import(dev, amdgpu_bo_handle_type_dma_buf_fd, dmabuf, &ir));
	EXPECT(ir.buf_handle == dst);
	CHECK(amdgpu_bo_free(ir.buf_handle));

	CHECK(amdgpu_bo_list_destroy(bl));
	CHECK(amdgpu_cs_ctx_free(ctx));
	for (auto *bo : {src, dst, ib})
		CHECK(amdgpu_bo_cpu_unmap(bo));
	CHECK(amdgpu_bo_va_op(src, 0, 8 << 20, as, 0, AMDGPU_VA_OP_UNMAP));
	CHECK(amdgpu_bo_va_op(dst, 0, 8 << 20, ad, 0, AMDGPU_VA_OP_UNMAP));
	CHECK(amdgpu_bo_va_op(ib, 0, 4096, ai, 0, AMDGPU_VA_OP_UNMAP));
	CHECK(amdgpu_va_range_free(vs));
	CHECK(amdgpu_va_range_free(vd));
	CHECK(amdgpu_va_range_free(vi));
	for (auto *bo : {src, dst, ib})
		CHECK(amdgpu_bo_free(bo));
	CHECK(amdgpu_device_deinitialize(dev));
	close(fd);
	std::puts("ok");
	return 0;
}
