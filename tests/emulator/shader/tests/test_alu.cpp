// SPDX-License-Identifier: GPL-2.0-only
//
// Instruction semantics: one wave runs a kernel assembled by llvm-mc-15 from
// the table below (each row: instructions leaving their result in v5, from
// inputs a, b, c in v2, v3, v4), and every lane's result is compared with
// the row's CPU computation, bit for bit (NaNs: both NaN). The inputs mix
// ordinary values with signed zeros, denormals, infinities, NaNs and
// integer edges. The table is the one source of truth: the program writes
// the assembly from it and runs llvm-mc-15 itself (NOT RUN without it).
// Then the stops: an unimplemented instruction, ds_gws_init (GWS: decoded,
// not run), s_trap, an invalid word.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <unistd.h>

#include "harness.h"

using namespace kfdemu::shader;
using namespace kfdemu::shader::test;

namespace {

using U = uint32_t;
using Fn = U (*)(U a, U b, U c, unsigned lane);

struct Row {
	const char *name;	// what the row checks
	const char *code;	// instructions (';'-separated), result in v5
	Fn cpu;
	bool fp;		// a float result: NaN matches any NaN
	bool gfx90a_only = false;	// an instruction or operand gfx908 lacks
	bool f16 = false;	// a binary16 result in the low half: NaN matches any NaN there
};

float f(U u) { return std::bit_cast<float>(u); }
U u(float v) { return std::bit_cast<U>(v); }
int32_t i(U v) { return static_cast<int32_t>(v); }
float ftz(float v) { return std::fpclassify(v) == FP_SUBNORMAL ? std::copysign(0.0f, v) : v; }
// A binary16 (low half) with a denormal flushed to a signed zero.
U ftz16(U h) { return h & 0x7c00 ? h & 0xffff : h & 0x8000; }
// The ISA's class index of a binary16 (v_cmp_class bit numbers).
unsigned class16(U h)
{
	const U e = h >> 10 & 31, m = h & 0x3ff;
	const bool neg = h >> 15 & 1;
	if (e == 31)
		return m ? (m >> 9 & 1) : neg ? 2 : 9;
	if (e)
		return neg ? 3 : 8;
	return m ? (neg ? 4 : 7) : (neg ? 5 : 6);
}
// The ISA's class index of an f32 (v_cmp_class bit numbers).
unsigned fp_class(U a)
{
	float v = f(a);
	bool neg = std::signbit(v);
	switch (std::fpclassify(v)) {
	case FP_NAN: return a & 0x400000 ? 1 : 0;
	case FP_INFINITE: return neg ? 2 : 9;
	case FP_NORMAL: return neg ? 3 : 8;
	case FP_SUBNORMAL: return neg ? 4 : 7;
	default: return neg ? 5 : 6;
	}
}

template <class T>
U sat(float v)
{
	if (std::isnan(v))
		return 0;
	if (v <= float(std::numeric_limits<T>::min()))
		return U(std::numeric_limits<T>::min());
	if (v >= float(std::numeric_limits<T>::max()))
		return U(std::numeric_limits<T>::max());
	return U(T(v));
}

const Row kRows[] = {
	{"v_add_f32", "v_add_f32 v5, v2, v3", [](U a, U b, U, unsigned) { return u(f(a) + f(b)); }, true},
	{"v_sub_f32", "v_sub_f32 v5, v2, v3", [](U a, U b, U, unsigned) { return u(f(a) - f(b)); }, true},
	{"v_subrev_f32", "v_subrev_f32 v5, v2, v3", [](U a, U b, U, unsigned) { return u(f(b) - f(a)); }, true},
	{"v_mul_f32", "v_mul_f32 v5, v2, v3", [](U a, U b, U, unsigned) { return u(f(a) * f(b)); }, true},
	{"v_fma_f32", "v_fma_f32 v5, v2, v3, v4", [](U a, U b, U c, unsigned) { return u(std::fma(f(a), f(b), f(c))); }, true},
	{"v_fmac_f32", "v_mov_b32 v5, v4; v_fmac_f32 v5, v2, v3", [](U a, U b, U c, unsigned) { return u(std::fma(f(a), f(b), f(c))); }, true},
	{"v_mad_f32 (not fused, denormals flushed)", "v_mad_f32 v5, v2, v3, v4", [](U a, U b, U c, unsigned) { return u(ftz(ftz(ftz(f(a)) * ftz(f(b))) + ftz(f(c)))); }, true},
	{"v_mac_f32", "v_mov_b32 v5, v4; v_mac_f32 v5, v2, v3", [](U a, U b, U c, unsigned) { return u(ftz(ftz(ftz(f(a)) * ftz(f(b))) + ftz(f(c)))); }, true},
	{"v_min_f32", "v_min_f32 v5, v2, v3", [](U a, U b, U, unsigned) { return u(std::fmin(f(a), f(b))); }, true},
	{"v_max_f32", "v_max_f32 v5, v2, v3", [](U a, U b, U, unsigned) { return u(std::fmax(f(a), f(b))); }, true},
	{"neg/abs modifiers", "v_add_f32_e64 v5, -v2, |v3|", [](U a, U b, U, unsigned) { return u(-f(a) + std::fabs(f(b))); }, true},
	{"clamp", "v_add_f32_e64 v5, v2, v3 clamp", [](U a, U b, U, unsigned) { float r = f(a) + f(b); return u(std::isnan(r) ? 0.0f : std::fmin(std::fmax(r, 0.0f), 1.0f)); }, true},
	{"omod mul:2 ignored in IEEE mode (the kernel's)", "v_add_f32_e64 v5, v2, v3 mul:2", [](U a, U b, U, unsigned) { return u(f(a) + f(b)); }, true},
	{"omod mul:2 and clamp with IEEE off", "s_mov_b32 s20, 0; s_setreg_b32 hwreg(HW_REG_MODE, 9, 1), s20; v_add_f32_e64 v5, v2, v3 mul:2; v_mul_f32_e64 v6, v2, v3 clamp div:2; v_add_f32 v5, v5, v6; s_mov_b32 s20, 1; s_setreg_b32 hwreg(HW_REG_MODE, 9, 1), s20", [](U a, U b, U, unsigned) { float m = f(a) * f(b) * 0.5f; return u((f(a) + f(b)) * 2.0f + (std::isnan(m) ? 0.0f : std::fmin(std::fmax(m, 0.0f), 1.0f))); }, true},
	{"inline float constant", "v_mul_f32 v5, 0.5, v2", [](U a, U, U, unsigned) { return u(0.5f * f(a)); }, true},
	{"literal", "v_add_f32 v5, 0x40490fdb, v2", [](U a, U, U, unsigned) { return u(3.14159274f + f(a)); }, true},
	{"v_madak_f32", "v_madak_f32 v5, v2, v3, 0x3fc00000", [](U a, U b, U, unsigned) { return u(ftz(ftz(ftz(f(a)) * ftz(f(b))) + 1.5f)); }, true},
	{"v_cvt_i32_f32", "v_cvt_i32_f32 v5, v2", [](U a, U, U, unsigned) { return sat<int32_t>(f(a)); }, false},
	{"v_cvt_u32_f32", "v_cvt_u32_f32 v5, v2", [](U a, U, U, unsigned) { return sat<uint32_t>(f(a)); }, false},
	{"v_cvt_f32_i32", "v_cvt_f32_i32 v5, v2", [](U a, U, U, unsigned) { return u(float(i(a))); }, true},
	{"v_cvt_f32_u32", "v_cvt_f32_u32 v5, v2", [](U a, U, U, unsigned) { return u(float(a)); }, true},
	{"v_rndne_f32", "v_rndne_f32 v5, v2", [](U a, U, U, unsigned) { return u(std::nearbyint(f(a))); }, true},
	{"v_floor_f32", "v_floor_f32 v5, v2", [](U a, U, U, unsigned) { return u(std::floor(f(a))); }, true},
	{"v_ceil_f32", "v_ceil_f32 v5, v2", [](U a, U, U, unsigned) { return u(std::ceil(f(a))); }, true},
	{"v_trunc_f32", "v_trunc_f32 v5, v2", [](U a, U, U, unsigned) { return u(std::trunc(f(a))); }, true},
	{"v_ldexp_f32", "v_and_b32 v6, 63, v3; v_ldexp_f32 v5, v2, v6", [](U a, U b, U, unsigned) { return u(std::ldexp(f(a), int(b & 63))); }, true},
	{"v_med3_f32", "v_med3_f32 v5, v2, v3, v4", [](U a, U b, U c, unsigned) { float x = f(a), y = f(b), z = f(c); if (std::isnan(x) || std::isnan(y) || std::isnan(z)) return u(std::fmin(std::fmin(x, y), z)); return u(std::max(std::min(x, y), std::min(std::max(x, y), z))); }, true},
	{"v_cmp_lt_f32 + v_cndmask", "v_cmp_lt_f32 vcc, v2, v3; v_cndmask_b32 v5, 0, 1, vcc", [](U a, U b, U, unsigned) { return U(f(a) < f(b)); }, false},
	{"v_cmp_nge_f32 (unordered)", "v_cmp_nge_f32 vcc, v2, v3; v_cndmask_b32 v5, 0, 1, vcc", [](U a, U b, U, unsigned) { return U(!(f(a) >= f(b))); }, false},
	{"v_cmp_class_f32", "v_mov_b32 v6, 0x1a5; v_cmp_class_f32 vcc, v2, v6; v_cndmask_b32 v5, 0, 1, vcc", [](U a, U, U, unsigned) { return U(0x1a5 >> fp_class(a) & 1); }, false},
	{"v_cmp_gt_i32 e64 into SGPRs", "v_cmp_gt_i32_e64 s[20:21], v2, v3; v_cndmask_b32_e64 v5, 7, 9, s[20:21]", [](U a, U b, U, unsigned) { return i(a) > i(b) ? 9u : 7u; }, false},
	{"v_cmpx_lt_u32 (EXEC)", "s_mov_b64 s[22:23], exec; v_mov_b32 v5, 0; v_cmpx_lt_u32 vcc, v2, v3; v_mov_b32 v5, 1; s_mov_b64 exec, s[22:23]", [](U a, U b, U, unsigned) { return U(a < b); }, false},
	{"v_add_u32", "v_add_u32 v5, v2, v3", [](U a, U b, U, unsigned) { return a + b; }, false},
	{"v_sub_u32", "v_sub_u32 v5, v2, v3", [](U a, U b, U, unsigned) { return a - b; }, false},
	{"v_add_co_u32 carry", "v_add_co_u32_e64 v6, s[20:21], v2, v3; v_cndmask_b32_e64 v5, 0, 1, s[20:21]", [](U a, U b, U, unsigned) { return U((uint64_t(a) + b) >> 32); }, false},
	{"v_addc_co_u32", "v_cmp_lt_u32 vcc, v4, v2; v_addc_co_u32 v5, vcc, v2, v3, vcc", [](U a, U b, U c, unsigned) { return a + b + (c < a); }, false},
	{"v_sub_co_u32 borrow", "v_sub_co_u32 v6, vcc, v2, v3; v_cndmask_b32 v5, 0, 1, vcc", [](U a, U b, U, unsigned) { return U(b > a); }, false},
	{"v_subbrev_co_u32", "v_cmp_lt_u32 vcc, v4, v2; v_subbrev_co_u32 v5, vcc, v2, v3, vcc", [](U a, U b, U c, unsigned) { return b - a - (c < a); }, false},
	{"v_mul_lo_u32", "v_mul_lo_u32 v5, v2, v3", [](U a, U b, U, unsigned) { return a * b; }, false},
	{"v_mul_hi_u32", "v_mul_hi_u32 v5, v2, v3", [](U a, U b, U, unsigned) { return U((uint64_t(a) * b) >> 32); }, false},
	{"v_mul_hi_i32", "v_mul_hi_i32 v5, v2, v3", [](U a, U b, U, unsigned) { return U(uint64_t(int64_t(i(a)) * i(b)) >> 32); }, false},
	{"v_mul_u32_u24", "v_mul_u32_u24 v5, v2, v3", [](U a, U b, U, unsigned) { return (a & 0xffffff) * (b & 0xffffff); }, false},
	{"v_mul_i32_i24", "v_mul_i32_i24 v5, v2, v3", [](U a, U b, U, unsigned) { return U(int64_t(i(a << 8) >> 8) * (i(b << 8) >> 8)); }, false},
	{"v_mad_u32_u24", "v_mad_u32_u24 v5, v2, v3, v4", [](U a, U b, U c, unsigned) { return (a & 0xffffff) * (b & 0xffffff) + c; }, false},
	{"v_lshlrev_b32", "v_lshlrev_b32 v5, v3, v2", [](U a, U b, U, unsigned) { return a << (b & 31); }, false},
	{"v_lshrrev_b32", "v_lshrrev_b32 v5, v3, v2", [](U a, U b, U, unsigned) { return a >> (b & 31); }, false},
	{"v_ashrrev_i32", "v_ashrrev_i32 v5, v3, v2", [](U a, U b, U, unsigned) { return U(i(a) >> (b & 31)); }, false},
	{"v_bfe_u32", "v_bfe_u32 v5, v2, v3, v4", [](U a, U b, U c, unsigned) { U o = b & 31, w = c & 31; return w ? (a >> o) & ((1u << w) - 1) : 0; }, false},
	{"v_bfe_i32", "v_bfe_i32 v5, v2, 4, 7", [](U a, U, U, unsigned) { return U(i(a << 21) >> 25); }, false},
	{"v_bfi_b32", "v_bfi_b32 v5, v2, v3, v4", [](U a, U b, U c, unsigned) { return (a & b) | (~a & c); }, false},
	{"v_alignbit_b32", "v_alignbit_b32 v5, v2, v3, v4", [](U a, U b, U c, unsigned) { return U(((uint64_t(a) << 32) | b) >> (c & 31)); }, false},
	{"v_alignbyte_b32", "v_alignbyte_b32 v5, v2, v3, v4", [](U a, U b, U c, unsigned) { return U(((uint64_t(a) << 32) | b) >> (8 * (c & 3))); }, false},
	{"v_perm_b32", "v_mov_b32 v6, 0x0c070105; v_perm_b32 v5, v2, v3, v6", [](U a, U b, U, unsigned) { uint64_t x = uint64_t(a) << 32 | b; return U((x >> 40 & 0xff) | (x >> 8 & 0xff) << 8 | (x >> 56 & 0xff) << 16); }, false},
	{"v_add3_u32", "v_add3_u32 v5, v2, v3, v4", [](U a, U b, U c, unsigned) { return a + b + c; }, false},
	{"v_lshl_add_u32", "v_lshl_add_u32 v5, v2, 3, v4", [](U a, U, U c, unsigned) { return (a << 3) + c; }, false},
	{"v_lshl_or_b32", "v_lshl_or_b32 v5, v2, 5, v4", [](U a, U, U c, unsigned) { return (a << 5) | c; }, false},
	{"v_and_or_b32", "v_and_or_b32 v5, v2, v3, v4", [](U a, U b, U c, unsigned) { return (a & b) | c; }, false},
	{"v_xad_u32", "v_xad_u32 v5, v2, v3, v4", [](U a, U b, U c, unsigned) { return (a ^ b) + c; }, false},
	{"v_min_i32", "v_min_i32 v5, v2, v3", [](U a, U b, U, unsigned) { return U(std::min(i(a), i(b))); }, false},
	{"v_max_u32", "v_max_u32 v5, v2, v3", [](U a, U b, U, unsigned) { return std::max(a, b); }, false},
	{"v_med3_i32", "v_med3_i32 v5, v2, v3, v4", [](U a, U b, U c, unsigned) { int32_t x = i(a), y = i(b), z = i(c); return U(std::max(std::min(x, y), std::min(std::max(x, y), z))); }, false},
	{"v_ffbh_u32", "v_ffbh_u32 v5, v2", [](U a, U, U, unsigned) { return a ? U(__builtin_clz(a)) : ~0u; }, false},
	{"v_ffbl_b32", "v_ffbl_b32 v5, v2", [](U a, U, U, unsigned) { return a ? U(__builtin_ctz(a)) : ~0u; }, false},
	{"v_bfrev_b32", "v_bfrev_b32 v5, v2", [](U a, U, U, unsigned) { U r = 0; for (int k = 0; k < 32; k++) r |= (a >> k & 1) << (31 - k); return r; }, false},
	{"v_bcnt_u32_b32", "v_bcnt_u32_b32 v5, v2, v3", [](U a, U b, U, unsigned) { return U(__builtin_popcount(a)) + b; }, false},
	{"v_mbcnt_lo/hi (lane index)", "v_mbcnt_lo_u32_b32 v5, -1, 0; v_mbcnt_hi_u32_b32 v5, -1, v5", [](U, U, U, unsigned l) { return U(l); }, false},
	{"v_readfirstlane + s_bfe_u32", "v_readfirstlane_b32 s20, v2; s_bfe_u32 s21, s20, 0x50003; v_mov_b32 v5, s21", [](U, U, U, unsigned) { return 0u; }, false},
	{"v_readlane + s_mul_hi_u32", "v_readlane_b32 s20, v2, 5; v_readlane_b32 s21, v3, 5; s_mul_hi_u32 s20, s20, s21; v_mov_b32 v5, s20", [](U, U, U, unsigned) { return 0u; }, false},
	{"v_cvt_f64_f32 + v_fma_f64 + v_cvt_f32_f64", "v_cvt_f64_f32 v[6:7], v2; v_cvt_f64_f32 v[8:9], v3; v_fma_f64 v[6:7], v[6:7], v[8:9], v[6:7]; v_cvt_f32_f64 v5, v[6:7]", [](U a, U b, U, unsigned) { double x = f(a), y = f(b); return u(float(std::fma(x, y, x))); }, true},
	{"v_accvgpr_write/read_b32", "v_accvgpr_write_b32 a1, v2; v_accvgpr_write_b32 a255, v3; v_accvgpr_read_b32 v5, a1; v_accvgpr_read_b32 v6, a255; v_xor_b32 v5, v5, v6", [](U a, U b, U, unsigned) { return a ^ b; }, false},
	{"v_accvgpr_write_b32 of inline constants", "v_accvgpr_write_b32 a7, -1.0; v_accvgpr_write_b32 a8, 17; v_accvgpr_read_b32 v5, a7; v_accvgpr_read_b32 v6, a8; v_add_u32 v5, v5, v6", [](U, U, U, unsigned) { return 0xbf800000u + 17; }, false},
	{"v_accvgpr_mov_b32, v_accvgpr_write_b32 of an SGPR", "s_mov_b32 s20, 0x12345; v_accvgpr_write_b32 a2, v3; v_accvgpr_mov_b32 a3, a2; v_accvgpr_write_b32 a2, s20; v_accvgpr_read_b32 v5, a3; v_accvgpr_read_b32 v6, a2; v_sub_u32 v5, v5, v6", [](U, U b, U, unsigned) { return b - 0x12345; }, false, true},
	{"v_add_u16 (high half 0)", "v_add_u16 v5, v2, v3", [](U a, U b, U, unsigned) { return (a + b) & 0xffff; }, false},
	{"v_subrev_u16", "v_subrev_u16 v5, v2, v3", [](U a, U b, U, unsigned) { return (b - a) & 0xffff; }, false},
	{"v_mul_lo_u16", "v_mul_lo_u16 v5, v2, v3", [](U a, U b, U, unsigned) { return (a & 0xffff) * (b & 0xffff) & 0xffff; }, false},
	{"v_lshlrev_b16", "v_lshlrev_b16 v5, v3, v2", [](U a, U b, U, unsigned) { return (a << (b & 15)) & 0xffff; }, false},
	{"v_lshrrev_b16", "v_lshrrev_b16 v5, v3, v2", [](U a, U b, U, unsigned) { return (a & 0xffff) >> (b & 15); }, false},
	{"v_ashrrev_i16", "v_ashrrev_i16 v5, v3, v2", [](U a, U b, U, unsigned) { return U(uint16_t(int16_t(a) >> (b & 15))); }, false},
	{"v_max_i16", "v_max_i16 v5, v2, v3", [](U a, U b, U, unsigned) { return U(uint16_t(std::max(int16_t(a), int16_t(b)))); }, false},
	{"v_min_u16", "v_min_u16 v5, v2, v3", [](U a, U b, U, unsigned) { return std::min(a & 0xffff, b & 0xffff); }, false},
	{"v_mad_legacy_u16", "v_mad_legacy_u16 v5, v2, v3, v4", [](U a, U b, U c, unsigned) { return ((a & 0xffff) * (b & 0xffff) + c) & 0xffff; }, false},
	{"SDWA: bytes and words in, WORD_1 out, the rest kept", "v_mov_b32 v5, v4; v_add_u32_sdwa v5, v2, v3 dst_sel:WORD_1 dst_unused:UNUSED_PRESERVE src0_sel:BYTE_1 src1_sel:WORD_0", [](U a, U b, U c, unsigned) { return (c & 0xffff) | ((a >> 8 & 0xff) + (b & 0xffff)) << 16; }, false},
	{"SDWA: sext source, WORD_0 out sign-extended", "v_mul_u32_u24_sdwa v5, sext(v2), v3 dst_sel:WORD_0 dst_unused:UNUSED_SEXT src0_sel:BYTE_0 src1_sel:BYTE_3", [](U a, U b, U, unsigned) { U s0 = U(int32_t(int8_t(a))); U r = (s0 & 0xffffff) * (b >> 24); U f = r & 0xffff; return f >> 15 & 1 ? f | 0xffff0000u : f; }, false},
	{"SDWA: BYTE_2 out sign-extended", "v_add_u32_sdwa v5, v2, v3 dst_sel:BYTE_2 dst_unused:UNUSED_SEXT src0_sel:BYTE_0 src1_sel:BYTE_1", [](U a, U b, U, unsigned) { U f = (((a & 0xff) + (b >> 8 & 0xff)) & 0xff) << 16; return f >> 23 & 1 ? f | 0xff000000u : f; }, false},
	{"SDWA: float neg/abs", "v_add_f32_sdwa v5, -v2, |v3| dst_sel:DWORD dst_unused:UNUSED_PAD src0_sel:DWORD src1_sel:DWORD", [](U a, U b, U, unsigned) { return u(-f(a) + std::fabs(f(b))); }, true},
	{"SDWA: v_mov WORD_1 to WORD_0", "v_mov_b32_sdwa v5, v2 dst_sel:WORD_0 dst_unused:UNUSED_PAD src0_sel:WORD_1", [](U a, U, U, unsigned) { return a >> 16; }, false},
	{"SDWA: an SGPR source, a 16-bit op into WORD_1", "s_mov_b32 s20, 0x1234; v_sub_u16_sdwa v5, s20, v3 dst_sel:WORD_1 dst_unused:UNUSED_PAD src0_sel:BYTE_0 src1_sel:BYTE_0", [](U, U b, U, unsigned) { return ((0x34 - (b & 0xff)) & 0xffff) << 16; }, false},
	{"DPP: neg/abs on both sources (quad_perm identity)", "v_add_f32_dpp v5, -v2, |v3| quad_perm:[0,1,2,3] row_mask:0xf bank_mask:0xf", [](U a, U b, U, unsigned) { return u(-f(a) + std::fabs(f(b))); }, true},
	{"DPP: rows 0 and 2 written, the others keep the old value", "v_mov_b32 v5, v4; v_mov_b32_dpp v5, v2 quad_perm:[0,1,2,3] row_mask:0x5 bank_mask:0xf", [](U a, U, U c, unsigned l) { return (0x5 >> (l / 16) & 1) ? a : c; }, false},
	{"DPP: banks 1 and 3 written", "v_mov_b32 v5, v4; v_mov_b32_dpp v5, v2 quad_perm:[0,1,2,3] row_mask:0xf bank_mask:0xa", [](U a, U, U c, unsigned l) { return (0xa >> (l / 4 % 4) & 1) ? a : c; }, false},
	{"v_add_f16", "v_add_f16 v5, v2, v3", [](U a, U b, U, unsigned) { return to_half(half_value(a) + half_value(b)); }, true, false, true},
	{"v_mul_f16 with neg/abs", "v_mul_f16_e64 v5, -v2, |v3|", [](U a, U b, U, unsigned) { return to_half(-half_value(a) * std::fabs(half_value(b))); }, true, false, true},
	{"v_sub_f16 clamp", "v_sub_f16_e64 v5, v2, v3 clamp", [](U a, U b, U, unsigned) { long double r = half_value(a) - half_value(b); return to_half(std::isnan(r) ? 0 : std::fmin(std::fmax(r, 0.0L), 1.0L)); }, true, false, true},
	{"v_max_f16", "v_max_f16 v5, v2, v3", [](U a, U b, U, unsigned) { return to_half(std::fmax(half_value(a), half_value(b))); }, true, false, true},
	{"v_fma_f16 (one rounding)", "v_fma_f16 v5, v2, v3, v4", [](U a, U b, U c, unsigned) { return to_half(std::fmal(half_value(a), half_value(b), half_value(c))); }, true, false, true},
	{"v_fma_f16 of an inline constant", "v_fma_f16 v5, v2, 0.5, v4", [](U a, U, U c, unsigned) { return to_half(std::fmal(half_value(a), 0.5L, half_value(c))); }, true, false, true},
	{"v_mad_f16 (not fused, denormals flushed)", "v_mad_f16 v5, v2, v3, v4", [](U a, U b, U c, unsigned) { return ftz16(to_half(half_value(ftz16(to_half(half_value(ftz16(a)) * half_value(ftz16(b))))) + half_value(ftz16(c)))); }, true, false, true},
	{"v_mac_f16", "v_mov_b32 v5, v4; v_mac_f16 v5, v2, v3", [](U a, U b, U c, unsigned) { return ftz16(to_half(half_value(ftz16(to_half(half_value(ftz16(a)) * half_value(ftz16(b))))) + half_value(ftz16(c)))); }, true, false, true},
	{"v_sqrt_f16 (correctly rounded)", "v_sqrt_f16 v5, v2", [](U a, U, U, unsigned) { return to_half(std::sqrt(half_value(a))); }, true, false, true},
	{"v_rsq_f16 (correctly rounded)", "v_rsq_f16 v5, v3", [](U, U b, U, unsigned) { return to_half(1.0L / std::sqrt(half_value(b))); }, true, false, true},
	{"v_rcp_f16 (correctly rounded)", "v_rcp_f16 v5, v2", [](U a, U, U, unsigned) { return to_half(1.0L / half_value(a)); }, true, false, true},
	{"v_exp_f16 (2^x, correctly rounded)", "v_exp_f16 v5, v4", [](U, U, U c, unsigned) { return to_half(std::exp2(half_value(c))); }, true, false, true},
	{"v_log_f16 (log2, correctly rounded)", "v_log_f16 v5, v3", [](U, U b, U, unsigned) { return to_half(std::log2(half_value(b))); }, true, false, true},
	{"v_floor_f16 + v_fract_f16", "v_floor_f16 v5, v2; v_fract_f16 v6, v2; v_add_f16 v5, v5, v6", [](U a, U, U, unsigned) { long double x = half_value(a); long double fr = std::isinf(x) ? NAN : std::fmin(x - std::floor(x), 0x1.ffcp-1L); return to_half(half_value(to_half(std::floor(x))) + half_value(to_half(fr))); }, true, false, true},
	{"v_rndne_f16 + v_trunc_f16 + v_ceil_f16", "v_rndne_f16 v5, v2; v_trunc_f16 v6, v3; v_ceil_f16 v7, v4; v_add_f16 v5, v5, v6; v_add_f16 v5, v5, v7", [](U a, U b, U c, unsigned) { long double s = half_value(to_half(std::nearbyint(half_value(a)) + std::trunc(half_value(b)))); return to_half(s + std::ceil(half_value(c))); }, true, false, true},
	{"v_cmp_lt_f16 + v_cmp_class_f16", "v_cmp_lt_f16 vcc, v2, v3; v_cndmask_b32 v5, 0, 1, vcc; v_mov_b32 v6, 0x2a5; v_cmp_class_f16 vcc, v4, v6; v_cndmask_b32 v6, 0, 2, vcc; v_or_b32 v5, v5, v6", [](U a, U b, U c, unsigned) { return U(half_value(a) < half_value(b)) | (0x2a5 >> class16(c) & 1) << 1; }, false},
	{"f16 omod div:2 and clamp with IEEE off", "s_mov_b32 s20, 0; s_setreg_b32 hwreg(HW_REG_MODE, 9, 1), s20; v_mul_f16_e64 v5, v2, v3 clamp div:2; s_mov_b32 s20, 1; s_setreg_b32 hwreg(HW_REG_MODE, 9, 1), s20", [](U a, U b, U, unsigned) { long double r = half_value(a) * half_value(b) / 2; return to_half(std::isnan(r) ? 0 : std::fmin(std::fmax(r, 0.0L), 1.0L)); }, true, false, true},
	{"v_lshlrev_b64 (high half)", "v_mov_b32 v7, v3; v_mov_b32 v6, v2; v_lshlrev_b64 v[6:7], 13, v[6:7]; v_mov_b32 v5, v7", [](U a, U b, U, unsigned) { return U(((uint64_t(b) << 32 | a) << 13) >> 32); }, false},
};

// Per-lane inputs: edges first, then a fixed LCG.
std::vector<U> inputs(unsigned which)
{
	static constexpr U kEdges[] = {0x00000000, 0x80000000, 0x3f800000, 0xbfc00000, 0x7f800000, 0xff800000,
				       0x7fc00000, 0x00000001, 0x807fffff, 0x4f000000, 0xcf000000, 0x4f800000,
				       0x3effffff, 0x40400000, 0xffffffff, 0x7fffffff};
	std::vector<U> v(64);
	uint32_t s = 12345 + which * 777;
	for (unsigned l = 0; l < 64; l++) {
		s = s * 1664525u + 1013904223u;
		v[l] = l < 16 ? kEdges[(l + which * 5) % 16] : l < 40 ? u(float(int(s >> 12) - 524288) / 1024.0f) : s;
	}
	return v;
}

constexpr uint64_t kCode = 0x10000000, kKd = 0x10100000, kIn = 0x100000000ull, kOut = 0x200000000ull;

// Assembles `body` (between a prologue loading a/b/c and s_endpgm) with
// llvm-mc-15; the .text bytes, or empty when it is missing or fails.
std::vector<uint8_t> assemble(const std::string &body, const char *cpu, std::string *err)
{
	char src[] = "/tmp/kfdemu-shader-alu-XXXXXX";
	int fd = mkstemp(src);
	if (fd < 0)
		return *err = "mkstemp", std::vector<uint8_t>{};
	close(fd);
	std::string obj = std::string(src) + ".o";
	FILE *f = std::fopen(src, "w");
	std::fprintf(f, "%s", body.c_str());
	std::fclose(f);
	std::string cmd = std::string("llvm-mc-15 -arch=amdgcn -mcpu=") + cpu + " -filetype=obj -o " + obj + " " + src + " 2>&1";
	FILE *p = popen(cmd.c_str(), "r");
	char buf[512];
	while (p && std::fgets(buf, sizeof(buf), p))
		*err += buf;
	int rc = p ? pclose(p) : -1;
	unlink(src);
	std::vector<uint8_t> text;
	std::ifstream o(obj, std::ios::binary);
	std::vector<char> e((std::istreambuf_iterator<char>(o)), std::istreambuf_iterator<char>());
	unlink(obj.c_str());
	if (rc != 0 || e.size() < sizeof(Elf64_Ehdr))
		return text;
	Elf64_Ehdr eh;
	std::memcpy(&eh, e.data(), sizeof(eh));
	Elf64_Shdr strs;
	std::memcpy(&strs, e.data() + eh.e_shoff + eh.e_shstrndx * sizeof(strs), sizeof(strs));
	for (unsigned k = 0; k < eh.e_shnum; k++) {
		Elf64_Shdr sh;
		std::memcpy(&sh, e.data() + eh.e_shoff + k * sizeof(sh), sizeof(sh));
		if (std::string(e.data() + strs.sh_offset + sh.sh_name) == ".text")
			text.assign(e.data() + sh.sh_offset, e.data() + sh.sh_offset + sh.sh_size);
	}
	return text;
}

// A kernel descriptor over `code`: kernarg pointer in s[0:1], one
// dimension, IEEE mode, f32/f64 denormals kept.
void load_kernel(FakeMemory &m, const std::vector<uint8_t> &code)
{
	m.map(kCode, (code.size() + 0xfff) & ~0xfffull, false, true);
	std::memcpy(m.bytes(kCode), code.data(), code.size());
	m.map(kKd, 64, false, true);
	uint8_t *kd = m.bytes(kKd);
	int64_t entry = int64_t(kCode) - int64_t(kKd);
	uint32_t rsrc1 = 15u << 16 | 1u << 23, rsrc2 = 2u << 1 | 1u << 7;
	uint16_t props = 1u << 3;
	uint32_t kernarg = 64;
	std::memcpy(kd + 8, &kernarg, 4), std::memcpy(kd + 16, &entry, 8);
	std::memcpy(kd + 48, &rsrc1, 4), std::memcpy(kd + 52, &rsrc2, 4), std::memcpy(kd + 56, &props, 2);
}

std::string program(Target t)
{
	std::string s = ".text\n"
			"s_load_dwordx4 s[4:7], s[0:1], 0x0\n"
			"v_lshlrev_b32 v1, 2, v0\n"
			"s_waitcnt lgkmcnt(0)\n"
			"global_load_dword v2, v1, s[4:5]\n"
			"global_load_dword v3, v1, s[4:5] offset:256\n"
			"global_load_dword v4, v1, s[4:5] offset:512\n"
			"s_waitcnt vmcnt(0)\n";
	for (const Row &r : kRows) {
		std::string code = r.gfx90a_only && t != Target::Gfx90a ? "v_mov_b32 v5, 0" : r.code;
		for (char &ch : code)
			if (ch == ';')
				ch = '\n';
		s += code + "\nglobal_store_dword v1, v5, s[6:7]\ns_add_u32 s6, s6, 256\ns_addc_u32 s7, s7, 0\n";
	}
	return s + "s_endpgm\n";
}

void semantics(Target t, const char *cpu)
{
	std::string err;
	std::vector<uint8_t> code = assemble(program(t), cpu, &err);
	SHADER_CHECK(!code.empty(), "llvm-mc-15 failed: %s", err.c_str());
	if (code.empty())
		return;
	FakeMemory m;
	load_kernel(m, code);
	std::vector<U> a = inputs(0), b = inputs(1), c = inputs(2);
	m.map(kIn, 768), m.map(kOut, 256 * std::size(kRows));
	std::memcpy(m.bytes(kIn), a.data(), 256), std::memcpy(m.bytes(kIn + 256), b.data(), 256);
	std::memcpy(m.bytes(kIn + 512), c.data(), 256);
	Grid g;
	g.grid[0] = 64, g.wg[0] = 64;
	Result res = run(m, t, kKd, g, Args().add(kIn).add(kOut));
	SHADER_CHECK(res.status == Dispatch::Status::Done, "%s: %s %s %s", cpu, status_name(res.status),
		     res.why.c_str(), res.error.c_str());
	for (size_t k = 0; k < std::size(kRows); k++) {
		const Row &r = kRows[k];
		int bad = 0;
		for (unsigned l = 0; l < 64; l++) {
			U want = r.cpu(a[l], b[l], c[l], l), got = m.at<U>(kOut + 256 * k)[l];
			if (std::string(r.name).starts_with("v_readfirstlane"))
				want = (a[0] >> 3) & 31;
			if (std::string(r.name).starts_with("v_readlane"))
				want = U((uint64_t(a[5]) * b[5]) >> 32);
			if (r.gfx90a_only && t != Target::Gfx90a)
				want = 0;  // the row is v_mov_b32 v5, 0 there
			auto nan = [&](U v) { return r.f16 ? (v & 0x7c00) == 0x7c00 && (v & 0x3ff) : std::isnan(f(v)); };
			bool same = got == want || (r.fp && nan(got) && nan(want));
			if (!same && bad++ == 0)
				std::printf("  %s %s lane %u: a %08x b %08x c %08x: got %08x want %08x\n", cpu, r.name, l,
					    a[l], b[l], c[l], got, want);
		}
		SHADER_CHECK(bad == 0, "%s: %s: %d lanes differ", cpu, r.name, bad);
	}
}

// A kernel whose instruction at its second word stops it with `status`
// and a why() containing `what`.
void stops(Target t, const char *cpu, const char *insn, Dispatch::Status status, const char *what)
{
	std::string err;
	std::vector<uint8_t> code = assemble(std::string(".text\ns_nop 0\n") + insn + "\ns_endpgm\n", cpu, &err);
	SHADER_CHECK(!code.empty(), "llvm-mc-15 failed: %s", err.c_str());
	if (code.empty())
		return;
	FakeMemory m;
	load_kernel(m, code);
	Grid g;
	g.grid[0] = 64, g.wg[0] = 64;
	Result res = run(m, t, kKd, g, Args().add(uint64_t(0)));
	SHADER_CHECK(res.status == status, "%s %s: %s", cpu, insn, status_name(res.status));
	SHADER_CHECK(res.why.find(what) != std::string::npos && res.why.find("0x10000004") != std::string::npos,
		     "%s %s: why: %s", cpu, insn, res.why.c_str());
}

}  // namespace

