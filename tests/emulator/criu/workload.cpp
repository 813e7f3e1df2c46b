// SPDX-License-Identifier: GPL-2.0-only
//
// kfdemu_criu_workload: the process real CRIU dumps and restores in the
// emulator's realcriu test (realcriu_test.py). Unmodified libhsakmt 5.2.3.
//
//   kfdemu_criu_workload DIR
//
// Setup: on every GPU node a VRAM BO, plus one system-memory (GTT) BO, each
// filled with a pattern through the process's own CPU mapping and mapped to
// the GPUs; on the first GPU a signal event and an AQL queue. Then writes
// DIR/ready ("<pid> <addr> <size> <seed>" per BO) and polls for DIR/go
// (CRIU dumps and restores it while it polls). After DIR/go it checks in
// the (restored) process: every BO's pattern through its own mapping, then
// that KFD still serves it: a new VRAM BO is allocated, mapped to the GPU,
// written and read back and freed; the event is set and waited on; the
// queue is destroyed. The verdict goes to DIR/result ("OK" or "FAIL: why")
// and the exit status (0 / 1).
#include <hsakmt.h>

#include <unistd.h>

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Bo {
	void *addr;
	uint64_t size;
	uint64_t seed;
};

uint64_t word(uint64_t seed, uint64_t i)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + i;
	x ^= x >> 31;
	x *= 0xbf58476d1ce4e5b9ull;
	return x ^ (x >> 29);
}

void fill(const Bo &b)
{
	auto *w = static_cast<uint64_t *>(b.addr);
	for (uint64_t i = 0; i < b.size / 8; i++)
		w[i] = word(b.seed, i);
}

// Index of the first wrong word, or -1.
int64_t check(const Bo &b)
{
	const auto *w = static_cast<const uint64_t *>(b.addr);
	for (uint64_t i = 0; i < b.size / 8; i++)
		if (w[i] != word(b.seed, i))
			return int64_t(i);
	return -1;
}

std::string g_dir;

[[noreturn]] void finish(const std::string &verdict)
{
	const std::string tmp = g_dir + "/result.tmp";
	if (FILE *f = std::fopen(tmp.c_str(), "w")) {
		std::fprintf(f, "%s\n", verdict.c_str());
		std::fclose(f);
		std::rename(tmp.c_str(), (g_dir + "/result").c_str());
	}
	std::printf("workload %d: %s\n", int(getpid()), verdict.c_str());
	std::fflush(stdout);
	std::exit(verdict == "OK" ? 0 : 1);
}

std::string status(const char *what, HSAKMT_STATUS s)
{
	return std::string(what) + " failed: status " + std::to_string(int(s));
}

bool alloc_bo(uint32_t node, uint64_t size, bool vram, Bo *out, std::string *err)
{
	HsaMemFlags f{};
	f.ui32.NonPaged = 1;
	f.ui32.HostAccess = 1;
	f.ui32.PageSize = HSA_PAGE_SIZE_4KB;
	if (vram)
		f.ui32.NoSubstitute = 1;
	void *addr = nullptr;
	if (HSAKMT_STATUS s = hsaKmtAllocMemory(node, size, f, &addr); s != HSAKMT_STATUS_SUCCESS) {
		*err = status("hsaKmtAllocMemory", s);
		return false;
	}
	HSAuint64 gpuva = 0;
	if (HSAKMT_STATUS s = hsaKmtMapMemoryToGPU(addr, size, &gpuva); s != HSAKMT_STATUS_SUCCESS) {
		*err = status("hsaKmtMapMemoryToGPU", s);
		return false;
	}
	*out = Bo{addr, size, 0};
	return true;
}

} // namespace

