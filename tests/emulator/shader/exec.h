// SPDX-License-Identifier: GPL-2.0-only
//
// The executor's internals shared by its parts (scalar, vector ALU, memory):
// the context of one run() call, operand access, and the handler table.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>

#include "shader/state.h"

namespace kfdemu::shader {

// What a handler tells the scheduler.
enum Step : int {
	kNext = 0,	// continue at pc + size
	kJumped,	// the handler set pc
	kBarrier,	// s_barrier: wait for the workgroup, then pc + size
	kEnd,		// s_endpgm
	kFault,		// VM fault: Exec::fault_va, Exec::why
	kIllegal,	// not implemented / invalid: Exec::why
	kTrap,		// s_trap and the like: Exec::why
};

// A small cache in front of Memory::host(), emptied at every run() call
// (host pointers are only valid until run() returns).
struct Tlb {
	struct Entry {
		uint64_t va = 0, len = 0;
		uint8_t *p = nullptr;
		bool write = false;
	};
	static constexpr unsigned kEntries = 8;
	Entry e[kEntries];
	unsigned next = 0;	// the entry the next miss replaces
	unsigned last = 0;	// the entry of the last hit, tried first
};

// One run() call's context.
struct Exec {
	DispatchState &d;
	Memory &m;
	Tlb tlb;
	std::string why;
	uint64_t fault_va = 0;
	Workgroup *wg = nullptr;	// the running wave's workgroup (its LDS)

	// Host bytes for [va, va + n) when the caller maps them (write: and
	// writable), else nullptr.
	uint8_t *host(uint64_t va, uint64_t n, bool write);
	// Copies through host() or Memory::read/write; false after a VM fault.
	bool load(uint64_t va, void *dst, uint64_t n);
	bool store(uint64_t va, const void *src, uint64_t n);
	int fault(uint64_t va, const char *what);
	int illegal(const Wave &w, const Inst &in, const char *what);
};

// --- scalar registers and constants --------------------------------------

// The IEEE bits of the float inline constants 240-248 at each width.
uint32_t float_const32(unsigned enc);
uint64_t float_const64(unsigned enc);
uint16_t float_const16(unsigned enc);

// A scalar source (SGPR/special/inline constant/literal) as 32 bits; float
// inline constants as f32 bits.
uint32_t sread(const Wave &w, const Exec &x, unsigned enc, const Inst &in);
// As 64 bits: an SGPR pair, or a constant widened (f64: floats as doubles
// and a literal as the high half; integers sign-extended inline constants,
// zero-extended literals).
uint64_t sread64(const Wave &w, const Exec &x, unsigned enc, const Inst &in, bool f64);
void swrite(Wave &w, unsigned enc, uint32_t v);
void swrite64(Wave &w, unsigned enc, uint64_t v);

// Bits of a double/float.
inline float f32(uint32_t u) { return std::bit_cast<float>(u); }
inline uint32_t u32(float f) { return std::bit_cast<uint32_t>(f); }
inline double f64(uint64_t u) { return std::bit_cast<double>(u); }
inline uint64_t u64(double f) { return std::bit_cast<uint64_t>(f); }

// Each active lane's index, lowest first.
template <class F>
inline void for_lanes(uint64_t mask, F f)
{
	while (mask) {
		unsigned l = static_cast<unsigned>(std::countr_zero(mask));
		f(l);
		mask &= mask - 1;
	}
}

// The VGPRs a wave of the dispatch has (COMPUTE_PGM_RSRC1's granules; on
// gfx90a the unified file's granule of 8), which a new workgroup's waves
// start with cleared and a context save writes.
size_t declared_vgprs(const DispatchState &d);

// The handler of a decoded instruction (nullptr: not implemented); `why`
// is not touched. For an SDWA or DPP form (VOP1/VOP2), its base opcode's,
// which run_sdwa / run_dpp wrap.
Handler handler_for(const Inst &in);
// An SDWA instruction: its sources' selected bytes or words (zero- or
// sign-extended, with float abs/neg), `base` run on them, and the result
// put in the destination's selected field (the rest zeroed, sign-extended
// or kept).
int run_sdwa(Exec &x, Wave &w, const Inst &in, Handler base);
// A DPP instruction (VOP1/VOP2): src0 read from the lane the DPP control
// names, `base` run on the lanes row_mask, bank_mask and bound_ctrl let
// write.
int run_dpp(Exec &x, Wave &w, const Inst &in, Handler base);
Handler scalar_handler(const std::string &name);
Handler vector_handler(const std::string &name);
Handler memory_handler(const std::string &name);

}  // namespace kfdemu::shader
