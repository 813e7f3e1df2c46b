// SPDX-License-Identifier: GPL-2.0-only
//
// SVM memory reached by GPU queues, through Debian's libhsakmt 5.2.3
// (hsaKmtSVMSetAttr/GetAttr, hsaKmtSetXNACKMode) and SDMA user queues:
// copies into and out of SVM ranges (XNACK off: the GPUs with ACCESS;
// XNACK on, where the GPUs take it: any memory, through the fault path),
// a VM fault where a GPU has no access, a prefetch to VRAM and back with
// the SMI migration events, the hole a munmap leaves in a range (kfdtest's
// PartialUnmapSysMemTest: a userptr there), one range on two GPUs, and a
// range of another process evicted from VRAM when it is needed.
//
// Usage (under kfd-emu): test_svm --machine NAME
#include "hsakmt_client.h"

#include <amdgpu.h>
#include <amdgpu_drm.h>
#include <linux/kfd_ioctl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

using namespace kfdemu;
using namespace kfdemu::test;

namespace {

struct Gpu {
	uint32_t node;
	uint32_t gpu_id;
};

// Anonymous memory of the test's own, never allocated through libhsakmt.
struct Anon {
	void *addr = nullptr;
	size_t size = 0;
	explicit Anon(size_t n) : size(n)
	{
		void *p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (CHECK(p != MAP_FAILED))
			addr = p;
	}
	~Anon()
	{
		if (addr)
			::munmap(addr, size);
	}
	Anon(const Anon &) = delete;
	Anon &operator=(const Anon &) = delete;
	uint64_t va(size_t off = 0) const { return uint64_t(uintptr_t(addr)) + off; }
	uint32_t *words() const { return static_cast<uint32_t *>(addr); }
};

bool set_attrs(void *addr, size_t size, std::vector<HSA_SVM_ATTRIBUTE> attrs)
{
	return hsaKmtSVMSetAttr(addr, size, unsigned(attrs.size()), attrs.data()) == HSAKMT_STATUS_SUCCESS;
}

void fill(uint32_t *w, size_t bytes, uint32_t seed)
{
	for (size_t i = 0; i < bytes / 4; i++)
		w[i] = seed * 0x9e3779b9u + uint32_t(i);
}

long long model_vm_faults() { return json_number(introspect("counters"), "vm_faults"); }

// An SMI event fd of the GPU (AMDKFD_IOC_SMI_EVENTS on a /dev/kfd of this
// process) taking the events in `mask`; -1 on failure.
int smi_open(uint32_t gpu_id, uint64_t mask)
{
	const int kfd = ::open("/dev/kfd", O_RDWR | O_CLOEXEC);
	if (!CHECK(kfd >= 0))
		return -1;
	kfd_ioctl_smi_events_args a{};
	a.gpuid = gpu_id;
	const int r = ::ioctl(kfd, AMDKFD_IOC_SMI_EVENTS, &a);
	::close(kfd);
	if (!CHECK_EQ(r, 0))
		return -1;
	const int fd = int(a.anon_fd);
	CHECK_EQ(::write(fd, &mask, sizeof mask), ssize_t(sizeof mask));
	return fd;
}

// Every event line that comes on fd within `ms`.
std::vector<std::string> smi_read(int fd, int ms = 200)
{
	std::vector<std::string> lines;
	pollfd p{fd, POLLIN, 0};
	while (::poll(&p, 1, ms) == 1) {
		char b[256];
		const ssize_t n = ::read(fd, b, sizeof b);
		if (n <= 0)
			break;
		std::string s(b, size_t(n));
		for (size_t at = 0, nl; (nl = s.find('\n', at)) != std::string::npos; at = nl + 1)
			lines.push_back(s.substr(at, nl - at));
	}
	return lines;
}

// The event number each line starts with.
std::vector<unsigned> smi_kinds(const std::vector<std::string> &lines)
{
	std::vector<unsigned> k;
	for (const auto &l : lines)
		k.push_back(unsigned(std::stoul(l, nullptr, 16)));
	return k;
}

// src (system memory) -> SVM range -> dst (system memory) on GPU g's SDMA
// queue: both copies complete and every byte arrives, the CPU seeing the
// range's bytes as the GPU wrote them.
void copy_through(const Gpu &g, const Anon &svm, size_t bytes, uint32_t seed)
{
	SysMem src(bytes), dst(bytes);
	SdmaQueue q(g.node);
	if (!src.addr || !dst.addr || !q.ok())
		return;
	fill(static_cast<uint32_t *>(src.addr), bytes, seed);
	q.copy(svm.va(), src.va(), uint32_t(bytes));
	CHECK(q.submit());
	CHECK(std::memcmp(svm.addr, src.addr, bytes) == 0);
	q.copy(dst.va(), svm.va(), uint32_t(bytes));
	CHECK(q.submit());
	CHECK(std::memcmp(dst.addr, src.addr, bytes) == 0);
}

void test_access(const Gpu &g)
{
	Anon svm(256 << 10);
	if (!svm.addr || !CHECK(set_attrs(svm.addr, svm.size, {{HSA_SVM_ATTR_ACCESS, g.node}})))
		return;
	copy_through(g, svm, svm.size, 1);
}

// XNACK off: a range the GPU has no access to is not in its page table.
void test_no_access_faults(const Gpu &g)
{
	Anon svm(64 << 10);
	SysMem src(4096);
	if (!svm.addr || !src.addr || !CHECK(set_attrs(svm.addr, svm.size, {{HSA_SVM_ATTR_SET_FLAGS, 0}})))
		return;
	const long long faults = model_vm_faults();
	SdmaQueue q(g.node);
	if (!q.ok())
		return;
	q.copy(svm.va(), src.va(), 4096);
	CHECK(!q.submit(500));
	CHECK(model_vm_faults() > faults);
}

void test_prefetch(const Gpu &g)
{
	const uint64_t mask = KFD_SMI_EVENT_MASK_FROM_INDEX(KFD_SMI_EVENT_MIGRATE_START) |
			      KFD_SMI_EVENT_MASK_FROM_INDEX(KFD_SMI_EVENT_MIGRATE_END);
	const int smi = smi_open(g.gpu_id, mask);
	Anon svm(2 << 20);
	if (smi < 0 || !svm.addr)
		return;
	CHECK(set_attrs(svm.addr, svm.size, {{HSA_SVM_ATTR_ACCESS, g.node}, {HSA_SVM_ATTR_PREFETCH_LOC, g.node}}));
	// MIGRATE_START: "<ns> -<pid> @<start page>(<pages>) 0-><gpu_id> ..."
	const auto in = smi_read(smi);
	CHECK(smi_kinds(in) == (std::vector<unsigned>{KFD_SMI_EVENT_MIGRATE_START, KFD_SMI_EVENT_MIGRATE_END}));
	char want[96];
	std::snprintf(want, sizeof want, "-%d @%lx(%lx) 0->%x ", int(::getpid()), (unsigned long)(svm.va() >> 12),
		      (unsigned long)(svm.size >> 12), g.gpu_id);
	CHECK(!in.empty() && in[0].find(want) != std::string::npos);
	HSA_SVM_ATTRIBUTE loc{HSA_SVM_ATTR_PREFETCH_LOC, 0};
	CHECK_OK(hsaKmtSVMGetAttr(svm.addr, svm.size, 1, &loc));
	CHECK_EQ(loc.value, g.node);
	CHECK(introspect("svm " + std::to_string(::getpid())).find("\"vram_gpu_id\":" + std::to_string(g.gpu_id)) !=
	      std::string::npos);
	copy_through(g, svm, 1 << 20, 2);
	CHECK(set_attrs(svm.addr, svm.size, {{HSA_SVM_ATTR_PREFETCH_LOC, 0}}));
	const auto out = smi_read(smi);
	CHECK(smi_kinds(out) == (std::vector<unsigned>{KFD_SMI_EVENT_MIGRATE_START, KFD_SMI_EVENT_MIGRATE_END}));
	std::snprintf(want, sizeof want, " %x->0 ", g.gpu_id);
	CHECK(!out.empty() && out[0].find(want) != std::string::npos);
	copy_through(g, svm, 1 << 20, 3);
	::close(smi);
}

// kfdtest's PartialUnmapSysMemTest: pages unmapped out of a range leave
// it (the kernel's MMU notifier), so memory mapped again there is not SVM
// memory: a userptr registration of it succeeds, and the range's other
// pages still reach the GPU.
void test_partial_unmap(const Gpu &g)
{
	Anon svm(16 << 12);
	if (!svm.addr || !CHECK(set_attrs(svm.addr, svm.size, {{HSA_SVM_ATTR_ACCESS, g.node}})))
		return;
	char *hole = static_cast<char *>(svm.addr) + (2 << 12);
	CHECK_EQ(::munmap(hole, 4 << 12), 0);
	void *again = ::mmap(hole, 4 << 12, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
			     -1, 0);
	if (!CHECK(again == hole))
		return;
	CHECK_OK(hsaKmtRegisterMemory(hole, 4 << 12));
	CHECK_OK(hsaKmtDeregisterMemory(hole));
	const std::string ranges = introspect("svm " + std::to_string(::getpid()));
	CHECK(ranges.find("\"start\":" + std::to_string(svm.va()) + ",\"size\":8192,") != std::string::npos);
	CHECK(ranges.find("\"start\":" + std::to_string(svm.va(6 << 12)) + ",\"size\":40960,") != std::string::npos);
	SysMem dst(4096);
	SdmaQueue q(g.node);
	if (!dst.addr || !q.ok())
		return;
	fill(svm.words() + (6 << 10), 4096, 4);
	q.copy(dst.va(), svm.va(6 << 12), 4096);
	CHECK(q.submit());
	CHECK(std::memcmp(dst.addr, svm.words() + (6 << 10), 4096) == 0);
}

// XNACK on (gfx90a; refused with EPERM-as-error on gfx908): memory never
// registered reaches the GPU through its fault (PAGE_FAULT_START/END);
// a range with NO_ACCESS for the GPU stays a VM fault.
void test_xnack(const Gpu &g, bool supported)
{
	const HSAKMT_STATUS st = hsaKmtSetXNACKMode(1);
	if (!supported) {
		CHECK(st != HSAKMT_STATUS_SUCCESS);
		return;
	}
	if (!CHECK_OK(st))
		return;
	const uint64_t mask = KFD_SMI_EVENT_MASK_FROM_INDEX(KFD_SMI_EVENT_PAGE_FAULT_START) |
			      KFD_SMI_EVENT_MASK_FROM_INDEX(KFD_SMI_EVENT_PAGE_FAULT_END);
	const int smi = smi_open(g.gpu_id, mask);
	{
		Anon plain(64 << 10);
		if (plain.addr)
			copy_through(g, plain, plain.size, 5);
		if (smi >= 0) {
			const auto kinds = smi_kinds(smi_read(smi));
			CHECK(kinds.size() >= 2 && kinds[0] == KFD_SMI_EVENT_PAGE_FAULT_START &&
			      kinds[1] == KFD_SMI_EVENT_PAGE_FAULT_END);
		}
		Anon denied(64 << 10);
		SysMem src(4096);
		if (denied.addr && src.addr && CHECK(set_attrs(denied.addr, denied.size, {{HSA_SVM_ATTR_NO_ACCESS, g.node}}))) {
			SdmaQueue q(g.node);
			q.copy(denied.va(), src.va(), 4096);
			CHECK(q.ok() && !q.submit(500));
		}
	}
	if (smi >= 0)
		::close(smi);
	CHECK_OK(hsaKmtSetXNACKMode(0));
}

// One range, two GPUs with ACCESS: what one GPU's SDMA writes, the other's
// reads.
void test_two_gpus(const Gpu &a, const Gpu &b)
{
	Anon svm(128 << 10);
	SysMem src(svm.size), dst(svm.size);
	if (!svm.addr || !src.addr || !dst.addr ||
	    !CHECK(set_attrs(svm.addr, svm.size, {{HSA_SVM_ATTR_ACCESS, a.node}, {HSA_SVM_ATTR_ACCESS, b.node}})))
		return;
	fill(static_cast<uint32_t *>(src.addr), svm.size, 6);
	{
		SdmaQueue qa(a.node);
		qa.copy(svm.va(), src.va(), uint32_t(svm.size));
		CHECK(qa.ok() && qa.submit());
	}
	SdmaQueue qb(b.node);
	qb.copy(dst.va(), svm.va(), uint32_t(svm.size));
	CHECK(qb.ok() && qb.submit());
	CHECK(std::memcmp(dst.addr, src.addr, svm.size) == 0);
}

// VRAM pressure: a child process prefetches a range into half of GPU g's
// VRAM, then this process creates a VRAM-only GEM BO (libdrm_amdgpu) of
// three quarters of it, which fits only once that range has gone (KFD's
// own allocations cannot do this: KFD's limit counts SVM VRAM): the BO is
// in VRAM, the child's range in system memory, and its bytes still reach
// its GPU.
void test_eviction(const Gpu &g, uint32_t minor, uint64_t vram)
{
	const size_t range = size_t(vram / 2);
	int go[2], done[2];
	if (!CHECK_EQ(::pipe(go), 0) || !CHECK_EQ(::pipe(done), 0))
		return;
	const pid_t child = ::fork();
	if (child == 0) {
		HsaSystemProperties props{}; // libhsakmt starts again in a forked child
		int ok = hsaKmtOpenKFD() == HSAKMT_STATUS_SUCCESS &&
			 hsaKmtAcquireSystemProperties(&props) == HSAKMT_STATUS_SUCCESS;
		Anon svm(range);
		ok = ok && svm.addr &&
		     set_attrs(svm.addr, range, {{HSA_SVM_ATTR_ACCESS, g.node}, {HSA_SVM_ATTR_PREFETCH_LOC, g.node}});
		char c = char(ok);
		(void)!::write(done[1], &c, 1);
		(void)!::read(go[0], &c, 1); // the parent has its BO
		tally() = {};
		if (ok)
			copy_through(g, svm, 1 << 20, 7);
		std::_Exit(tally().checks_failed || !ok ? 1 : 0);
	}
	char c = 0;
	CHECK(child > 0 && ::read(done[0], &c, 1) == 1 && c == 1);
	CHECK(introspect("svm " + std::to_string(child)).find("\"vram_gpu_id\":" + std::to_string(g.gpu_id)) !=
	      std::string::npos);
	const int fd = ::open(("/dev/dri/renderD" + std::to_string(minor)).c_str(), O_RDWR | O_CLOEXEC);
	uint32_t major = 0, minor_v = 0;
	amdgpu_device_handle dev = nullptr;
	amdgpu_bo_handle bo = nullptr;
	if (CHECK(fd >= 0) && CHECK_EQ(amdgpu_device_initialize(fd, &major, &minor_v, &dev), 0)) {
		amdgpu_bo_alloc_request rq{};
		rq.alloc_size = vram / 4 * 3;
		rq.phys_alignment = 4096;
		rq.preferred_heap = AMDGPU_GEM_DOMAIN_VRAM;
		CHECK_EQ(amdgpu_bo_alloc(dev, &rq, &bo), 0);
		amdgpu_bo_info info{};
		CHECK(bo && amdgpu_bo_query_info(bo, &info) == 0 && info.preferred_heap == AMDGPU_GEM_DOMAIN_VRAM);
		CHECK(introspect("svm " + std::to_string(child)).find("\"vram_gpu_id\":0") != std::string::npos);
	}
	(void)!::write(go[1], &c, 1);
	int status = 0;
	CHECK_EQ(::waitpid(child, &status, 0), child);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	if (bo)
		amdgpu_bo_free(bo);
	if (dev)
		amdgpu_device_deinitialize(dev);
	if (fd >= 0)
		::close(fd);
	for (int p : {go[0], go[1], done[0], done[1]})
		::close(p);
}

} // namespace

