// SPDX-License-Identifier: GPL-2.0-only
//
// Whole HIP kernels (kernels.hip, compiled for gfx908 and gfx90a) run by the
// shader core over a fake address space (grids of whole workgroups, as HIP
// launches them: a kernel's blockDim is the partial size in a partial one), every result checked against the
// same computation on the CPU, bit for bit where the ISA defines the
// rounding: saxpy over a partial workgroup, an LDS tree reduction with
// barriers, a tiled matrix multiply over a 2D grid, global atomics, a
// private (scratch) array with f64 division, values kept in AccVGPRs (also
// across a CWSR save and resume mid-dispatch); then the failure paths: a
// VM fault, a userptr buffer, a dispatch resumed across many budget calls.
#include <cmath>
#include <cstdint>
#include <cstdlib>

#include "harness.h"

using namespace kfdemu::shader;
using namespace kfdemu::shader::test;

namespace {

constexpr uint64_t kCode = 0x10000000, kA = 0x100000000ull, kB = 0x200000000ull, kC = 0x300000000ull,
		   kD = 0x400000000ull;

struct Arch {
	Target target;
	const char *name, *path;
};

// Deterministic test data (a fixed LCG).
uint32_t lcg(uint32_t &s) { return s = s * 1664525u + 1013904223u; }
float frand(uint32_t &s) { return static_cast<float>(lcg(s) >> 8) / 16777216.0f * 4.0f - 2.0f; }

struct Rig {
	FakeMemory m;
	CodeObject co;
	Target t;
	explicit Rig(const Arch &a) : t(a.target) { co.load(a.path, m, kCode); }
	uint64_t kd(const char *name) { return co.symbol(std::string(name) + ".kd"); }
};

void saxpy(const Arch &a, bool userptr_y)
{
	Rig r(a);
	const int n = 1000;
	float alpha = 1.5f;
	r.m.map(kA, n * 4), r.m.map(kB, n * 4, userptr_y);
	std::vector<float> x(n), y(n);
	uint32_t s = 1;
	for (int i = 0; i < n; i++)
		x[i] = frand(s), y[i] = frand(s);
	std::memcpy(r.m.bytes(kA), x.data(), n * 4), std::memcpy(r.m.bytes(kB), y.data(), n * 4);
	Grid g;
	g.grid[0] = (n + 255) / 256 * 256, g.wg[0] = 256;  // HIP grids are whole workgroups
	Result res = run(r.m, r.t, r.kd("saxpy"), g, Args().add(alpha).add(kA).add(kB).add(n));
	SHADER_CHECK(res.status == Dispatch::Status::Done, "%s: %s %s %s", a.name, status_name(res.status),
		     res.why.c_str(), res.error.c_str());
	int bad = 0;
	for (int i = 0; i < n; i++) {
		float want = std::fma(alpha, x[i], y[i]);
		if (std::memcmp(&r.m.at<float>(kB)[i], &want, 4) != 0 && bad++ < 3)
			std::printf("  [%d] %a, CPU %a (x %a y %a)\n", i, r.m.at<float>(kB)[i], want, x[i], y[i]);
	}
	SHADER_CHECK(bad == 0, "%s: %d of %d results differ from the CPU's fmaf", a.name, bad, n);
}

void reduce(const Arch &a)
{
	Rig r(a);
	const int n = 4096 + 77, blocks = (n + 255) / 256;
	r.m.map(kA, n * 4), r.m.map(kB, blocks * 4);
	std::vector<float> in(n);
	uint32_t s = 2;
	for (float &v : in)
		v = frand(s);
	std::memcpy(r.m.bytes(kA), in.data(), n * 4);
	Grid g;
	g.grid[0] = blocks * 256, g.wg[0] = 256;
	Result res = run(r.m, r.t, r.kd("reduce"), g, Args().add(kA).add(kB).add(n));
	SHADER_CHECK(res.status == Dispatch::Status::Done, "%s: %s %s", a.name, status_name(res.status), res.why.c_str());
	int bad = 0;
	for (int b = 0; b < blocks; b++) {
		float t[256];
		for (int i = 0; i < 256; i++)
			t[i] = b * 256 + i < n ? in[b * 256 + i] : 0.0f;
		for (int k = 128; k > 0; k >>= 1)
			for (int i = 0; i < k; i++)
				t[i] += t[i + k];
		bad += std::memcmp(&r.m.at<float>(kB)[b], &t[0], 4) != 0;
	}
	SHADER_CHECK(bad == 0, "%s: %d of %d block sums differ", a.name, bad, blocks);
}

void matmul(const Arch &a)
{
	Rig r(a);
	const int n = 48;
	r.m.map(kA, n * n * 4), r.m.map(kB, n * n * 4), r.m.map(kC, n * n * 4);
	std::vector<float> A(n * n), B(n * n);
	uint32_t s = 3;
	for (int i = 0; i < n * n; i++)
		A[i] = frand(s), B[i] = frand(s);
	std::memcpy(r.m.bytes(kA), A.data(), n * n * 4), std::memcpy(r.m.bytes(kB), B.data(), n * n * 4);
	Grid g;
	g.dims = 2, g.grid[0] = n, g.grid[1] = n, g.wg[0] = 16, g.wg[1] = 16;
	Result res = run(r.m, r.t, r.kd("matmul"), g, Args().add(kA).add(kB).add(kC).add(n));
	SHADER_CHECK(res.status == Dispatch::Status::Done, "%s: %s %s", a.name, status_name(res.status), res.why.c_str());
	int bad = 0;
	for (int i = 0; i < n; i++)
		for (int j = 0; j < n; j++) {
			float acc = 0;
			for (int k = 0; k < n; k++)
				acc = std::fma(A[i * n + k], B[k * n + j], acc);
			bad += std::memcmp(&r.m.at<float>(kC)[i * n + j], &acc, 4) != 0;
		}
	SHADER_CHECK(bad == 0, "%s: %d of %d elements differ", a.name, bad, n * n);
}

void atomics(const Arch &a)
{
	Rig r(a);
	const int n = 3000;
	r.m.map(kA, n * 4), r.m.map(kB, 16 * 4), r.m.map(kC, 4), r.m.map(kD, 4);
	std::vector<int> in(n);
	uint32_t s = 4;
	int hist[16] = {}, mx = INT32_MIN;
	unsigned sum = 0;
	for (int &v : in) {
		v = static_cast<int>(lcg(s) >> 4);
		hist[v & 15]++, sum += static_cast<unsigned>(v), mx = std::max(mx, v);
	}
	std::memcpy(r.m.bytes(kA), in.data(), n * 4);
	*r.m.at<int>(kD) = INT32_MIN;
	Grid g;
	g.grid[0] = (n + 127) / 128 * 128, g.wg[0] = 128;
	Result res = run(r.m, r.t, r.kd("atomics"), g, Args().add(kA).add(kB).add(kC).add(kD).add(n));
	SHADER_CHECK(res.status == Dispatch::Status::Done, "%s: %s %s", a.name, status_name(res.status), res.why.c_str());
	SHADER_CHECK(std::memcmp(r.m.bytes(kB), hist, sizeof(hist)) == 0, "%s: histogram differs", a.name);
	SHADER_CHECK(*r.m.at<unsigned>(kC) == sum, "%s: sum %u, CPU %u", a.name, *r.m.at<unsigned>(kC), sum);
	SHADER_CHECK(*r.m.at<int>(kD) == mx, "%s: max %d, CPU %d", a.name, *r.m.at<int>(kD), mx);
}

void private_array(const Arch &a)
{
	Rig r(a);
	const int n = 200;
	r.m.map(kA, n * 8), r.m.map(kB, n * 8);
	std::vector<double> in(n);
	uint32_t s = 5;
	for (double &v : in)
		v = frand(s) * 1e3;
	std::memcpy(r.m.bytes(kA), in.data(), n * 8);
	Grid g;
	g.grid[0] = (n + 63) / 64 * 64, g.wg[0] = 64;
	Result res = run(r.m, r.t, r.kd("private_array"), g, Args().add(kA).add(kB).add(n));
	SHADER_CHECK(res.status == Dispatch::Status::Done, "%s: %s %s", a.name, status_name(res.status), res.why.c_str());
	int bad = 0;
	for (int i = 0; i < n; i++) {
		double v[24], sum = 0;
		for (int k = 0; k < 24; k++)
			v[k] = in[(i + k) % n] * (k + 1);
		for (int k = 0; k < 24; k++)
			sum += v[(k * 7 + i) % 24] / (k + 3.0);
		bad += std::memcmp(&r.m.at<double>(kB)[i], &sum, 8) != 0;
		if (bad == 1 && std::memcmp(&r.m.at<double>(kB)[i], &sum, 8) != 0)
			std::printf("  first: [%d] %.17g vs CPU %.17g\n", i, r.m.at<double>(kB)[i], sum);
	}
	SHADER_CHECK(bad == 0, "%s: %d of %d results differ", a.name, bad, n);
}

// AccVGPRs carried across a loop (kernels.hip's agpr_carry); with
// `cwsr_at`, the dispatch saved mid-flight (its waves holding values only in
// AGPRs) and resumed from the save: the result is the CPU's either way.
void agpr_carry(const Arch &a, uint64_t cwsr_at)
{
	Rig r(a);
	const int n = 4000, rounds = 40;
	r.m.map(kA, n * 4), r.m.map(kB, n * 4);
	std::vector<uint32_t> in(n);
	uint32_t s = 6;
	for (uint32_t &v : in)
		v = lcg(s);
	std::memcpy(r.m.bytes(kA), in.data(), n * 4);
	Grid g;
	g.grid[0] = (n + 255) / 256 * 256, g.wg[0] = 256;
	Result res = run(r.m, r.t, r.kd("agpr_carry"), g, Args().add(kA).add(kB).add(n).add(rounds), 10000, cwsr_at);
	SHADER_CHECK(res.status == Dispatch::Status::Done && res.error.empty(), "%s: %s %s %s", a.name,
		     status_name(res.status), res.why.c_str(), res.error.c_str());
	if (cwsr_at)
		SHADER_CHECK(res.saved.waves >= 4 && res.saved.groups_done > 0 &&
				     res.saved.groups_done + res.saved.waves / 4 < res.saved.groups,
			     "%s: saved mid-flight: %u waves, %llu of %llu workgroups done", a.name, res.saved.waves,
			     static_cast<unsigned long long>(res.saved.groups_done),
			     static_cast<unsigned long long>(res.saved.groups));
	int bad = 0;
	for (int i = 0; i < n; i++) {
		uint32_t h = in[i];
		for (int k = 0; k < rounds; k++)
			h = h * 0x19660du + 0x3c6ef35fu + static_cast<uint32_t>(k);
		const uint32_t want = h ^ in[i] ^ 0x5bd1e995u;
		if (r.m.at<uint32_t>(kB)[i] != want && bad++ < 3)
			std::printf("  [%d] %#x, CPU %#x\n", i, r.m.at<uint32_t>(kB)[i], want);
	}
	SHADER_CHECK(bad == 0, "%s: %d of %d results differ", a.name, bad, n);
}

// kernels.hip's narrow: bytes and shorts as hipcc compiles them (SDWA
// operands, the 16-bit ALU), against the same C++ on the CPU.
void narrow(const Arch &a)
{
	Rig r(a);
	const int n = 777;
	constexpr uint64_t kE = 0x500000000ull, kF = 0x600000000ull;
	r.m.map(kA, n * 4), r.m.map(kB, n * 4), r.m.map(kC, n), r.m.map(kD, n), r.m.map(kE, n * 2), r.m.map(kF, n * 2);
	std::vector<uint32_t> in(n);
	std::vector<uint8_t> b(n);
	std::vector<int16_t> h(n);
	uint32_t s = 7;
	for (int i = 0; i < n; i++)
		in[i] = lcg(s), b[i] = static_cast<uint8_t>(lcg(s) >> 24), h[i] = static_cast<int16_t>(lcg(s) >> 16);
	std::memcpy(r.m.bytes(kA), in.data(), n * 4), std::memcpy(r.m.bytes(kC), b.data(), n);
	std::memcpy(r.m.bytes(kE), h.data(), n * 2);
	Grid g;
	g.grid[0] = (n + 127) / 128 * 128, g.wg[0] = 128;
	Result res = run(r.m, r.t, r.kd("narrow"), g, Args().add(kA).add(kB).add(kC).add(kD).add(kE).add(kF).add(n));
	SHADER_CHECK(res.status == Dispatch::Status::Done, "%s: %s %s %s", a.name, status_name(res.status),
		     res.why.c_str(), res.error.c_str());
	int bad = 0;
	for (int i = 0; i < n; i++) {
		const uint32_t o = (in[i] % 256) * 3 + static_cast<uint8_t>(in[i] >> 8) + static_cast<uint16_t>(in[i] >> 3);
		const auto bo = static_cast<uint8_t>(b[i] * 7 + b[(i + 1) % n]);
		const auto ho = static_cast<int16_t>(static_cast<int16_t>(h[i] * h[i] - 3) >> 1);
		const bool ok = r.m.at<uint32_t>(kB)[i] == o && r.m.at<uint8_t>(kD)[i] == bo && r.m.at<int16_t>(kF)[i] == ho;
		if (!ok && bad++ < 3)
			std::printf("  [%d] %#x %#x %d, CPU %#x %#x %d\n", i, r.m.at<uint32_t>(kB)[i], r.m.at<uint8_t>(kD)[i],
				    r.m.at<int16_t>(kF)[i], o, bo, ho);
	}
	SHADER_CHECK(bad == 0, "%s: %d of %d results differ", a.name, bad, n);
}

// kernels.hip's halves: binary16 sums, products and fmas (v_add_f16,
// v_mul_f16, v_fma_f16) against the CPU's correctly rounded ones.
void halves(const Arch &a)
{
	Rig r(a);
	const int n = 1000;
	const uint64_t in[3] = {kA, kB, kC}, out[3] = {kD, 0x500000000ull, 0x600000000ull};
	std::vector<uint16_t> v[3];
	uint32_t s = 8;
	for (int k = 0; k < 3; k++) {
		r.m.map(in[k], n * 2), r.m.map(out[k], n * 2);
		for (int i = 0; i < n; i++)
			v[k].push_back(static_cast<uint16_t>(to_half(frand(s) * (k == 2 ? 8.0f : 40.0f))));
		std::memcpy(r.m.bytes(in[k]), v[k].data(), n * 2);
	}
	Grid g;
	g.grid[0] = (n + 255) / 256 * 256, g.wg[0] = 256;
	Args args;
	for (uint64_t va : {in[0], in[1], in[2], out[0], out[1], out[2]})
		args.add(va);
	Result res = run(r.m, r.t, r.kd("halves"), g, args.add(n));
	SHADER_CHECK(res.status == Dispatch::Status::Done, "%s: %s %s %s", a.name, status_name(res.status),
		     res.why.c_str(), res.error.c_str());
	int bad = 0;
	for (int i = 0; i < n; i++) {
		const long double x = half_value(v[0][i]), y = half_value(v[1][i]), z = half_value(v[2][i]);
		const uint32_t want[3] = {to_half(x + y), to_half(x * y), to_half(std::fmal(x, y, z))};
		for (int k = 0; k < 3; k++)
			if (r.m.at<uint16_t>(out[k])[i] != want[k] && bad++ < 3)
				std::printf("  [%d] output %d: %#x, CPU %#x\n", i, k, r.m.at<uint16_t>(out[k])[i], want[k]);
	}
	SHADER_CHECK(bad == 0, "%s: %d of %d results differ", a.name, bad, 3 * n);
}

// kernels.hip's half_math: v_sqrt/rsq/exp/log_f16 and the f16 roundings
// as hipcc emits them, against the correctly rounded CPU values (what the
// shader core computes; the hardware's transcendentals are approximations
// of about 1 ULP), on every binary16 value with a sign bit of 0 or 1 in
// steps of 7 (NaN results compared as NaN).
void half_math(const Arch &a)
{
	Rig r(a);
	std::vector<uint16_t> in;
	for (uint32_t h = 0; h < 0x10000; h += 7)
		in.push_back(static_cast<uint16_t>(h));
	const int n = static_cast<int>(in.size());
	r.m.map(kA, n * 2), r.m.map(kB, n * 16);
	std::memcpy(r.m.bytes(kA), in.data(), n * 2);
	Grid g;
	g.grid[0] = (n + 255) / 256 * 256, g.wg[0] = 256;
	Result res = run(r.m, r.t, r.kd("half_math"), g, Args().add(kA).add(kB).add(n));
	SHADER_CHECK(res.status == Dispatch::Status::Done, "%s: %s %s %s", a.name, status_name(res.status),
		     res.why.c_str(), res.error.c_str());
	int bad = 0;
	auto nan = [](uint32_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff); };
	for (int i = 0; i < n; i++) {
		const long double x = half_value(in[i]);
		const uint32_t want[8] = {to_half(std::sqrt(x)), to_half(1.0L / std::sqrt(x)), to_half(std::exp2(x)),
					  to_half(std::log2(x)), to_half(std::floor(x)), to_half(std::ceil(x)),
					  to_half(std::trunc(x)), to_half(std::nearbyint(x))};
		for (int k = 0; k < 8; k++) {
			const uint32_t got = r.m.at<uint16_t>(kB)[8 * i + k];
			if (got != want[k] && !(nan(got) && nan(want[k])) && bad++ < 5)
				std::printf("  %#x result %d: %#x, CPU %#x\n", in[i], k, got, want[k]);
		}
	}
	SHADER_CHECK(bad == 0, "%s: %d of %d results differ", a.name, bad, 8 * n);
}

