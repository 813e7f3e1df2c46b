// SPDX-License-Identifier: GPL-2.0-only
//
// One long kernel, for a checkpoint taken while its waves run (CWSR): 256
// workgroups of 256 work-items, each work-item mixing its value through
// `rounds` rounds of 64 multiply-adds, handing it through LDS to its
// neighbour between two barriers every round, so every result depends on
// the registers of two waves and on the LDS at every round. On the
// emulator it runs for seconds (about 20 M wave-instructions at the
// default 64 rounds). The element function is shared by the kernel and the
// CPU reference (__host__ __device__), integer only: the GPU's result
// equals the CPU's bit for bit.
//
//   hip_long_kernel [--rounds N] [--cpu-only] [--gate-after 0 --gate FILE]
//
// Prints "long kernel: G workgroups of 256, N rounds", then (with a gate)
// launches the kernel and, while it runs, "gate 0" and waits for FILE (a
// checkpoint harness dumps the program there, mid-kernel), then waits for
// the kernel, compares every element with the CPU's (the first mismatch
// fails: index, both values) and prints "out[0] <hex>", "out[last] <hex>"
// and "checksum <hex>". --cpu-only prints the same lines from the CPU
// reference alone (what a checkpoint test compares a restored run with).
#include "hiptest.h"

#include <string>
#include <vector>

namespace {

using hiptest::step;

constexpr int kGroups = 256, kGroupSize = 256, kItems = kGroups * kGroupSize, kInner = 64;

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

__global__ void long_kernel(uint32_t *out, int rounds)
{
	__shared__ uint32_t lds[kGroupSize];
	const uint32_t lid = threadIdx.x, gid = blockIdx.x * kGroupSize + lid;
	uint32_t x = seed(gid);
	for (int r = 0; r < rounds; ++r) {
		x = mix(x, r);
		lds[lid] = x;
		__syncthreads();
		x ^= lds[next_lane(lid)];
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
			x[g] ^= lds[g - g % kGroupSize + next_lane(g % kGroupSize)];
	}
	return x;
}

struct Options {
	int rounds = 64;
	bool cpu_only = false;
	bool gated = false;
	std::string gate;
};

Options parse(int argc, char **argv)
{
	Options o;
	for (int i = 1; i < argc; ++i) {
		const std::string a = argv[i];
		const bool has_value = i + 1 < argc;
		if (a == "--rounds" && has_value)
			o.rounds = std::atoi(argv[++i]);
		else if (a == "--cpu-only")
			o.cpu_only = true;
		else if (a == "--gate-after" && has_value && std::string(argv[i + 1]) == "0")
			o.gated = true, ++i;
		else if (a == "--gate" && has_value)
			o.gate = argv[++i];
		else {
			std::fprintf(stderr, "usage: %s [--rounds N] [--cpu-only] [--gate-after 0 --gate FILE]\n", argv[0]);
			std::exit(hiptest::kUsage);
		}
	}
	if (o.rounds < 1 || o.gated == o.gate.empty()) {
		std::fprintf(stderr, "%s: --rounds must be >= 1; --gate-after 0 and --gate go together\n", argv[0]);
		std::exit(hiptest::kUsage);
	}
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
	if (!o.cpu_only) {
		hiptest::hip_init();
		step("allocate the output");
		hiptest::Device out(kItems * sizeof(uint32_t));
		step("launch the long kernel");
		hipLaunchKernelGGL(long_kernel, dim3(kGroups), dim3(kGroupSize), 0, 0,
				   static_cast<uint32_t *>(out.p), o.rounds);
		HIPTEST_CHECK(hipGetLastError());
		if (o.gated)
			hiptest::wait_gate(o.gate, 0); // the kernel runs meanwhile
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
