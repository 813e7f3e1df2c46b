// SPDX-License-Identifier: GPL-2.0-only
//
// Printing a decoded instruction as llvm-objdump-15 prints it: the
// opcode's operand template (opcodes.inc) filled in from the fields, then
// the family's modifiers in LLVM's order.
#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "shader/isa.h"

namespace kfdemu::shader {

namespace {

std::string hex(uint64_t v)
{
	char buf[24];
	std::snprintf(buf, sizeof(buf), "0x%llx", static_cast<unsigned long long>(v));
	return buf;
}

std::string range(const char *prefix, unsigned lo, unsigned width)
{
	if (width == 1)
		return prefix + std::to_string(lo);
	return std::string(prefix) + "[" + std::to_string(lo) + ":" +
	       std::to_string(lo + width - 1) + "]";
}

// An SGPR-space encoding (0-127) or a special source (235-254).
std::string scalar(unsigned v, unsigned width)
{
	auto pair = [&](const char *name, const char *lo) { return std::string(width > 1 ? name : lo); };
	if (v <= 101)
		return range("s", v, width);
	if (v >= 108 && v <= 123)
		return range("ttmp", v - 108, width);
	switch (v) {
	case 102: return pair("flat_scratch", "flat_scratch_lo");
	case 103: return "flat_scratch_hi";
	case 104: return pair("xnack_mask", "xnack_mask_lo");
	case 105: return "xnack_mask_hi";
	case src::kVccLo: return pair("vcc", "vcc_lo");
	case src::kVccHi: return "vcc_hi";
	case src::kM0: return "m0";
	case src::kExecLo: return pair("exec", "exec_lo");
	case src::kExecHi: return "exec_hi";
	case src::kSharedBase: return "src_shared_base";
	case src::kSharedLimit: return "src_shared_limit";
	case src::kPrivateBase: return "src_private_base";
	case src::kPrivateLimit: return "src_private_limit";
	case 239: return "src_pops_exiting_wave_id";
	case src::kVccz: return "src_vccz";
	case src::kExecz: return "src_execz";
	case src::kScc: return "src_scc";
	case src::kLdsDirect: return "src_lds_direct";
	default: return "<invalid src " + std::to_string(v) + ">";
	}
}

constexpr const char *kFloatConsts[] = {"0.5", "-0.5", "1.0", "-1.0", "2.0", "-2.0", "4.0", "-4.0"};
constexpr uint32_t kFloatBits[] = {0x3f000000, 0xbf000000, 0x3f800000, 0xbf800000,
				   0x40000000, 0xc0000000, 0x40800000, 0xc0800000};

std::string literal(uint32_t v)
{
	int32_t i = static_cast<int32_t>(v);
	if (i >= -16 && i <= 64)
		return std::to_string(i);
	for (unsigned k = 0; k < 8; k++)
		if (v == kFloatBits[k])
			return kFloatConsts[k];
	if (v == 0x3e22f983)
		return "0.15915494";
	return hex(v);
}

// A 9-bit source operand: register, inline constant or literal.
std::string source(const Inst &in, unsigned v, unsigned width, char kind)
{
	if (v >= src::kVgpr0)
		return range(kind == 'a' ? "a" : "v", v - src::kVgpr0, width);
	if (v >= 129 && v <= 192)
		return std::to_string(v - 128);
	if (v >= 193 && v <= 208)
		return std::to_string(192 - static_cast<int>(v));
	if (v >= 240 && v <= 247)
		return kFloatConsts[v - 240];
	switch (v) {
	case src::kZero: return "0";
	case 248: return width == 2 ? "0.15915494309189532" : "0.15915494";
	case src::kLiteral: return literal(in.literal);
	default: return scalar(v, width);
	}
}

bool is_source9(Family f, char field)
{
	switch (f) {
	case Family::Vop1: case Family::Vop2: case Family::Vopc:
	case Family::Vop3: case Family::Vop3p:
		return field == 'A' || field == 'B' || field == 'C';
	case Family::Sop2: case Family::Sop1: case Family::Sopc:
		return field == 'A' || field == 'B';
	case Family::Mubuf:
		return field == 'O';
	default:
		return false;
	}
}

unsigned field_value(const Inst &in, char field)
{
	switch (field) {
	case 'D': return in.dst;
	case 'A': return in.src0;
	case 'B': return in.src1;
	case 'C': return in.src2;
	case 'E': return in.sdst;
	case 'R': return in.src1;
	case 'S': return in.src2;
	default: return in.soffset;	// 'O'
	}
}

bool vector_memory(Family f)
{
	return f == Family::Ds || f == Family::Flat || f == Family::Global ||
	       f == Family::Scratch || f == Family::Mubuf;
}

// VOP3, SDWA and DPP source modifiers: -x, |x|, sext(x).
std::string modified(const Inst &in, char field, std::string s)
{
	unsigned i = field - 'A';
	if ((in.family != Family::Vop3 && !in.sdwa && !in.dpp) || i > 2 || std::strstr(in.info->operands, "%E"))
		return s;
	if (in.sext >> i & 1)
		s = "sext(" + s + ")";
	if (in.abs >> i & 1)
		s = "|" + s + "|";
	if (in.neg >> i & 1)
		s = "-" + s;
	return s;
}

std::string reg_field(const Inst &in, char field, unsigned width, char kind)
{
	unsigned v = field_value(in, field);
	if (is_source9(in.family, field))
		return modified(in, field, source(in, v, width, kind));
	if (kind == 's' || field == 'E' || field == 'R' || field == 'S' || in.family == Family::Smem ||
	    in.family == Family::Sop1 || in.family == Family::Sop2 || in.family == Family::Sopk)
		return scalar(v, width);
	bool agpr = kind == 'a' || (in.acc && vector_memory(in.family) && field != 'A');
	return range(agpr ? "a" : "v", v, width);
}

std::string hwreg(uint16_t imm)
{
	static constexpr const char *kNames[] = {
		nullptr, "HW_REG_MODE", "HW_REG_STATUS", "HW_REG_TRAPSTS", "HW_REG_HW_ID",
		"HW_REG_GPR_ALLOC", "HW_REG_LDS_ALLOC", "HW_REG_IB_STS"};
	unsigned id = imm & 63, off = imm >> 6 & 31, size = (imm >> 11) + 1;
	std::string name = id < 8 && kNames[id] ? kNames[id]
			 : id == 15 ? "HW_REG_SH_MEM_BASES" : std::to_string(id);
	if (off == 0 && size == 32)
		return "hwreg(" + name + ")";
	return "hwreg(" + name + ", " + std::to_string(off) + ", " + std::to_string(size) + ")";
}

std::string waitcnt(uint16_t imm)
{
	unsigned vm = (imm & 15) | (imm >> 14 & 3) << 4, exp = imm >> 4 & 7, lgkm = imm >> 8 & 15;
	std::string s;
	auto add = [&](const char *n, unsigned v, unsigned max) {
		if (v != max)
			s += (s.empty() ? "" : " ") + std::string(n) + "(" + std::to_string(v) + ")";
	};
	add("vmcnt", vm, 63), add("expcnt", exp, 7), add("lgkmcnt", lgkm, 15);
	return s.empty() ? "vmcnt(63) expcnt(7) lgkmcnt(15)" : s;
}

std::string sendmsg(uint16_t imm)
{
	static constexpr const char *kMsgs[] = {
		nullptr, "MSG_INTERRUPT", "MSG_GS", "MSG_GS_DONE", "MSG_SAVEWAVE",
		"MSG_STALL_WAVE_GEN", "MSG_HALT_WAVES", "MSG_ORDERED_PS_DONE",
		"MSG_EARLY_PRIM_DEALLOC", "MSG_GS_ALLOC_REQ", "MSG_GET_DOORBELL"};
	static constexpr const char *kGsOps[] = {"GS_OP_NOP", "GS_OP_CUT", "GS_OP_EMIT", "GS_OP_EMIT_CUT"};
	unsigned id = imm & 15, op = imm >> 4 & 7, stream = imm >> 8 & 3;
	if (id == 2 || id == 3) {
		std::string s = std::string("sendmsg(") + kMsgs[id] + ", " + (op < 4 ? kGsOps[op] : "?");
		if (op != 0)
			s += ", " + std::to_string(stream);
		return s + ")";
	}
	if (id == 15)
		return "sendmsg(MSG_SYSMSG, " + std::to_string(op) + ")";
	if (id < 11 && kMsgs[id] && (imm >> 4) == 0)
		return std::string("sendmsg(") + kMsgs[id] + ")";
	return "sendmsg(" + std::to_string(id) + ", " + std::to_string(op) + ", " +
	       std::to_string(stream) + ")";
}

// SOPP / SOPK operands printed from the immediate (the template holds the
// probe's immediate, 16 or 0x10, or its symbolic form).
std::string immediate_operands(const Inst &in)
{
	std::string t = in.info->operands;
	uint16_t u = static_cast<uint16_t>(in.simm16);
	if (std::strstr(in.info->name, "s_waitcnt"))
		return waitcnt(u);
	if (std::strstr(in.info->name, "s_sendmsg"))
		return sendmsg(u);
	if (t == "16")
		return std::to_string(u);
	if (t == "0x10")
		return hex(u);
	if (t.empty() && u != 0)
		return std::to_string(u);
	return t;
}

// The template with its %fields filled in.
std::string fill(const Inst &in, const char *t)
{
	std::string out;
	for (const char *p = t; *p; p++) {
		if (*p != '%') {
			out += *p;
			continue;
		}
		char field = *++p;
		if (field == 'L') {
			out += hex(in.literal);
		} else if (field == 'K') {
			out += hex(static_cast<uint16_t>(in.simm16));
		} else if (field == 'O' && !(p[1] >= '0' && p[1] <= '9')) {
			out += in.imm ? hex(in.offset) : scalar(in.soffset, 1);
		} else {
			unsigned width = 0;
			while (p[1] >= '0' && p[1] <= '9')
				width = width * 10 + (*++p - '0');
			char kind = *++p;
			out += reg_field(in, field, width, kind);
		}
	}
	return out;
}

std::vector<std::string> split(const std::string &t)
{
	std::vector<std::string> v;
	size_t p = 0, q;
	while ((q = t.find(", ", p)) != std::string::npos)
		v.push_back(t.substr(p, q - p)), p = q + 2;
	v.push_back(t.substr(p));
	return v;
}

std::string join(const std::vector<std::string> &v)
{
	std::string s;
	for (const std::string &x : v)
		s += (s.empty() ? "" : ", ") + x;
	return s;
}

// The template's last operand without the modifiers LLVM printed after it
// for the probe (they are printed from the fields instead).
std::vector<std::string> template_operands(const Inst &in)
{
	std::string t = in.info->operands;
	if (t.empty())
		return {};
	std::vector<std::string> v = split(t);
	size_t sp = v.back().find(' ');
	if (sp != std::string::npos)
		v.back().resize(sp);
	return v;
}

std::string flag(bool on, const char *s) { return on ? std::string(" ") + s : std::string(); }

std::string flat_text(const Inst &in)
{
	std::vector<std::string> v = template_operands(in);
	bool atomic = std::strstr(in.info->name, "atomic");
	for (std::string &x : v) {
		if (in.family == Family::Global && in.saddr != 0x7f) {
			if (x == "%A2v")
				x = "%A1v";
			else if (x == "off")
				x = scalar(in.saddr, 2);
		} else if (in.family == Family::Scratch && in.saddr != 0x7f) {
			if (x == "%A1v")
				x = "off@";
			else if (x == "off")
				x = scalar(in.saddr, 1);
		}
		if (x == "off@")
			x = "off";
	}
	auto data = std::find_if(v.begin(), v.end(), [](const std::string &x) { return x.starts_with("%B"); });
	if (atomic && in.glc && data != v.end()) {
		unsigned w = data->size() > 2 ? static_cast<unsigned>((*data)[2] - '0') : 1;
		if (std::strstr(in.info->name, "cmpswap"))
			w /= 2;
		v.insert(v.begin(), "%D" + std::to_string(w) + "v");
	}
	std::string s = fill(in, join(v).c_str());
	if (in.offset)
		s += " offset:" + std::to_string(in.offset);
	return s + flag(in.glc, "glc") + flag(in.slc, "slc") + flag(in.scc, "scc") + flag(in.lds, "lds");
}

std::string mubuf_text(const Inst &in)
{
	std::vector<std::string> v = template_operands(in);
	// The cache maintenance forms (buffer_wbl2, buffer_wbinvl1, ...) take
	// no operand, and llvm-objdump-15 prints none of their cache bits
	// (hipcc's atomics emit buffer_wbl2 with glc and scc set on gfx90a).
	if (v.empty())
		return fill(in, "");
	for (std::string &x : v)
		if (x == "off")
			x = in.offen && in.idxen ? "%A2v" : in.offen || in.idxen ? "%A1v" : "off";
	std::string s = fill(in, join(v).c_str()) + flag(in.idxen, "idxen") + flag(in.offen, "offen");
	if (in.offset)
		s += " offset:" + std::to_string(in.offset);
	return s + flag(in.glc, "glc") + flag(in.slc, "slc") + flag(in.scc, "scc") + flag(in.lds, "lds");
}

// ds_swizzle_b32's offset as LLVM names its patterns: QUAD_PERM (bit 15
// set, bits 14:8 clear), and in bitmask mode (bit 15 clear) SWAP (and all
// ones, or 0, one xor bit), REVERSE (xor 2^k - 1), BROADCAST (and masks
// off a power-of-2 group, or inside it, xor 0), else BITMASK_PERM with a
// letter per bit from bit 4 down: p (kept) or i (inverted) where the and
// mask keeps the bit and the or mask does not set it, else the constant
// the bit becomes (or ^ xor: 0 or 1).
std::string swizzle_text(unsigned imm)
{
	if ((imm & 0xff00) == 0x8000) {
		std::string s = "swizzle(QUAD_PERM";
		for (unsigned i = 0; i < 4; i++)
			s += "," + std::to_string(imm >> (2 * i) & 3);
		return s + ")";
	}
	if (imm & 0x8000)
		return std::to_string(imm);
	const unsigned and_mask = imm & 31, or_mask = imm >> 5 & 31, xor_mask = imm >> 10 & 31;
	if (and_mask == 31 && !or_mask && std::has_single_bit(xor_mask))
		return "swizzle(SWAP," + std::to_string(xor_mask) + ")";
	if (and_mask == 31 && !or_mask && std::has_single_bit(xor_mask + 1))
		return "swizzle(REVERSE," + std::to_string(xor_mask + 1) + ")";
	const unsigned group = 32 - and_mask;
	if (group > 1 && std::has_single_bit(group) && or_mask < group && !xor_mask)
		return "swizzle(BROADCAST," + std::to_string(group) + "," + std::to_string(or_mask) + ")";
	std::string s = "swizzle(BITMASK_PERM,\"";
	for (unsigned bit = 16; bit; bit >>= 1)
		s += (and_mask & bit) && !(or_mask & bit) ? (xor_mask & bit ? 'i' : 'p')
							     : ((or_mask ^ xor_mask) & bit ? '1' : '0');
	return s + "\")";
}

std::string ds_text(const Inst &in)
{
	std::string s = fill(in, join(template_operands(in)).c_str());
	const char *n = in.info->name;
	if (std::strstr(n, "2_") || std::strstr(n, "2st64")) {
		if (in.offset)
			s += " offset0:" + std::to_string(in.offset);
		if (in.offset1)
			s += " offset1:" + std::to_string(in.offset1);
	} else if (unsigned off = static_cast<unsigned>(in.offset) | in.offset1 << 8) {
		s += " offset:" + (std::strcmp(n, "ds_swizzle_b32") ? std::to_string(off) : swizzle_text(off));
	}
	return s + flag(in.gds, "gds");
}

std::string bit_list(unsigned bits, unsigned n)
{
	std::string s = "[";
	for (unsigned i = 0; i < n; i++)
		s += (i ? "," : "") + std::to_string(bits >> i & 1);
	return s + "]";
}

unsigned source_count(const Inst &in)
{
	unsigned n = 0;
	for (const char *f : {"%A", "%B", "%C"})
		n += std::strstr(in.info->operands, f) != nullptr;
	return n;
}

std::string vop3_text(const Inst &in)
{
	std::string s = fill(in, join(template_operands(in)).c_str());
	bool vop3b = std::strstr(in.info->operands, "%E");
	if (in.clamp)
		s += " clamp";
	static constexpr const char *kOmod[] = {"", " mul:2", " mul:4", " div:2"};
	s += kOmod[in.omod];
	if (!vop3b && in.opsel)
		s += " op_sel:" + bit_list(in.opsel, source_count(in) + 1);
	return s;
}

std::string vop3p_text(const Inst &in)
{
	std::vector<std::string> v = template_operands(in);
	bool mai = std::strncmp(in.info->name, "v_mfma", 6) == 0;
	if (mai && in.clamp)  // gfx90a acc_cd: vdst and src2 are AGPRs
		for (std::string &x : v)
			if ((x[1] == 'D' || x[1] == 'C') && x.back() == 'v')
				x.back() = 'a';
	std::string s = fill(in, join(v).c_str());
	if (mai) {
		unsigned abid = in.opsel | (in.opsel_hi >> 2) << 3;
		if (in.neg_hi)
			s += " cbsz:" + std::to_string(in.neg_hi);
		if (abid)
			s += " abid:" + std::to_string(abid);
		if (in.neg)
			s += " blgp:" + std::to_string(in.neg);
		return s;
	}
	unsigned n = source_count(in);
	unsigned all = (1u << n) - 1;
	if (in.opsel & all)
		s += " op_sel:" + bit_list(in.opsel, n);
	if ((in.opsel_hi & all) != all)
		s += " op_sel_hi:" + bit_list(in.opsel_hi, n);
	if (in.neg & all)
		s += " neg_lo:" + bit_list(in.neg, n);
	if (in.neg_hi & all)
		s += " neg_hi:" + bit_list(in.neg_hi, n);
	return s + (in.clamp ? " clamp" : "");
}

std::string dpp_text(const Inst &in)
{
	unsigned ctrl = in.ext >> 8 & 0x1ff;
	std::string s;
	if (ctrl <= 0xff)
		s = " quad_perm:[" + std::to_string(ctrl & 3) + "," + std::to_string(ctrl >> 2 & 3) +
		    "," + std::to_string(ctrl >> 4 & 3) + "," + std::to_string(ctrl >> 6 & 3) + "]";
	else if (ctrl >= 0x101 && ctrl <= 0x10f)
		s = " row_shl:" + std::to_string(ctrl & 15);
	else if (ctrl >= 0x111 && ctrl <= 0x11f)
		s = " row_shr:" + std::to_string(ctrl & 15);
	else if (ctrl >= 0x121 && ctrl <= 0x12f)
		s = " row_ror:" + std::to_string(ctrl & 15);
	else if (ctrl == 0x130 || ctrl == 0x134 || ctrl == 0x138 || ctrl == 0x13c)
		s = std::string(" ") + (ctrl == 0x130 ? "wave_shl" : ctrl == 0x134 ? "wave_rol"
					: ctrl == 0x138 ? "wave_shr" : "wave_ror") + ":1";
	else if (ctrl == 0x140)
		s = " row_mirror";
	else if (ctrl == 0x141)
		s = " row_half_mirror";
	else if (ctrl == 0x142 || ctrl == 0x143)
		s = ctrl == 0x142 ? " row_bcast:15" : " row_bcast:31";
	s += " row_mask:" + hex(in.ext >> 28) + " bank_mask:" + hex(in.ext >> 24 & 15);
	if (in.ext >> 19 & 1)
		s += " bound_ctrl:1"; // llvm-objdump-15's spelling of the bit (older LLVMs printed :0)
	return s;
}

std::string sdwa_text(const Inst &in)
{
	static constexpr const char *kOmod[] = {"", " mul:2", " mul:4", " div:2"};
	std::string s = std::string(in.clamp ? " clamp" : "") + kOmod[in.omod];
	static constexpr const char *kSel[] = {"BYTE_0", "BYTE_1", "BYTE_2", "BYTE_3",
					       "WORD_0", "WORD_1", "DWORD", "?"};
	static constexpr const char *kUnused[] = {"UNUSED_PAD", "UNUSED_SEXT", "UNUSED_PRESERVE", "?"};
	if (in.family != Family::Vopc)
		s += std::string(" dst_sel:") + kSel[in.ext >> 8 & 7] + " dst_unused:" +
		     kUnused[in.ext >> 11 & 3];
	s += std::string(" src0_sel:") + kSel[in.ext >> 16 & 7];
	if (in.family != Family::Vop1)
		s += std::string(" src1_sel:") + kSel[in.ext >> 24 & 7];
	return s;
}

std::string mimg_text(const Inst &in)
{
	std::vector<std::string> v = template_operands(in);
	unsigned data = static_cast<unsigned>(__builtin_popcount(in.dmask));
	data = (data ? data : 1);
	if (in.d16)
		data = (data + 1) / 2;
	data += in.tfe;
	for (std::string &x : v) {
		if (x.size() > 2 && x[1] == 'D')
			x = "%D" + std::to_string(data) + "v";
		if (x.size() > 2 && x[1] == 'R')
			x = in.r128 ? "%R4s" : "%R8s";
	}
	std::string s = fill(in, join(v).c_str());
	if (in.dmask)
		s += " dmask:" + hex(in.dmask);
	return s + flag(in.unorm, "unorm") + flag(in.glc, "glc") + flag(in.slc, "slc") +
	       flag(in.r128, "r128") + flag(in.tfe, "tfe") + flag(in.lwe, "lwe") + flag(in.da, "da") +
	       flag(in.d16, "d16");
}

std::string vector32_text(const Inst &in)
{
	std::string s = fill(in, join(template_operands(in)).c_str());
	if (in.dpp)
		s += dpp_text(in);
	else if (in.sdwa)
		s += sdwa_text(in);
	return s;
}

std::string mnemonic(const Inst &in)
{
	std::string n = in.info->name;
	if ((in.dpp || in.sdwa) && n.size() > 4 && n.compare(n.size() - 4, 4, "_e32") == 0)
		n.replace(n.size() - 4, 4, in.dpp ? "_dpp" : "_sdwa");
	return n;
}

// The operand text (after the mnemonic), with the family's modifiers.
std::string operands(const Inst &in)
{
	const char *name = in.info->name;
	switch (in.family) {
	case Family::Sopp:
		return immediate_operands(in);
	case Family::Sopk:
		if (std::strstr(name, "s_getreg"))
			return scalar(in.dst, 1) + ", " + hwreg(static_cast<uint16_t>(in.simm16));
		if (std::strstr(name, "s_setreg_imm32"))
			return hwreg(static_cast<uint16_t>(in.simm16)) + ", " + hex(in.literal);
		if (std::strstr(name, "s_setreg"))
			return hwreg(static_cast<uint16_t>(in.simm16)) + ", " + scalar(in.dst, 1);
		if (std::strstr(in.info->operands, "4660"))
			return scalar(in.dst, 2) + ", " + std::to_string(in.simm16);
		return fill(in, in.info->operands);
	case Family::Smem:
		return fill(in, join(template_operands(in)).c_str()) + flag(in.glc, "glc");
	case Family::Vop1: case Family::Vop2: case Family::Vopc:
		return vector32_text(in);
	case Family::Vop3:
		return vop3_text(in);
	case Family::Vop3p:
		return vop3p_text(in);
	case Family::Ds:
		return ds_text(in);
	case Family::Flat: case Family::Global: case Family::Scratch:
		return flat_text(in);
	case Family::Mubuf:
		return mubuf_text(in);
	case Family::Mimg:
		return mimg_text(in);
	default:
		return fill(in, in.info->operands);
	}
}

}  // namespace

std::string disassemble(const Inst &in)
{
	if (in.family == Family::Invalid || !in.info)
	{
		char buf[32];
		std::snprintf(buf, sizeof(buf), "<unknown 0x%08x>", in.word[0]);
		return buf;
	}
	std::string ops = operands(in);
	return ops.empty() ? mnemonic(in) : mnemonic(in) + " " + ops;
}

}  // namespace kfdemu::shader