int main(int argc, char **argv)
{
	const MachineDesc m = machine_from_args(argc, argv);
	HsaSystemProperties sys{};
	if (!CHECK_OK(hsaKmtOpenKFD()) || !CHECK_OK(hsaKmtAcquireSystemProperties(&sys)))
		return summary();
	std::vector<Gpu> gpus;
	std::vector<const NodeDesc *> descs;
	for (size_t i = 0; i < m.nodes.size(); i++)
		if (m.nodes[i].is_gpu) {
			gpus.push_back(Gpu{uint32_t(i), m.nodes[i].gpu_id});
			descs.push_back(&m.nodes[i]);
		}
	for (size_t i = 0; i < gpus.size(); i++) {
		const Gpu &g = gpus[i];
		const std::string id = " on gpu " + std::to_string(g.gpu_id);
		const uint64_t gfx = prop(*descs[i], "gfx_target_version");
		run(("an SDMA copy into and out of an SVM range with ACCESS" + id).c_str(), [&] { test_access(g); });
		run(("a range the GPU may not access is a VM fault with XNACK off" + id).c_str(),
		    [&] { test_no_access_faults(g); });
		run(("a range prefetched to VRAM and back, with its SMI migration events" + id).c_str(),
		    [&] { test_prefetch(g); });
		run(("pages unmapped out of a range leave it (partial unmap)" + id).c_str(),
		    [&] { test_partial_unmap(g); });
		run(("XNACK on where the GPU takes it (gfx90a), else refused: unregistered memory through GPU faults" + id)
			    .c_str(),
		    [&] { test_xnack(g, gfx == 90010); });
	}
	if (gpus.size() >= 2)
		run("one range on two GPUs", [&] { test_two_gpus(gpus[0], gpus[1]); });
	if (!gpus.empty()) {
		uint64_t vram = 0;
		for (const MemBankDesc &b : descs[0]->mem_banks)
			vram += b.heap_type ? b.size_in_bytes : 0;
		run("a range of another process leaves VRAM that a GEM BO needs",
		    [&] { test_eviction(gpus[0], descs[0]->drm_render_minor, vram); });
	}
	CHECK_OK(hsaKmtCloseKFD());
	return summary();
}
