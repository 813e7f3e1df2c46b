// SPDX-License-Identifier: GPL-2.0-only
//
// The emulated GPU's shader core: the contract between it and whoever hands
// it kernel dispatches (the device model's AQL packet processor, or a test).
//
// The shader core knows nothing of the device model: it sees the dispatching
// process's GPU virtual memory through a Memory the caller implements, and
// one AQL kernel dispatch packet at a time (a Launch). A Dispatch runs that
// packet's grid, wave by wave, for as many wave-instructions as the caller
// grants per call, so the caller may drop its locks between calls; between
// calls the whole state of every wave and workgroup is plain data.
//
// Memory is synchronous: a load or store completes when its instruction
// executes, so s_waitcnt never waits. There is no timing, no cache, no
// graphics: see README.md for what runs and what does not.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace kfdemu::shader {

// The ISA the waves run (wave64 for both).
enum class Target {
	Gfx908,	// MI100 (CDNA1)
	Gfx90a,	// MI210 / MI250 (CDNA2)
};

// GPU virtual memory as the dispatching process sees it; the caller (the
// device model) implements it. Accesses never straddle calls: the shader core
// asks again for every contiguous run it needs.
class Memory {
public:
	virtual ~Memory() = default;
	// Host bytes backing GPU VA `va`, contiguous for *len (> 0) bytes, or
	// nullptr when va is not mapped, is not writable and `write` is set, or
	// has no host bytes in the caller (then read()/write() are tried). The
	// pointer stays valid until the next call of run() returns.
	virtual uint8_t *host(uint64_t va, bool write, uint64_t *len) = 0;
	// For memory with no host bytes in the caller (userptr: the process's
	// own pages): copies n bytes. 0, or -EFAULT when any byte is unmapped
	// (a VM fault at the first such byte the shader core reports).
	virtual int read(uint64_t va, void *dst, size_t n) = 0;
	virtual int write(uint64_t va, const void *src, size_t n) = 0;
};

// Where the flat address space's LDS and private (scratch) windows lie: the
// process's apertures as KFD reports them (kfd_ioctl_get_process_apertures).
// The defaults are what amdkfd gives a GFX9 process (64-bit apertures).
struct Apertures {
	uint64_t shared_base = 0x1000000000000ull;	// LDS: 4 GiB from here
	uint64_t private_base = 0x2000000000000ull;	// scratch: 4 GiB from here
};

// One kernel dispatch as the command processor picks it up.
//
// Scratch (the private segment): the shader core keeps each wave's private
// memory itself, as part of the wave's state (so it is saved with the wave),
// sized by the dispatch packet's private_segment_size. The caller fills in
// nothing for it: the private segment buffer descriptor and flat scratch init
// SGPRs a kernel receives point into the private aperture (Apertures), which
// the shader core serves from that per-wave memory; ROCr's scratch fields in
// amd_queue_t (scratch_resource_descriptor, scratch_backing_memory_location,
// compute_tmpring_size, scratch_wave64_lane_byte_size) are not read.
struct Launch {
	Target target = Target::Gfx908;
	// The hsa_kernel_dispatch_packet_t, 64 bytes as read from the ring
	// (header, setup, workgroup and grid sizes, private/group segment sizes,
	// kernel_object, kernarg_address, completion_signal). Only the
	// dispatch fields are read: the caller handles header and signal.
	std::array<uint8_t, 64> packet{};
	uint64_t packet_va = 0;		// its GPU VA: the dispatch_ptr SGPRs
	uint64_t queue_va = 0;		// the amd_queue_t: the queue_ptr SGPRs
	uint64_t dispatch_id = 0;	// the packet's index: the dispatch_id SGPRs
	Apertures apertures;		// flat-address windows (see Apertures)
	// Each workgroup's LDS: the device's maximum (64 KiB on GFX9); a
	// kernel asking for more (descriptor or packet) is refused at start().
	uint32_t lds_limit = 65536;
};

class DispatchState;

// A dispatch's waves saved between two instructions, as the hardware's
// context save (CWSR) leaves them for the queue's control stack and its
// wave save area; the layout is in cwsr.cpp.
struct WaveSave {
	std::vector<uint8_t> control;	// the control stack's used entries
	std::vector<uint8_t> area;	// the wave save area: each wave's registers, then LDS
};

// What a saved control stack says (Dispatch::describe).
struct SaveSummary {
	uint32_t waves = 0;		// wave entries (of every workgroup in flight)
	uint64_t groups_done = 0;	// workgroups that ended before the save
	uint64_t groups = 0;		// the grid's workgroups
	uint32_t area_bytes = 0;	// the wave save area it goes with
};

// One dispatch in flight. Not thread-safe: one caller at a time (the caller
// serialises run() calls, and may hold no lock between them).
class Dispatch {
public:
	enum class Status {
		Running,		// budget spent, waves remain: call run() again
		Done,			// every wave of the grid reached s_endpgm
		VmFault,		// a wave touched unmapped memory: fault_va(), why()
		IllegalInstruction,	// an instruction this core does not run (or
					// an invalid one): why() names it and its PC
		Trap,			// s_trap, or a memory-violation-style halt: why()
	};

	// Reads and checks the kernel descriptor at the packet's kernel_object
	// (AMDHSA code object v4/v5) through `m`. nullptr, with *error naming
	// what is wrong (which field, which value), when the packet or the
	// descriptor cannot be run.
	static std::unique_ptr<Dispatch> start(const Launch &l, Memory &m, std::string *error);
	~Dispatch();
	Dispatch(const Dispatch &) = delete;
	Dispatch &operator=(const Dispatch &) = delete;

	// Runs the dispatch's waves for at most `budget` wave-instructions (at
	// least one). Resumable: between calls its whole state (every wave's
	// PC, SGPRs, VGPRs, AccVGPRs, EXEC, VCC, SCC, M0, trap status, each
	// workgroup's LDS and barrier state, which workgroups are still to
	// launch) is plain data (DispatchState). Once it returned anything but
	// Running it returns the same status again without running.
	Status run(Memory &m, uint64_t budget);
	// For VmFault / IllegalInstruction / Trap: what happened, at which PC
	// (the kernel's code address) and in which wave; empty otherwise.
	std::string why() const;
	uint64_t fault_va() const;		// the faulting GPU VA after VmFault
	uint64_t instructions() const;		// wave-instructions executed so far
	uint64_t lane_ops() const;		// of those, the active lanes summed

	// CWSR. save() writes every wave's state (PC, SGPRs, VGPRs, the
	// AccVGPRs once used, private memory, EXEC, VCC, M0, SCC, MODE,
	// TRAPSTS, TTMPs, barrier state), each workgroup in flight's LDS and the grid's
	// progress into *out; false with *why when there is nothing to resume
	// (the dispatch ended or stopped on an error).
	bool save(WaveSave *out, std::string *why) const;
	// A dispatch going on from `saved`: start()'s reading of `l` and of the
	// kernel descriptor, then the saved waves, LDS and progress, so that
	// run() continues at the instruction each wave stopped before. nullptr
	// with *error naming what does not fit (another packet, a malformed or
	// truncated save).
	static std::unique_ptr<Dispatch> resume(const Launch &l, Memory &m, const WaveSave &saved,
						std::string *error);
	// The counts of a saved control stack; false when it is not one.
	static bool describe(std::span<const uint8_t> control, SaveSummary *out);

private:
	explicit Dispatch(std::unique_ptr<DispatchState> s);
	std::unique_ptr<DispatchState> s_;
};

}  // namespace kfdemu::shader
