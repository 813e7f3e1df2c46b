// SPDX-License-Identifier: GPL-2.0-only
//
// The HIP runtime's data paths, every byte compared with what the CPU sent:
//   memcpy     hipMemcpy host (pageable and pinned) <-> device, device ->
//              device, hipMemcpy2D with pitches, hipMemcpyAsync on two
//              streams at once, sizes from 1 byte to 4 MiB at odd offsets;
//   memset     hipMemset/hipMemsetAsync from 1 byte to 3 MiB + 3 at
//              unaligned offsets, the bytes around left untouched (not
//              a range shorter than the way to the next 8-byte boundary,
//              which HIP 5.2.3 fills wrongly: see case_memset);
//   events     streams ordered by events (hipStreamWaitEvent), hipEventSynchronize,
//              hipEventElapsedTime >= 0 between two recorded events; streams
//              of the least and greatest priority (hipStreamCreateWithPriority)
//              running kernels, and under the emulator (KFDEMU_CTL: its
//              kfd-emu) their AQL queues at KFD priorities 0 and 15;
//   userptr    hipHostRegister'ed malloc memory used by a kernel through
//              its device pointer, then unregistered;
//   managed    hipMallocManaged memory (SVM) used in place by kernels, in
//              system memory and prefetched to VRAM, copied out, and read
//              by the CPU after a prefetch back;
//   peer       two GPUs: hipSetDevice, hipDeviceEnablePeerAccess, a kernel on
//              GPU 1 reading GPU 0's memory, hipMemcpyPeer both ways (NOT RUN
//              on one GPU, with a line saying so);
//   ipc        hipIpcGetMemHandle in this process, hipIpcOpenMemHandle in a
//              child (fork + exec of this program with --ipc-child), the
//              child checks the parent's bytes and writes its own, which the
//              parent checks.
//   hip_runtime [--list] [--case NAME]...
#include "hiptest.h"

#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace {

using hiptest::step;

using hiptest::Device;
using hiptest::Event;
using hiptest::Pinned;
using hiptest::Stream;

void expect_bytes(const std::string &what, const uint8_t *want, const uint8_t *got, size_t n)
{
	hiptest::expect_equal(what.c_str(), want, got, n);
}

const size_t kSizes[] = {1, 3, 64, 4095, 65536 + 7, (1u << 20) + 5, 4u << 20};

