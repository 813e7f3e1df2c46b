// SPDX-License-Identifier: GPL-2.0-only
//
// GFX9 decoding: which family a dword starts, its fields, its opcode's row
// in opcodes.inc, and how many dwords it spans.
#include <array>
#include <cstring>
#include <vector>

#include "shader/isa.h"

namespace kfdemu::shader {

namespace {

constexpr unsigned kFamilies = static_cast<unsigned>(Family::Invalid);

struct Row {
	Target target;
	OpInfo info;
};

constexpr Row kRows[] = {
#define OP(t, fam, op, name, ops) {Target::t, {Family::fam, op, name, ops}},
#include "shader/opcodes.inc"
#undef OP
};

// Per target and family, the opcode rows indexed by opcode number.
class OpTable {
public:
	OpTable()
	{
		for (const Row &r : kRows) {
			auto &v = rows_[r.target == Target::Gfx90a][static_cast<unsigned>(r.info.family)];
			if (v.size() <= r.info.op)
				v.resize(r.info.op + 1u, nullptr);
			v[r.info.op] = &r.info;
		}
	}
	const OpInfo *find(Target t, Family f, unsigned op) const
	{
		const auto &v = rows_[t == Target::Gfx90a][static_cast<unsigned>(f)];
		return op < v.size() ? v[op] : nullptr;
	}

private:
	std::array<std::array<std::vector<const OpInfo *>, kFamilies>, 2> rows_;
};

const OpTable &table()
{
	static const OpTable t;
	return t;
}

constexpr uint32_t bits(uint32_t w, unsigned hi, unsigned lo)
{
	return (w >> lo) & ((hi - lo == 31) ? ~0u : ((1u << (hi - lo + 1)) - 1));
}

constexpr int32_t sext(uint32_t v, unsigned width)
{
	return static_cast<int32_t>(v << (32 - width)) >> (32 - width);
}

Family family_of(uint32_t w)
{
	if (!(w >> 31)) {
		if (bits(w, 31, 25) == 0x3f)
			return Family::Vop1;
		if (bits(w, 31, 25) == 0x3e)
			return Family::Vopc;
		return Family::Vop2;
	}
	if (bits(w, 31, 30) == 2) {
		switch (bits(w, 31, 23)) {
		case 0x17d: return Family::Sop1;
		case 0x17e: return Family::Sopc;
		case 0x17f: return Family::Sopp;
		default: break;
		}
		return bits(w, 31, 28) == 0xb ? Family::Sopk : Family::Sop2;
	}
	if (bits(w, 31, 23) == 0x1a7)
		return Family::Vop3p;
	switch (bits(w, 31, 26)) {
	case 0x30: return Family::Smem;
	case 0x34: return Family::Vop3;
	case 0x36: return Family::Ds;
	case 0x37: return Family::Flat;
	case 0x38: return Family::Mubuf;
	case 0x3a: return Family::Mtbuf;
	case 0x3c: return Family::Mimg;
	default: return Family::Invalid;
	}
}

void scalar_fields(Inst &in, uint32_t w)
{
	switch (in.family) {
	case Family::Sop2:
		in.op = bits(w, 29, 23), in.dst = bits(w, 22, 16);
		in.src1 = bits(w, 15, 8), in.src0 = bits(w, 7, 0);
		break;
	case Family::Sopk:
		in.op = bits(w, 27, 23), in.dst = bits(w, 22, 16);
		in.simm16 = static_cast<int16_t>(bits(w, 15, 0));
		break;
	case Family::Sop1:
		in.dst = bits(w, 22, 16), in.op = bits(w, 15, 8), in.src0 = bits(w, 7, 0);
		break;
	case Family::Sopc:
		in.op = bits(w, 22, 16), in.src1 = bits(w, 15, 8), in.src0 = bits(w, 7, 0);
		break;
	default:  // Sopp
		in.op = bits(w, 22, 16), in.simm16 = static_cast<int16_t>(bits(w, 15, 0));
		break;
	}
}

void vector32_fields(Inst &in, uint32_t w)
{
	in.src0 = bits(w, 8, 0);
	switch (in.family) {
	case Family::Vop2:
		in.op = bits(w, 30, 25), in.dst = bits(w, 24, 17), in.src1 = 256 + bits(w, 16, 9);
		break;
	case Family::Vop1:
		in.dst = bits(w, 24, 17), in.op = bits(w, 16, 9);
		break;
	default:  // Vopc
		in.op = bits(w, 24, 17), in.src1 = 256 + bits(w, 16, 9);
		break;
	}
}

void vop3_fields(Inst &in, uint32_t w, uint32_t w2)
{
	in.src0 = bits(w2, 8, 0), in.src1 = bits(w2, 17, 9), in.src2 = bits(w2, 26, 18);
	in.neg = bits(w2, 31, 29), in.dst = bits(w, 7, 0), in.clamp = bits(w, 15, 15);
	if (in.family == Family::Vop3) {
		in.op = bits(w, 25, 16), in.abs = bits(w, 10, 8), in.opsel = bits(w, 14, 11);
		in.sdst = bits(w, 14, 8), in.omod = bits(w2, 28, 27);
	} else {
		in.op = bits(w, 22, 16), in.neg_hi = bits(w, 10, 8), in.opsel = bits(w, 13, 11);
		in.opsel_hi = static_cast<uint8_t>(bits(w2, 28, 27) | bits(w, 14, 14) << 2);
	}
}

void memory_fields(Inst &in, Target t, uint32_t w, uint32_t w2)
{
	bool gfx90a = t == Target::Gfx90a;
	switch (in.family) {
	case Family::Smem:
		in.op = bits(w, 25, 18), in.imm = bits(w, 17, 17), in.glc = bits(w, 16, 16);
		in.dst = bits(w, 12, 6), in.src0 = bits(w, 5, 0) * 2;
		in.offset = static_cast<int32_t>(bits(w2, 20, 0));
		in.soffset = static_cast<uint8_t>(bits(w, 14, 14) ? bits(w2, 31, 25) : bits(w2, 6, 0));
		break;
	case Family::Ds:
		in.offset = bits(w, 7, 0), in.offset1 = bits(w, 15, 8), in.gds = bits(w, 16, 16);
		in.op = bits(w, 24, 17), in.acc = gfx90a && bits(w, 25, 25);
		in.src0 = bits(w2, 7, 0), in.src1 = bits(w2, 15, 8), in.src2 = bits(w2, 23, 16);
		in.dst = bits(w2, 31, 24);
		break;
	case Family::Flat:
		in.family = bits(w, 15, 14) == 1 ? Family::Scratch
			  : bits(w, 15, 14) == 2 ? Family::Global : Family::Flat;
		in.offset = in.family == Family::Flat ? static_cast<int32_t>(bits(w, 11, 0))
						      : sext(bits(w, 12, 0), 13);
		in.lds = bits(w, 13, 13), in.glc = bits(w, 16, 16), in.slc = bits(w, 17, 17);
		in.op = bits(w, 24, 18), in.scc = gfx90a && bits(w, 25, 25);
		in.src0 = bits(w2, 7, 0), in.src1 = bits(w2, 15, 8);
		in.saddr = static_cast<uint8_t>(bits(w2, 22, 16));
		in.acc = gfx90a && bits(w2, 23, 23), in.dst = bits(w2, 31, 24);
		break;
	case Family::Mubuf:
		in.offset = bits(w, 11, 0), in.offen = bits(w, 12, 12), in.idxen = bits(w, 13, 13);
		in.glc = bits(w, 14, 14), in.scc = gfx90a && bits(w, 15, 15), in.lds = bits(w, 16, 16);
		in.slc = bits(w, 17, 17), in.op = bits(w, 24, 18);
		in.src0 = bits(w2, 7, 0), in.dst = bits(w2, 15, 8), in.src1 = bits(w2, 20, 16) * 4;
		in.acc = gfx90a && bits(w2, 23, 23), in.soffset = static_cast<uint8_t>(bits(w2, 31, 24));
		break;
	case Family::Mimg:
		in.dmask = bits(w, 11, 8), in.unorm = bits(w, 12, 12), in.glc = bits(w, 13, 13);
		in.da = bits(w, 14, 14), in.r128 = bits(w, 15, 15), in.tfe = bits(w, 16, 16);
		in.lwe = bits(w, 17, 17), in.op = bits(w, 24, 18), in.slc = bits(w, 25, 25);
		in.src0 = bits(w2, 7, 0), in.dst = bits(w2, 15, 8), in.src1 = bits(w2, 20, 16) * 4;
		in.src2 = bits(w2, 25, 21) * 4, in.d16 = bits(w2, 31, 31);
		break;
	default:  // Mtbuf: not decoded further
		in.op = bits(w, 24, 18);
		break;
	}
}

bool is_wide(Family f)
{
	switch (f) {
	case Family::Smem: case Family::Vop3: case Family::Vop3p: case Family::Ds:
	case Family::Flat: case Family::Mubuf: case Family::Mtbuf: case Family::Mimg:
		return true;
	default:
		return false;
	}
}

// The SDWA dword's source fields (GFX9): src0 [7:0] a VGPR, or a scalar
// operand with S0 [23] (src1, the VGPR of the first dword, one with S1
// [31]); sext [19]/[27], neg [20]/[28], abs [21]/[29]; on VOP1/VOP2 clamp
// [13] and omod [15:14] (VOPC's bits 15:8 are its SGPR destination).
void sdwa_fields(Inst &in, uint32_t e)
{
	if (e >> 23 & 1)
		in.src0 = static_cast<uint16_t>(e & 0xff);
	if (in.family != Family::Vop1 && (e >> 31 & 1))
		in.src1 = static_cast<uint16_t>(in.src1 - 256);
	in.sext = static_cast<uint8_t>((e >> 19 & 1) | (e >> 27 & 1) << 1);
	in.neg = static_cast<uint8_t>((e >> 20 & 1) | (e >> 28 & 1) << 1);
	in.abs = static_cast<uint8_t>((e >> 21 & 1) | (e >> 29 & 1) << 1);
	if (in.family != Family::Vopc)
		in.clamp = e >> 13 & 1, in.omod = static_cast<uint8_t>(e >> 14 & 3);
}

// Whether the 32-bit encodings' sources or the opcode itself call for a
// trailing dword (literal, DPP or SDWA control).
void trailing_dword(Inst &in, const uint32_t *code, size_t n)
{
	bool literal = false;
	switch (in.family) {
	case Family::Sop2:
	case Family::Sopc:
		literal = in.src0 == src::kLiteral || in.src1 == src::kLiteral;
		break;
	case Family::Sop1:
		literal = in.src0 == src::kLiteral;
		break;
	case Family::Sopk:
		literal = in.info && !std::strcmp(in.info->name, "s_setreg_imm32_b32");
		break;
	case Family::Vop1: case Family::Vop2: case Family::Vopc:
		literal = in.src0 == src::kLiteral ||
			  (in.info && std::strstr(in.info->operands, "%L"));
		in.dpp = in.src0 == src::kDpp;
		in.sdwa = in.src0 == src::kSdwa;
		break;
	default:
		break;
	}
	if (!literal && !in.dpp && !in.sdwa)
		return;
	if (n < 2) {
		in.info = nullptr;
		return;
	}
	in.size = 8;
	in.word[1] = code[1];
	if (literal)
		in.literal = code[1], in.has_literal = true;
	else
		in.ext = code[1], in.src0 = static_cast<uint16_t>(256 + (code[1] & 0xff));
	if (in.sdwa)
		sdwa_fields(in, code[1]);
	if (in.dpp) // src0 neg/abs [20]/[21], src1's [22]/[23]
		in.neg = static_cast<uint8_t>((code[1] >> 20 & 1) | (code[1] >> 22 & 1) << 1),
		in.abs = static_cast<uint8_t>((code[1] >> 21 & 1) | (code[1] >> 23 & 1) << 1);
}

}  // namespace

Inst decode(Target t, const uint32_t *code, size_t n)
{
	Inst in;
	uint32_t w = code[0];
	in.word[0] = w;
	in.family = family_of(w);
	if (in.family == Family::Invalid)
		return in;
	if (is_wide(in.family)) {
		if (n < 2) {
			in.family = Family::Invalid;
			return in;
		}
		in.size = 8;
		in.word[1] = code[1];
	}
	switch (in.family) {
	case Family::Sop2: case Family::Sopk: case Family::Sop1: case Family::Sopc: case Family::Sopp:
		scalar_fields(in, w);
		break;
	case Family::Vop1: case Family::Vop2: case Family::Vopc:
		vector32_fields(in, w);
		break;
	case Family::Vop3: case Family::Vop3p:
		vop3_fields(in, w, code[1]);
		break;
	default:
		memory_fields(in, t, w, code[1]);
		break;
	}
	in.info = table().find(t, in.family, in.op);
	if (in.info && in.family == Family::Vop3 && std::strstr(in.info->operands, "%E"))
		in.abs = 0, in.opsel = 0;  // VOP3b: those bits are sdst
	trailing_dword(in, code, n);
	if (!in.info)
		in.size = 4;
	return in;
}

const char *family_name(Family f)
{
	static constexpr const char *kNames[] = {
		"SOP2", "SOPK", "SOP1", "SOPC", "SOPP", "SMEM", "VOP2", "VOP1", "VOPC", "VOP3",
		"VOP3P", "DS", "FLAT", "SCRATCH", "GLOBAL", "MUBUF", "MTBUF", "MIMG", "invalid"};
	return kNames[static_cast<unsigned>(f)];
}

}  // namespace kfdemu::shader
