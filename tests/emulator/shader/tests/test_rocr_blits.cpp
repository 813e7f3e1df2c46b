// SPDX-License-Identifier: GPL-2.0-only
//
// ROCr's own blit kernels, as ROCr 5.2 runs them for hsa_amd_memory_fill
// and same-GPU copies: the raw CopyAligned, CopyMisaligned and Fill code
// taken from Debian's libhsa-runtime64 (found by their first instructions),
// behind an amd_kernel_code_t header built as ROCr builds it (entry at
// 256, kernarg pointer in s[0:1], workgroup id x in s2, 64-lane
// workgroups). Each copies or fills a buffer with unaligned ends, checked
// byte for byte, bytes outside the range untouched. NOT RUN without the
// library.
#include <cstdint>
#include <cstring>

#include "harness.h"

using namespace kfdemu::shader;
using namespace kfdemu::shader::test;

namespace {

constexpr const char *kRocr = "/usr/lib/x86_64-linux-gnu/libhsa-runtime64.so.1";
constexpr uint64_t kKernel = 0x10000000, kSrc = 0x100000000ull, kDst = 0x200000000ull;
constexpr uint32_t kSmemLoadX4_0 = 0xc00a0100;  // s_load_dwordx4 s[4:7], s[0:1], 0x0
constexpr uint32_t kEndpgm = 0xbf810000;
constexpr uint32_t kWorkitems = 256;  // 4 workgroups of 64

// ROCr's three blits, told apart by their fourth instruction.
struct Blits {
	std::vector<uint32_t> aligned, misaligned, fill;
};

// Each blit's code, from its first instruction (two s_load_dwordx4 of the
// kernel arguments) to its s_endpgm.
Blits find_blits(const std::vector<char> &lib)
{
	Blits b;
	for (size_t i = 0; i + 32 <= lib.size(); i += 4) {
		uint32_t w[8];
		std::memcpy(w, &lib[i], sizeof(w));
		if (w[0] != kSmemLoadX4_0 || w[1] != 0 || w[2] != 0xc00a0200 || w[3] != 0x10)
			continue;
		std::vector<uint32_t> code;
		for (size_t j = i; j + 4 <= lib.size() && code.size() < 1024; j += 4) {
			uint32_t v;
			std::memcpy(&v, &lib[j], 4);
			code.push_back(v);
			if (v == kEndpgm)
				break;
		}
		if (code.back() != kEndpgm)
			continue;
		// 4th: s_load_dwordx4 s[16:19] (CopyAligned), s_load_dword s16
		// (CopyMisaligned), or no third load at all (Fill).
		(w[6] == 0xc00a0400 ? b.aligned : w[6] == 0xc0020400 ? b.misaligned
			: w[4] != 0xc00a0300 ? b.fill : code).swap(code);
	}
	return b;
}

// An amd_kernel_code_t header (as ROCr's GpuAgent::AssembleShader fills
// it) followed by the code, at kKernel.
void load(FakeMemory &m, const std::vector<uint32_t> &code)
{
	m.map(kKernel, 256 + code.size() * 4 + 4096, false, true);
	uint8_t *p = m.bytes(kKernel);
	int64_t entry = 256;
	uint32_t rsrc1 = 3u << 18 | 1u << 23 | 4 << 6 | 8, rsrc2 = 2u << 1 | 1u << 7;
	uint32_t props = 1u << 3;  // enable_sgpr_kernarg_segment_ptr
	std::memcpy(p + 16, &entry, 8), std::memcpy(p + 48, &rsrc1, 4), std::memcpy(p + 52, &rsrc2, 4);
	std::memcpy(p + 56, &props, 4);
	std::memcpy(p + 256, code.data(), code.size() * 4);
}

Result dispatch(FakeMemory &m, Target t, const Args &args)
{
	Grid g;
	g.grid[0] = kWorkitems, g.wg[0] = 64;
	return run(m, t, kKernel, g, args);
}

void fill_buffers(FakeMemory &m, size_t n)
{
	m.map(kSrc, n), m.map(kDst, n);
	for (size_t i = 0; i < n; i++)
		m.bytes(kSrc)[i] = static_cast<uint8_t>(i * 7 + 3), m.bytes(kDst)[i] = 0xee;
}

// dst[off, off + len) must equal src's bytes, the rest still 0xee.
int copy_errors(FakeMemory &m, size_t n, size_t off, size_t len)
{
	int bad = 0;
	for (size_t i = 0; i < n; i++) {
		uint8_t want = i >= off && i < off + len ? m.bytes(kSrc)[i] : 0xee;
		bad += m.bytes(kDst)[i] != want;
	}
	return bad;
}

// CopyAligned: bytes to a 256-byte aligned destination, dwordx4 blocks of
// 16 x work-items, dwords, then the tail bytes (ROCr's four phases).
void copy_aligned(const std::vector<uint32_t> &code, Target t)
{
	FakeMemory m;
	load(m, code);
	const size_t n = 20000, off = 3, len = 17000;
	fill_buffers(m, n);
	uint64_t s = kSrc + off, d = kDst + off, end = s + len;
	uint64_t p2 = s + ((0x100 - (d & 0xff)) & 0xff);
	uint64_t p3 = p2 + (end - p2) / (16 * kWorkitems) * (16 * kWorkitems);
	uint64_t p4 = p3 + (end - p3) / 4 * 4;
	auto dst = [&](uint64_t src) { return src - kSrc + kDst; };
	Args a;
	a.add(s).add(d).add(p2).add(dst(p2)).add(p3).add(dst(p3)).add(p4).add(dst(p4)).add(end).add(dst(end)).add(kWorkitems);
	Result r = dispatch(m, t, a);
	SHADER_CHECK(r.status == Dispatch::Status::Done, "%s %s", status_name(r.status), r.why.c_str());
	int bad = copy_errors(m, n, off, len);
	SHADER_CHECK(bad == 0, "%d bytes wrong", bad);
}

// CopyMisaligned: unrolled bytes, then single bytes.
void copy_misaligned(const std::vector<uint32_t> &code, Target t)
{
	FakeMemory m;
	load(m, code);
	const size_t n = 5000, off = 1, len = 4321;
	fill_buffers(m, n);
	uint64_t s = kSrc + off, d = kDst + off, end = s + len;
	uint64_t p2 = s + len / (4 * kWorkitems) * (4 * kWorkitems);
	Args a;
	a.add(s).add(d).add(p2).add(p2 - kSrc + kDst).add(end).add(end - kSrc + kDst).add(kWorkitems);
	Result r = dispatch(m, t, a);
	SHADER_CHECK(r.status == Dispatch::Status::Done, "%s %s", status_name(r.status), r.why.c_str());
	int bad = copy_errors(m, n, off, len);
	SHADER_CHECK(bad == 0, "%d bytes wrong", bad);
}

// Fill: dwordx4 blocks of 16 x work-items, then dwords.
void fill(const std::vector<uint32_t> &code, Target t)
{
	FakeMemory m;
	load(m, code);
	const size_t n = 30000, off = 16, len = 6 * 16 * kWorkitems + 4 * 77;
	m.map(kDst, n);
	std::memset(m.bytes(kDst), 0xee, n);
	uint64_t d = kDst + off, p2 = d + len / (16 * kWorkitems) * (16 * kWorkitems), end = d + len;
	const uint32_t value = 0x12345678;
	Args a;
	a.add(d).add(p2).add(end).add(value).add(kWorkitems);
	Result r = dispatch(m, t, a);
	SHADER_CHECK(r.status == Dispatch::Status::Done, "%s %s", status_name(r.status), r.why.c_str());
	int bad = 0;
	for (size_t i = 0; i < n; i += 4) {
		uint32_t v;
		std::memcpy(&v, m.bytes(kDst) + i, 4);
		bad += v != (i >= off && i < off + len ? value : 0xeeeeeeee);
	}
	SHADER_CHECK(bad == 0, "%d dwords wrong", bad);
}

}  // namespace

int main()
{
	std::ifstream f(kRocr, std::ios::binary);
	std::vector<char> lib((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
	Blits b = find_blits(lib);
	if (b.aligned.empty() || b.misaligned.empty() || b.fill.empty()) {
		std::printf("NOT RUN: ROCr's blit kernels were not found in %s\n", kRocr);
		return 77;
	}
	for (auto [t, name] : {std::pair{Target::Gfx908, "gfx908"}, std::pair{Target::Gfx90a, "gfx90a"}}) {
		std::string n = name;
		Target tt = t;
		cases().add(n + ": ROCr CopyAligned, 17000 bytes at offset 3", [&b, tt] { copy_aligned(b.aligned, tt); });
		cases().add(n + ": ROCr CopyMisaligned, 4321 bytes", [&b, tt] { copy_misaligned(b.misaligned, tt); });
		cases().add(n + ": ROCr Fill, dwordx4 blocks then dwords", [&b, tt] { fill(b.fill, tt); });
	}
	return cases().run();
}
