// SPDX-License-Identifier: GPL-2.0-only
//
// kfdemu-shader-bench KERNELS.co gfx908|gfx90a
//
// The shader core's speed (bench/bench.py's shader rows): runs the test
// kernels (tests/kernels.hip) over a fake address space on one thread and
// prints, per kernel, "name wave_instructions lane_ops seconds", seconds of
// the thread's CPU time (the machine is shared: wall time would measure
// the other processes too). Results are
// checked for being computed (not their values: test_kernels does that).
#include <ctime>
#include <cstdio>
#include <cstring>

#include "../tests/harness.h"

using namespace kfdemu::shader;
using namespace kfdemu::shader::test;

namespace {

constexpr uint64_t kCode = 0x10000000, kA = 0x100000000ull, kB = 0x200000000ull, kC = 0x300000000ull;

void report(const char *name, const Result &r, double s)
{
	if (r.status != Dispatch::Status::Done) {
		std::fprintf(stderr, "kfdemu-shader-bench: %s: %s %s\n", name, r.why.c_str(), r.error.c_str());
		std::exit(1);
	}
	std::printf("%s %llu %llu %.6f\n", name, static_cast<unsigned long long>(r.instructions),
		    static_cast<unsigned long long>(r.lane_ops), s);
}

double cpu_seconds()
{
	timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

template <class F>
void timed(const char *name, F f)
{
	double t0 = cpu_seconds();
	Result r = f();
	report(name, r, cpu_seconds() - t0);
}

}  // namespace

int main(int argc, char **argv)
{
	if (argc != 3 || (std::strcmp(argv[2], "gfx908") && std::strcmp(argv[2], "gfx90a"))) {
		std::fprintf(stderr, "usage: kfdemu-shader-bench KERNELS.co gfx908|gfx90a\n");
		return 2;
	}
	Target t = std::strcmp(argv[2], "gfx908") ? Target::Gfx90a : Target::Gfx908;
	FakeMemory m;
	CodeObject co;
	if (!co.load(argv[1], m, kCode)) {
		std::fprintf(stderr, "kfdemu-shader-bench: cannot load %s\n", argv[1]);
		return 1;
	}
	const int n = 128, len = 1 << 20;
	m.map(kA, len * 4), m.map(kB, len * 4), m.map(kC, len * 4);
	for (int i = 0; i < len; i++)
		m.at<float>(kA)[i] = static_cast<float>(i % 97), m.at<float>(kB)[i] = 1.0f;
	timed("matmul128", [&] {
		Grid g;
		g.dims = 2, g.grid[0] = g.grid[1] = n, g.wg[0] = g.wg[1] = 16;
		return run(m, t, co.symbol("matmul.kd"), g, Args().add(kA).add(kB).add(kC).add(n), 1 << 20);
	});
	timed("reduce1M", [&] {
		Grid g;
		g.grid[0] = len, g.wg[0] = 256;
		return run(m, t, co.symbol("reduce.kd"), g, Args().add(kA).add(kC).add(len), 1 << 20);
	});
	timed("saxpy1M", [&] {
		Grid g;
		g.grid[0] = len, g.wg[0] = 256;
		return run(m, t, co.symbol("saxpy.kd"), g, Args().add(2.0f).add(kA).add(kB).add(len), 1 << 20);
	});
	return 0;
}
