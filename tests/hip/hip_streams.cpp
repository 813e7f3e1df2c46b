// SPDX-License-Identifier: GPL-2.0-only
//
// Rounds of work on three HIP streams ordered by events, with async copies:
//
//   stream 0: [at a gate: wait for a value, hipStreamWaitValue32]
//             hipMemcpyAsync host -> device (pinned), kernel `scale`, event e0
//   stream 1: hipStreamWaitEvent(e0), kernel `mix`, hipMemcpyAsync device ->
//             device, event e1
//   stream 2: hipStreamWaitEvent(e1), two hipMemcpyAsync device -> host
//             (pinned), event e2
//
// then hipEventSynchronize(e2), every output word compared with the CPU's,
// and "round R c <hash> d <hash>" printed (FNV-1a of the two outputs' bits);
// then a new device buffer is allocated, filled with hipMemset (HIP's own
// fill kernel), read back, checked and freed (after a restore: new memory
// and a new kernel of the runtime in the restored process).
// With --peer (two GPUs) stream 1, its kernel's output and the copy's
// destination are on GPU 1: after hipDeviceEnablePeerAccess the kernel on
// GPU 1 reads GPU 0's memory, the copy is a peer copy (GPU 0 -> GPU 1), and
// stream 1 waits for an event of GPU 0's stream.
//
//   hip_streams [--rounds N] [--cpu-only] [--peer] [--gate-after K]... [--gate FILE]
//
// --gate-after K --gate FILE: after round K is printed, round K+1 is
// enqueued on all three streams behind stream 0's wait for a value in
// signal memory (hipExtMallocWithFlags(hipMallocSignalMemory)), the three
// events are checked to be pending (hipEventQuery: hipErrorNotReady), the
// program prints "gate K" and waits for FILE (testkit.h Gates); then it
// writes the value from the CPU and the round completes. So a checkpoint at
// the gate holds three streams with their copies, kernels and events queued
// and unfinished, and no kernel running: the wait is a barrier-value packet
// on the CP (GPU_STREAMOPS_CP_WAIT=1, set by the program unless the
// environment sets it; HIP's default, GPU_STREAMOPS_CP_WAIT=0, waits in a
// spinning kernel, a dispatch in flight, whose waves the dump saves into the
// queue's context-save area: README.md). --cpu-only prints the lines a
// run prints but the gate lines, computed on the CPU alone (what a
// checkpoint test compares a restored run with).
#include "hiptest.h"

#include <algorithm>
#include <cstdlib>
#include <memory>

namespace {

using hiptest::step;

constexpr size_t kWords = 64 * 1024;
constexpr uint32_t kMix = 0x9e3779b1u;

__host__ __device__ inline uint32_t scale_word(uint32_t a, uint32_t round) { return a * 3u + round; }
__host__ __device__ inline uint32_t mix_word(uint32_t b, size_t i) { return b ^ (uint32_t(i) * kMix); }

__global__ void scale(const uint32_t *a, uint32_t *b, uint32_t round, size_t n)
{
	size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
	if (i < n)
		b[i] = scale_word(a[i], round);
}

__global__ void mix(const uint32_t *b, uint32_t *c, size_t n)
{
	size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
	if (i < n)
		c[i] = mix_word(b[i], i);
}

struct Options {
	int rounds = 4;
	bool cpu_only = false, peer = false;
	hiptest::Gates gates;
};

Options parse(int argc, char **argv)
{
	Options o;
	hiptest::parse_command_line(argc, argv, "--rounds", o.rounds,
				    {{"--cpu-only", &o.cpu_only, true}, {"--peer", &o.peer, true}}, o.gates);
	return o;
}

uint32_t fnv(const uint32_t *v, size_t n)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < n; ++i)
		h = (h ^ v[i]) * 16777619u;
	return h;
}

// Round r's input and its two outputs as the CPU computes them.
struct Expected {
	std::vector<uint32_t> in, c, d;
	explicit Expected(int r) : in(kWords), c(kWords), d(kWords)
	{
		for (size_t i = 0; i < kWords; ++i) {
			in[i] = uint32_t(testcommon::pattern_word(uint64_t(100 + r), i));
			d[i] = scale_word(in[i], uint32_t(r));
			c[i] = mix_word(d[i], i);
		}
	}
};