void case_memcpy()
{
	const size_t max = 4u << 20;
	const size_t off = 3; // odd offsets in every buffer
	Device d1(max + 64), d2(max + 64);
	Pinned pin(max + 64);
	std::vector<uint8_t> src(max + 64), back(max + 64);
	for (size_t n : kSizes) {
		const std::string sz = std::to_string(n) + " bytes";
		testcommon::fill_pattern(src.data(), src.size(), uint32_t(n));
		step("hipMemcpy pageable -> device, " + sz);
		HIPTEST_CHECK(hipMemcpy(d1.b() + off, src.data() + off, n, hipMemcpyHostToDevice));
		step("hipMemcpy device -> device, " + sz);
		HIPTEST_CHECK(hipMemcpy(d2.b() + off + 1, d1.b() + off, n, hipMemcpyDeviceToDevice));
		step("hipMemcpy device -> pinned, " + sz);
		HIPTEST_CHECK(hipMemcpy(pin.b() + off, d2.b() + off + 1, n, hipMemcpyDeviceToHost));
		expect_bytes("pageable -> device -> device -> pinned, " + sz, src.data() + off, pin.b() + off, n);
		step("hipMemcpy pinned -> device -> pageable, " + sz);
		for (size_t i = 0; i < n; ++i)
			pin.b()[off + i] ^= 0x5a;
		HIPTEST_CHECK(hipMemcpy(d1.b() + off, pin.b() + off, n, hipMemcpyHostToDevice));
		HIPTEST_CHECK(hipMemcpy(back.data(), d1.b() + off, n, hipMemcpyDeviceToHost));
		expect_bytes("pinned -> device -> pageable, " + sz, pin.b() + off, back.data(), n);
	}
	// 2D: a 37 x 129 region between pitches 160 (host), 256 and 192 (device).
	const size_t w = 129, h = 37, hp = 160, dp = 256, dp2 = 192;
	std::vector<uint8_t> host2d(hp * h), out2d(hp * h, 0);
	testcommon::fill_pattern(host2d.data(), host2d.size(), 2);
	step("hipMemcpy2D host -> device -> device -> host");
	HIPTEST_CHECK(hipMemcpy2D(d1.p, dp, host2d.data(), hp, w, h, hipMemcpyHostToDevice));
	HIPTEST_CHECK(hipMemcpy2D(d2.p, dp2, d1.p, dp, w, h, hipMemcpyDeviceToDevice));
	HIPTEST_CHECK(hipMemcpy2D(out2d.data(), hp, d2.p, dp2, w, h, hipMemcpyDeviceToHost));
	for (size_t r = 0; r < h; ++r)
		expect_bytes("hipMemcpy2D row " + std::to_string(r), host2d.data() + r * hp, out2d.data() + r * hp, w);
	// Async on two streams, each its own buffers, both in flight.
	Stream s1, s2;
	Pinned a_in(max), b_in(max), a_out(max), b_out(max);
	testcommon::fill_pattern(a_in.p, max, 10);
	testcommon::fill_pattern(b_in.p, max, 11);
	step("hipMemcpyAsync on two streams");
	HIPTEST_CHECK(hipMemcpyAsync(d1.p, a_in.p, max, hipMemcpyHostToDevice, s1.s));
	HIPTEST_CHECK(hipMemcpyAsync(d2.p, b_in.p, max, hipMemcpyHostToDevice, s2.s));
	HIPTEST_CHECK(hipMemcpyAsync(a_out.p, d1.p, max, hipMemcpyDeviceToHost, s1.s));
	HIPTEST_CHECK(hipMemcpyAsync(b_out.p, d2.p, max, hipMemcpyDeviceToHost, s2.s));
	HIPTEST_CHECK(hipStreamSynchronize(s1.s));
	HIPTEST_CHECK(hipStreamSynchronize(s2.s));
	expect_bytes("hipMemcpyAsync stream 1", a_in.b(), a_out.b(), max);
	expect_bytes("hipMemcpyAsync stream 2", b_in.b(), b_out.b(), max);
}

// Each round: the span [0, off + n + 64) set to 0xee by a copy (not by the
// memset under test), the memset, then the whole span read back.
void case_memset()
{
	const size_t sizes[] = {1, 2, 3, 5, 63, 4097, (1u << 20) + 1, (3u << 20) + 3};
	const size_t max = (3u << 20) + 3 + 64 + 8;
	Device d(max);
	Stream s;
	const std::vector<uint8_t> background(max, 0xee);
	std::vector<uint8_t> want(max), got(max);
	int round = 0;
	for (size_t n : sizes)
		for (size_t off : {size_t(0), size_t(1), size_t(3), size_t(6)}) {
			const uint8_t v = uint8_t(0x11 * (1 + round % 14));
			const bool async = round++ % 2;
			const size_t span = off + n + 64;
			const std::string what = std::string(async ? "hipMemsetAsync " : "hipMemset ") +
						 std::to_string(n) + " bytes at offset " + std::to_string(off);
			// HIP 5.2.3's hipMemset(Async) of bytes splits the range at the
			// next 8-byte boundary without checking that the range reaches
			// it: it fills the whole head (7 bytes for 1 at offset 1) and
			// then asks for (n - head - tail) / 8 words, which wraps to
			// 2^61 - 1 (seen in the fill kernel's arguments on kfd-emu).
			// A runtime bug, not the GPU's: those rounds are left out.
			const size_t head = (8 - (reinterpret_cast<uintptr_t>(d.b()) + off) % 8) % 8;
			if (n < head) {
				std::printf("memset: %s: not run (HIP 5.2.3 fills past a range shorter than its head to the next 8-byte boundary)\n",
					    what.c_str());
				continue;
			}
			step(what + ": setup");
			HIPTEST_CHECK(hipMemcpy(d.p, background.data(), span, hipMemcpyHostToDevice));
			step(what);
			if (async) {
				HIPTEST_CHECK(hipMemsetAsync(d.b() + off, v, n, s.s));
				HIPTEST_CHECK(hipStreamSynchronize(s.s));
			} else {
				HIPTEST_CHECK(hipMemset(d.b() + off, v, n));
			}
			std::fill(want.begin(), want.begin() + long(span), 0xee);
			std::fill(want.begin() + long(off), want.begin() + long(off + n), v);
			step(what + ": read back");
			HIPTEST_CHECK(hipMemcpy(got.data(), d.p, span, hipMemcpyDeviceToHost));
			expect_bytes(what + " (the range and 64 bytes after it)", want.data(), got.data(), span);
		}
}