// One wave's cross-lane reference for kernels.hip's lanes, from the ISA's
// definitions: `from(l)` is the lane l reads (-1: none), rows/banks the
// DPP masks; a lane that does not write keeps `old`, one whose source is
// missing or inactive reads 0 with bound_ctrl, else keeps `old`.
template <class From>
uint32_t dpp_ref(const uint32_t *v, uint64_t active, unsigned l, From from, unsigned rows, unsigned banks,
		 bool bound_ctrl, uint32_t old)
{
	if (!(rows >> (l / 16) & 1) || !(banks >> (l / 4 % 4) & 1))
		return old;
	const int f = from(static_cast<int>(l));
	if (f < 0 || f > 63 || !(active >> f & 1))
		return bound_ctrl ? 0 : old;
	return v[f];
}

uint32_t swizzle_ref(const uint32_t *v, unsigned l, unsigned pattern)
{
	if (pattern & 0x8000)
		return v[(l & ~3u) | (pattern >> (2 * (l % 4)) & 3)];
	const unsigned j = l % 32, a = pattern & 31, o = pattern >> 5 & 31, x = pattern >> 10 & 31;
	return v[(l & 32) | (((j & a) | o) ^ x)];
}

// The 16 results of lane l of the wave whose values are v (kernels.hip).
void lanes_ref(const uint32_t *v, unsigned l, uint32_t *o)
{
	const uint64_t all = ~0ull;
	const int row = static_cast<int>(l) & ~15, r = static_cast<int>(l) & 15;
	auto shr = [&](int n) { return [=](int x) { return r >= n ? x - n : -1; }; };
	o[0] = dpp_ref(v, all, l, shr(1), 0xf, 0xf, false, 0);
	o[1] = dpp_ref(v, all, l, [&](int) { return row ? row - 1 : -1; }, 0xa, 0xf, false, 7);
	o[2] = dpp_ref(v, all, l, [&](int x) { return (x & ~3) | (3 - (x & 3)); }, 0xf, 0xf, true, 0);
	o[3] = dpp_ref(v, all, l, [&](int x) { return x - 1; }, 0xf, 0xf, true, 0);
	o[4] = dpp_ref(v, all, l, [&](int x) { return x >= 32 ? 31 : -1; }, 0xc, 0xf, false, 5);
	o[5] = dpp_ref(v, all, l, [&](int x) { return r + 1 < 16 ? x + 1 : -1; }, 0xf, 0x5, true, 3);
	o[6] = dpp_ref(v, all, l, [&](int x) { return (x + 1) % 64; }, 0xf, 0xf, false, 0);
	o[7] = dpp_ref(v, all, l, [&](int) { return row + (r + 13) % 16; }, 0xf, 0xf, false, 0);
	o[8] = dpp_ref(v, all, l, [&](int) { return row + 15 - r; }, 0xf, 0xf, false, 0);
	o[9] = dpp_ref(v, all, l, [&](int x) { return (x & ~7) + 7 - (x & 7); }, 0xf, 0xf, false, 0);
	o[10] = v[l] + dpp_ref(v, all, l, shr(2), 0xf, 0xf, true, 0);
	auto fl = [](uint32_t x) { return std::bit_cast<float>((x & 0x807fffffu) | 0x3f800000u); };
	o[11] = std::bit_cast<uint32_t>(fl(v[l]) - fl(dpp_ref(v, all, l, [&](int x) { return (x + 63) % 64; }, 0xf, 0xf, true, 0)));
	uint64_t odd = 0;
	for (unsigned k = 0; k < 64; k++)
		odd |= uint64_t{v[k] & 1} << k;
	o[12] = v[l] & 1 ? dpp_ref(v, odd, l, [&](int x) { return x + 1; }, 0xf, 0xf, false, 9) : 9;
	o[13] = swizzle_ref(v, l, 0x801b) ^ swizzle_ref(v, l, 0x041f);
	o[14] = swizzle_ref(v, l, 0x1c1f) + swizzle_ref(v, l, 0x00b8);
	o[15] = swizzle_ref(v, l, 0x0c35);
}

