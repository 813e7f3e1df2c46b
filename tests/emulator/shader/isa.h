// SPDX-License-Identifier: GPL-2.0-only
//
// The GFX9 instruction encodings of gfx908 and gfx90a (wave64): decoding a
// code address's dwords into an Inst, and printing it as llvm-objdump-15
// does. Opcode numbers, names and operand layouts come from opcodes.inc,
// generated from LLVM's disassembler (tools/gen_opcodes.py).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "shader/dispatch.h"

namespace kfdemu::shader {

// Encoding families (the "microcode formats" of the ISA documents).
enum class Family : uint8_t {
	Sop2, Sopk, Sop1, Sopc, Sopp, Smem,
	Vop2, Vop1, Vopc, Vop3, Vop3p,
	Ds, Flat, Scratch, Global, Mubuf, Mtbuf, Mimg,
	Invalid,
};

// One opcode of one family on one target (a row of opcodes.inc).
struct OpInfo {
	Family family;
	uint16_t op;
	const char *name;	// LLVM's mnemonic (VOP1/2/C: the _e32 form)
	// LLVM's operand list with %<field><width><kind> for the register
	// fields: D vdst/sdst/sdata, A src0/addr/sbase, B src1/data0, C src2/
	// data1, E VOP3b sdst, R MUBUF srsrc, O MUBUF soffset; %O in SMEM the
	// offset, %K the SOPK immediate. kind: v, s or a (AGPR).
	const char *operands;
};

// Special 9-bit source operand encodings.
namespace src {
inline constexpr unsigned kVccLo = 106, kVccHi = 107, kM0 = 124, kExecLo = 126, kExecHi = 127;
inline constexpr unsigned kZero = 128, kSharedBase = 235, kSharedLimit = 236, kPrivateBase = 237,
			  kPrivateLimit = 238, kSdwa = 249, kDpp = 250, kVccz = 251, kExecz = 252,
			  kScc = 253, kLdsDirect = 254, kLiteral = 255, kVgpr0 = 256;
}  // namespace src

// A decoded instruction: its family, opcode and every field, so that the
// executor and the disassembler never look at the raw bits again.
struct Inst {
	Family family = Family::Invalid;
	uint16_t op = 0;
	uint8_t size = 4;		// bytes, with the literal / DPP / SDWA dword
	const OpInfo *info = nullptr;	// nullptr: not an instruction of the target
	uint32_t word[2]{};		// the first two dwords as fetched
	uint32_t literal = 0;		// the literal constant (a source field 255)
	bool has_literal = false;
	bool dpp = false, sdwa = false;	// VOP1/2/C with a DPP / SDWA dword
	uint8_t sext = 0;		// SDWA: sources sign-extended from their selection (bit i: src i)
	uint32_t ext = 0;		// that DPP / SDWA dword
	// Register fields in their encodings: 9-bit sources (0-255 SGPRs,
	// constants, specials; 256-511 VGPRs); dst as the family encodes it.
	uint16_t dst = 0, src0 = 0, src1 = 0, src2 = 0, sdst = 0;
	// VOP3 / VOP3P modifiers.
	uint8_t abs = 0, neg = 0, neg_hi = 0, opsel = 0, opsel_hi = 7, omod = 0;
	bool clamp = false;
	// Memory fields.
	int32_t offset = 0;		// SMEM/DS/FLAT/MUBUF byte offset (DS: offset0)
	uint8_t offset1 = 0;		// DS offset1
	bool glc = false, slc = false, scc = false, lds = false, gds = false, acc = false;
	bool imm = false;		// SMEM: offset is an immediate (else soffset SGPR)
	bool offen = false, idxen = false;
	uint8_t saddr = 0x7f;		// GLOBAL/SCRATCH saddr (0x7f: off)
	uint8_t soffset = 0;		// MUBUF soffset (8-bit scalar source)
	int16_t simm16 = 0;		// SOPK / SOPP immediate
	// MIMG (decoded for the disassembler only: images are not executed).
	uint8_t dmask = 0;
	bool unorm = false, da = false, r128 = false, tfe = false, lwe = false, d16 = false;
};

// Decodes the instruction at `code` (n >= 1 dwords readable). An
// undecodable word gives family Invalid (or info nullptr) and size 4.
Inst decode(Target t, const uint32_t *code, size_t n);

// llvm-objdump-15's text for `in` (mnemonic and operands, no address):
// "<unknown 0x%08x>" for an undecodable word.
std::string disassemble(const Inst &in);

const char *family_name(Family f);

}  // namespace kfdemu::shader