__global__ void add_kernel(uint32_t *p, uint32_t v, size_t n)
{
	size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
	if (i < n)
		p[i] += v;
}

void stream_priorities();

void case_events()
{
	const size_t n = 1u << 18;
	Device d(n * 4);
	Stream s1, s2;
	Event start, mid, end;
	std::vector<uint32_t> host(n), want(n);
	for (size_t i = 0; i < n; ++i)
		host[i] = uint32_t(i * 2654435761u);
	step("events: upload and record start on stream 1");
	HIPTEST_CHECK(hipMemcpyAsync(d.p, host.data(), n * 4, hipMemcpyHostToDevice, s1.s));
	HIPTEST_CHECK(hipEventRecord(start.e, s1.s));
	step("events: kernel on stream 1, stream 2 waits for it, kernel on stream 2");
	hipLaunchKernelGGL(add_kernel, dim3(unsigned(n / 256)), dim3(256), 0, s1.s, static_cast<uint32_t *>(d.p), 5u, n);
	HIPTEST_CHECK(hipEventRecord(mid.e, s1.s));
	HIPTEST_CHECK(hipStreamWaitEvent(s2.s, mid.e, 0));
	hipLaunchKernelGGL(add_kernel, dim3(unsigned(n / 256)), dim3(256), 0, s2.s, static_cast<uint32_t *>(d.p), 7u, n);
	HIPTEST_CHECK(hipGetLastError());
	HIPTEST_CHECK(hipEventRecord(end.e, s2.s));
	step("events: hipEventSynchronize");
	HIPTEST_CHECK(hipEventSynchronize(end.e));
	HIPTEST_CHECK(hipEventQuery(end.e));
	float ms = -1.0f;
	HIPTEST_CHECK(hipEventElapsedTime(&ms, start.e, end.e));
	if (!(ms >= 0.0f))
		hiptest::fail("hipEventElapsedTime(start, end): expected >= 0 ms, got %f", double(ms));
	std::printf("events: %f ms between start and end\n", double(ms));
	step("events: download");
	std::vector<uint32_t> got(n);
	HIPTEST_CHECK(hipMemcpy(got.data(), d.p, n * 4, hipMemcpyDeviceToHost));
	for (size_t i = 0; i < n; ++i)
		want[i] = host[i] + 12;
	hiptest::expect_equal("two kernels ordered by an event", want.data(), got.data(), n);
	stream_priorities();
}

