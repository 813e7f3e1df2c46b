// SPDX-License-Identifier: GPL-2.0-only
//
// libdrm_amdgpu 2.4.114, unmodified, on every GPU of the emulated machine:
// device initialisation without aliasing, GTT and userptr BOs, dma-buf
// export/import (same device and across GPUs), SDMA linear copies through
// amdgpu_cs_submit on the DMA IP from 1 byte to beyond one packet's
// maximum at odd sizes and unaligned offsets, fence waits, contents checked;
// PM4 packets through amdgpu_cs_submit on the COMPUTE IP.
//
// Usage (under kfd-emu): test_libdrm --machine NAME [overrides]
#include "libdrm_client.h"
#include "testcommon/pattern.h"

#include <amdgpu.h>
#include <amdgpu_drm.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

using namespace kfdemu;
using namespace kfdemu::test;

namespace {

constexpr uint64_t kBufSize = 8ull << 20;

void test_init(std::vector<Dev> &devs)
{
	for (auto &d : devs) {
		const std::string path = "/dev/dri/renderD" + std::to_string(d.desc->drm_render_minor);
		d.fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
		CHECK(d.fd >= 0);
		uint32_t maj = 0, min = 0;
		if (!CHECK_EQ(amdgpu_device_initialize(d.fd, &maj, &min, &d.dev), 0))
			continue;
		CHECK_EQ(maj, 3u);
		CHECK_EQ(amdgpu_query_gpu_info(d.dev, &d.info), 0);
		CHECK_EQ(d.info.asic_id, d.desc->pci_device_id);
		CHECK_EQ(d.info.family_id, d.desc->family);
	}
	// No aliasing: every GPU has its own device; a second open of the
	// same node finds the existing one.
	for (size_t i = 0; i < devs.size(); i++)
		for (size_t j = i + 1; j < devs.size(); j++)
			CHECK(devs[i].dev != devs[j].dev);
	for (auto &d : devs) {
		const std::string path = "/dev/dri/renderD" + std::to_string(d.desc->drm_render_minor);
		int fd2 = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
		amdgpu_device_handle again = nullptr;
		uint32_t maj, min;
		CHECK_EQ(amdgpu_device_initialize(fd2, &maj, &min, &again), 0);
		CHECK(again == d.dev);
		if (again)
			amdgpu_device_deinitialize(again);
		::close(fd2);
	}
}

struct Case {
	uint64_t n, src_off, dst_off;
};

void test_copies(Dev &d)
{
	void *host = pages(kBufSize);
	Mapped src = gtt(d.dev, kBufSize);
	Mapped dst = userptr(d.dev, host, kBufSize);
	if (!src.ok || !dst.ok || !host)
		return;
	const Case cases[] = {{1, 0, 0}, {3, 1, 5}, {4096, 0, 0}, {4097, 3, 7},
			      {65535, 4093, 11}, {kMaxPacket, 0, 0}, {kMaxPacket + 4099, 5, 1}};
	for (const auto &c : cases) {
		testcommon::fill_pattern(src.cpu, kBufSize, uint32_t(c.n));
		std::memset(host, 0xee, kBufSize);
		if (!sdma_copy(d, {src.bo, dst.bo}, src.va + c.src_off, dst.va + c.dst_off, c.n))
			continue;
		auto *s = static_cast<unsigned char *>(src.cpu) + c.src_off;
		auto *t = static_cast<unsigned char *>(host) + c.dst_off;
		if (!CHECK(std::memcmp(s, t, c.n) == 0))
			std::printf("    copy of %llu bytes (+%llu -> +%llu) differs\n",
				    static_cast<unsigned long long>(c.n),
				    static_cast<unsigned long long>(c.src_off),
				    static_cast<unsigned long long>(c.dst_off));
		CHECK_EQ(t[c.n], 0xee);	// not one byte more
		if (c.dst_off)
			CHECK_EQ(t[-1], 0xee);
	}
	// The other direction: user pages to GTT.
	testcommon::fill_pattern(host, kBufSize, 77);
	std::memset(src.cpu, 0, kBufSize);
	if (sdma_copy(d, {src.bo, dst.bo}, dst.va + 9, src.va + 2, 12345))
		CHECK(std::memcmp(static_cast<char *>(host) + 9, static_cast<char *>(src.cpu) + 2, 12345) == 0);
	src.release(true);
	dst.release(false);
	std::free(host);
}

void test_dmabuf(std::vector<Dev> &devs)
{
	Dev &a = devs[0];
	Mapped src = gtt(a.dev, 1 << 20);
	if (!src.ok)
		return;
	testcommon::fill_pattern(src.cpu, 1 << 20, 4242);
	uint32_t fd = 0;
	CHECK_EQ(amdgpu_bo_export(src.bo, amdgpu_bo_handle_type_dma_buf_fd, &fd), 0);
	char link[64] = {};
	CHECK(::readlink(("/proc/self/fd/" + std::to_string(fd)).c_str(), link, sizeof link - 1) > 0);
	CHECK(std::string(link).starts_with("/dmabuf:"));
	CHECK_EQ(::lseek(int(fd), 0, SEEK_END), off_t(1 << 20));
	struct statfs sfs{};
	CHECK(::fstatfs(int(fd), &sfs) == 0 && sfs.f_type == 0x444d4142);	// DMA_BUF_MAGIC
	struct stat st{};
	CHECK(::fstat(int(fd), &st) == 0 && (st.st_mode & S_IFMT) == 0 && st.st_size == (1 << 20));
	::lseek(int(fd), 0, SEEK_SET);

	// Same device: the same BO comes back.
	amdgpu_bo_import_result same{};
	CHECK_EQ(amdgpu_bo_import(a.dev, amdgpu_bo_handle_type_dma_buf_fd, fd, &same), 0);
	CHECK(same.buf_handle == src.bo);
	CHECK_EQ(same.alloc_size, uint64_t(1 << 20));
	if (same.buf_handle)
		amdgpu_bo_free(same.buf_handle);

	// A native mmap of the dma-buf sees what the GTT map wrote.
	void *view = ::mmap(nullptr, 1 << 20, PROT_READ, MAP_SHARED, int(fd), 0);
	CHECK(view != MAP_FAILED && std::memcmp(view, src.cpu, 1 << 20) == 0);
	if (view != MAP_FAILED)
		::munmap(view, 1 << 20);

	// Another GPU imports it and copies it out with its own SDMA.
	for (size_t i = 1; i < devs.size(); i++) {
		Dev &b = devs[i];
		amdgpu_bo_import_result imp{};
		if (!CHECK_EQ(amdgpu_bo_import(b.dev, amdgpu_bo_handle_type_dma_buf_fd, fd, &imp), 0))
			continue;
		CHECK_EQ(imp.alloc_size, uint64_t(1 << 20));
		Mapped in;
		in.bo = imp.buf_handle;
		in.size = 1 << 20;
		in.map_va(b.dev);
		void *host = pages(1 << 20);
		Mapped out = userptr(b.dev, host, 1 << 20);
		std::memset(host, 0, 1 << 20);
		if (in.ok && out.ok && sdma_copy(b, {in.bo, out.bo}, in.va + 17, out.va + 17, (1 << 20) - 33))
			CHECK(std::memcmp(static_cast<char *>(host) + 17, static_cast<char *>(src.cpu) + 17,
					  (1 << 20) - 33) == 0);
		out.release(false);
		in.release(false);
		std::free(host);
	}
	::close(int(fd));
	src.release(true);
}

// The transport's record of device mappings ("vmas <pid>"), which stands
// in for /proc/PID/maps: GEM mappings appear with the render node's path
// and fake offset, survive into a forked child, and go with munmap.
void test_vmas(Dev &d)
{
	Mapped b = gtt(d.dev, 3 * 4096);
	if (!b.ok)
		return;
	const uint64_t start = uint64_t(uintptr_t(b.cpu));
	const std::string node = "/dev/dri/renderD" + std::to_string(d.desc->drm_render_minor);
	auto has = [&](pid_t pid, uint64_t s, uint64_t e) {
		const std::string v = introspect("vmas " + std::to_string(pid));
		return v.find("\"start\":" + std::to_string(s) + ",\"end\":" + std::to_string(e)) !=
			       std::string::npos &&
		       v.find("\"path\":\"" + node + "\"") != std::string::npos;
	};
	CHECK(has(::getpid(), start, start + 3 * 4096));
	std::fflush(stdout);
	pid_t c = ::fork();
	if (c == 0) {
		const bool ok = has(::getpid(), start, start + 3 * 4096);
		if (!ok) {
			std::printf("    child sees %s, parent %s\n", introspect("vmas " + std::to_string(::getpid())).c_str(),
				    introspect("vmas " + std::to_string(::getppid())).c_str());
			char cmd[128];
			std::snprintf(cmd, sizeof cmd, "grep -i %llx /proc/%d/maps", static_cast<unsigned long long>(start), ::getpid());
			std::fflush(stdout);
			(void)!std::system(cmd);
		}
		std::fflush(stdout);
		::_exit(ok ? 0 : 1);
	}
	int status = 0;
	::waitpid(c, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	// A partial munmap splits the record.
	CHECK_EQ(::munmap(reinterpret_cast<void *>(start + 4096), 4096), 0);
	CHECK(has(::getpid(), start, start + 4096));
	CHECK(has(::getpid(), start + 8192, start + 3 * 4096));
	CHECK(!has(::getpid(), start, start + 3 * 4096));
	b.release(true);	// unmaps the whole range
	CHECK(!has(::getpid(), start, start + 4096));
}

uint32_t pm4(uint32_t op, uint32_t dwords) { return (3u << 30) | ((dwords - 2) << 16) | (op << 8); }

// The amdgpu COMPUTE ring takes CS of PM4 packets that need no shader: an IB
// with a WAIT_REG_MEM on a word the CPU sets after the submission, then
// WRITE_DATA, DMA_DATA (a copy and a fill), a nested IB with a RELEASE_MEM
// of 64-bit data; the fence is not signalled before the word is set, then
// is, and every write is there. A ring beyond the four, and the GFX IP
// (none on these chips), are EINVAL.
void test_compute_ring(Dev &d)
{
	Mapped buf = gtt(d.dev, 1 << 20);
	if (!buf.ok)
		return;
	auto *w = static_cast<uint32_t *>(buf.cpu);
	std::memset(w, 0, 1 << 20);
	const uint64_t va = buf.va;
	auto at = [&](uint64_t dword) { return va + dword * 4; };
	constexpr uint64_t kFlag = 0, kOut = 16, kSrc = 1024, kDst = 32768, kIb = 65536, kIb2 = 66560;
	for (uint32_t i = 0; i < 16384; i++)
		w[kSrc + i] = i * 2654435761u;
	uint32_t n = 0;
	auto put = [&](uint64_t base, std::initializer_list<uint32_t> dw) {
		for (uint32_t v : dw)
			w[base + n++] = v;
	};
	put(kIb2, {pm4(0x49, 8), 0x14, 2u << 29, uint32_t(at(kOut + 4)), uint32_t(at(kOut + 4) >> 32), 0xdeadbeef, 0x1234,
		   0});
	const uint32_t ib2_dw = n;
	n = 0;
	put(kIb, {pm4(0x3c, 7), 1u << 4 | 3, uint32_t(at(kFlag)), uint32_t(at(kFlag) >> 32), 1, 0xffffffff, 4});
	put(kIb, {pm4(0x37, 5), 5u << 8, uint32_t(at(kOut)), uint32_t(at(kOut) >> 32), 0x5157});
	put(kIb, {pm4(0x50, 7), 0, uint32_t(at(kSrc)), uint32_t(at(kSrc) >> 32), uint32_t(at(kDst)),
		  uint32_t(at(kDst) >> 32), 65536});
	put(kIb, {pm4(0x50, 7), 2u << 29, 0xa5a5a5a5u, 0, uint32_t(at(kOut + 8)), uint32_t(at(kOut + 8) >> 32), 8});
	put(kIb, {pm4(0x3f, 4), uint32_t(at(kIb2)), uint32_t(at(kIb2) >> 32), ib2_dw | 1u << 23});
	amdgpu_bo_list_handle list = nullptr;
	amdgpu_context_handle ctx = nullptr;
	if (CHECK_EQ(amdgpu_bo_list_create(d.dev, 1, &buf.bo, nullptr, &list), 0) &&
	    CHECK_EQ(amdgpu_cs_ctx_create(d.dev, &ctx), 0)) {
		amdgpu_cs_ib_info ibi{};
		ibi.ib_mc_address = at(kIb);
		ibi.size = n;
		amdgpu_cs_request req{};
		req.ip_type = AMDGPU_HW_IP_COMPUTE;
		req.resources = list;
		req.number_of_ibs = 1;
		req.ibs = &ibi;
		req.ring = 4;
		CHECK_EQ(amdgpu_cs_submit(ctx, 0, &req, 1), -EINVAL);
		req.ip_type = AMDGPU_HW_IP_GFX;
		req.ring = 0;
		CHECK_EQ(amdgpu_cs_submit(ctx, 0, &req, 1), -EINVAL);
		req.ip_type = AMDGPU_HW_IP_COMPUTE;
		req.ring = 3;
		CHECK_EQ(amdgpu_cs_submit(ctx, 0, &req, 1), 0);
		amdgpu_cs_fence f{};
		f.context = ctx;
		f.ip_type = AMDGPU_HW_IP_COMPUTE;
		f.ring = 3;
		f.fence = req.seq_no;
		uint32_t expired = 1;
		CHECK_EQ(amdgpu_cs_query_fence_status(&f, 50 * 1000 * 1000, 0, &expired), 0);
		CHECK_EQ(expired, 0u); // waiting at the WAIT_REG_MEM
		CHECK_EQ(w[kOut], 0u);
		__atomic_store_n(&w[kFlag], 1u, __ATOMIC_RELEASE);
		CHECK_EQ(amdgpu_cs_query_fence_status(&f, AMDGPU_TIMEOUT_INFINITE, 0, &expired), 0);
		CHECK_EQ(expired, 1u);
		CHECK_EQ(w[kOut], 0x5157u);
		CHECK(std::memcmp(&w[kSrc], &w[kDst], 65536) == 0);
		CHECK_EQ(w[kOut + 8], 0xa5a5a5a5u);
		CHECK_EQ(w[kOut + 9], 0xa5a5a5a5u);
		CHECK_EQ(w[kOut + 10], 0u);
		CHECK_EQ(w[kOut + 4], 0xdeadbeefu);
		CHECK_EQ(w[kOut + 5], 0x1234u);
	}
	if (ctx)
		amdgpu_cs_ctx_free(ctx);
	if (list)
		amdgpu_bo_list_destroy(list);
	buf.release(true);
}

// The heaps as libdrm's BO suite checks them ("Memory alloc" and "Memory
// fail alloc"): BOs in each domain, a 1 TB BO in VRAM or GTT fails with
// ENOMEM (no domain holds it: amdgpu_bo_validate_size), and the GTT heap
// libdrm reports is the one sysfs shows, its use counted.
void test_heaps(Dev &d)
{
	amdgpu_heap_info gtt{};
	CHECK_EQ(amdgpu_query_heap_info(d.dev, AMDGPU_GEM_DOMAIN_GTT, 0, &gtt), 0);
	const std::string sys = "/sys/class/drm/card" + std::to_string(d.desc->card_index) + "/device/";
	CHECK_EQ(slurp(sys + "mem_info_gtt_total"), std::to_string(gtt.heap_size) + "\n");
	CHECK(gtt.heap_size < 1ull << 40);
	for (uint32_t heap : {AMDGPU_GEM_DOMAIN_VRAM, AMDGPU_GEM_DOMAIN_GTT}) {
		for (uint64_t flags : {uint64_t{AMDGPU_GEM_CREATE_CPU_ACCESS_REQUIRED}, uint64_t{AMDGPU_GEM_CREATE_NO_CPU_ACCESS}}) {
			amdgpu_bo_alloc_request req{4096, 4096, heap, flags};
			amdgpu_bo_handle bo = nullptr;
			if (CHECK_EQ(amdgpu_bo_alloc(d.dev, &req, &bo), 0))
				CHECK_EQ(amdgpu_bo_free(bo), 0);
		}
		amdgpu_bo_alloc_request req{0xE8D4A51000ull, 4096, heap, AMDGPU_GEM_CREATE_NO_CPU_ACCESS}; // 1 TB
		amdgpu_bo_handle bo = nullptr;
		if (!CHECK_EQ(amdgpu_bo_alloc(d.dev, &req, &bo), -ENOMEM) && bo)
			amdgpu_bo_free(bo);
	}
	uint64_t before = 0, during = 0;
	CHECK_EQ(amdgpu_query_info(d.dev, AMDGPU_INFO_GTT_USAGE, 8, &before), 0);
	amdgpu_bo_alloc_request req{64ull << 20, 4096, AMDGPU_GEM_DOMAIN_GTT, 0};
	amdgpu_bo_handle bo = nullptr;
	if (!CHECK_EQ(amdgpu_bo_alloc(d.dev, &req, &bo), 0))
		return;
	CHECK_EQ(amdgpu_query_info(d.dev, AMDGPU_INFO_GTT_USAGE, 8, &during), 0);
	CHECK_EQ(during, before + (64ull << 20));
	CHECK_EQ(slurp(sys + "mem_info_gtt_used"), std::to_string(during) + "\n");
	CHECK_EQ(amdgpu_bo_free(bo), 0);
}

} // namespace

int main(int argc, char **argv)
{
	const MachineDesc m = machine_from_args(argc, argv);
	std::vector<Dev> devs = gpu_devs(m);
	run("amdgpu_device_initialize on every GPU, no aliasing", [&] { test_init(devs); });
	for (auto &d : devs) {
		if (!d.dev)
			continue;
		run(("SDMA copies GTT <-> userptr, 1 B .. > 1 packet, gpu " + std::to_string(d.desc->gpu_id)).c_str(),
		    [&] { test_copies(d); });
	}
	for (auto &d : devs)
		if (d.dev)
			run(("heaps: BOs per domain, 1 TB in VRAM or GTT ENOMEM, GTT size and use, gpu " +
			     std::to_string(d.desc->gpu_id)).c_str(), [&] { test_heaps(d); });
	if (devs[0].dev)
		run("dma-buf export, re-import, native mmap, import on peer GPUs + SDMA",
		    [&] { test_dmabuf(devs); });
	if (devs[0].dev)
		run("device mappings recorded for the CRIU host (vmas)", [&] { test_vmas(devs[0]); });
	if (devs[0].dev)
		run("COMPUTE ring CS of PM4 packets (WAIT_REG_MEM, WRITE_DATA, DMA_DATA, IB, RELEASE_MEM)",
		    [&] { test_compute_ring(devs[0]); });
	run("deinitialize", [&] {
		for (auto &d : devs) {
			if (d.dev)
				CHECK_EQ(amdgpu_device_deinitialize(d.dev), 0);
			if (d.fd >= 0)
				CHECK_EQ(::close(d.fd), 0);
		}
	});
	return summary();
}
