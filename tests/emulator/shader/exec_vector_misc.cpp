// SPDX-License-Identifier: GPL-2.0-only
//
// Vector ALU instructions with more than a per-lane formula: the division
// helpers (v_div_scale / v_div_fmas / v_div_fixup), packed f32 (gfx90a)
// and the AGPR moves.
#include <cmath>
#include <limits>
#include <unordered_map>

#include "shader/exec.h"

namespace kfdemu::shader {

namespace {

// IEEE layout of the two float widths, for the division helpers.
template <class T> struct Fp;
template <> struct Fp<float> {
	using Bits = uint32_t;
	static constexpr int kBias = 127, kScale = 64, kFar = 96, kMant = 23;
};
template <> struct Fp<double> {
	using Bits = uint64_t;
	static constexpr int kBias = 1023, kScale = 128, kFar = 768, kMant = 53;
};

template <class T>
int exponent(T v)  // the biased exponent field
{
	using B = typename Fp<T>::Bits;
	B b = std::bit_cast<B>(v);
	return static_cast<int>((b >> (sizeof(T) == 4 ? 23 : 52)) & (sizeof(T) == 4 ? 0xff : 0x7ff));
}

template <class T>
bool denorm(T v) { return std::fpclassify(v) == FP_SUBNORMAL; }

template <class T>
T load(const Exec &x, const Wave &w, unsigned enc, const Inst &in, unsigned l, unsigned i)
{
	T v;
	if constexpr (sizeof(T) == 4) {
		v = f32(enc >= src::kVgpr0 ? w.v(enc - src::kVgpr0)[l] : sread(w, x, enc, in));
	} else {
		uint64_t b = enc >= src::kVgpr0 ? (w.v(enc - src::kVgpr0)[l] |
						    uint64_t(w.v(enc - src::kVgpr0 + 1)[l]) << 32)
						 : sread64(w, x, enc, in, true);
		v = f64(b);
	}
	if (in.abs >> i & 1)
		v = std::fabs(v);
	if (in.neg >> i & 1)
		v = -v;
	return v;
}

template <class T>
void store(Wave &w, const Inst &in, unsigned l, T v)
{
	if constexpr (sizeof(T) == 4) {
		w.v(in.dst)[l] = u32(v);
	} else {
		w.v(in.dst)[l] = static_cast<uint32_t>(u64(v));
		w.v(in.dst + 1)[l] = static_cast<uint32_t>(u64(v) >> 32);
	}
}

// v_div_scale: S0 the value to scale (S1 or S2), S1 the denominator, S2 the
// numerator. VCC (sdst) flags lanes whose quotient v_div_fmas rescales.
template <class T>
T div_scale(T s0, T s1, T s2, bool &vcc)
{
	using P = Fp<T>;
	vcc = false;
	if (s2 == 0 || s1 == 0)
		return std::numeric_limits<T>::quiet_NaN();
	if (exponent(s2) - exponent(s1) >= P::kFar) {
		vcc = true;
		return s0 == s1 ? std::ldexp(s0, P::kScale) : s0;
	}
	if (denorm(s1))
		return std::ldexp(s0, P::kScale);
	if (denorm(T(1) / s1) && denorm(s2 / s1)) {
		vcc = true;
		return s0 == s1 ? std::ldexp(s0, P::kScale) : s0;
	}
	if (denorm(T(1) / s1))
		return std::ldexp(s0, -P::kScale);
	if (denorm(s2 / s1)) {
		vcc = true;
		return s0 == s2 ? std::ldexp(s0, P::kScale) : s0;
	}
	if (exponent(s2) <= P::kMant)
		return std::ldexp(s0, P::kScale);
	return s0;
}

template <class T>
int v_div_scale(Exec &x, Wave &w, const Inst &in)
{
	uint64_t flags = 0;
	for_lanes(w.exec, [&](unsigned l) {
		bool vcc;
		T r = div_scale(load<T>(x, w, in.src0, in, l, 0), load<T>(x, w, in.src1, in, l, 1),
				load<T>(x, w, in.src2, in, l, 2), vcc);
		store(w, in, l, r);
		flags |= uint64_t(vcc) << l;
	});
	swrite64(w, in.sdst, flags);
	return kNext;
}

template <class T>
int v_div_fmas(Exec &x, Wave &w, const Inst &in)
{
	using P = Fp<T>;
	for_lanes(w.exec, [&](unsigned l) {
		T s2 = load<T>(x, w, in.src2, in, l, 2);
		T r = std::fma(load<T>(x, w, in.src0, in, l, 0), load<T>(x, w, in.src1, in, l, 1), s2);
		if (w.vcc >> l & 1)
			r = std::ldexp(r, exponent(s2) > P::kBias ? P::kScale : -P::kScale);
		store(w, in, l, r);
	});
	return kNext;
}

// v_div_fixup: S0 the quotient, S1 the denominator, S2 the numerator.
template <class T>
T div_fixup(T q, T den, T num)
{
	bool neg = std::signbit(den) != std::signbit(num);
	T inf = std::numeric_limits<T>::infinity();
	if (std::isnan(num))
		return num;
	if (std::isnan(den))
		return den;
	if ((den == 0 && num == 0) || (std::isinf(den) && std::isinf(num)))
		return std::numeric_limits<T>::quiet_NaN();
	if (den == 0 || std::isinf(num))
		return neg ? -inf : inf;
	if (std::isinf(den) || num == 0)
		return neg ? -T(0) : T(0);
	return neg ? -std::fabs(q) : std::fabs(q);
}

template <class T>
int v_div_fixup(Exec &x, Wave &w, const Inst &in)
{
	for_lanes(w.exec, [&](unsigned l) {
		store(w, in, l, div_fixup(load<T>(x, w, in.src0, in, l, 0), load<T>(x, w, in.src1, in, l, 1),
					  load<T>(x, w, in.src2, in, l, 2)));
	});
	return kNext;
}

// --- packed f32 (gfx90a): each source a 64-bit pair, op_sel picking the
// half for the low result, op_sel_hi for the high one.
uint32_t half_of(const Exec &x, const Wave &w, unsigned enc, const Inst &in, unsigned l, bool hi)
{
	if (enc >= src::kVgpr0)
		return w.v(enc - src::kVgpr0 + hi)[l];
	return static_cast<uint32_t>(sread64(w, x, enc, in, false) >> (hi ? 32 : 0));
}

template <int Op>  // 0 add, 1 mul, 2 fma
int pk_f32(Exec &x, Wave &w, const Inst &in)
{
	for_lanes(w.exec, [&](unsigned l) {
		float r[2];
		for (unsigned h = 0; h < 2; h++) {
			uint8_t sel = h ? in.opsel_hi : in.opsel, neg = h ? in.neg_hi : in.neg;
			float s[3];
			for (unsigned i = 0; i < 3; i++) {
				unsigned enc = i == 0 ? in.src0 : i == 1 ? in.src1 : in.src2;
				s[i] = f32(half_of(x, w, enc, in, l, sel >> i & 1));
				if (neg >> i & 1)
					s[i] = -s[i];
			}
			r[h] = Op == 0 ? s[0] + s[1] : Op == 1 ? s[0] * s[1] : std::fma(s[0], s[1], s[2]);
		}
		w.v(in.dst)[l] = u32(r[0]);
		w.v(in.dst + 1)[l] = u32(r[1]);
	});
	return kNext;
}

int pk_mov_b32(Exec &x, Wave &w, const Inst &in)
{
	for_lanes(w.exec, [&](unsigned l) {
		uint32_t lo = half_of(x, w, in.src0, in, l, in.opsel & 1);
		uint32_t hi = half_of(x, w, in.src1, in, l, in.opsel >> 1 & 1);
		w.v(in.dst)[l] = lo;
		w.v(in.dst + 1)[l] = hi;
	});
	return kNext;
}

// --- AGPRs -------------------------------------------------------------------

uint32_t *agpr(Wave &w, unsigned reg)
{
	if (w.agpr.empty())
		w.agpr.assign(kVgprFile, 0);
	return &w.agpr[reg * kWaveSize];
}

int accvgpr_write(Exec &x, Wave &w, const Inst &in)
{
	uint32_t *d = agpr(w, in.dst);
	for_lanes(w.exec, [&](unsigned l) {
		d[l] = in.src0 >= src::kVgpr0 ? w.v(in.src0 - src::kVgpr0)[l] : sread(w, x, in.src0, in);
	});
	return kNext;
}

int accvgpr_read(Exec &, Wave &w, const Inst &in)
{
	const uint32_t *s = agpr(w, (in.src0 - src::kVgpr0) & 0xff);
	uint32_t *d = w.v(in.dst);
	for_lanes(w.exec, [&](unsigned l) { d[l] = s[l]; });
	return kNext;
}

int accvgpr_mov(Exec &, Wave &w, const Inst &in)
{
	const uint32_t *s = agpr(w, (in.src0 - src::kVgpr0) & 0xff);
	uint32_t *d = agpr(w, in.dst);
	for_lanes(w.exec, [&](unsigned l) { d[l] = s[l]; });
	return kNext;
}

// --- SDWA ----------------------------------------------------------------------

// A source's selected field (sel: BYTE_0-3 0-3, WORD_0/1 4/5, DWORD 6),
// zero- or sign-extended.
uint32_t sdwa_select(uint32_t v, unsigned sel, bool sext)
{
	if (sel >= 6)
		return v;
	const unsigned width = sel < 4 ? 8 : 16, shift = sel < 4 ? 8 * sel : 16 * (sel - 4);
	const uint32_t f = v >> shift & ((1u << width) - 1);
	return sext && f >> (width - 1) ? f | ~((1u << width) - 1) : f;
}

// The result r in the destination's selected field of the old value d;
// unused 0 pads with zeros, 1 sign-extends upward, 2 keeps d's other bits.
uint32_t sdwa_place(uint32_t r, uint32_t d, unsigned sel, unsigned unused)
{
	if (sel >= 6)
		return r;
	const unsigned width = sel < 4 ? 8 : 16, shift = sel < 4 ? 8 * sel : 16 * (sel - 4);
	const uint32_t mask = ((1u << width) - 1) << shift, field = r << shift & mask;
	if (unused == 2)
		return (d & ~mask) | field;
	const uint32_t above = shift + width == 32 ? 0 : ~0u << (shift + width);
	return unused == 1 && (field >> (shift + width - 1) & 1) ? field | above : field;
}

}  // namespace

// The SDWA dword (GFX9; the source fields and modifiers are decoded into
// Inst: decode.cpp's sdwa_fields): dst_sel [10:8], dst_unused [12:11],
// src0_sel [18:16], src1_sel [26:24]. The base instruction runs on the
// selected sources in the register file's guard rows (past v255), with the
// float modifiers, and writes its result there.
int run_sdwa(Exec &x, Wave &w, const Inst &in, Handler base)
{
	const uint32_t e = in.ext;
	if ((e >> 8 & 7) > 6 || (e >> 16 & 7) > 6 || (e >> 24 & 7) > 6 || (e >> 11 & 3) == 3)
		return x.illegal(w, in, "an SDWA selection that does not exist");
	constexpr unsigned kS0 = kVgprs, kS1 = kVgprs + 1, kD = kVgprs + 2;
	uint32_t *s0 = w.v(kS0), *s1 = w.v(kS1), *td = w.v(kD), *d = w.v(in.dst);
	auto src = [&](unsigned enc, unsigned l) {
		return enc >= src::kVgpr0 ? w.v(enc - src::kVgpr0)[l] : sread(w, x, enc, in);
	};
	const bool two = in.family == Family::Vop2;
	for_lanes(w.exec, [&](unsigned l) {
		s0[l] = sdwa_select(src(in.src0, l), e >> 16 & 7, in.sext & 1);
		if (two)
			s1[l] = sdwa_select(src(in.src1, l), e >> 24 & 7, in.sext >> 1 & 1);
		td[l] = d[l]; // v_mac/v_fmac read their destination
	});
	Inst b = in;
	b.sdwa = false;
	b.src0 = static_cast<uint16_t>(src::kVgpr0 + kS0);
	if (two)
		b.src1 = static_cast<uint16_t>(src::kVgpr0 + kS1);
	b.dst = kD;
	if (int r = base(x, w, b); r != kNext)
		return r;
	for_lanes(w.exec, [&](unsigned l) { d[l] = sdwa_place(td[l], d[l], e >> 8 & 7, e >> 11 & 3); });
	return kNext;
}

// --- DPP -----------------------------------------------------------------------

namespace {

// The lane whose src0 lane l reads under DPP control `ctrl` (GFX9's
// DPP_CTRL), or -1 when it names none: quad_perm (0x00-0xff), row_shl/
// row_shr/row_ror 1-15 (0x101-0x12f) within the lane's row of 16,
// wave_shl/rol/shr/ror by 1 (0x130, 0x134, 0x138, 0x13c) over the wave,
// row_mirror (0x140), row_half_mirror (0x141), row_bcast:15 (0x142: each
// row reads lane 15 of the row before it) and row_bcast:31 (0x143: rows 2
// and 3 read lane 31). -2: a control the ISA does not define.
int dpp_source(unsigned ctrl, unsigned l)
{
	const unsigned row = l & ~15u, in_row = l & 15, n = ctrl & 15;
	if (ctrl <= 0xff)
		return static_cast<int>((l & ~3u) | (ctrl >> (2 * (l & 3)) & 3));
	if (ctrl >= 0x101 && ctrl <= 0x10f)
		return in_row + n < 16 ? static_cast<int>(l + n) : -1;
	if (ctrl >= 0x111 && ctrl <= 0x11f)
		return in_row >= n ? static_cast<int>(l - n) : -1;
	if (ctrl >= 0x121 && ctrl <= 0x12f)
		return static_cast<int>(row | ((in_row - n) & 15));
	switch (ctrl) {
	case 0x130: return l + 1 < kWaveSize ? static_cast<int>(l + 1) : -1;
	case 0x134: return static_cast<int>((l + 1) % kWaveSize);
	case 0x138: return l ? static_cast<int>(l - 1) : -1;
	case 0x13c: return static_cast<int>((l + kWaveSize - 1) % kWaveSize);
	case 0x140: return static_cast<int>(row | (15 - in_row));
	case 0x141: return static_cast<int>((l & ~7u) | (7 - (l & 7)));
	case 0x142: return row ? static_cast<int>(row - 1) : -1;
	case 0x143: return l >= 32 ? 31 : -1;
	default: return -2;
	}
}

}  // namespace

// The DPP dword (GFX9): src0 VGPR [7:0], dpp_ctrl [16:8], bound_ctrl
// [19], src0 neg/abs [20]/[21], src1 neg/abs [22]/[23] (decoded into Inst),
// bank_mask [27:24], row_mask [31:28]. A lane's src0 is src0's register of
// the lane dpp_ctrl names. A lane writes its destination only when its row
// (lanes 16r..16r+15) is in row_mask and its bank (lanes 4b..4b+3 of each
// row) in bank_mask, and when the lane it reads exists and is active in
// EXEC; without those, bound_ctrl set makes it read 0 and write, clear
// leaves its destination (and carry-out) alone. The base instruction runs
// on the lanes that write, with src0 gathered into a guard row.
int run_dpp(Exec &x, Wave &w, const Inst &in, Handler base)
{
	const unsigned ctrl = in.ext >> 8 & 0x1ff, rows = in.ext >> 28, banks = in.ext >> 24 & 15;
	const bool bound_zero = in.ext >> 19 & 1;
	if (dpp_source(ctrl, 0) == -2)
		return x.illegal(w, in, "a DPP control the ISA does not define");
	constexpr unsigned kS0 = kVgprs, kD = kVgprs + 2;
	const uint32_t *src = w.v(in.src0 - src::kVgpr0);
	uint32_t *s0 = w.v(kS0), *td = w.v(kD), *d = w.v(in.dst);
	const uint64_t exec = w.exec;
	uint64_t writes = 0;
	for_lanes(exec, [&](unsigned l) {
		if (!(rows >> (l >> 4) & 1) || !(banks >> (l >> 2 & 3) & 1))
			return;
		const int from = dpp_source(ctrl, l);
		const bool valid = from >= 0 && (exec >> from & 1);
		if (!valid && !bound_zero)
			return;
		s0[l] = valid ? src[from] : 0;
		td[l] = d[l]; // v_mac/v_fmac read their destination
		writes |= uint64_t{1} << l;
	});
	Inst b = in;
	b.dpp = false;
	b.src0 = static_cast<uint16_t>(src::kVgpr0 + kS0);
	b.dst = kD;
	w.exec = writes;
	const int r = base(x, w, b);
	w.exec = exec;
	if (r != kNext)
		return r;
	for_lanes(writes, [&](unsigned l) { d[l] = td[l]; });
	return kNext;
}

void vector_ops_div(std::unordered_map<std::string, Handler> &t)
{
	t["v_div_scale_f32"] = v_div_scale<float>;
	t["v_div_scale_f64"] = v_div_scale<double>;
	t["v_div_fmas_f32"] = v_div_fmas<float>;
	t["v_div_fmas_f64"] = v_div_fmas<double>;
	t["v_div_fixup_f32"] = v_div_fixup<float>;
	t["v_div_fixup_f64"] = v_div_fixup<double>;
}

void vector_ops_misc(std::unordered_map<std::string, Handler> &t)
{
	t["v_pk_add_f32"] = pk_f32<0>;
	t["v_pk_mul_f32"] = pk_f32<1>;
	t["v_pk_fma_f32"] = pk_f32<2>;
	t["v_pk_mov_b32"] = pk_mov_b32;
	t["v_accvgpr_write_b32"] = accvgpr_write;
	t["v_accvgpr_read_b32"] = accvgpr_read;
	t["v_accvgpr_mov_b32"] = accvgpr_mov;
}

}  // namespace kfdemu::shader