// The AQL queues' KFD priorities in `kfd-emu ctl queues <pid>`'s JSON.
std::vector<int> aql_queue_priorities(const char *kfd_emu)
{
	const std::string cmd = std::string(kfd_emu) + " ctl queues " + std::to_string(getpid());
	FILE *p = popen(cmd.c_str(), "r");
	if (!p)
		hiptest::fail("popen %s: %s", cmd.c_str(), std::strerror(errno));
	std::string out;
	char buf[4096];
	for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;)
		out.append(buf, n);
	if (pclose(p) != 0)
		hiptest::fail("%s failed: %s", cmd.c_str(), out.c_str());
	std::vector<int> prios;
	for (size_t at = out.find("{\"id\":"); at != std::string::npos; at = out.find("{\"id\":", at + 1)) {
		const std::string q = out.substr(at, out.find("\"state\"", at) - at);
		const size_t pr = q.find("\"priority\":");
		if (q.find("\"type\":2,") != std::string::npos && pr != std::string::npos)
			prios.push_back(std::atoi(q.c_str() + pr + 11));
	}
	return prios;
}

// Streams of the least and greatest priority HIP offers: hipStreamGetPriority
// gives them back, a kernel on each computes, and their AQL queues reach
// KFD with the priorities libhsakmt maps ROCr's low and high to (0, 15),
// which the emulator's CP honours (tests/emulator/model/README.md).
void stream_priorities()
{
	int least = 0, greatest = 0;
	HIPTEST_CHECK(hipDeviceGetStreamPriorityRange(&least, &greatest));
	std::printf("events: stream priorities from %d (least) to %d (greatest)\n", least, greatest);
	if (greatest >= least)
		hiptest::fail("hipDeviceGetStreamPriorityRange: greatest %d not above least %d", greatest, least);
	const size_t n = 4096;
	Device d(n * 4);
	Stream low(least), high(greatest);
	for (auto [s, want] : {std::pair{low.s, least}, std::pair{high.s, greatest}}) {
		int got = 0;
		HIPTEST_CHECK(hipStreamGetPriority(s, &got));
		if (got != want)
			hiptest::fail("hipStreamGetPriority: %d, asked %d", got, want);
	}
	step("events: kernels on the low- and high-priority streams");
	HIPTEST_CHECK(hipMemset(d.p, 0, n * 4));
	hipLaunchKernelGGL(add_kernel, dim3(unsigned(n / 256)), dim3(256), 0, low.s, static_cast<uint32_t *>(d.p), 3u, n);
	HIPTEST_CHECK(hipStreamSynchronize(low.s));
	hipLaunchKernelGGL(add_kernel, dim3(unsigned(n / 256)), dim3(256), 0, high.s, static_cast<uint32_t *>(d.p), 4u, n);
	HIPTEST_CHECK(hipGetLastError());
	HIPTEST_CHECK(hipStreamSynchronize(high.s));
	std::vector<uint32_t> got(n), want(n, 7);
	HIPTEST_CHECK(hipMemcpy(got.data(), d.p, n * 4, hipMemcpyDeviceToHost));
	hiptest::expect_equal("kernels on prioritized streams", want.data(), got.data(), n);
	const char *kfd_emu = std::getenv("KFDEMU_CTL");
	if (!kfd_emu || !*kfd_emu) {
		std::printf("events: the queues' KFD priorities: not checked (KFDEMU_CTL unset)\n");
		return;
	}
	step("events: the queues' KFD priorities");
	const std::vector<int> prios = aql_queue_priorities(kfd_emu);
	std::string list;
	for (int p : prios)
		list += " " + std::to_string(p);
	std::printf("events: AQL queue priorities at KFD:%s\n", list.c_str());
	for (int want : {0, 15})
		if (std::find(prios.begin(), prios.end(), want) == prios.end())
			hiptest::fail("no AQL queue of KFD priority %d (have:%s)", want, list.c_str());
}