int main(int argc, char **argv)
{
	if (argc != 2) {
		std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	g_dir = argv[1];
	std::string err;
	if (HSAKMT_STATUS s = hsaKmtOpenKFD(); s != HSAKMT_STATUS_SUCCESS)
		finish(status("FAIL: hsaKmtOpenKFD", s));
	HsaSystemProperties sys{};
	if (HSAKMT_STATUS s = hsaKmtAcquireSystemProperties(&sys); s != HSAKMT_STATUS_SUCCESS)
		finish(status("FAIL: hsaKmtAcquireSystemProperties", s));

	std::vector<Bo> bos;
	std::vector<uint32_t> gpus;
	uint64_t seed = 0x5eed;
	for (uint32_t node = 0; node < sys.NumNodes; node++) {
		HsaNodeProperties props{};
		if (hsaKmtGetNodeProperties(node, &props) != HSAKMT_STATUS_SUCCESS)
			finish("FAIL: hsaKmtGetNodeProperties");
		if (props.NumFComputeCores == 0)
			continue;
		gpus.push_back(node);
		Bo b{};
		if (!alloc_bo(node, 2 << 20, true, &b, &err))
			finish("FAIL: VRAM: " + err);
		b.seed = seed++;
		bos.push_back(b);
	}
	if (gpus.empty())
		finish("FAIL: no GPU node");
	Bo gtt{};
	if (!alloc_bo(0, 1 << 20, false, &gtt, &err))
		finish("FAIL: GTT: " + err);
	gtt.seed = seed++;
	bos.push_back(gtt);
	for (const auto &b : bos)
		fill(b);

	HsaEventDescriptor desc{};
	desc.EventType = HSA_EVENTTYPE_SIGNAL;
	desc.NodeId = gpus[0];
	HsaEvent *ev = nullptr;
	if (HSAKMT_STATUS s = hsaKmtCreateEvent(&desc, true, false, &ev); s != HSAKMT_STATUS_SUCCESS)
		finish(status("FAIL: hsaKmtCreateEvent", s));
	Bo ring{};
	if (!alloc_bo(0, 64 << 10, false, &ring, &err))
		finish("FAIL: ring: " + err);
	HsaQueueResource q{};
	if (HSAKMT_STATUS s = hsaKmtCreateQueue(gpus[0], HSA_QUEUE_COMPUTE_AQL, 100, HSA_QUEUE_PRIORITY_NORMAL,
						 ring.addr, ring.size, nullptr, &q);
	    s != HSAKMT_STATUS_SUCCESS)
		finish(status("FAIL: hsaKmtCreateQueue", s));

	{
		const std::string tmp = g_dir + "/ready.tmp";
		FILE *f = std::fopen(tmp.c_str(), "w");
		if (!f)
			finish("FAIL: cannot write ready");
		std::fprintf(f, "%d\n", int(getpid()));
		for (const auto &b : bos)
			std::fprintf(f, "%" PRIu64 " %" PRIu64 " %" PRIu64 "\n", uint64_t(uintptr_t(b.addr)), b.size,
				     b.seed);
		std::fclose(f);
		std::rename(tmp.c_str(), (g_dir + "/ready").c_str());
	}
	// Dumped and restored in here.
	const std::string go = g_dir + "/go";
	while (access(go.c_str(), F_OK) != 0)
		usleep(10000);

	for (const auto &b : bos)
		if (int64_t at = check(b); at >= 0) {
			char msg[160];
			std::snprintf(msg, sizeof msg, "FAIL: BO at %p (%" PRIu64 " bytes): word %" PRId64 " differs",
				      b.addr, b.size, at);
			finish(msg);
		}
	Bo fresh{};
	if (!alloc_bo(gpus.back(), 1 << 20, true, &fresh, &err))
		finish("FAIL: after restore: " + err);
	fresh.seed = 77;
	fill(fresh);
	if (check(fresh) >= 0)
		finish("FAIL: after restore: new BO reads back wrong");
	if (hsaKmtUnmapMemoryToGPU(fresh.addr) != HSAKMT_STATUS_SUCCESS ||
	    hsaKmtFreeMemory(fresh.addr, fresh.size) != HSAKMT_STATUS_SUCCESS)
		finish("FAIL: after restore: unmap/free of the new BO");
	if (HSAKMT_STATUS s = hsaKmtSetEvent(ev); s != HSAKMT_STATUS_SUCCESS)
		finish(status("FAIL: after restore: hsaKmtSetEvent", s));
	if (HSAKMT_STATUS s = hsaKmtWaitOnEvent(ev, 2000); s != HSAKMT_STATUS_SUCCESS)
		finish(status("FAIL: after restore: hsaKmtWaitOnEvent", s));
	if (HSAKMT_STATUS s = hsaKmtDestroyQueue(q.QueueId); s != HSAKMT_STATUS_SUCCESS)
		finish(status("FAIL: after restore: hsaKmtDestroyQueue", s));
	finish("OK");
}