// kernels.hip's lanes: DPP moves and ALU ops with every kind of control
// and mask, and ds_swizzle_b32's modes, against the reference per wave.
void lanes(const Arch &a)
{
	Rig r(a);
	const int n = 256;
	r.m.map(kA, n * 4), r.m.map(kB, n * 64);
	std::vector<uint32_t> in(n);
	uint32_t s = 11;
	for (int i = 0; i < n; i++)
		in[i] = lcg(s);
	std::memcpy(r.m.bytes(kA), in.data(), n * 4);
	Grid g;
	g.grid[0] = n, g.wg[0] = 128;
	Result res = run(r.m, r.t, r.kd("lanes"), g, Args().add(kA).add(kB));
	SHADER_CHECK(res.status == Dispatch::Status::Done, "%s: %s %s %s", a.name, status_name(res.status),
		     res.why.c_str(), res.error.c_str());
	int bad = 0;
	for (int i = 0; i < n; i++) {
		uint32_t want[16];
		lanes_ref(in.data() + (i & ~63), static_cast<unsigned>(i & 63), want);
		for (int k = 0; k < 16; k++)
			if (r.m.at<uint32_t>(kB)[16 * i + k] != want[k] && bad++ < 5)
				std::printf("  lane %d result %d: %#x, CPU %#x\n", i, k, r.m.at<uint32_t>(kB)[16 * i + k], want[k]);
	}
	SHADER_CHECK(bad == 0, "%s: %d of %d results differ", a.name, bad, 16 * n);
}