void case_userptr()
{
	const size_t n = (1u << 20) / 4 + 100;
	const size_t bytes = (n * 4 + 4095) & ~size_t(4095);
	void *mem = std::aligned_alloc(4096, bytes);
	if (!mem)
		hiptest::fail("aligned_alloc(%zu)", bytes);
	std::unique_ptr<void, void (*)(void *)> own(mem, std::free);
	auto *host = static_cast<uint32_t *>(mem);
	std::vector<uint32_t> want(n);
	for (size_t i = 0; i < n; ++i) {
		host[i] = uint32_t(i) * 3u;
		want[i] = host[i] + 9u;
	}
	step("hipHostRegister");
	HIPTEST_CHECK(hipHostRegister(mem, bytes, hipHostRegisterMapped));
	void *dev = nullptr;
	HIPTEST_CHECK(hipHostGetDevicePointer(&dev, mem, 0));
	step("userptr: kernel on registered memory");
	hipLaunchKernelGGL(add_kernel, dim3(unsigned((n + 255) / 256)), dim3(256), 0, 0, static_cast<uint32_t *>(dev), 9u, n);
	HIPTEST_CHECK(hipGetLastError());
	HIPTEST_CHECK(hipDeviceSynchronize());
	hiptest::expect_equal("kernel through hipHostRegister'ed memory", want.data(), host, n);
	step("userptr: hipMemcpy from registered memory");
	Device d(bytes);
	HIPTEST_CHECK(hipMemcpy(d.p, mem, n * 4, hipMemcpyHostToDevice));
	std::vector<uint32_t> got(n);
	HIPTEST_CHECK(hipMemcpy(got.data(), d.p, n * 4, hipMemcpyDeviceToHost));
	hiptest::expect_equal("hipMemcpy of registered memory", want.data(), got.data(), n);
	step("hipHostUnregister");
	HIPTEST_CHECK(hipHostUnregister(mem));
}

// hipMallocManaged memory (KFD SVM ranges under HIP 5.2: ROCr gives them
// the GPUs' access, XNACK off): written by the CPU, a kernel adds to it in
// place, then prefetched to the GPU's VRAM (hipMemPrefetchAsync: an SVM
// prefetch) a second kernel adds again and hipMemcpy copies it out to
// device memory; prefetched back, the CPU reads what the GPU wrote.
void case_managed()
{
	const size_t n = (1u << 20) / 4 + 100;
	uint32_t *m = nullptr;
	step("hipMallocManaged");
	HIPTEST_CHECK(hipMallocManaged(reinterpret_cast<void **>(&m), n * 4));
	std::unique_ptr<uint32_t, hipError_t (*)(void *)> own(m, hipFree);
	std::vector<uint32_t> want(n);
	for (size_t i = 0; i < n; ++i) {
		m[i] = uint32_t(i) * 5u;
		want[i] = m[i] + 9u;
	}
	const dim3 grid(unsigned((n + 255) / 256)), block(256);
	step("managed: kernel in place");
	hipLaunchKernelGGL(add_kernel, grid, block, 0, 0, m, 9u, n);
	HIPTEST_CHECK(hipGetLastError());
	HIPTEST_CHECK(hipDeviceSynchronize());
	hiptest::expect_equal("kernel on hipMallocManaged memory", want.data(), m, n);
	step("managed: prefetched to the GPU");
	HIPTEST_CHECK(hipMemPrefetchAsync(m, n * 4, 0, nullptr));
	hipLaunchKernelGGL(add_kernel, grid, block, 0, 0, m, 3u, n);
	HIPTEST_CHECK(hipGetLastError());
	HIPTEST_CHECK(hipDeviceSynchronize());
	for (auto &w : want)
		w += 3u;
	Device d(n * 4);
	HIPTEST_CHECK(hipMemcpy(d.p, m, n * 4, hipMemcpyDefault));
	std::vector<uint32_t> got(n);
	HIPTEST_CHECK(hipMemcpy(got.data(), d.p, n * 4, hipMemcpyDeviceToHost));
	hiptest::expect_equal("hipMemcpy out of prefetched managed memory", want.data(), got.data(), n);
	step("managed: prefetched back to the CPU");
	HIPTEST_CHECK(hipMemPrefetchAsync(m, n * 4, hipCpuDeviceId, nullptr));
	HIPTEST_CHECK(hipDeviceSynchronize());
	hiptest::expect_equal("the CPU reads what the GPU wrote", want.data(), m, n);
}

