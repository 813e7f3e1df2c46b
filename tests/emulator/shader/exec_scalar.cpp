// SPDX-License-Identifier: GPL-2.0-only
//
// Scalar instructions: SOP2, SOPK, SOP1, SOPC, SOPP and SMEM, and the
// scalar register file (SGPRs, VCC, EXEC, M0, the constants).
#include <bit>
#include <functional>
#include <unordered_map>

#include "shader/exec.h"

namespace kfdemu::shader {

// --- scalar registers and constants --------------------------------------

uint32_t float_const32(unsigned enc)
{
	static constexpr uint32_t k[] = {0x3f000000, 0xbf000000, 0x3f800000, 0xbf800000, 0x40000000,
					 0xc0000000, 0x40800000, 0xc0800000, 0x3e22f983};
	return k[enc - 240];
}

uint64_t float_const64(unsigned enc)
{
	static constexpr uint64_t k[] = {0x3fe0000000000000, 0xbfe0000000000000, 0x3ff0000000000000,
					 0xbff0000000000000, 0x4000000000000000, 0xc000000000000000,
					 0x4010000000000000, 0xc010000000000000, 0x3fc45f306dc9c882};
	return k[enc - 240];
}

uint16_t float_const16(unsigned enc)
{
	static constexpr uint16_t k[] = {0x3800, 0xb800, 0x3c00, 0xbc00, 0x4000, 0xc000, 0x4400, 0xc400, 0x3118};
	return k[enc - 240];
}

namespace {

// Inline integer constants 128-208 (0..64, -1..-16).
inline bool int_const(unsigned enc, int32_t *v)
{
	if (enc >= 128 && enc <= 192)
		return *v = static_cast<int32_t>(enc) - 128, true;
	if (enc >= 193 && enc <= 208)
		return *v = 192 - static_cast<int32_t>(enc), true;
	return false;
}

uint32_t special(const Wave &w, const Exec &x, unsigned enc)
{
	const Apertures &a = x.d.launch.apertures;
	switch (enc) {
	case 102: return static_cast<uint32_t>(w.flat_scratch);
	case 103: return static_cast<uint32_t>(w.flat_scratch >> 32);
	case 104: return static_cast<uint32_t>(w.xnack_mask);
	case 105: return static_cast<uint32_t>(w.xnack_mask >> 32);
	case src::kVccLo: return static_cast<uint32_t>(w.vcc);
	case src::kVccHi: return static_cast<uint32_t>(w.vcc >> 32);
	case src::kM0: return w.m0;
	case src::kExecLo: return static_cast<uint32_t>(w.exec);
	case src::kExecHi: return static_cast<uint32_t>(w.exec >> 32);
	case src::kSharedBase: return static_cast<uint32_t>(a.shared_base >> 32);
	case src::kSharedLimit: return static_cast<uint32_t>((a.shared_base >> 32) + 0xffffffffull);
	case src::kPrivateBase: return static_cast<uint32_t>(a.private_base >> 32);
	case src::kPrivateLimit: return static_cast<uint32_t>((a.private_base >> 32) + 0xffffffffull);
	case src::kVccz: return w.vcc == 0;
	case src::kExecz: return w.exec == 0;
	case src::kScc: return w.scc;
	default: return 0;
	}
}

}  // namespace

uint32_t sread(const Wave &w, const Exec &x, unsigned enc, const Inst &in)
{
	if (enc < kSgprs)
		return w.sgpr[enc];
	int32_t i;
	if (int_const(enc, &i))
		return static_cast<uint32_t>(i);
	if (enc >= 240 && enc <= 248)
		return float_const32(enc);
	if (enc >= 108 && enc <= 123)
		return w.ttmp[enc - 108];
	if (enc == src::kLiteral)
		return in.literal;
	return special(w, x, enc);
}

uint64_t sread64(const Wave &w, const Exec &x, unsigned enc, const Inst &in, bool f64)
{
	int32_t i;
	if (int_const(enc, &i))
		return static_cast<uint64_t>(static_cast<int64_t>(i));
	if (enc >= 240 && enc <= 248)
		return f64 ? float_const64(enc) : float_const32(enc);
	if (enc == src::kLiteral)
		return f64 ? uint64_t(in.literal) << 32 : in.literal;
	return sread(w, x, enc, in) | uint64_t(sread(w, x, enc + 1, in)) << 32;
}

void swrite(Wave &w, unsigned enc, uint32_t v)
{
	auto lo = [](uint64_t &r, uint32_t x) { r = (r & ~0xffffffffull) | x; };
	auto hi = [](uint64_t &r, uint32_t x) { r = (r & 0xffffffffull) | uint64_t(x) << 32; };
	if (enc < kSgprs)
		w.sgpr[enc] = v;
	else if (enc >= 108 && enc <= 123)
		w.ttmp[enc - 108] = v;
	else if (enc == 102)
		lo(w.flat_scratch, v);
	else if (enc == 103)
		hi(w.flat_scratch, v);
	else if (enc == 104)
		lo(w.xnack_mask, v);
	else if (enc == 105)
		hi(w.xnack_mask, v);
	else if (enc == src::kVccLo)
		lo(w.vcc, v);
	else if (enc == src::kVccHi)
		hi(w.vcc, v);
	else if (enc == src::kM0)
		w.m0 = v;
	else if (enc == src::kExecLo)
		lo(w.exec, v);
	else if (enc == src::kExecHi)
		hi(w.exec, v);
}

void swrite64(Wave &w, unsigned enc, uint64_t v)
{
	swrite(w, enc, static_cast<uint32_t>(v));
	swrite(w, enc + 1, static_cast<uint32_t>(v >> 32));
}

namespace {

// --- SOP2 / SOP1 / SOPC / SOPK ---------------------------------------------


template <auto F>
int sop2_32(Exec &x, Wave &w, const Inst &in)
{
	bool scc = w.scc;
	uint32_t r = F(sread(w, x, in.src0, in), sread(w, x, in.src1, in), scc);
	swrite(w, in.dst, r);
	w.scc = scc;
	return kNext;
}

// 64-bit ops whose second source is 32 bits (shifts, bfe) read it as such.
template <auto F, bool Src1Is32 = false>
int sop2_64(Exec &x, Wave &w, const Inst &in)
{
	bool scc = w.scc;
	uint64_t b = Src1Is32 ? sread(w, x, in.src1, in) : sread64(w, x, in.src1, in, false);
	uint64_t r = F(sread64(w, x, in.src0, in, false), b, scc);
	swrite64(w, in.dst, r);
	w.scc = scc;
	return kNext;
}

template <class T>
bool nz(T v) { return v != 0; }

int32_t s(uint32_t v) { return static_cast<int32_t>(v); }

template <auto F>
int sop1_32(Exec &x, Wave &w, const Inst &in)
{
	bool scc = w.scc;
	uint32_t r = F(sread(w, x, in.src0, in), 0, scc);
	swrite(w, in.dst, r);
	w.scc = scc;
	return kNext;
}

template <auto F>
int sop1_64(Exec &x, Wave &w, const Inst &in)
{
	bool scc = w.scc;
	uint64_t r = F(sread64(w, x, in.src0, in, false), 0, scc);
	swrite64(w, in.dst, r);
	w.scc = scc;
	return kNext;
}

// s_*_saveexec_b64: dst = exec; exec = F(src, exec); scc = exec != 0.
template <auto F>
int saveexec(Exec &x, Wave &w, const Inst &in)
{
	uint64_t src = sread64(w, x, in.src0, in, false), old = w.exec;
	bool scc;
	w.exec = F(src, old, scc);
	swrite64(w, in.dst, old);
	w.scc = w.exec != 0;
	return kNext;
}

template <class T, class Cmp>
int sopc(Exec &x, Wave &w, const Inst &in)
{
	T a, b;
	if constexpr (sizeof(T) == 8)
		a = static_cast<T>(sread64(w, x, in.src0, in, false)), b = static_cast<T>(sread64(w, x, in.src1, in, false));
	else
		a = static_cast<T>(sread(w, x, in.src0, in)), b = static_cast<T>(sread(w, x, in.src1, in));
	w.scc = Cmp{}(a, b);
	return kNext;
}

template <class T, class Cmp>
int sopk_cmp(Exec &x, Wave &w, const Inst &in)
{
	T a = static_cast<T>(sread(w, x, in.dst, in));
	T b = std::is_signed_v<T> ? static_cast<T>(in.simm16) : static_cast<T>(static_cast<uint16_t>(in.simm16));
	w.scc = Cmp{}(a, b);
	return kNext;
}

uint32_t bfe_u32(uint32_t a, uint32_t b)
{
	unsigned off = b & 31, width = b >> 16 & 127;
	if (!width)
		return 0;
	uint32_t v = a >> off;
	return width >= 32 ? v : v & ((1u << width) - 1);
}

int32_t bfe_i32(uint32_t a, uint32_t b)
{
	unsigned off = b & 31, width = b >> 16 & 127;
	if (!width)
		return 0;
	if (width >= 32)
		return s(a) >> off;
	return static_cast<int32_t>((a >> off) << (32 - width)) >> (32 - width);
}

// HW_REG ids of s_getreg/s_setreg that waves have: MODE, STATUS, TRAPSTS,
// HW_ID, GPR_ALLOC, LDS_ALLOC, IB_STS.
uint32_t hwreg_read(const Exec &x, const Wave &w, unsigned id)
{
	switch (id) {
	case 1: return w.mode;
	case 2: return (w.scc ? 1u : 0u) | (w.exec ? 0u : 1u << 9) | (w.vcc ? 0u : 1u << 10);
	case 3: return w.trapsts;
	case 4: return w.id_in_group;  // HW_ID: wave id in [3:0]
	case 6: return (x.d.k.group_size + 255) / 256 << 12;  // LDS_ALLOC size in 64-dword units at [20:12]
	default: return 0;
	}
}

int getreg(Exec &x, Wave &w, const Inst &in)
{
	uint16_t imm = static_cast<uint16_t>(in.simm16);
	unsigned id = imm & 63, off = imm >> 6 & 31, size = (imm >> 11) + 1;
	uint32_t v = hwreg_read(x, w, id) >> off;
	swrite(w, in.dst, size >= 32 ? v : v & ((1u << size) - 1));
	return kNext;
}

int setreg_value(Exec &x, Wave &w, const Inst &in, uint32_t value)
{
	uint16_t imm = static_cast<uint16_t>(in.simm16);
	unsigned id = imm & 63, off = imm >> 6 & 31, size = (imm >> 11) + 1;
	uint32_t mask = (size >= 32 ? ~0u : (1u << size) - 1) << off;
	if (id == 1)
		w.mode = (w.mode & ~mask) | ((value << off) & mask);
	else if (id == 3)
		w.trapsts = (w.trapsts & ~mask) | ((value << off) & mask);
	else
		return x.illegal(w, in, "s_setreg of a hardware register other than MODE/TRAPSTS");
	return kNext;
}

int setreg(Exec &x, Wave &w, const Inst &in) { return setreg_value(x, w, in, sread(w, x, in.dst, in)); }
int setreg_imm(Exec &x, Wave &w, const Inst &in) { return setreg_value(x, w, in, in.literal); }

// --- SOPP ------------------------------------------------------------------

int branch_if(Wave &w, const Inst &in, bool taken)
{
	if (!taken)
		return kNext;
	w.pc = w.pc + 4 + static_cast<int64_t>(in.simm16) * 4;
	return kJumped;
}

int nop(Exec &, Wave &, const Inst &) { return kNext; }
int endpgm(Exec &, Wave &, const Inst &) { return kEnd; }
int barrier(Exec &, Wave &, const Inst &) { return kBarrier; }
int trap(Exec &x, Wave &w, const Inst &in)
{
	x.why = "s_trap " + std::to_string(static_cast<uint16_t>(in.simm16) & 0xff);
	(void)w;
	return kTrap;
}
int sethalt(Exec &x, Wave &, const Inst &in)
{
	if (!(in.simm16 & 1))
		return kNext;
	x.why = "s_sethalt 1 (the wave halted itself)";
	return kTrap;
}

// --- SMEM ------------------------------------------------------------------

// s_load_dword*, s_buffer_load_dword*: `n` dwords.
template <unsigned N, bool Buffer>
int smem_load(Exec &x, Wave &w, const Inst &in)
{
	uint64_t base = sread64(w, x, in.src0, in, false);
	if (Buffer)
		base &= 0xffffffffffffull;
	uint64_t off = in.imm ? static_cast<uint32_t>(in.offset) : sread(w, x, in.soffset, in);
	uint64_t va = (base + off) & ~3ull;
	uint32_t v[N];
	if (!x.load(va, v, sizeof(v)))
		return kFault;
	for (unsigned i = 0; i < N; i++)
		swrite(w, in.dst + i, v[i]);
	return kNext;
}

template <unsigned N>
int smem_store(Exec &x, Wave &w, const Inst &in)
{
	uint64_t base = sread64(w, x, in.src0, in, false);
	uint64_t off = in.imm ? static_cast<uint32_t>(in.offset) : sread(w, x, in.soffset, in);
	uint32_t v[N];
	for (unsigned i = 0; i < N; i++)
		v[i] = sread(w, x, in.dst + i, in);
	return x.store((base + off) & ~3ull, v, sizeof(v)) ? kNext : kFault;
}

// s_memtime / s_memrealtime: the dispatch's wave-instruction count, a clock
// that only moves forward (there is no real timing).
int memtime(Exec &x, Wave &w, const Inst &in)
{
	swrite64(w, in.dst, x.d.instructions);
	return kNext;
}

// SOP2.
void sop2_ops(std::unordered_map<std::string, Handler> &t)
{
	using U = uint32_t;
	using L = uint64_t;
	t.insert({
		// SOP2, 32-bit
		{"s_add_u32", sop2_32<([](U a, U b, bool &c) { c = uint64_t(a) + b > 0xffffffffu; return a + b; })>},
		{"s_sub_u32", sop2_32<([](U a, U b, bool &c) { c = b > a; return a - b; })>},
		{"s_add_i32", sop2_32<([](U a, U b, bool &c) { U r = a + b; c = ((a ^ r) & (b ^ r)) >> 31; return r; })>},
		{"s_sub_i32", sop2_32<([](U a, U b, bool &c) { U r = a - b; c = ((a ^ b) & (a ^ r)) >> 31; return r; })>},
		{"s_addc_u32", sop2_32<([](U a, U b, bool &c) { uint64_t r = uint64_t(a) + b + c; c = r >> 32; return U(r); })>},
		{"s_subb_u32", sop2_32<([](U a, U b, bool &c) { uint64_t r = uint64_t(a) - b - c; c = (r >> 32) != 0; return U(r); })>},
		{"s_min_i32", sop2_32<([](U a, U b, bool &c) { c = s(a) < s(b); return c ? a : b; })>},
		{"s_min_u32", sop2_32<([](U a, U b, bool &c) { c = a < b; return c ? a : b; })>},
		{"s_max_i32", sop2_32<([](U a, U b, bool &c) { c = s(a) > s(b); return c ? a : b; })>},
		{"s_max_u32", sop2_32<([](U a, U b, bool &c) { c = a > b; return c ? a : b; })>},
		{"s_cselect_b32", sop2_32<([](U a, U b, bool &c) { return c ? a : b; })>},
		{"s_and_b32", sop2_32<([](U a, U b, bool &c) { U r = a & b; c = r; return r; })>},
		{"s_or_b32", sop2_32<([](U a, U b, bool &c) { U r = a | b; c = r; return r; })>},
		{"s_xor_b32", sop2_32<([](U a, U b, bool &c) { U r = a ^ b; c = r; return r; })>},
		{"s_andn2_b32", sop2_32<([](U a, U b, bool &c) { U r = a & ~b; c = r; return r; })>},
		{"s_orn2_b32", sop2_32<([](U a, U b, bool &c) { U r = a | ~b; c = r; return r; })>},
		{"s_nand_b32", sop2_32<([](U a, U b, bool &c) { U r = ~(a & b); c = r; return r; })>},
		{"s_nor_b32", sop2_32<([](U a, U b, bool &c) { U r = ~(a | b); c = r; return r; })>},
		{"s_xnor_b32", sop2_32<([](U a, U b, bool &c) { U r = ~(a ^ b); c = r; return r; })>},
		{"s_lshl_b32", sop2_32<([](U a, U b, bool &c) { U r = a << (b & 31); c = r; return r; })>},
		{"s_lshr_b32", sop2_32<([](U a, U b, bool &c) { U r = a >> (b & 31); c = r; return r; })>},
		{"s_ashr_i32", sop2_32<([](U a, U b, bool &c) { U r = U(s(a) >> (b & 31)); c = r; return r; })>},
		{"s_bfm_b32", sop2_32<([](U a, U b, bool &) { return ((1u << (a & 31)) - 1) << (b & 31); })>},
		{"s_mul_i32", sop2_32<([](U a, U b, bool &) { return U(int64_t(s(a)) * s(b)); })>},
		{"s_mul_hi_u32", sop2_32<([](U a, U b, bool &) { return U((uint64_t(a) * b) >> 32); })>},
		{"s_mul_hi_i32", sop2_32<([](U a, U b, bool &) { return U(uint64_t(int64_t(s(a)) * s(b)) >> 32); })>},
		{"s_bfe_u32", sop2_32<([](U a, U b, bool &c) { U r = bfe_u32(a, b); c = r; return r; })>},
		{"s_bfe_i32", sop2_32<([](U a, U b, bool &c) { U r = U(bfe_i32(a, b)); c = r; return r; })>},
		{"s_absdiff_i32", sop2_32<([](U a, U b, bool &c) { int64_t d = int64_t(s(a)) - s(b); U r = U(d < 0 ? -d : d); c = r; return r; })>},
		{"s_lshl1_add_u32", sop2_32<([](U a, U b, bool &c) { uint64_t r = (uint64_t(a) << 1) + b; c = r >> 32; return U(r); })>},
		{"s_lshl2_add_u32", sop2_32<([](U a, U b, bool &c) { uint64_t r = (uint64_t(a) << 2) + b; c = r >> 32; return U(r); })>},
		{"s_lshl3_add_u32", sop2_32<([](U a, U b, bool &c) { uint64_t r = (uint64_t(a) << 3) + b; c = r >> 32; return U(r); })>},
		{"s_lshl4_add_u32", sop2_32<([](U a, U b, bool &c) { uint64_t r = (uint64_t(a) << 4) + b; c = r >> 32; return U(r); })>},
		{"s_pack_ll_b32_b16", sop2_32<([](U a, U b, bool &) { return (a & 0xffff) | b << 16; })>},
		{"s_pack_lh_b32_b16", sop2_32<([](U a, U b, bool &) { return (a & 0xffff) | (b & 0xffff0000); })>},
		{"s_pack_hh_b32_b16", sop2_32<([](U a, U b, bool &) { return a >> 16 | (b & 0xffff0000); })>},
		// SOP2, 64-bit
		{"s_cselect_b64", sop2_64<([](L a, L b, bool &c) { return c ? a : b; })>},
		{"s_and_b64", sop2_64<([](L a, L b, bool &c) { L r = a & b; c = r; return r; })>},
		{"s_or_b64", sop2_64<([](L a, L b, bool &c) { L r = a | b; c = r; return r; })>},
		{"s_xor_b64", sop2_64<([](L a, L b, bool &c) { L r = a ^ b; c = r; return r; })>},
		{"s_andn2_b64", sop2_64<([](L a, L b, bool &c) { L r = a & ~b; c = r; return r; })>},
		{"s_orn2_b64", sop2_64<([](L a, L b, bool &c) { L r = a | ~b; c = r; return r; })>},
		{"s_nand_b64", sop2_64<([](L a, L b, bool &c) { L r = ~(a & b); c = r; return r; })>},
		{"s_nor_b64", sop2_64<([](L a, L b, bool &c) { L r = ~(a | b); c = r; return r; })>},
		{"s_xnor_b64", sop2_64<([](L a, L b, bool &c) { L r = ~(a ^ b); c = r; return r; })>},
		{"s_lshl_b64", sop2_64<([](L a, L b, bool &c) { L r = a << (b & 63); c = r; return r; }), true>},
		{"s_lshr_b64", sop2_64<([](L a, L b, bool &c) { L r = a >> (b & 63); c = r; return r; }), true>},
		{"s_ashr_i64", sop2_64<([](L a, L b, bool &c) { L r = L(int64_t(a) >> (b & 63)); c = r; return r; }), true>},
		{"s_bfm_b64", sop2_64<([](L a, L b, bool &) { return ((1ull << (a & 63)) - 1) << (b & 63); }), true>},
		{"s_bfe_u64", sop2_64<([](L a, L b, bool &c) { unsigned o = b & 63, wd = b >> 16 & 127; L r = wd ? (a >> o) & (wd >= 64 ? ~0ull : (1ull << wd) - 1) : 0; c = r; return r; }), true>},
		{"s_bfe_i64", sop2_64<([](L a, L b, bool &c) { unsigned o = b & 63, wd = b >> 16 & 127; L r = 0; if (wd) r = wd >= 64 ? L(int64_t(a) >> o) : L(int64_t((a >> o) << (64 - wd)) >> (64 - wd)); c = r; return r; }), true>},
	});
}

// SOP1.
void sop1_ops(std::unordered_map<std::string, Handler> &t)
{
	using U = uint32_t;
	using L = uint64_t;
	t.insert({
		// SOP1
		{"s_mov_b32", sop1_32<([](U a, U, bool &) { return a; })>},
		{"s_mov_b64", sop1_64<([](L a, L, bool &) { return a; })>},
		{"s_not_b32", sop1_32<([](U a, U, bool &c) { c = ~a; return ~a; })>},
		{"s_not_b64", sop1_64<([](L a, L, bool &c) { c = ~a; return ~a; })>},
		{"s_brev_b32", sop1_32<([](U a, U, bool &) { U r = 0; for (int i = 0; i < 32; i++) r |= (a >> i & 1) << (31 - i); return r; })>},
		{"s_bcnt1_i32_b32", sop1_32<([](U a, U, bool &c) { U r = U(std::popcount(a)); c = r; return r; })>},
		{"s_bcnt1_i32_b64", sop1_64<([](L a, L, bool &c) { L r = L(std::popcount(a)); c = r; return r; })>},
		{"s_ff1_i32_b32", sop1_32<([](U a, U, bool &) { return a ? U(std::countr_zero(a)) : ~0u; })>},
		{"s_ff1_i32_b64", sop1_64<([](L a, L, bool &) { return L(a ? U(std::countr_zero(a)) : ~0u); })>},
		{"s_flbit_i32_b32", sop1_32<([](U a, U, bool &) { return a ? U(std::countl_zero(a)) : ~0u; })>},
		{"s_flbit_i32_b64", sop1_64<([](L a, L, bool &) { return L(a ? U(std::countl_zero(a)) : ~0u); })>},
		{"s_sext_i32_i8", sop1_32<([](U a, U, bool &) { return U(int32_t(int8_t(a))); })>},
		{"s_sext_i32_i16", sop1_32<([](U a, U, bool &) { return U(int32_t(int16_t(a))); })>},
		{"s_bitset0_b32", [](Exec &x, Wave &w, const Inst &in) { swrite(w, in.dst, sread(w, x, in.dst, in) & ~(1u << (sread(w, x, in.src0, in) & 31))); return int(kNext); }},
		{"s_bitset1_b32", [](Exec &x, Wave &w, const Inst &in) { swrite(w, in.dst, sread(w, x, in.dst, in) | 1u << (sread(w, x, in.src0, in) & 31)); return int(kNext); }},
		{"s_abs_i32", sop1_32<([](U a, U, bool &c) { U r = s(a) < 0 ? 0u - a : a; c = r; return r; })>},
		{"s_and_saveexec_b64", saveexec<([](L s, L e, bool &) { return s & e; })>},
		{"s_or_saveexec_b64", saveexec<([](L s, L e, bool &) { return s | e; })>},
		{"s_xor_saveexec_b64", saveexec<([](L s, L e, bool &) { return s ^ e; })>},
		{"s_andn2_saveexec_b64", saveexec<([](L s, L e, bool &) { return s & ~e; })>},
		{"s_orn2_saveexec_b64", saveexec<([](L s, L e, bool &) { return s | ~e; })>},
		{"s_nand_saveexec_b64", saveexec<([](L s, L e, bool &) { return ~(s & e); })>},
		{"s_nor_saveexec_b64", saveexec<([](L s, L e, bool &) { return ~(s | e); })>},
		{"s_xnor_saveexec_b64", saveexec<([](L s, L e, bool &) { return ~(s ^ e); })>},
		{"s_andn1_saveexec_b64", saveexec<([](L s, L e, bool &) { return ~s & e; })>},
		{"s_orn1_saveexec_b64", saveexec<([](L s, L e, bool &) { return ~s | e; })>},
		{"s_getpc_b64", ([](Exec &, Wave &w, const Inst &in) { swrite64(w, in.dst, w.pc + 4); return int(kNext); })},
		{"s_setpc_b64", ([](Exec &x, Wave &w, const Inst &in) { w.pc = sread64(w, x, in.src0, in, false); return int(kJumped); })},
		{"s_swappc_b64", ([](Exec &x, Wave &w, const Inst &in) { uint64_t t = sread64(w, x, in.src0, in, false); swrite64(w, in.dst, w.pc + 4); w.pc = t; return int(kJumped); })},
	});
}

// SOPC, SOPK, SOPP and SMEM.
void control_ops(std::unordered_map<std::string, Handler> &t)
{
	using U = uint32_t;
	t.insert({
		// SOPC
		{"s_cmp_eq_i32", sopc<int32_t, std::equal_to<>>}, {"s_cmp_lg_i32", sopc<int32_t, std::not_equal_to<>>},
		{"s_cmp_gt_i32", sopc<int32_t, std::greater<>>}, {"s_cmp_ge_i32", sopc<int32_t, std::greater_equal<>>},
		{"s_cmp_lt_i32", sopc<int32_t, std::less<>>}, {"s_cmp_le_i32", sopc<int32_t, std::less_equal<>>},
		{"s_cmp_eq_u32", sopc<uint32_t, std::equal_to<>>}, {"s_cmp_lg_u32", sopc<uint32_t, std::not_equal_to<>>},
		{"s_cmp_gt_u32", sopc<uint32_t, std::greater<>>}, {"s_cmp_ge_u32", sopc<uint32_t, std::greater_equal<>>},
		{"s_cmp_lt_u32", sopc<uint32_t, std::less<>>}, {"s_cmp_le_u32", sopc<uint32_t, std::less_equal<>>},
		{"s_cmp_eq_u64", sopc<uint64_t, std::equal_to<>>}, {"s_cmp_lg_u64", sopc<uint64_t, std::not_equal_to<>>},
		{"s_bitcmp0_b32", ([](Exec &x, Wave &w, const Inst &in) { w.scc = !(sread(w, x, in.src0, in) >> (sread(w, x, in.src1, in) & 31) & 1); return int(kNext); })},
		{"s_bitcmp1_b32", ([](Exec &x, Wave &w, const Inst &in) { w.scc = sread(w, x, in.src0, in) >> (sread(w, x, in.src1, in) & 31) & 1; return int(kNext); })},
		// SOPK
		{"s_movk_i32", ([](Exec &, Wave &w, const Inst &in) { swrite(w, in.dst, U(int32_t(in.simm16))); return int(kNext); })},
		{"s_cmovk_i32", ([](Exec &, Wave &w, const Inst &in) { if (w.scc) swrite(w, in.dst, U(int32_t(in.simm16))); return int(kNext); })},
		{"s_addk_i32", ([](Exec &x, Wave &w, const Inst &in) { U a = sread(w, x, in.dst, in), b = U(int32_t(in.simm16)), r = a + b; w.scc = ((a ^ r) & (b ^ r)) >> 31; swrite(w, in.dst, r); return int(kNext); })},
		{"s_mulk_i32", ([](Exec &x, Wave &w, const Inst &in) { swrite(w, in.dst, U(int64_t(s(sread(w, x, in.dst, in))) * in.simm16)); return int(kNext); })},
		{"s_cmpk_eq_i32", sopk_cmp<int32_t, std::equal_to<>>}, {"s_cmpk_lg_i32", sopk_cmp<int32_t, std::not_equal_to<>>},
		{"s_cmpk_gt_i32", sopk_cmp<int32_t, std::greater<>>}, {"s_cmpk_ge_i32", sopk_cmp<int32_t, std::greater_equal<>>},
		{"s_cmpk_lt_i32", sopk_cmp<int32_t, std::less<>>}, {"s_cmpk_le_i32", sopk_cmp<int32_t, std::less_equal<>>},
		{"s_cmpk_eq_u32", sopk_cmp<uint32_t, std::equal_to<>>}, {"s_cmpk_lg_u32", sopk_cmp<uint32_t, std::not_equal_to<>>},
		{"s_cmpk_gt_u32", sopk_cmp<uint32_t, std::greater<>>}, {"s_cmpk_ge_u32", sopk_cmp<uint32_t, std::greater_equal<>>},
		{"s_cmpk_lt_u32", sopk_cmp<uint32_t, std::less<>>}, {"s_cmpk_le_u32", sopk_cmp<uint32_t, std::less_equal<>>},
		{"s_getreg_b32", getreg}, {"s_setreg_b32", setreg}, {"s_setreg_imm32_b32", setreg_imm},
		{"s_call_b64", ([](Exec &, Wave &w, const Inst &in) { swrite64(w, in.dst, w.pc + 4); w.pc = w.pc + 4 + int64_t(in.simm16) * 4; return int(kJumped); })},
		// SOPP
		{"s_nop", nop}, {"s_waitcnt", nop}, {"s_sleep", nop}, {"s_setprio", nop}, {"s_sendmsg", nop},
		{"s_icache_inv", nop}, {"s_incperflevel", nop}, {"s_decperflevel", nop}, {"s_ttracedata", nop},
		{"s_endpgm", endpgm}, {"s_barrier", barrier}, {"s_trap", trap}, {"s_sethalt", sethalt},
		{"s_branch", ([](Exec &, Wave &w, const Inst &in) { return branch_if(w, in, true); })},
		{"s_cbranch_scc0", ([](Exec &, Wave &w, const Inst &in) { return branch_if(w, in, !w.scc); })},
		{"s_cbranch_scc1", ([](Exec &, Wave &w, const Inst &in) { return branch_if(w, in, w.scc); })},
		{"s_cbranch_vccz", ([](Exec &, Wave &w, const Inst &in) { return branch_if(w, in, !w.vcc); })},
		{"s_cbranch_vccnz", ([](Exec &, Wave &w, const Inst &in) { return branch_if(w, in, w.vcc != 0); })},
		{"s_cbranch_execz", ([](Exec &, Wave &w, const Inst &in) { return branch_if(w, in, !w.exec); })},
		{"s_cbranch_execnz", ([](Exec &, Wave &w, const Inst &in) { return branch_if(w, in, w.exec != 0); })},
		// SMEM
		{"s_load_dword", smem_load<1, false>}, {"s_load_dwordx2", smem_load<2, false>},
		{"s_load_dwordx4", smem_load<4, false>}, {"s_load_dwordx8", smem_load<8, false>},
		{"s_load_dwordx16", smem_load<16, false>},
		{"s_buffer_load_dword", smem_load<1, true>}, {"s_buffer_load_dwordx2", smem_load<2, true>},
		{"s_buffer_load_dwordx4", smem_load<4, true>}, {"s_buffer_load_dwordx8", smem_load<8, true>},
		{"s_buffer_load_dwordx16", smem_load<16, true>},
		{"s_store_dword", smem_store<1>}, {"s_store_dwordx2", smem_store<2>}, {"s_store_dwordx4", smem_store<4>},
		{"s_memtime", memtime}, {"s_memrealtime", memtime},
		{"s_dcache_inv", nop}, {"s_dcache_wb", nop}, {"s_dcache_inv_vol", nop}, {"s_dcache_wb_vol", nop},
	});
}

const std::unordered_map<std::string, Handler> &scalar_table()
{
	static const std::unordered_map<std::string, Handler> t = [] {
		std::unordered_map<std::string, Handler> m;
		sop2_ops(m);
		sop1_ops(m);
		control_ops(m);
		return m;
	}();
	return t;
}

}  // namespace

Handler scalar_handler(const std::string &name)
{
	auto it = scalar_table().find(name);
	return it == scalar_table().end() ? nullptr : it->second;
}

}  // namespace kfdemu::shader