// kernels.hip's handshake: workgroup 0 spins until workgroup 1 sets a
// flag, which needs both in flight at once (kGroupsInFlight); run one
// after another it would spin forever (bounded here at 2 M
// wave-instructions).
void handshake(const Arch &a)
{
	Rig r(a);
	r.m.map(kA, 4), r.m.map(kB, 8);
	Grid g;
	g.grid[0] = 8 * 64, g.wg[0] = 64;
	Result res = run(r.m, r.t, r.kd("handshake"), g, Args().add(kA).add(kB), 10000, 0, 2000000);
	SHADER_CHECK(res.status == Dispatch::Status::Done && r.m.at<int>(kB)[0] == 1 && r.m.at<int>(kB)[1] == 2,
		     "%s: %s after %llu wave-instructions, out %d %d", a.name, status_name(res.status),
		     static_cast<unsigned long long>(res.instructions), r.m.at<int>(kB)[0], r.m.at<int>(kB)[1]);
}

// y unmapped: the first store faults, at y's VA.
void vm_fault(const Arch &a)
{
	Rig r(a);
	const int n = 64;
	r.m.map(kA, n * 4);
	Grid g;
	g.grid[0] = n, g.wg[0] = 64;
	Result res = run(r.m, r.t, r.kd("saxpy"), g, Args().add(1.0f).add(kA).add(kB).add(n));
	SHADER_CHECK(res.status == Dispatch::Status::VmFault, "%s: %s", a.name, status_name(res.status));
	SHADER_CHECK(res.fault_va == kB, "%s: fault at 0x%llx", a.name, static_cast<unsigned long long>(res.fault_va));
	SHADER_CHECK(res.why.find("global_load_dword") != std::string::npos, "%s: why: %s", a.name, res.why.c_str());
}