__global__ void copy_kernel(const uint32_t *src, uint32_t *dst, size_t n)
{
	size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
	if (i < n)
		dst[i] = src[i] ^ 0xffffffffu;
}

void case_peer()
{
	int count = 0;
	HIPTEST_CHECK(hipGetDeviceCount(&count));
	if (count < 2) {
		std::printf("peer: NOT RUN: one GPU only (the 2xMI210 run tests it)\n");
		return;
	}
	const size_t n = (1u << 20) + 33;
	std::vector<uint32_t> host(n), got(n), want(n);
	for (size_t i = 0; i < n; ++i) {
		host[i] = uint32_t(i * 40503u);
		want[i] = ~host[i];
	}
	step("peer: allocate on GPU 0 and GPU 1");
	HIPTEST_CHECK(hipSetDevice(0));
	Device d0(n * 4);
	HIPTEST_CHECK(hipMemcpy(d0.p, host.data(), n * 4, hipMemcpyHostToDevice));
	HIPTEST_CHECK(hipSetDevice(1));
	Device d1(n * 4), d1b(n * 4);
	int can = 0;
	HIPTEST_CHECK(hipDeviceCanAccessPeer(&can, 1, 0));
	if (!can)
		hiptest::fail("hipDeviceCanAccessPeer(1, 0): expected 1, got 0");
	step("peer: hipDeviceEnablePeerAccess(0) on GPU 1");
	HIPTEST_CHECK(hipDeviceEnablePeerAccess(0, 0));
	step("peer: kernel on GPU 1 reading GPU 0's memory");
	hipLaunchKernelGGL(copy_kernel, dim3(unsigned((n + 255) / 256)), dim3(256), 0, 0,
			   static_cast<const uint32_t *>(d0.p), static_cast<uint32_t *>(d1.p), n);
	HIPTEST_CHECK(hipGetLastError());
	HIPTEST_CHECK(hipDeviceSynchronize());
	HIPTEST_CHECK(hipMemcpy(got.data(), d1.p, n * 4, hipMemcpyDeviceToHost));
	hiptest::expect_equal("GPU 1's kernel on GPU 0's memory", want.data(), got.data(), n);
	step("peer: hipMemcpyPeer GPU 1 -> GPU 0 -> GPU 1");
	HIPTEST_CHECK(hipMemcpyPeer(d0.p, 0, d1.p, 1, n * 4));
	HIPTEST_CHECK(hipMemcpyPeer(d1b.p, 1, d0.p, 0, n * 4));
	HIPTEST_CHECK(hipMemcpy(got.data(), d1b.p, n * 4, hipMemcpyDeviceToHost));
	hiptest::expect_equal("hipMemcpyPeer both ways", want.data(), got.data(), n);
	HIPTEST_CHECK(hipDeviceDisablePeerAccess(0));
	HIPTEST_CHECK(hipSetDevice(0));
}

constexpr size_t kIpcBytes = (2u << 20) + 4096;