int main()
{
	if (system("llvm-mc-15 --version >/dev/null 2>&1") != 0) {
		std::printf("NOT RUN: llvm-mc-15 (Debian's llvm-15) is not installed\n");
		return 77;
	}
	const std::pair<Target, const char *> targets[] = {{Target::Gfx908, "gfx908"}, {Target::Gfx90a, "gfx90a"}};
	for (auto [t, cpu] : targets) {
		std::string n = cpu;
		cases().add(n + ": " + std::to_string(std::size(kRows)) + " instruction rows match the CPU",
			    [t, cpu] { semantics(t, cpu); });
		cases().add(n + ": an unimplemented instruction stops the dispatch, named", [t, cpu] {
			stops(t, cpu, "image_load v[0:3], v0, s[0:7] dmask:0xf unorm", Dispatch::Status::IllegalInstruction,
			      "image_load");
		});
		cases().add(n + ": ds_gws_init (decoded, not run) stops the dispatch, named", [t, cpu] {
			stops(t, cpu, "ds_gws_init v0 gds", Dispatch::Status::IllegalInstruction, "ds_gws_init");
		});
		cases().add(n + ": a DPP control the ISA does not define stops the dispatch", [t, cpu] {
			stops(t, cpu, ".long 0x7e0202fa, 0xff010000", Dispatch::Status::IllegalInstruction,
			      "a DPP control the ISA does not define");
		});
		cases().add(n + ": s_trap stops the dispatch as a trap", [t, cpu] {
			stops(t, cpu, "s_trap 2", Dispatch::Status::Trap, "s_trap 2");
		});
		cases().add(n + ": an invalid word stops the dispatch", [t, cpu] {
			stops(t, cpu, ".long 0xf4000000", Dispatch::Status::IllegalInstruction, "not a gfx9 instruction");
		});
	}
	return cases().run();
}