// The same reduction run one wave-instruction per call: the state carried
// between calls is the whole state.
void resumable(const Arch &a)
{
	Rig r(a);
	const int n = 512;
	r.m.map(kA, n * 4), r.m.map(kB, 8);
	for (int i = 0; i < n; i++)
		r.m.at<float>(kA)[i] = static_cast<float>(i);
	Grid g;
	g.grid[0] = n, g.wg[0] = 256;
	Result res = run(r.m, r.t, r.kd("reduce"), g, Args().add(kA).add(kB).add(n), 1);
	SHADER_CHECK(res.status == Dispatch::Status::Done, "%s: %s %s", a.name, status_name(res.status), res.why.c_str());
	SHADER_CHECK(r.m.at<float>(kB)[0] == 32640.0f && r.m.at<float>(kB)[1] == 98176.0f, "%s: %g %g", a.name,
		     r.m.at<float>(kB)[0], r.m.at<float>(kB)[1]);
}

void bad_packet(const Arch &a)
{
	Rig r(a);
	Grid g;
	g.grid[0] = 64, g.wg[0] = 2048;
	Result res = run(r.m, r.t, r.kd("saxpy"), g, Args().add(1.0f));
	SHADER_CHECK(res.error.find("1-1024") != std::string::npos, "%s: error: %s", a.name, res.error.c_str());
	Result none = run(r.m, r.t, 0xdead0000, Grid(), Args());
	SHADER_CHECK(none.error.find("kernel descriptor") != std::string::npos, "%s: error: %s", a.name,
		     none.error.c_str());
}

}  // namespace

