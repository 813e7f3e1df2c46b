// SPDX-License-Identifier: GPL-2.0-only
//
// A dispatch's whole state as plain data: waves, workgroups, the grid's
// progress. Nothing here points into the caller's memory, so the state can
// be kept across run() calls with no lock held, and written out and read
// back between them (CWSR: cwsr.cpp).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "shader/dispatch.h"
#include "shader/isa.h"

namespace kfdemu::shader {

inline constexpr unsigned kWaveSize = 64;
inline constexpr unsigned kSgprs = 102;		// s0-s101 (GFX9)
inline constexpr unsigned kVgprs = 256;		// v0-v255 (and as many AGPRs)
// Registers allocated past v255 / a255, so that an operand of up to 8
// dwords starting at v255 (undefined on hardware) stays inside the file.
inline constexpr unsigned kVgprGuard = 8;
inline constexpr size_t kVgprFile = size_t(kVgprs + kVgprGuard) * kWaveSize;

// One wave64: its registers and where it is.
struct Wave {
	enum class State : uint8_t { Ready, Barrier, Done };
	State state = State::Ready;
	uint64_t pc = 0;
	std::array<uint32_t, kSgprs> sgpr{};
	std::array<uint32_t, 16> ttmp{};
	uint64_t flat_scratch = 0, vcc = 0, exec = 0, xnack_mask = 0;
	uint32_t m0 = 0;
	bool scc = false;
	uint32_t mode = 0;		// HW_REG_MODE: round [3:0], denorm [7:4], dx10 clamp 8, ieee 9
	uint32_t trapsts = 0;		// HW_REG_TRAPSTS
	std::vector<uint32_t> vgpr;	// [reg * 64 + lane], kVgprFile entries
	std::vector<uint32_t> agpr;	// the same, allocated at the first AGPR access
	std::vector<uint8_t> scratch;	// private segment: [lane * size + offset], at first use
	uint32_t id_in_group = 0;	// wave index within its workgroup

	uint32_t *v(unsigned reg) { return &vgpr[reg * kWaveSize]; }
	const uint32_t *v(unsigned reg) const { return &vgpr[reg * kWaveSize]; }
};

// How many workgroups of a dispatch are in flight at once, run round robin
// a wave quantum at a time (a fixed number, so that a dispatch runs the
// same way every time): a stand-in for the CUs hardware spreads them over.
inline constexpr unsigned kGroupsInFlight = 4;

// One workgroup in flight: its waves, LDS and barrier.
struct Workgroup {
	bool live = false;		// a slot with a workgroup (else free)
	std::array<uint32_t, 3> id{};	// workgroup id x, y, z
	std::array<uint32_t, 3> size{};	// work-items in each dimension (partial at the grid's edge)
	std::vector<Wave> waves;
	std::vector<uint8_t> lds;
	unsigned current = 0;		// the wave running now (round robin)
};

// What start() read from the packet and the kernel descriptor.
struct Kernel {
	uint64_t entry = 0;		// code address of the first instruction
	uint32_t rsrc1 = 0, rsrc2 = 0, rsrc3 = 0;
	uint16_t properties = 0;	// kernel_code_properties (enable_sgpr_* bits)
	std::array<uint32_t, 3> wg_size{}, grid{};
	uint32_t dims = 0;
	uint32_t private_size = 0;	// bytes per work-item (packet)
	uint32_t group_size = 0;	// LDS bytes per workgroup (packet)
	uint64_t kernarg = 0;
	std::array<uint32_t, 3> groups{};	// workgroups per dimension
};

class Memory;

// An instruction resolved once per code address.
struct Decoded;
using Handler = int (*)(struct Exec &, Wave &, const Inst &);

struct Decoded {
	Inst in;
	Handler fn = nullptr;
};

class DispatchState {
public:
	Launch launch;
	Kernel k;
	// The workgroups in flight, by slot (kGroupsInFlight); `cur` the slot
	// whose turn it is.
	std::vector<Workgroup> groups = std::vector<Workgroup>(kGroupsInFlight);
	unsigned cur = 0;
	uint64_t next_group = 0;	// linear index of the next workgroup to launch
	uint64_t total_groups = 0;
	Dispatch::Status status = Dispatch::Status::Running;
	std::string why;
	uint64_t fault_va = 0;
	uint64_t instructions = 0, lane_ops = 0;
	std::unordered_map<uint64_t, Decoded> code;	// decode cache: PC -> instruction
	// A direct-mapped index in front of `code` (its nodes do not move).
	struct Recent {
		uint64_t pc = 0;
		const Decoded *dec = nullptr;
	};
	static constexpr unsigned kRecent = 4096;
	std::vector<Recent> recent = std::vector<Recent>(kRecent);
};

}  // namespace kfdemu::shader