void print_round(int r, const uint32_t *c, const uint32_t *d)
{
	std::printf("round %d c %08x d %08x\n", r, fnv(c, kWords), fnv(d, kWords));
	std::fflush(stdout);
}

// The GPU side: buffers, streams and events, on GPU 0 (stream 1's part on
// GPU 1 with --peer).
class Rounds {
public:
	explicit Rounds(bool peer) : peer_(peer)
	{
		HIPTEST_CHECK(hipSetDevice(0));
		in_ = std::make_unique<hiptest::Pinned>(kWords * 4);
		outc_ = std::make_unique<hiptest::Pinned>(kWords * 4);
		outd_ = std::make_unique<hiptest::Pinned>(kWords * 4);
		a_ = std::make_unique<hiptest::Device>(kWords * 4);
		b_ = std::make_unique<hiptest::Device>(kWords * 4);
		s0_ = std::make_unique<hiptest::Stream>();
		s2_ = std::make_unique<hiptest::Stream>();
		e0p_ = std::make_unique<hiptest::Event>();
		e2p_ = std::make_unique<hiptest::Event>();
		HIPTEST_CHECK(hipExtMallocWithFlags(&flag_, 8, hipMallocSignalMemory));
		HIPTEST_CHECK(hipSetDevice(peer ? 1 : 0));
		if (peer)
			HIPTEST_CHECK(hipDeviceEnablePeerAccess(0, 0));
		c_ = std::make_unique<hiptest::Device>(kWords * 4);
		d_ = std::make_unique<hiptest::Device>(kWords * 4);
		s1_ = std::make_unique<hiptest::Stream>();
		e1p_ = std::make_unique<hiptest::Event>();
		e0_ = e0p_->e, e1_ = e1p_->e, e2_ = e2p_->e;
		HIPTEST_CHECK(hipSetDevice(0));
		if (peer)
			HIPTEST_CHECK(hipDeviceEnablePeerAccess(1, 0));
	}
	~Rounds() { (void)hipFree(flag_); }
	Rounds(const Rounds &) = delete;
	Rounds &operator=(const Rounds &) = delete;

	// Enqueues round r (behind a wait for flag value r when `gated`).
	void enqueue(int r, const Expected &x, bool gated)
	{
		std::copy(x.in.begin(), x.in.end(), static_cast<uint32_t *>(in_->p));
		const dim3 grid(unsigned((kWords + 255) / 256)), block(256);
		const size_t bytes = kWords * 4;
		HIPTEST_CHECK(hipSetDevice(0));
		if (gated)
			HIPTEST_CHECK(hipStreamWaitValue32(s0_->s, flag_, uint32_t(r), hipStreamWaitValueGte, ~0u));
		HIPTEST_CHECK(hipMemcpyAsync(a_->p, in_->p, bytes, hipMemcpyHostToDevice, s0_->s));
		hipLaunchKernelGGL(scale, grid, block, 0, s0_->s, static_cast<const uint32_t *>(a_->p),
				   static_cast<uint32_t *>(b_->p), uint32_t(r), kWords);
		HIPTEST_CHECK(hipGetLastError());
		HIPTEST_CHECK(hipEventRecord(e0_, s0_->s));
		HIPTEST_CHECK(hipSetDevice(peer_ ? 1 : 0));
		HIPTEST_CHECK(hipStreamWaitEvent(s1_->s, e0_, 0));
		hipLaunchKernelGGL(mix, grid, block, 0, s1_->s, static_cast<const uint32_t *>(b_->p),
				   static_cast<uint32_t *>(c_->p), kWords);
		HIPTEST_CHECK(hipGetLastError());
		HIPTEST_CHECK(hipMemcpyAsync(d_->p, b_->p, bytes, hipMemcpyDeviceToDevice, s1_->s));
		HIPTEST_CHECK(hipEventRecord(e1_, s1_->s));
		HIPTEST_CHECK(hipSetDevice(0));
		HIPTEST_CHECK(hipStreamWaitEvent(s2_->s, e1_, 0));
		HIPTEST_CHECK(hipMemcpyAsync(outc_->p, c_->p, bytes, hipMemcpyDeviceToHost, s2_->s));
		HIPTEST_CHECK(hipMemcpyAsync(outd_->p, d_->p, bytes, hipMemcpyDeviceToHost, s2_->s));
		HIPTEST_CHECK(hipEventRecord(e2_, s2_->s));
	}

