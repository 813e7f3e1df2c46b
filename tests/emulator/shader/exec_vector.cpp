// SPDX-License-Identifier: GPL-2.0-only
//
// Vector ALU instructions (VOP1, VOP2, VOPC, VOP3, VOP3P): per-lane loops
// over EXEC, operands typed by the opcode. Floats are computed with the
// host's IEEE arithmetic in round-to-nearest-even, which is what the ISA
// defines for the basic operations; see README.md for the approximations
// (v_rcp, v_rsq, v_sqrt, v_exp, v_log, v_sin, v_cos) and denormal modes.
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <unordered_map>
#include <utility>

#include "shader/exec.h"

namespace kfdemu::shader {

namespace {

using U = uint32_t;
using I = int32_t;
using L = uint64_t;
using SL = int64_t;
using F = float;
using D = double;
__extension__ using U128 = unsigned __int128;
__extension__ using S128 = __int128;

// Operand types: how a source is read and a result written.
enum class Ty : uint8_t { None, U32, I32, F32, U64, I64, F64 };

template <Ty T> struct Of;
template <> struct Of<Ty::None> { using t = U; };
template <> struct Of<Ty::U32> { using t = U; };
template <> struct Of<Ty::I32> { using t = I; };
template <> struct Of<Ty::F32> { using t = F; };
template <> struct Of<Ty::U64> { using t = L; };
template <> struct Of<Ty::I64> { using t = SL; };
template <> struct Of<Ty::F64> { using t = D; };

constexpr bool wide(Ty t) { return t == Ty::U64 || t == Ty::I64 || t == Ty::F64; }
constexpr bool flt(Ty t) { return t == Ty::F32 || t == Ty::F64; }

// A source resolved for the wave: a VGPR (pair) row, or one uniform value.
struct Opnd {
	const U *lo = nullptr, *hi = nullptr;
	L k = 0;
	L at(unsigned l) const { return lo ? (lo[l] | (hi ? L(hi[l]) << 32 : 0)) : k; }
};

template <Ty T>
Opnd operand(const Exec &x, const Wave &w, unsigned enc, const Inst &in)
{
	Opnd o;
	if constexpr (T == Ty::None) {
		return o;
	} else {
		if (enc >= src::kVgpr0) {
			o.lo = w.v(enc - src::kVgpr0);
			if (wide(T))
				o.hi = w.v(enc - src::kVgpr0 + 1);
		} else if (wide(T)) {
			o.k = sread64(w, x, enc, in, T == Ty::F64);
			if (T == Ty::I64 && enc == src::kLiteral)
				o.k = L(SL(I(in.literal)));
		} else {
			o.k = sread(w, x, enc, in);
		}
		return o;
	}
}

inline F ftz(F v) { return std::fpclassify(v) == FP_SUBNORMAL ? std::copysign(0.0f, v) : v; }

// The value of source `i` (0-2) at lane l, with VOP3 abs/neg applied.
template <Ty T>
typename Of<T>::t value(const Opnd &o, unsigned l, unsigned i, const Inst &in, bool flush)
{
	L bits = o.at(l);
	if constexpr (T == Ty::F32) {
		F v = f32(static_cast<U>(bits));
		if (flush)
			v = ftz(v);
		if (in.abs >> i & 1)
			v = std::fabs(v);
		if (in.neg >> i & 1)
			v = -v;
		return v;
	} else if constexpr (T == Ty::F64) {
		D v = f64(bits);
		if (in.abs >> i & 1)
			v = std::fabs(v);
		if (in.neg >> i & 1)
			v = -v;
		return v;
	} else {
		return static_cast<typename Of<T>::t>(bits);
	}
}

// MODE's IEEE bit: set (compute's default), the hardware ignores omod, as
// LLVM's SIFoldOperands says (it never folds a multiply into omod then).
bool ieee(const Wave &w) { return w.mode >> 9 & 1; }

// The VOP3 output modifiers: omod (x2, x4, /2; only with IEEE off), then
// clamp to [0, 1] (NaN to 0).
template <class T>
T out_mod(T v, const Inst &in, bool ieee_mode)
{
	static constexpr T kOmod[] = {1, 2, 4, 0.5};
	if (in.omod && !ieee_mode)
		v *= kOmod[in.omod];
	if (in.clamp)
		v = std::isnan(v) ? T(0) : std::fmin(std::fmax(v, T(0)), T(1));
	return v;
}

template <Ty T>
void put(U *lo, U *hi, unsigned l, typename Of<T>::t r, const Inst &in, bool flush, bool ieee_mode)
{
	if constexpr (T == Ty::F32) {
		r = out_mod(r, in, ieee_mode);
		lo[l] = u32(flush ? ftz(r) : r);
	} else if constexpr (T == Ty::F64) {
		L b = u64(out_mod(r, in, ieee_mode));
		lo[l] = static_cast<U>(b), hi[l] = static_cast<U>(b >> 32);
	} else if constexpr (wide(T)) {
		lo[l] = static_cast<U>(L(r)), hi[l] = static_cast<U>(L(r) >> 32);
	} else {
		lo[l] = static_cast<U>(r);
	}
}

bool flush32(const Wave &w) { return (w.mode >> 4 & 3) == 0; }

// dst = Fn(src0, src1, src2) on every active lane. Acc: src2 is the
// destination (v_mac / v_fmac).
template <Ty Dt, Ty At, Ty Bt, Ty Ct, auto Fn, bool Acc = false>
int valu(Exec &x, Wave &w, const Inst &in)
{
	if (in.clamp && !flt(Dt))
		return x.illegal(w, in, "clamp on an integer result");
	Opnd a = operand<At>(x, w, in.src0, in), b = operand<Bt>(x, w, in.src1, in);
	Opnd c = operand<Ct>(x, w, Acc ? src::kVgpr0 + in.dst : in.src2, in);
	U *lo = w.v(in.dst), *hi = wide(Dt) ? w.v(in.dst + 1) : nullptr;
	const bool fl = flush32(w), ie = ieee(w);
	for_lanes(w.exec, [&](unsigned l) {
		auto r = Fn(value<At>(a, l, 0, in, fl), value<Bt>(b, l, 1, in, fl), value<Ct>(c, l, 2, in, fl));
		put<Dt>(lo, hi, l, static_cast<typename Of<Dt>::t>(r), in, fl, ie);
	});
	return kNext;
}

// VOP2 v_madmk (src0 * K + src1) and v_madak (src0 * src1 + K) with K the literal.
F mad_legacy(F a, F b, F c) { return ftz(ftz(ftz(a) * ftz(b)) + ftz(c)); }

template <bool Mk>
int madk(Exec &x, Wave &w, const Inst &in)
{
	Opnd a = operand<Ty::F32>(x, w, in.src0, in), b = operand<Ty::F32>(x, w, in.src1, in);
	F k = f32(in.literal);
	U *d = w.v(in.dst);
	for_lanes(w.exec, [&](unsigned l) {
		F s0 = f32(U(a.at(l))), s1 = f32(U(b.at(l)));
		d[l] = u32(Mk ? mad_legacy(s0, k, s1) : mad_legacy(s0, s1, k));
	});
	return kNext;
}

template <Ty T, Ty Src = T>
constexpr auto cvt_sat = [](typename Of<Src>::t v, U, U) {
	using R = typename Of<T>::t;
	if (std::isnan(v))
		return R(0);
	if (v <= static_cast<typename Of<Src>::t>(std::numeric_limits<R>::min()))
		return std::numeric_limits<R>::min();
	if (v >= static_cast<typename Of<Src>::t>(std::numeric_limits<R>::max()))
		return std::numeric_limits<R>::max();
	return static_cast<R>(v);
};

// --- carries, selects, lanes -----------------------------------------------

// The carry mask a VOP2 (VCC) or VOP3b (sdst) instruction writes / reads.
unsigned carry_out(const Inst &in) { return in.family == Family::Vop3 ? in.sdst : src::kVccLo; }
uint64_t carry_in(const Exec &x, const Wave &w, const Inst &in)
{
	return in.family == Family::Vop3 ? sread64(w, x, in.src2, in, false) : w.vcc;
}

// Add/sub with carry: Op 0 add, 1 sub, 2 subrev; CarryIn reads VCC/src2.
template <int Op, bool CarryIn>
int addc(Exec &x, Wave &w, const Inst &in)
{
	Opnd a = operand<Ty::U32>(x, w, in.src0, in), b = operand<Ty::U32>(x, w, in.src1, in);
	uint64_t cin = CarryIn ? carry_in(x, w, in) : 0, cout = 0;
	U *d = w.v(in.dst);
	for_lanes(w.exec, [&](unsigned l) {
		uint64_t s0 = U(a.at(l)), s1 = U(b.at(l)), c = cin >> l & 1, r;
		if (Op == 2)
			std::swap(s0, s1);
		r = Op == 0 ? s0 + s1 + c : s0 - s1 - c;
		d[l] = static_cast<U>(r);
		if (r >> 32)
			cout |= 1ull << l;
	});
	swrite64(w, carry_out(in), cout);
	return kNext;
}

int cndmask(Exec &x, Wave &w, const Inst &in)
{
	Opnd a = operand<Ty::U32>(x, w, in.src0, in), b = operand<Ty::U32>(x, w, in.src1, in);
	uint64_t sel = carry_in(x, w, in);
	U *d = w.v(in.dst);
	bool fl = flush32(w);
	for_lanes(w.exec, [&](unsigned l) {
		if (in.abs || in.neg) {  // VOP3 float modifiers on the two sources
			F s0 = value<Ty::F32>(a, l, 0, in, fl), s1 = value<Ty::F32>(b, l, 1, in, fl);
			d[l] = u32(sel >> l & 1 ? s1 : s0);
		} else {
			d[l] = U(sel >> l & 1 ? b.at(l) : a.at(l));
		}
	});
	return kNext;
}

template <bool Signed>
int mad64(Exec &x, Wave &w, const Inst &in)
{
	Opnd a = operand<Ty::U32>(x, w, in.src0, in), b = operand<Ty::U32>(x, w, in.src1, in);
	Opnd c = operand<Ty::U64>(x, w, in.src2, in);
	U *lo = w.v(in.dst), *hi = w.v(in.dst + 1);
	uint64_t cout = 0;
	for_lanes(w.exec, [&](unsigned l) {
		U128 r;
		if (Signed) {
			S128 p = S128(SL(I(U(a.at(l))))) * SL(I(U(b.at(l)))) + SL(c.at(l));
			r = static_cast<U128>(p);
			if (p < INT64_MIN || p > INT64_MAX)
				cout |= 1ull << l;
		} else {
			r = static_cast<U128>(U(a.at(l))) * U(b.at(l)) + c.at(l);
			if (r >> 64)
				cout |= 1ull << l;
		}
		lo[l] = static_cast<U>(r), hi[l] = static_cast<U>(r >> 32);
	});
	swrite64(w, in.sdst, cout);
	return kNext;
}

int readfirstlane(Exec &x, Wave &w, const Inst &in)
{
	unsigned lane = w.exec ? static_cast<unsigned>(std::countr_zero(w.exec)) : 0;
	Opnd a = operand<Ty::U32>(x, w, in.src0, in);
	swrite(w, in.dst, U(a.at(lane)));
	return kNext;
}

int readlane(Exec &x, Wave &w, const Inst &in)
{
	Opnd a = operand<Ty::U32>(x, w, in.src0, in);
	swrite(w, in.dst, U(a.at(sread(w, x, in.src1, in) & 63)));
	return kNext;
}

int writelane(Exec &x, Wave &w, const Inst &in)
{
	w.v(in.dst)[sread(w, x, in.src1, in) & 63] = sread(w, x, in.src0, in);
	return kNext;
}

template <bool Hi>
int mbcnt(Exec &x, Wave &w, const Inst &in)
{
	Opnd a = operand<Ty::U32>(x, w, in.src0, in), b = operand<Ty::U32>(x, w, in.src1, in);
	U *d = w.v(in.dst);
	for_lanes(w.exec, [&](unsigned l) {
		unsigned below = Hi ? (l < 32 ? 0 : l - 32) : (l < 32 ? l : 32);
		U mask = below >= 32 ? ~0u : (1u << below) - 1;
		d[l] = static_cast<U>(std::popcount(U(a.at(l)) & mask)) + U(b.at(l));
	});
	return kNext;
}

// --- compares ----------------------------------------------------------------

enum Cond : int { kF, kLt, kEq, kLe, kGt, kLg, kGe, kO, kU, kNge, kNlg, kNgt, kNle, kNeq, kNlt, kTru };

template <class T, int C>
bool compare(T a, T b)
{
	if constexpr (std::is_floating_point_v<T>) {
		switch (C) {
		case kF: return false;
		case kLt: return a < b;
		case kEq: return a == b;
		case kLe: return a <= b;
		case kGt: return a > b;
		case kLg: return a < b || a > b;
		case kGe: return a >= b;
		case kO: return !std::isnan(a) && !std::isnan(b);
		case kU: return std::isnan(a) || std::isnan(b);
		case kNge: return !(a >= b);
		case kNlg: return !(a < b || a > b);
		case kNgt: return !(a > b);
		case kNle: return !(a <= b);
		case kNeq: return !(a == b);
		case kNlt: return !(a < b);
		default: return true;
		}
	} else {  // integer conditions: f lt eq le gt ne ge t (encoded as kF..kGe, kTru)
		switch (C) {
		case kF: return false;
		case kLt: return a < b;
		case kEq: return a == b;
		case kLe: return a <= b;
		case kGt: return a > b;
		case kLg: return a != b;
		case kGe: return a >= b;
		default: return true;
		}
	}
}

void write_mask(Wave &w, const Inst &in, uint64_t r, bool x_exec)
{
	swrite64(w, in.family == Family::Vop3 ? in.dst : src::kVccLo, r);
	if (x_exec)
		w.exec = r;
}

template <Ty T, int C, bool X>
int vcmp(Exec &x, Wave &w, const Inst &in)
{
	Opnd a = operand<T>(x, w, in.src0, in), b = operand<T>(x, w, in.src1, in);
	bool fl = flush32(w);
	uint64_t r = 0;
	for_lanes(w.exec, [&](unsigned l) {
		if (compare<typename Of<T>::t, C>(value<T>(a, l, 0, in, fl), value<T>(b, l, 1, in, fl)))
			r |= 1ull << l;
	});
	write_mask(w, in, r, X);
	return kNext;
}

template <class T>
unsigned fp_class(T v)
{
	bool neg = std::signbit(v);
	switch (std::fpclassify(v)) {
	case FP_NAN: {
		using B = std::conditional_t<sizeof(T) == 4, U, L>;
		B bits = std::bit_cast<B>(v);
		B quiet = B(1) << (std::numeric_limits<T>::digits - 2);
		return bits & quiet ? 1 : 0;
	}
	case FP_INFINITE: return neg ? 2 : 9;
	case FP_NORMAL: return neg ? 3 : 8;
	case FP_SUBNORMAL: return neg ? 4 : 7;
	default: return neg ? 5 : 6;
	}
}

template <Ty T, bool X>
int vcmp_class(Exec &x, Wave &w, const Inst &in)
{
	Opnd a = operand<T>(x, w, in.src0, in), b = operand<Ty::U32>(x, w, in.src1, in);
	uint64_t r = 0;
	for_lanes(w.exec, [&](unsigned l) {
		if (U(b.at(l)) >> fp_class(value<T>(a, l, 0, in, false)) & 1)
			r |= 1ull << l;
	});
	write_mask(w, in, r, X);
	return kNext;
}

// Registers every v_cmp[x]_<cond>_<type> of the types and conditions.
template <Ty T, int... C>
void add_compares(std::unordered_map<std::string, Handler> &t, const char *type,
		  const char *const *names, std::integer_sequence<int, C...>)
{
	((t[std::string("v_cmp_") + names[C] + "_" + type] = vcmp<T, C, false>,
	  t[std::string("v_cmpx_") + names[C] + "_" + type] = vcmp<T, C, true>), ...);
}

void compares(std::unordered_map<std::string, Handler> &t)
{
	static constexpr const char *kFloat[] = {"f", "lt", "eq", "le", "gt", "lg", "ge", "o",
						 "u", "nge", "nlg", "ngt", "nle", "neq", "nlt", "tru"};
	static constexpr const char *kInt[] = {"f", "lt", "eq", "le", "gt", "ne", "ge", "t"};
	auto fl = std::make_integer_sequence<int, 16>();
	add_compares<Ty::F32>(t, "f32", kFloat, fl);
	add_compares<Ty::F64>(t, "f64", kFloat, fl);
	add_compares<Ty::I32>(t, "i32", kInt, std::integer_sequence<int, 0, 1, 2, 3, 4, 5, 6>());
	add_compares<Ty::U32>(t, "u32", kInt, std::integer_sequence<int, 0, 1, 2, 3, 4, 5, 6>());
	add_compares<Ty::I64>(t, "i64", kInt, std::integer_sequence<int, 0, 1, 2, 3, 4, 5, 6>());
	add_compares<Ty::U64>(t, "u64", kInt, std::integer_sequence<int, 0, 1, 2, 3, 4, 5, 6>());
	for (const char *ty : {"i32", "u32", "i64", "u64"}) {  // "t" is condition 7 of the integer list
		std::string n = std::string("_t_") + ty;
		bool w = ty[1] == '6';
		bool sg = ty[0] == 'i';
		t["v_cmp" + n] = w ? (sg ? vcmp<Ty::I64, kTru, false> : vcmp<Ty::U64, kTru, false>)
				   : (sg ? vcmp<Ty::I32, kTru, false> : vcmp<Ty::U32, kTru, false>);
		t["v_cmpx" + n] = w ? (sg ? vcmp<Ty::I64, kTru, true> : vcmp<Ty::U64, kTru, true>)
				    : (sg ? vcmp<Ty::I32, kTru, true> : vcmp<Ty::U32, kTru, true>);
	}
	t["v_cmp_class_f32"] = vcmp_class<Ty::F32, false>;
	t["v_cmpx_class_f32"] = vcmp_class<Ty::F32, true>;
	t["v_cmp_class_f64"] = vcmp_class<Ty::F64, false>;
	t["v_cmpx_class_f64"] = vcmp_class<Ty::F64, true>;
}

}  // namespace

void vector_ops_div(std::unordered_map<std::string, Handler> &t);
void vector_ops_misc(std::unordered_map<std::string, Handler> &t);

namespace {

// IEEE binary32 -> binary16, rounded to nearest even, NaNs quieted with the
// payload's top bits kept (what v_cvt_f16_f32 does in the default mode).
// Written out rather than through _Float16, which clang before 15 lacks
// on x86-64 (scripts/fuzz.sh builds this library with Debian's clang 14).
constexpr uint16_t f32_to_f16(F f)
{
	const U x = std::bit_cast<U>(f);
	const U sign = (x >> 16) & 0x8000;
	const U exp = (x >> 23) & 0xff, mant = x & 0x7fffff;
	if (exp == 0xff)
		return static_cast<uint16_t>(sign | 0x7c00 | (mant ? 0x200 | (mant >> 13) : 0));
	const int e = static_cast<int>(exp) - 127 + 15; // the binary16 biased exponent
	if (e >= 31)
		return static_cast<uint16_t>(sign | 0x7c00);
	if (exp == 0) // binary32 zero or subnormal: below half the least binary16 subnormal
		return static_cast<uint16_t>(sign);
	const U m = mant | 0x800000; // 24 significant bits
	const int shift = e >= 1 ? 13 : 14 - e;
	if (shift > 24)
		return static_cast<uint16_t>(sign);
	U r = m >> shift;
	const U rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
	if (rem > half || (rem == half && (r & 1)))
		++r;
	// Normal: r holds the implicit bit (0x400..0x800); a carry into 0x800
	// moves the exponent on (to infinity from e 30). Subnormal: r is the
	// encoding (0x400 when it rounds up to the least normal).
	return static_cast<uint16_t>(sign | (e >= 1 ? (static_cast<U>(e) << 10) + (r - 0x400) : r));
}

// IEEE binary16 -> binary32: exact; a signalling NaN comes out quiet.
constexpr F f16_to_f32(U h)
{
	const U sign = (h & 0x8000) << 16;
	const U exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
	if (exp == 0x1f)
		return std::bit_cast<F>(sign | 0x7f800000 | (mant ? 0x400000 | (mant << 13) : 0));
	if (exp == 0) {
		const F v = static_cast<F>(mant) * 0x1p-24f;
		return sign ? -v : v;
	}
	return std::bit_cast<F>(sign | ((exp + 112) << 23) | (mant << 13));
}

constexpr U bfe(U a, U off, U width)
{
	off &= 31, width &= 31;
	return width == 0 ? 0 : (a >> off) & ((1u << width) - 1);
}

constexpr I bfe_signed(U a, U off, U width)
{
	off &= 31, width &= 31;
	return width == 0 ? 0 : I(a << (32 - off - width)) >> (32 - width);
}

template <class T>
T med3(T a, T b, T c)
{
	return std::max(std::min(a, b), std::min(std::max(a, b), c));
}

F fmed3(F a, F b, F c)
{
	if (std::isnan(a) || std::isnan(b) || std::isnan(c))
		return std::fmin(std::fmin(a, b), c);
	return med3(a, b, c);
}

U perm(U s0, U s1, U sel)
{
	uint64_t in = uint64_t(s0) << 32 | s1;
	U r = 0;
	for (int i = 0; i < 4; i++) {
		U b = sel >> (8 * i) & 0xff, v;
		if (b <= 7)
			v = U(in >> (8 * b) & 0xff);
		else if (b <= 11) {
			unsigned byte = 2 * (b - 8) + 1;  // sign bit of byte 1, 3, 5, 7
			v = (in >> (8 * byte + 7) & 1) ? 0xff : 0;
		} else if (b == 12)
			v = 0;
		else
			v = 0xff;
		r |= v << (8 * i);
	}
	return r;
}

// Moves, bit and integer operations.
void integer_ops(std::unordered_map<std::string, Handler> &t)
{
	using enum Ty;
	t.insert({
		// moves and bit ops
		{"v_mov_b32", valu<U32, U32, None, None, ([](U a, U, U) { return a; })>},
		{"v_not_b32", valu<U32, U32, None, None, ([](U a, U, U) { return ~a; })>},
		{"v_bfrev_b32", valu<U32, U32, None, None, ([](U a, U, U) { U r = 0; for (int i = 0; i < 32; i++) r |= (a >> i & 1) << (31 - i); return r; })>},
		{"v_ffbh_u32", valu<U32, U32, None, None, ([](U a, U, U) { return a ? U(std::countl_zero(a)) : ~0u; })>},
		{"v_ffbl_b32", valu<U32, U32, None, None, ([](U a, U, U) { return a ? U(std::countr_zero(a)) : ~0u; })>},
		{"v_ffbh_i32", valu<U32, U32, None, None, ([](U a, U, U) { U v = I(a) < 0 ? ~a : a; return v ? U(std::countl_zero(v)) : ~0u; })>},
		{"v_and_b32", valu<U32, U32, U32, None, ([](U a, U b, U) { return a & b; })>},
		{"v_or_b32", valu<U32, U32, U32, None, ([](U a, U b, U) { return a | b; })>},
		{"v_xor_b32", valu<U32, U32, U32, None, ([](U a, U b, U) { return a ^ b; })>},
		{"v_xnor_b32", valu<U32, U32, U32, None, ([](U a, U b, U) { return ~(a ^ b); })>},
		{"v_lshlrev_b32", valu<U32, U32, U32, None, ([](U a, U b, U) { return b << (a & 31); })>},
		{"v_lshrrev_b32", valu<U32, U32, U32, None, ([](U a, U b, U) { return b >> (a & 31); })>},
		{"v_ashrrev_i32", valu<U32, U32, U32, None, ([](U a, U b, U) { return U(I(b) >> (a & 31)); })>},
		{"v_lshlrev_b64", valu<U64, U32, U64, None, ([](U a, L b, U) { return b << (a & 63); })>},
		{"v_lshrrev_b64", valu<U64, U32, U64, None, ([](U a, L b, U) { return b >> (a & 63); })>},
		{"v_ashrrev_i64", valu<U64, U32, U64, None, ([](U a, L b, U) { return L(SL(b) >> (a & 63)); })>},
		{"v_bfe_u32", valu<U32, U32, U32, U32, ([](U a, U b, U c) { return bfe(a, b, c); })>},
		{"v_bfe_i32", valu<U32, U32, U32, U32, ([](U a, U b, U c) { return U(bfe_signed(a, b, c)); })>},
		{"v_bfi_b32", valu<U32, U32, U32, U32, ([](U a, U b, U c) { return (a & b) | (~a & c); })>},
		{"v_bfm_b32", valu<U32, U32, U32, None, ([](U a, U b, U) { return ((1u << (a & 31)) - 1) << (b & 31); })>},
		{"v_bcnt_u32_b32", valu<U32, U32, U32, None, ([](U a, U b, U) { return U(std::popcount(a)) + b; })>},
		{"v_alignbit_b32", valu<U32, U32, U32, U32, ([](U a, U b, U c) { return U((L(a) << 32 | b) >> (c & 31)); })>},
		{"v_alignbyte_b32", valu<U32, U32, U32, U32, ([](U a, U b, U c) { return U((L(a) << 32 | b) >> (8 * (c & 3))); })>},
		{"v_perm_b32", valu<U32, U32, U32, U32, ([](U a, U b, U c) { return perm(a, b, c); })>},
		{"v_lshl_or_b32", valu<U32, U32, U32, U32, ([](U a, U b, U c) { return (a << (b & 31)) | c; })>},
		{"v_and_or_b32", valu<U32, U32, U32, U32, ([](U a, U b, U c) { return (a & b) | c; })>},
		{"v_or3_b32", valu<U32, U32, U32, U32, ([](U a, U b, U c) { return a | b | c; })>},
		{"v_xad_u32", valu<U32, U32, U32, U32, ([](U a, U b, U c) { return (a ^ b) + c; })>},
		// integer arithmetic
		{"v_add_u32", valu<U32, U32, U32, None, ([](U a, U b, U) { return a + b; })>},
		{"v_sub_u32", valu<U32, U32, U32, None, ([](U a, U b, U) { return a - b; })>},
		{"v_subrev_u32", valu<U32, U32, U32, None, ([](U a, U b, U) { return b - a; })>},
		{"v_add3_u32", valu<U32, U32, U32, U32, ([](U a, U b, U c) { return a + b + c; })>},
		{"v_lshl_add_u32", valu<U32, U32, U32, U32, ([](U a, U b, U c) { return (a << (b & 31)) + c; })>},
		{"v_add_lshl_u32", valu<U32, U32, U32, U32, ([](U a, U b, U c) { return (a + b) << (c & 31); })>},
		{"v_mul_lo_u32", valu<U32, U32, U32, None, ([](U a, U b, U) { return a * b; })>},
		{"v_mul_hi_u32", valu<U32, U32, U32, None, ([](U a, U b, U) { return U((L(a) * b) >> 32); })>},
		{"v_mul_hi_i32", valu<U32, I32, I32, None, ([](I a, I b, U) { return U(L(SL(a) * b) >> 32); })>},
		{"v_mul_u32_u24", valu<U32, U32, U32, None, ([](U a, U b, U) { return (a & 0xffffff) * (b & 0xffffff); })>},
		{"v_mul_hi_u32_u24", valu<U32, U32, U32, None, ([](U a, U b, U) { return U((L(a & 0xffffff) * (b & 0xffffff)) >> 32); })>},
		{"v_mul_i32_i24", valu<U32, U32, U32, None, ([](U a, U b, U) { return U(SL(I(a << 8) >> 8) * (I(b << 8) >> 8)); })>},
		{"v_mul_hi_i32_i24", valu<U32, U32, U32, None, ([](U a, U b, U) { return U(L(SL(I(a << 8) >> 8) * (I(b << 8) >> 8)) >> 32); })>},
		{"v_mad_u32_u24", valu<U32, U32, U32, U32, ([](U a, U b, U c) { return (a & 0xffffff) * (b & 0xffffff) + c; })>},
		{"v_mad_i32_i24", valu<U32, U32, U32, U32, ([](U a, U b, U c) { return U(SL(I(a << 8) >> 8) * (I(b << 8) >> 8)) + c; })>},
		{"v_min_i32", valu<U32, I32, I32, None, ([](I a, I b, U) { return U(std::min(a, b)); })>},
		{"v_max_i32", valu<U32, I32, I32, None, ([](I a, I b, U) { return U(std::max(a, b)); })>},
		{"v_min_u32", valu<U32, U32, U32, None, ([](U a, U b, U) { return std::min(a, b); })>},
		{"v_max_u32", valu<U32, U32, U32, None, ([](U a, U b, U) { return std::max(a, b); })>},
		{"v_min3_i32", valu<U32, I32, I32, I32, ([](I a, I b, I c) { return U(std::min({a, b, c})); })>},
		{"v_max3_i32", valu<U32, I32, I32, I32, ([](I a, I b, I c) { return U(std::max({a, b, c})); })>},
		{"v_med3_i32", valu<U32, I32, I32, I32, ([](I a, I b, I c) { return U(med3(a, b, c)); })>},
		{"v_min3_u32", valu<U32, U32, U32, U32, ([](U a, U b, U c) { return std::min({a, b, c}); })>},
		{"v_max3_u32", valu<U32, U32, U32, U32, ([](U a, U b, U c) { return std::max({a, b, c}); })>},
		{"v_med3_u32", valu<U32, U32, U32, U32, ([](U a, U b, U c) { return med3(a, b, c); })>},
		{"v_add_co_u32", addc<0, false>}, {"v_sub_co_u32", addc<1, false>}, {"v_subrev_co_u32", addc<2, false>},
		{"v_addc_co_u32", addc<0, true>}, {"v_subb_co_u32", addc<1, true>}, {"v_subbrev_co_u32", addc<2, true>},
		{"v_mad_u64_u32", mad64<false>}, {"v_mad_i64_i32", mad64<true>},
		{"v_cndmask_b32", cndmask},
		{"v_readfirstlane_b32", readfirstlane}, {"v_readlane_b32", readlane}, {"v_writelane_b32", writelane},
		{"v_mbcnt_lo_u32_b32", mbcnt<false>}, {"v_mbcnt_hi_u32_b32", mbcnt<true>},
	});
}

// Floating-point arithmetic, conversions, rounding, transcendentals.
void float_ops(std::unordered_map<std::string, Handler> &t)
{
	using enum Ty;
	t.insert({
		// f32 arithmetic
		{"v_add_f32", valu<F32, F32, F32, None, ([](F a, F b, U) { return a + b; })>},
		{"v_sub_f32", valu<F32, F32, F32, None, ([](F a, F b, U) { return a - b; })>},
		{"v_subrev_f32", valu<F32, F32, F32, None, ([](F a, F b, U) { return b - a; })>},
		{"v_mul_f32", valu<F32, F32, F32, None, ([](F a, F b, U) { return a * b; })>},
		{"v_mul_legacy_f32", valu<F32, F32, F32, None, ([](F a, F b, U) { return a == 0 || b == 0 ? 0.0f : a * b; })>},
		{"v_min_f32", valu<F32, F32, F32, None, ([](F a, F b, U) { return std::fmin(a, b); })>},
		{"v_max_f32", valu<F32, F32, F32, None, ([](F a, F b, U) { return std::fmax(a, b); })>},
		{"v_min3_f32", valu<F32, F32, F32, F32, ([](F a, F b, F c) { return std::fmin(std::fmin(a, b), c); })>},
		{"v_max3_f32", valu<F32, F32, F32, F32, ([](F a, F b, F c) { return std::fmax(std::fmax(a, b), c); })>},
		{"v_med3_f32", valu<F32, F32, F32, F32, ([](F a, F b, F c) { return fmed3(a, b, c); })>},
		{"v_fma_f32", valu<F32, F32, F32, F32, ([](F a, F b, F c) { return std::fma(a, b, c); })>},
		{"v_fmac_f32", valu<F32, F32, F32, F32, ([](F a, F b, F c) { return std::fma(a, b, c); }), true>},
		{"v_mad_f32", valu<F32, F32, F32, F32, mad_legacy>},
		{"v_mac_f32", valu<F32, F32, F32, F32, mad_legacy, true>},
		{"v_madmk_f32", madk<true>}, {"v_madak_f32", madk<false>},
		{"v_ldexp_f32", valu<F32, F32, I32, None, ([](F a, I b, U) { return std::ldexp(a, b); })>},
		// f64 arithmetic
		{"v_add_f64", valu<F64, F64, F64, None, ([](D a, D b, U) { return a + b; })>},
		{"v_mul_f64", valu<F64, F64, F64, None, ([](D a, D b, U) { return a * b; })>},
		{"v_fma_f64", valu<F64, F64, F64, F64, ([](D a, D b, D c) { return std::fma(a, b, c); })>},
		{"v_fmac_f64", valu<F64, F64, F64, F64, ([](D a, D b, D c) { return std::fma(a, b, c); }), true>},
		{"v_min_f64", valu<F64, F64, F64, None, ([](D a, D b, U) { return std::fmin(a, b); })>},
		{"v_max_f64", valu<F64, F64, F64, None, ([](D a, D b, U) { return std::fmax(a, b); })>},
		{"v_ldexp_f64", valu<F64, F64, I32, None, ([](D a, I b, U) { return std::ldexp(a, b); })>},
		// conversions
		{"v_cvt_f32_i32", valu<F32, I32, None, None, ([](I a, U, U) { return F(a); })>},
		{"v_cvt_f32_u32", valu<F32, U32, None, None, ([](U a, U, U) { return F(a); })>},
		{"v_cvt_i32_f32", valu<I32, F32, None, None, cvt_sat<I32, F32>>},
		{"v_cvt_u32_f32", valu<U32, F32, None, None, cvt_sat<U32, F32>>},
		{"v_cvt_f64_i32", valu<F64, I32, None, None, ([](I a, U, U) { return D(a); })>},
		{"v_cvt_f64_u32", valu<F64, U32, None, None, ([](U a, U, U) { return D(a); })>},
		{"v_cvt_i32_f64", valu<I32, F64, None, None, cvt_sat<I32, F64>>},
		{"v_cvt_u32_f64", valu<U32, F64, None, None, cvt_sat<U32, F64>>},
		{"v_cvt_f64_f32", valu<F64, F32, None, None, ([](F a, U, U) { return D(a); })>},
		{"v_cvt_f32_f64", valu<F32, F64, None, None, ([](D a, U, U) { return F(a); })>},
		{"v_cvt_f32_ubyte0", valu<F32, U32, None, None, ([](U a, U, U) { return F(a & 0xff); })>},
		{"v_cvt_f32_ubyte1", valu<F32, U32, None, None, ([](U a, U, U) { return F(a >> 8 & 0xff); })>},
		{"v_cvt_f32_ubyte2", valu<F32, U32, None, None, ([](U a, U, U) { return F(a >> 16 & 0xff); })>},
		{"v_cvt_f32_ubyte3", valu<F32, U32, None, None, ([](U a, U, U) { return F(a >> 24); })>},
		{"v_cvt_f16_f32", valu<U32, F32, None, None, ([](F a, U, U) { return U(f32_to_f16(a)); })>},
		{"v_cvt_f32_f16", valu<F32, U32, None, None, ([](U a, U, U) { return f16_to_f32(a & 0xffff); })>},
		// rounding
		{"v_rndne_f32", valu<F32, F32, None, None, ([](F a, U, U) { return std::nearbyint(a); })>},
		{"v_trunc_f32", valu<F32, F32, None, None, ([](F a, U, U) { return std::trunc(a); })>},
		{"v_ceil_f32", valu<F32, F32, None, None, ([](F a, U, U) { return std::ceil(a); })>},
		{"v_floor_f32", valu<F32, F32, None, None, ([](F a, U, U) { return std::floor(a); })>},
		{"v_fract_f32", valu<F32, F32, None, None, ([](F a, U, U) { return std::isinf(a) ? std::numeric_limits<F>::quiet_NaN() : std::fmin(a - std::floor(a), 0x1.fffffep-1f); })>},
		{"v_rndne_f64", valu<F64, F64, None, None, ([](D a, U, U) { return std::nearbyint(a); })>},
		{"v_trunc_f64", valu<F64, F64, None, None, ([](D a, U, U) { return std::trunc(a); })>},
		{"v_ceil_f64", valu<F64, F64, None, None, ([](D a, U, U) { return std::ceil(a); })>},
		{"v_floor_f64", valu<F64, F64, None, None, ([](D a, U, U) { return std::floor(a); })>},
		{"v_fract_f64", valu<F64, F64, None, None, ([](D a, U, U) { return std::isinf(a) ? std::numeric_limits<D>::quiet_NaN() : std::fmin(a - std::floor(a), 0x1.fffffffffffffp-1); })>},
		{"v_frexp_mant_f32", valu<F32, F32, None, None, ([](F a, U, U) { int e; return std::isinf(a) || std::isnan(a) ? a : std::frexp(a, &e); })>},
		{"v_frexp_exp_i32_f32", valu<I32, F32, None, None, ([](F a, U, U) { int e = 0; if (std::isfinite(a)) std::frexp(a, &e); return I(e); })>},
		{"v_frexp_mant_f64", valu<F64, F64, None, None, ([](D a, U, U) { int e; return std::isinf(a) || std::isnan(a) ? a : std::frexp(a, &e); })>},
		{"v_frexp_exp_i32_f64", valu<I32, F64, None, None, ([](D a, U, U) { int e = 0; if (std::isfinite(a)) std::frexp(a, &e); return I(e); })>},
		// transcendental approximations (computed exactly rounded here)
		{"v_rcp_f32", valu<F32, F32, None, None, ([](F a, U, U) { return 1.0f / a; })>},
		{"v_rcp_iflag_f32", valu<F32, F32, None, None, ([](F a, U, U) { return 1.0f / a; })>},
		{"v_rsq_f32", valu<F32, F32, None, None, ([](F a, U, U) { return 1.0f / std::sqrt(a); })>},
		{"v_sqrt_f32", valu<F32, F32, None, None, ([](F a, U, U) { return std::sqrt(a); })>},
		{"v_exp_f32", valu<F32, F32, None, None, ([](F a, U, U) { return std::exp2(a); })>},
		{"v_log_f32", valu<F32, F32, None, None, ([](F a, U, U) { return std::log2(a); })>},
		{"v_sin_f32", valu<F32, F32, None, None, ([](F a, U, U) { return F(std::sin(D(a) * 6.283185307179586)); })>},
		{"v_cos_f32", valu<F32, F32, None, None, ([](F a, U, U) { return F(std::cos(D(a) * 6.283185307179586)); })>},
		{"v_rcp_f64", valu<F64, F64, None, None, ([](D a, U, U) { return 1.0 / a; })>},
		{"v_rsq_f64", valu<F64, F64, None, None, ([](D a, U, U) { return 1.0 / std::sqrt(a); })>},
		{"v_sqrt_f64", valu<F64, F64, None, None, ([](D a, U, U) { return std::sqrt(a); })>},
	});
}

// --- the f16 ALU (VOP2 and VOP3 without op_sel) ------------------------------
//
// The sources' low halves (a float inline constant as binary16), VOP3
// abs/neg; computed in double and rounded once to binary16: sums,
// differences and products of two binary16 values are exact in double, and
// fma is rounded to odd in double first (the exact result lies between two
// doubles, so the one rounding to binary16 that follows is still correct),
// as is the double-to-float step; omod (with IEEE off) and clamp apply
// before that one rounding. The transcendentals (v_sqrt, v_rsq, v_rcp,
// v_exp: 2^x, v_log: log2) are computed in double and so come out
// correctly rounded (the hardware's are approximations the ISA documents
// to about 1 ULP). Denormals kept unless MODE's f16/f64 denormal mode
// flushes them; v_mad_f16/v_mac_f16 always flush them and round the
// product to binary16 before the add (not fused, as v_mad_f32; not
// verified on hardware). The result's high 16 bits are written 0 (GFX9).

// d rounded to odd at float precision, then to nearest binary16.
U f64_to_f16(D d)
{
	F f = static_cast<F>(d);
	if (std::isfinite(d) && static_cast<D>(f) != d && !(std::bit_cast<U>(f) & 1))
		f = std::nextafter(f, d > f ? std::numeric_limits<F>::infinity() : -std::numeric_limits<F>::infinity());
	return f32_to_f16(f);
}

// a * b + c rounded to odd at double precision (TwoSum of the exact product
// and c gives the rounding error).
D fma_odd(D a, D b, D c)
{
	const D p = a * b, s = p + c;
	if (!std::isfinite(s))
		return s;
	const D bp = s - c, bc = s - bp, e = (p - bp) + (c - bc);
	if (e == 0 || (std::bit_cast<L>(s) & 1))
		return s;
	return std::nextafter(s, e > 0 ? std::numeric_limits<D>::infinity() : -std::numeric_limits<D>::infinity());
}

U half_source(const Wave &w, const Exec &x, unsigned enc, const Inst &in, unsigned l)
{
	if (enc >= src::kVgpr0)
		return w.v(enc - src::kVgpr0)[l] & 0xffff;
	if (enc >= 240 && enc <= 248)
		return float_const16(enc);
	return sread(w, x, enc, in) & 0xffff;
}

constexpr U flush16(U h, bool keep) { return keep || (h & 0x7c00) ? h : h & 0x8000; }

bool keep16(const Wave &w) { return (w.mode >> 6 & 3) != 0; }

// The value of f16 source i at lane l, flushed unless `keep`, with abs/neg.
D half_value(const Wave &w, const Exec &x, const Inst &in, unsigned i, unsigned l, bool keep)
{
	const unsigned enc[3] = {in.src0, in.src1, in.src2};
	D v = f16_to_f32(flush16(half_source(w, x, enc[i], in, l), keep));
	if (in.abs >> i & 1)
		v = std::fabs(v);
	if (in.neg >> i & 1)
		v = -v;
	return v;
}

// Legacy: denormals flushed whatever MODE says (v_mad_f16). Acc: src2 is
// the destination's low half (v_mac_f16).
template <unsigned N, auto Fn, bool Legacy = false, bool Acc = false>
int f16_op(Exec &x, Wave &w, const Inst &in)
{
	static constexpr D kOmod[] = {1, 2, 4, 0.5};
	const bool keep = !Legacy && keep16(w), ie = ieee(w);
	Inst src = in;
	if (Acc)
		src.src2 = static_cast<uint16_t>(src::kVgpr0 + in.dst);
	U *d = w.v(in.dst);
	for_lanes(w.exec, [&](unsigned l) {
		D v[3] = {};
		for (unsigned i = 0; i < N; i++)
			v[i] = half_value(w, x, src, i, l, keep);
		D r = Fn(v[0], v[1], v[2]);
		if (!ie)
			r *= kOmod[in.omod];
		if (in.clamp)
			r = std::isnan(r) ? 0.0 : std::fmin(std::fmax(r, 0.0), 1.0);
		d[l] = flush16(f64_to_f16(r), keep);
	});
	return kNext;
}

// a * b rounded to binary16 with a denormal flushed, as a double.
D mul16_ftz(D a, D b) { return f16_to_f32(flush16(f64_to_f16(a * b), false)); }

// f16 compares: the sources' low halves as binary16 (denormals as MODE
// says), abs/neg; the conditions of the f32 ones.
template <int C, bool X>
int vcmp16(Exec &x, Wave &w, const Inst &in)
{
	const bool keep = keep16(w);
	uint64_t r = 0;
	for_lanes(w.exec, [&](unsigned l) {
		if (compare<D, C>(half_value(w, x, in, 0, l, keep), half_value(w, x, in, 1, l, keep)))
			r |= 1ull << l;
	});
	write_mask(w, in, r, X);
	return kNext;
}

// v_cmp_class_f16: src0's class (binary16, never flushed) in src1's mask.
template <bool X>
int vcmp_class16(Exec &x, Wave &w, const Inst &in)
{
	Opnd b = operand<Ty::U32>(x, w, in.src1, in);
	uint64_t r = 0;
	for_lanes(w.exec, [&](unsigned l) {
		const U h = half_source(w, x, in.src0, in, l);
		const U e = h >> 10 & 31, m = h & 0x3ff, neg = h >> 15;
		const unsigned cls = e == 31 ? (m ? (m & 0x200 ? 1 : 0) : neg ? 2 : 9)
				     : e ? (neg ? 3 : 8) : m ? (neg ? 4 : 7) : (neg ? 5 : 6);
		if (U(b.at(l)) >> cls & 1)
			r |= 1ull << l;
	});
	write_mask(w, in, r, X);
	return kNext;
}

template <int... C>
void add_compares16(std::unordered_map<std::string, Handler> &t, const char *const *names,
		    std::integer_sequence<int, C...>)
{
	((t[std::string("v_cmp_") + names[C] + "_f16"] = vcmp16<C, false>,
	  t[std::string("v_cmpx_") + names[C] + "_f16"] = vcmp16<C, true>), ...);
}

// v_div_fixup_f16 (S0 the quotient, S1 the denominator, S2 the
// numerator): the special cases of v_div_fixup_f32, else the quotient.
D div_fixup16(D q, D den, D num)
{
	const bool neg = std::signbit(den) != std::signbit(num);
	const D inf = std::numeric_limits<D>::infinity();
	if (std::isnan(num))
		return num;
	if (std::isnan(den))
		return den;
	if ((den == 0 && num == 0) || (std::isinf(den) && std::isinf(num)))
		return std::numeric_limits<D>::quiet_NaN();
	if (den == 0 || std::isinf(num))
		return neg ? -inf : inf;
	if (std::isinf(den) || num == 0)
		return neg ? -0.0 : 0.0;
	return neg ? -std::fabs(q) : std::fabs(q);
}

void half_ops(std::unordered_map<std::string, Handler> &t)
{
	static constexpr const char *kFloat[] = {"f", "lt", "eq", "le", "gt", "lg", "ge", "o",
						 "u", "nge", "nlg", "ngt", "nle", "neq", "nlt", "tru"};
	add_compares16(t, kFloat, std::make_integer_sequence<int, 16>());
	t["v_cmp_class_f16"] = vcmp_class16<false>;
	t["v_cmpx_class_f16"] = vcmp_class16<true>;
	t.insert({
		{"v_mad_f16", f16_op<3, [](D a, D b, D c) { return mul16_ftz(a, b) + c; }, true>},
		{"v_mac_f16", f16_op<3, [](D a, D b, D c) { return mul16_ftz(a, b) + c; }, true, true>},
		{"v_div_fixup_f16", f16_op<3, div_fixup16>},
		{"v_sqrt_f16", f16_op<1, [](D a, D, D) { return std::sqrt(a); }>},
		{"v_rsq_f16", f16_op<1, [](D a, D, D) { return 1.0 / std::sqrt(a); }>},
		{"v_rcp_f16", f16_op<1, [](D a, D, D) { return 1.0 / a; }>},
		{"v_exp_f16", f16_op<1, [](D a, D, D) { return std::exp2(a); }>},
		{"v_log_f16", f16_op<1, [](D a, D, D) { return std::log2(a); }>},
		{"v_floor_f16", f16_op<1, [](D a, D, D) { return std::floor(a); }>},
		{"v_ceil_f16", f16_op<1, [](D a, D, D) { return std::ceil(a); }>},
		{"v_trunc_f16", f16_op<1, [](D a, D, D) { return std::trunc(a); }>},
		{"v_rndne_f16", f16_op<1, [](D a, D, D) { return std::nearbyint(a); }>},
		{"v_fract_f16", f16_op<1, [](D a, D, D) { return std::isinf(a) ? std::numeric_limits<D>::quiet_NaN() : std::fmin(a - std::floor(a), 0x1.ffcp-1); }>},
		{"v_add_f16", f16_op<2, [](D a, D b, D) { return a + b; }>},
		{"v_sub_f16", f16_op<2, [](D a, D b, D) { return a - b; }>},
		{"v_subrev_f16", f16_op<2, [](D a, D b, D) { return b - a; }>},
		{"v_mul_f16", f16_op<2, [](D a, D b, D) { return a * b; }>},
		{"v_max_f16", f16_op<2, [](D a, D b, D) { return std::fmax(a, b); }>},
		{"v_min_f16", f16_op<2, [](D a, D b, D) { return std::fmin(a, b); }>},
		{"v_fma_f16", f16_op<3, [](D a, D b, D c) { return fma_odd(a, b, c); }>},
	});
}

// The 16-bit integer ALU (VOP2 and VOP3 without op_sel): the sources'
// low halves; the result's high 16 bits are written 0, as GFX9 does (on
// GFX10 they are kept; LLVM's zeroesHigh16BitsOfDest).
constexpr U lo16(U v) { return v & 0xffff; }
constexpr I s16(U v) { return static_cast<int16_t>(v); }

void integer16_ops(std::unordered_map<std::string, Handler> &t)
{
	using enum Ty;
	t.insert({
		{"v_add_u16", valu<U32, U32, U32, None, ([](U a, U b, U) { return lo16(a + b); })>},
		{"v_sub_u16", valu<U32, U32, U32, None, ([](U a, U b, U) { return lo16(a - b); })>},
		{"v_subrev_u16", valu<U32, U32, U32, None, ([](U a, U b, U) { return lo16(b - a); })>},
		{"v_mul_lo_u16", valu<U32, U32, U32, None, ([](U a, U b, U) { return lo16(lo16(a) * lo16(b)); })>},
		{"v_lshlrev_b16", valu<U32, U32, U32, None, ([](U a, U b, U) { return lo16(b << (a & 15)); })>},
		{"v_lshrrev_b16", valu<U32, U32, U32, None, ([](U a, U b, U) { return lo16(b) >> (a & 15); })>},
		{"v_ashrrev_i16", valu<U32, U32, U32, None, ([](U a, U b, U) { return lo16(U(s16(b) >> (a & 15))); })>},
		{"v_max_u16", valu<U32, U32, U32, None, ([](U a, U b, U) { return std::max(lo16(a), lo16(b)); })>},
		{"v_min_u16", valu<U32, U32, U32, None, ([](U a, U b, U) { return std::min(lo16(a), lo16(b)); })>},
		{"v_max_i16", valu<U32, U32, U32, None, ([](U a, U b, U) { return lo16(U(std::max(s16(a), s16(b)))); })>},
		{"v_min_i16", valu<U32, U32, U32, None, ([](U a, U b, U) { return lo16(U(std::min(s16(a), s16(b)))); })>},
		{"v_mad_legacy_u16", valu<U32, U32, U32, U32, ([](U a, U b, U c) { return lo16(lo16(a) * lo16(b) + c); })>},
		{"v_mad_legacy_i16", valu<U32, U32, U32, U32, ([](U a, U b, U c) { return lo16(lo16(a) * lo16(b) + c); })>},
	});
}

const std::unordered_map<std::string, Handler> &vector_table()
{
	static const std::unordered_map<std::string, Handler> t = [] {
		std::unordered_map<std::string, Handler> m;
		integer_ops(m);
		integer16_ops(m);
		half_ops(m);
		float_ops(m);
		compares(m);
		vector_ops_div(m);
		vector_ops_misc(m);
		return m;
	}();
	return t;
}

}  // namespace

Handler vector_handler(const std::string &name)
{
	auto it = vector_table().find(name);
	return it == vector_table().end() ? nullptr : it->second;
}

}  // namespace kfdemu::shader