int main()
{
	const Arch archs[] = {{Target::Gfx908, "gfx908", SHADER_KERNELS_GFX908},
			      {Target::Gfx90a, "gfx90a", SHADER_KERNELS_GFX90A}};
	if (!*archs[0].path) {
		std::printf("NOT RUN: the test kernels were not built (no clang-15 with HIP and ROCm device libraries at configure time)\n");
		return 77;
	}
	for (const Arch &a : archs) {
		std::string n = a.name;
		cases().add(n + ": saxpy with a guarded tail, bit-exact", [&] { saxpy(a, false); });
		cases().add(n + ": saxpy with y in userptr memory (Memory::read/write)", [&] { saxpy(a, true); });
		cases().add(n + ": LDS tree reduction with barriers, bit-exact", [&] { reduce(a); });
		cases().add(n + ": tiled matmul on a 2D grid, bit-exact", [&] { matmul(a); });
		cases().add(n + ": global atomics (add, max) match the CPU", [&] { atomics(a); });
		cases().add(n + ": private array (scratch) and f64 division, bit-exact", [&] { private_array(a); });
		cases().add(n + ": values carried in AccVGPRs (v_accvgpr_write/read/mov)", [&] { agpr_carry(a, 0); });
		cases().add(n + ": waves holding AccVGPR values saved mid-dispatch (CWSR) and resumed",
			    [&] { agpr_carry(a, 8000); });
		cases().add(n + ": bytes and shorts (SDWA, 16-bit ALU) match the CPU", [&] { narrow(a); });
		cases().add(n + ": half precision (v_add/mul/fma_f16) matches the CPU, bit-exact", [&] { halves(a); });
		cases().add(n + ": DPP (row/bank masks, bound_ctrl) and ds_swizzle_b32 match the CPU", [&] { lanes(a); });
		cases().add(n + ": half-precision math (v_sqrt/rsq/exp/log_f16, roundings) matches the CPU", [&] { half_math(a); });
		cases().add(n + ": workgroups of one dispatch in flight together (one waits for another)",
			    [&] { handshake(a); });
		cases().add(n + ": a store to unmapped memory is a VM fault at its VA", [&] { vm_fault(a); });
		cases().add(n + ": a dispatch resumed one wave-instruction at a time", [&] { resumable(a); });
		cases().add(n + ": bad packets and descriptors are refused with the reason", [&] { bad_packet(a); });
	}
	return cases().run();
}
