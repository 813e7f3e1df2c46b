// SPDX-License-Identifier: GPL-2.0-only
//
// One long kernel, for a checkpoint taken while its waves run (CWSR): 64
// workgroups of 256 work-items, each work-item mixing its value through
// `rounds` rounds of 32 multiply-adds, handing it through LDS to its
// neighbour between two barriers every round, so every result depends on
// the registers of two waves and on the LDS at every round. Workgroup
// kHeldGroup (the middle one) waits half-way through its rounds until the
// host releases it (a flag in pinned memory), so a checkpoint taken before
// the release finds waves mid-kernel, with workgroups done and others not,
// however fast the machine; the program releases it right after the launch,
// or with gate 1 once past it. The element function is shared by the kernel and the
// CPU reference (__host__ __device__), integer only: the GPU's result
// equals the CPU's bit for bit.
//
//   hip_long_kernel [--rounds N] [--cpu-only] [--gate-after 0|1]... [--gate FILE]
//
// Prints "long kernel: G workgroups of 256, N rounds", allocates and
// clears the output (the runtime makes its queues), (gate 0), launches the
// kernel, prints "launched", and while it
// runs (gate 1), then waits for the kernel, compares every element with the
// CPU's (the first mismatch fails: index, both values) and prints
// "out[0] <hex>", "out[last] <hex>" and "checksum <hex>". A gate K given
// with --gate-after K prints "gate K" and waits for FILE (testkit.h's
// Gates): a checkpoint harness looks at the program at gate 0 and
// dumps it at gate 1, mid-kernel. --cpu-only prints the same lines but the
// gates' from the CPU reference alone (what a checkpoint test compares a
// restored run with).
#include "hiptest.h"

#include <algorithm>
#include <string>
#include <vector>

namespace {

using hiptest::step;

constexpr int kGroups = 64, kGroupSize = 256, kItems = kGroups * kGroupSize, kInner = 32;
constexpr unsigned kHeldGroup = kGroups / 2;

__host__ __device__ uint32_t mix(uint32_t x, int round)
{
	for (int i = 0; i < kInner; ++i)
		x = x * 0x19660du + 0x3c6ef35fu + uint32_t(i) + uint32_t(round);
	return x;
}

__host__ __device__ uint32_t seed(uint32_t gid) { return gid * 0x9e3779b1u; }

// The work-item whose value a work-item takes each round: the next one, the
// last taking the first's (a compare, not a modulo: hipcc's `% 256` is a
// byte select, an SDWA form the emulator's shader core does not run).
__host__ __device__ uint32_t next_lane(uint32_t lid) { return lid == kGroupSize - 1 ? 0 : lid + 1; }

// The neighbour's value rotated: the multiply-adds carry low bits up only,
// the rotation brings high bits down (a plain XOR of neighbours on 256
// work-items cancels out to 0 within 256 rounds).
__host__ __device__ uint32_t rotate(uint32_t y) { return y << 7 | y >> 25; }

// Spins until *release is not 0 (a relaxed atomic load: the host's store
// reaches the GPU's next read).
__device__ void wait_release(const uint32_t *release)
{
	while (__atomic_load_n(release, __ATOMIC_RELAXED) == 0)
		__builtin_amdgcn_s_sleep(2);
}

__global__ void long_kernel(uint32_t *out, int rounds, const uint32_t *release)
{
	__shared__ uint32_t lds[kGroupSize];
	const uint32_t lid = threadIdx.x, gid = blockIdx.x * kGroupSize + lid;
	uint32_t x = seed(gid);
	for (int r = 0; r < rounds; ++r) {
		if (r == rounds / 2 && blockIdx.x == kHeldGroup)
			wait_release(release);
		x = mix(x, r);
		lds[lid] = x;
		__syncthreads();
		x ^= rotate(lds[next_lane(lid)]);
		__syncthreads();
	}
	out[gid] = x;
}

std::vector<uint32_t> cpu_reference(int rounds)
{
	std::vector<uint32_t> x(kItems);
	for (uint32_t g = 0; g < kItems; ++g)
		x[g] = seed(g);
	std::vector<uint32_t> lds(kItems);
	for (int r = 0; r < rounds; ++r) {
		for (uint32_t &v : x)
			v = mix(v, r);
		lds = x;
		for (uint32_t g = 0; g < kItems; ++g)
			x[g] ^= rotate(lds[g - g % kGroupSize + next_lane(g % kGroupSize)]);
	}
	return x;
}

struct Options {
	int rounds = 2048;
	bool cpu_only = false;
	hiptest::Gates gates; // after 0 (before the launch) and 1 (the kernel held)
};

Options parse(int argc, char **argv)
{
	Options o;
	hiptest::parse_command_line(argc, argv, "--rounds", o.rounds, {{"--cpu-only", &o.cpu_only, true}}, o.gates,
				    {"0|1", " (0 or 1)", [](int k) { return k == 0 || k == 1; }});
	return o;
}

uint32_t checksum(const std::vector<uint32_t> &v)
{
	uint32_t h = 2166136261u;
	for (uint32_t u : v)
		h = (h ^ u) * 16777619u;
	return h;
}

} // namespace

int main(int argc, char **argv)
{
	const Options o = parse(argc, argv);
	std::printf("long kernel: %d workgroups of %d, %d rounds\n", kGroups, kGroupSize, o.rounds);
	std::fflush(stdout);
	const std::vector<uint32_t> want = cpu_reference(o.rounds);
	std::vector<uint32_t> got = want;
	auto gate = [&](int k) {
		if (o.gates.after_step(k))
			o.gates.wait(k);
	};
	if (o.cpu_only) {
		std::printf("launched\n");
	} else {
		hiptest::hip_init();
		step("allocate the output");
		hiptest::Device out(kItems * sizeof(uint32_t));
		hiptest::Pinned release(sizeof(uint32_t));
		auto *flag = static_cast<uint32_t *>(release.p);
		__atomic_store_n(flag, 0u, __ATOMIC_RELEASE);
		step("clear the output (the runtime makes its queues)");
		HIPTEST_CHECK(hipMemset(out.p, 0, kItems * sizeof(uint32_t)));
		HIPTEST_CHECK(hipDeviceSynchronize());
		gate(0);
		step("launch the long kernel");
		hipLaunchKernelGGL(long_kernel, dim3(kGroups), dim3(kGroupSize), 0, 0,
				   static_cast<uint32_t *>(out.p), o.rounds, flag);
		HIPTEST_CHECK(hipGetLastError());
		std::printf("launched\n");
		std::fflush(stdout);
		gate(1); // the kernel holds meanwhile
		__atomic_store_n(flag, 1u, __ATOMIC_RELEASE);
		step("wait for the long kernel", 600);
		HIPTEST_CHECK(hipDeviceSynchronize());
		step("download the output");
		HIPTEST_CHECK(hipMemcpy(got.data(), out.p, kItems * sizeof(uint32_t), hipMemcpyDeviceToHost));
		hiptest::expect_equal("the long kernel's output", want.data(), got.data(), kItems);
	}
	std::printf("out[0] %08x\nout[last] %08x\nchecksum %08x\n", got[0], got[kItems - 1], checksum(got));
	std::fflush(stdout);
	step(hiptest::kTeardown);
	return 0;
}