	// Every event of the round not reached yet (the round waits at its gate).
	void expect_pending(int r)
	{
		for (hipEvent_t e : {e0_, e1_, e2_}) {
			hipError_t q = hipEventQuery(e);
			if (q != hipErrorNotReady)
				hiptest::fail("round %d behind its gate: hipEventQuery -> %d %s, want hipErrorNotReady", r,
					      int(q), hipGetErrorString(q));
		}
	}

	// Lets the gated round r go: the value its stream 0 waits for.
	void release(int r) { __atomic_store_n(static_cast<uint32_t *>(flag_), uint32_t(r), __ATOMIC_SEQ_CST); }

	void finish(int r, const Expected &x)
	{
		HIPTEST_CHECK(hipEventSynchronize(e2_));
		float ms = -1.0f;
		HIPTEST_CHECK(hipEventElapsedTime(&ms, e0_, e2_));
		if (!(ms >= 0.0f))
			hiptest::fail("round %d: hipEventElapsedTime(e0, e2) = %f ms", r, double(ms));
		const auto *c = static_cast<const uint32_t *>(outc_->p), *d = static_cast<const uint32_t *>(outd_->p);
		hiptest::expect_equal(("round " + std::to_string(r) + " c").c_str(), x.c.data(), c, kWords);
		hiptest::expect_equal(("round " + std::to_string(r) + " d").c_str(), x.d.data(), d, kWords);
		print_round(r, c, d);
	}

	// A buffer allocated, filled by the runtime and freed (see the header).
	void fresh(int r)
	{
		HIPTEST_CHECK(hipSetDevice(0));
		const size_t bytes = kWords * 4;
		hiptest::Device t(bytes);
		HIPTEST_CHECK(hipMemset(t.p, r & 0xff, bytes));
		std::vector<uint8_t> back(bytes), want(bytes, uint8_t(r & 0xff));
		HIPTEST_CHECK(hipMemcpy(back.data(), t.p, bytes, hipMemcpyDeviceToHost));
		hiptest::expect_equal(("round " + std::to_string(r) + " new buffer").c_str(), want.data(), back.data(),
				      bytes);
	}

private:
	bool peer_;
	std::unique_ptr<hiptest::Pinned> in_, outc_, outd_;
	std::unique_ptr<hiptest::Device> a_, b_, c_, d_;
	std::unique_ptr<hiptest::Stream> s0_, s1_, s2_;
	std::unique_ptr<hiptest::Event> e0p_, e1p_, e2p_; // each on its stream's GPU
	hipEvent_t e0_ = nullptr, e1_ = nullptr, e2_ = nullptr;
	void *flag_ = nullptr; // signal memory: the value a gated round waits for
};

} // namespace

int main(int argc, char **argv)
{
	const Options o = parse(argc, argv);
	auto gated = [&o](int r) { return o.gates.after_step(r - 1); };
	if (o.cpu_only) { // the rounds' lines (a harness leaves out the gate lines)
		for (int r = 0; r < o.rounds; ++r) {
			const Expected x(r);
			print_round(r, x.c.data(), x.d.data());
		}
		return 0;
	}
	setenv("GPU_STREAMOPS_CP_WAIT", "1", 0); // a stream's wait for a value on the CP, no kernel
	hiptest::hip_init();
	int gpus = 0;
	HIPTEST_CHECK(hipGetDeviceCount(&gpus));
	if (o.peer && gpus < 2)
		hiptest::not_run("--peer needs two GPUs");
	step("allocate the buffers, streams and events");
	Rounds rounds(o.peer);
	for (int r = 0; r < o.rounds; ++r) {
		step("round " + std::to_string(r));
		const Expected x(r);
		rounds.enqueue(r, x, gated(r));
		if (gated(r)) {
			rounds.expect_pending(r);
			o.gates.wait(r - 1);
			step("round " + std::to_string(r) + " after its gate");
			rounds.release(r);
		}
		rounds.finish(r, x);
		rounds.fresh(r);
	}
	step(hiptest::kTeardown);
	return 0;
}