// The child's side: opens the handle read from fd 0, checks the parent's
// bytes (seed 21), writes its own (seed 22), says "done" on fd 1.
int ipc_child()
{
	step("ipc child: read the handle");
	hipIpcMemHandle_t h;
	if (read(0, &h, sizeof(h)) != ssize_t(sizeof(h)))
		hiptest::fail("ipc child: short read of the handle");
	step("ipc child: hipIpcOpenMemHandle (the child's runtime starts)", hiptest::kInitSeconds);
	void *p = nullptr;
	HIPTEST_CHECK(hipIpcOpenMemHandle(&p, h, hipIpcMemLazyEnablePeerAccess));
	std::vector<uint8_t> got(kIpcBytes), want(kIpcBytes);
	testcommon::fill_pattern(want.data(), kIpcBytes, 21);
	step("ipc child: read the parent's bytes");
	HIPTEST_CHECK(hipMemcpy(got.data(), p, kIpcBytes, hipMemcpyDeviceToHost));
	hiptest::expect_equal("ipc child: the parent's bytes", want.data(), got.data(), kIpcBytes);
	testcommon::fill_pattern(want.data(), kIpcBytes, 22);
	step("ipc child: write its bytes");
	HIPTEST_CHECK(hipMemcpy(p, want.data(), kIpcBytes, hipMemcpyHostToDevice));
	HIPTEST_CHECK(hipIpcCloseMemHandle(p));
	alarm(0);
	return (write(1, "done", 4) == 4) ? 0 : hiptest::kFail;
}

void case_ipc(const char *self)
{
	Device d(kIpcBytes);
	std::vector<uint8_t> buf(kIpcBytes);
	testcommon::fill_pattern(buf.data(), kIpcBytes, 21);
	step("ipc: upload and hipIpcGetMemHandle");
	HIPTEST_CHECK(hipMemcpy(d.p, buf.data(), kIpcBytes, hipMemcpyHostToDevice));
	hipIpcMemHandle_t h;
	HIPTEST_CHECK(hipIpcGetMemHandle(&h, d.p));
	int to_child[2], from_child[2];
	if (pipe(to_child) || pipe(from_child))
		hiptest::fail("pipe: %s", std::strerror(errno));
	// The child starts its own runtime, then reads, checks and writes.
	step("ipc: fork and exec the child, wait for it", hiptest::kInitSeconds + 3 * hiptest::kStepSeconds);
	pid_t pid = fork();
	if (pid < 0)
		hiptest::fail("fork: %s", std::strerror(errno));
	if (pid == 0) {
		dup2(to_child[0], 0);
		dup2(from_child[1], 1);
		execl(self, self, "--ipc-child", static_cast<char *>(nullptr));
		_exit(127);
	}
	close(to_child[0]);
	close(from_child[1]);
	if (write(to_child[1], &h, sizeof(h)) != ssize_t(sizeof(h)))
		hiptest::fail("ipc: short write of the handle to the child");
	close(to_child[1]);
	char done[4] = {};
	ssize_t got = read(from_child[0], done, sizeof(done));
	close(from_child[0]);
	int status = 0;
	waitpid(pid, &status, 0);
	if (got != 4 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		hiptest::fail("ipc: the child failed (status %#x; its stderr says why)", unsigned(status));
	step("ipc: read the child's bytes");
	std::vector<uint8_t> want(kIpcBytes);
	testcommon::fill_pattern(want.data(), kIpcBytes, 22);
	HIPTEST_CHECK(hipMemcpy(buf.data(), d.p, kIpcBytes, hipMemcpyDeviceToHost));
	hiptest::expect_equal("ipc: the child's bytes", want.data(), buf.data(), kIpcBytes);
}

} // namespace

int main(int argc, char **argv)
{
	if (argc == 2 && std::strcmp(argv[1], "--ipc-child") == 0)
		return ipc_child();
	const char *self = "/proc/self/exe";
	std::string exe(4096, '\0');
	ssize_t len = readlink(self, exe.data(), exe.size() - 1);
	if (len <= 0)
		hiptest::fail("readlink(/proc/self/exe): %s", std::strerror(errno));
	exe.resize(size_t(len));
	return hiptest::run_cases(argc, argv, hiptest::hip_init,
				  {{"memcpy", case_memcpy},
				   {"memset", case_memset},
				   {"events", case_events},
				   {"userptr", case_userptr},
				   {"managed", case_managed},
				   {"peer", case_peer},
				   {"ipc", [&exe] { case_ipc(exe.c_str()); }}});
}
