// SPDX-License-Identifier: GPL-2.0-only
//
// CWSR (compute wave save/restore): a dispatch's waves written out between
// two instructions and read back, as the hardware's context save does when
// the CP preempts a queue (a CRIU pause), so that a queue restored in
// another process, on another GPU, goes on where its waves stopped.
//
// Where it goes (the caller, the device model's packet processor, places
// it as amdkfd's GFX9 MQD manager describes it): the control stack is the
// one behind the queue's MQD (cp_hqd_cntl_stack_size bytes; its used part
// runs from cp_hqd_cntl_stack_offset to its end, which KFD's checkpoint
// carries in the queue's private data); the wave save area is the queue's
// CWSR area in process memory from ctl_stack_size on, used up to
// cp_hqd_wg_state_offset (dumped as the BO's contents).
//
// The hardware's structure, and where this encoding differs. On GFX9 the
// control stack holds the CP's dispatch state and one 8-byte entry per
// saved wave (CNTL_STACK_BYTES_PER_WAVE in kfd_queue.c), grouped by
// workgroup with a COMPUTE_RELAUNCH state word (bit 31) before the waves;
// each wave's first dword carries its index in the workgroup and
// first/last-wave bits (16, 17). The wave save area holds per wave its
// VGPRs, SGPRs and HWREG block (M0, PC, EXEC, STATUS, TRAPSTS, XNACK_MASK,
// MODE, then the TTMPs), and each workgroup's LDS. The trap handler and
// the CP write those from registers; here the same facts are written from
// the shader core's state, little-endian, in this layout (all offsets in
// bytes):
//
//   control stack
//     dispatch entry   kDispatchEntry: magic "CWSR", version, the 64-byte
//                      AQL packet (so a resume checks it is the same one),
//                      next workgroup to launch, instructions and lane-ops
//                      so far (s_memtime reads the count), the number of
//                      workgroups in flight, the slot whose turn it is,
//                      save-area bytes, VGPRs per wave. Hardware keeps this
//                      in the MQD and the CP's dispatch registers, not in
//                      the stack.
//     then per workgroup in flight (kGroupsInFlight slots at most):
//     state word       bit 31 set; VGPR granules (of 4) in [5:0], LDS in
//                      128-dword granules in [16:9], as COMPUTE_RELAUNCH
//                      (8 bytes).
//     workgroup        kGroupEntry: its slot, id, size, current wave,
//                      number of waves, LDS bytes.
//     wave entries     8 bytes each: wave in workgroup [5:0], state [9:8]
//                      (0 ready, 1 at the barrier, 2 ended), AccVGPRs
//                      saved [12], last [16], first [17]; then the offset of its block in the save
//                      area (hardware finds it by walking the sizes).
//   wave save area, per workgroup: per wave
//     VGPRs            the kernel's VGPRs (COMPUTE_PGM_RSRC1), 64 lanes each
//     AccVGPRs         all 256, only when the wave used them (entry bit 12)
//     SGPRs            kSgprBlock dwords: s0-s101, then 0
//     HWREG            kHwregDwords: M0, PC lo/hi, EXEC lo/hi, STATUS (SCC
//                      in bit 0), TRAPSTS, XNACK_MASK lo/hi, MODE,
//                      FLAT_SCRATCH lo/hi, VCC lo/hi (hardware saves VCC
//                      and FLAT_SCRATCH with the SGPRs), 0, the private
//                      memory's bytes, then
//                      TTMP0-15 in dwords 16-31
//     private memory   the wave's scratch (the shader core keeps it per
//                      wave; hardware leaves it in the scratch BO), padded
//                      to 4 bytes
//   then the workgroup's LDS (the kernel's group segment).
#include <algorithm>
#include <cstring>

#include "shader/exec.h"

namespace kfdemu::shader {

namespace {

constexpr uint32_t kMagic = 0x52535743; // "CWSR"
constexpr uint32_t kVersion = 2; // 2: several workgroups in flight
constexpr size_t kDispatchEntry = 4 + 4 + 64 + 8 * 3 + 4 * 4;
constexpr size_t kGroupEntry = 4 * 10;
constexpr size_t kWaveEntry = 8;
constexpr unsigned kSgprBlock = 112;
constexpr unsigned kHwregDwords = 32;
constexpr uint32_t kStateWord = 1u << 31, kLastWave = 1u << 16, kFirstWave = 1u << 17;
constexpr uint32_t kAgprsSaved = 1u << 12;

// Little-endian appends and bounded reads.
struct Out {
	std::vector<uint8_t> &v;
	template <class T> void put(const T &t)
	{
		const auto *p = reinterpret_cast<const uint8_t *>(&t);
		v.insert(v.end(), p, p + sizeof(T));
	}
	void bytes(const void *p, size_t n)
	{
		const auto *b = static_cast<const uint8_t *>(p);
		v.insert(v.end(), b, b + n);
	}
};

struct In {
	std::span<const uint8_t> v;
	size_t at = 0;
	bool ok = true;
	template <class T> T get()
	{
		T t{};
		bytes(&t, sizeof(T));
		return t;
	}
	void bytes(void *p, size_t n)
	{
		if (!ok || n > v.size() - at) {
			ok = false;
			return;
		}
		if (n) // an empty vector's data() may be null
			std::memcpy(p, v.data() + at, n);
		at += n;
	}
};

// The dispatch entry, as read back.
struct Entry {
	std::array<uint8_t, 64> packet{};
	uint64_t next_group = 0, instructions = 0, lane_ops = 0;
	uint32_t groups = 0, cur = 0, area = 0, vgprs = 0;
};

bool read_entry(In &in, Entry *e)
{
	if (in.get<uint32_t>() != kMagic || in.get<uint32_t>() != kVersion)
		return false;
	in.bytes(e->packet.data(), e->packet.size());
	e->next_group = in.get<uint64_t>(), e->instructions = in.get<uint64_t>(), e->lane_ops = in.get<uint64_t>();
	e->groups = in.get<uint32_t>(), e->cur = in.get<uint32_t>();
	e->area = in.get<uint32_t>(), e->vgprs = in.get<uint32_t>();
	return in.ok && e->groups <= kGroupsInFlight && e->cur < kGroupsInFlight;
}

// A workgroup's entry, as read back (after its state word).
struct GroupEntry {
	uint32_t slot = 0, current = 0, waves = 0, lds = 0;
	std::array<uint32_t, 3> id{}, size{};
};

bool read_group(In &in, GroupEntry *g)
{
	in.get<uint64_t>(); // the state word (its facts are in the entries)
	g->slot = in.get<uint32_t>();
	for (auto &x : g->id)
		x = in.get<uint32_t>();
	for (auto &x : g->size)
		x = in.get<uint32_t>();
	g->current = in.get<uint32_t>(), g->waves = in.get<uint32_t>(), g->lds = in.get<uint32_t>();
	return in.ok && g->slot < kGroupsInFlight && g->waves <= 1024 / kWaveSize;
}

void save_wave(const Wave &w, size_t vgprs, Out &area)
{
	area.bytes(w.vgpr.data(), vgprs * kWaveSize * 4);
	if (!w.agpr.empty())
		area.bytes(w.agpr.data(), size_t(kVgprs) * kWaveSize * 4);
	std::array<uint32_t, kSgprBlock> s{};
	std::copy(w.sgpr.begin(), w.sgpr.end(), s.begin());
	area.bytes(s.data(), sizeof(s));
	auto lo = [](uint64_t v) { return static_cast<uint32_t>(v); };
	auto hi = [](uint64_t v) { return static_cast<uint32_t>(v >> 32); };
	std::array<uint32_t, kHwregDwords> h{w.m0, lo(w.pc), hi(w.pc), lo(w.exec), hi(w.exec), w.scc ? 1u : 0u,
					      w.trapsts, lo(w.xnack_mask), hi(w.xnack_mask), w.mode,
					      lo(w.flat_scratch), hi(w.flat_scratch), lo(w.vcc), hi(w.vcc), 0,
					      static_cast<uint32_t>(w.scratch.size())};
	std::copy(w.ttmp.begin(), w.ttmp.end(), h.begin() + 16);
	area.bytes(h.data(), sizeof(h));
	area.bytes(w.scratch.data(), w.scratch.size());
	area.v.resize((area.v.size() + 3) & ~size_t{3});
}

bool load_wave(Wave &w, size_t vgprs, bool agprs, In &area)
{
	w.vgpr.assign(kVgprFile, 0);
	area.bytes(w.vgpr.data(), vgprs * kWaveSize * 4);
	w.agpr.clear();
	if (agprs) {
		w.agpr.assign(kVgprFile, 0);
		area.bytes(w.agpr.data(), size_t(kVgprs) * kWaveSize * 4);
	}
	area.bytes(w.sgpr.data(), sizeof(w.sgpr));
	area.at += (kSgprBlock - kSgprs) * 4;
	uint32_t h[kHwregDwords];
	area.bytes(h, sizeof(h));
	if (!area.ok)
		return false;
	auto q = [](uint32_t l, uint32_t hi) { return uint64_t{hi} << 32 | l; };
	w.m0 = h[0], w.pc = q(h[1], h[2]), w.exec = q(h[3], h[4]), w.scc = h[5] & 1, w.trapsts = h[6];
	w.xnack_mask = q(h[7], h[8]), w.mode = h[9], w.flat_scratch = q(h[10], h[11]), w.vcc = q(h[12], h[13]);
	std::copy(h + 16, h + 32, w.ttmp.begin());
	if (h[15] > area.v.size() - area.at) // checked before allocating it
		return false;
	w.scratch.resize(h[15]);
	area.bytes(w.scratch.data(), w.scratch.size());
	area.at = std::min(area.v.size(), (area.at + 3) & ~size_t{3});
	return area.ok;
}

} // namespace

namespace {

// One workgroup's control stack entries (state word, workgroup, waves) and
// its waves' blocks and LDS in the save area.
void save_group(const Workgroup &g, uint32_t slot, size_t vgprs, Out &c, Out &area)
{
	c.put(kStateWord | static_cast<uint32_t>((vgprs + 3) / 4 & 63) |
	      static_cast<uint32_t>((g.lds.size() + 511) / 512 & 255) << 9);
	c.put(uint32_t{0});
	c.put(slot);
	for (uint32_t x : g.id)
		c.put(x);
	for (uint32_t x : g.size)
		c.put(x);
	const auto waves = static_cast<uint32_t>(g.waves.size());
	c.put(uint32_t{g.current}), c.put(waves), c.put(static_cast<uint32_t>(g.lds.size()));
	for (uint32_t i = 0; i < waves; ++i) {
		const Wave &w = g.waves[i];
		c.put(w.id_in_group | static_cast<uint32_t>(w.state) << 8 | (w.agpr.empty() ? 0 : kAgprsSaved) |
		      (i + 1 == waves ? kLastWave : 0) | (i == 0 ? kFirstWave : 0));
		c.put(static_cast<uint32_t>(area.v.size()));
		save_wave(w, vgprs, area);
	}
	area.bytes(g.lds.data(), g.lds.size());
}

// The control stack's size for `e` and its groups' wave counts; false when
// it is not one of this format.
bool walk(std::span<const uint8_t> control, Entry *e, uint32_t *waves)
{
	In in{control};
	if (!read_entry(in, e))
		return false;
	*waves = 0;
	for (uint32_t i = 0; i < e->groups; ++i) {
		GroupEntry g;
		if (!read_group(in, &g))
			return false;
		*waves += g.waves;
		in.at += g.waves * kWaveEntry;
	}
	return in.at == control.size();
}

} // namespace

bool Dispatch::save(WaveSave *out, std::string *why) const
{
	const DispatchState &d = *s_;
	if (d.status != Status::Running)
		return *why = d.status == Status::Done ? "the dispatch has ended" : "the dispatch stopped: " + d.why, false;
	const size_t vgprs = declared_vgprs(d);
	WaveSave s;
	Out c{s.control}, area{s.area};
	std::vector<uint8_t> groups;
	Out gs{groups};
	uint32_t live = 0;
	for (uint32_t slot = 0; slot < d.groups.size(); ++slot)
		if (d.groups[slot].live)
			save_group(d.groups[slot], slot, vgprs, gs, area), ++live;
	c.put(kMagic), c.put(kVersion);
	c.bytes(d.launch.packet.data(), d.launch.packet.size());
	c.put(d.next_group), c.put(d.instructions), c.put(d.lane_ops);
	c.put(live), c.put(uint32_t{d.cur}), c.put(static_cast<uint32_t>(s.area.size())), c.put(static_cast<uint32_t>(vgprs));
	c.bytes(groups.data(), groups.size());
	*out = std::move(s);
	return true;
}

bool Dispatch::describe(std::span<const uint8_t> control, SaveSummary *out)
{
	Entry e;
	uint32_t waves = 0;
	if (!walk(control, &e, &waves) || e.groups > e.next_group)
		return false;
	uint64_t groups = 1;
	for (unsigned i = 0; i < 3; i++) {
		uint32_t wg, grid;
		std::memcpy(&wg, e.packet.data() + 4 + 2 * i, 2), wg &= 0xffff;
		std::memcpy(&grid, e.packet.data() + 12 + 4 * i, 4);
		groups *= wg ? (uint64_t{grid} + wg - 1) / wg : 0;
	}
	*out = {waves, e.next_group - e.groups, groups, e.area};
	return true;
}

namespace {

// Puts a saved workgroup back into its slot; empty, or what does not fit.
std::string load_group(DispatchState &d, const GroupEntry &ge, size_t vgprs, In &in, In &area)
{
	const uint64_t items = uint64_t{ge.size[0]} * ge.size[1] * ge.size[2];
	Workgroup &g = d.groups[ge.slot];
	if (g.live || ge.waves != (items + kWaveSize - 1) / kWaveSize || !ge.waves || ge.current >= ge.waves ||
	    ge.lds != d.k.group_size)
		return "control stack: a workgroup that does not fit the kernel";
	g.live = true;
	g.id = ge.id, g.size = ge.size, g.current = ge.current;
	g.waves.resize(ge.waves);
	for (Wave &w : g.waves) {
		const uint32_t word = in.get<uint32_t>(), off = in.get<uint32_t>();
		area.at = off;
		w.id_in_group = word & 63;
		const uint32_t state = word >> 8 & 3;
		if (!in.ok || state > 2 || off >= area.v.size() || !load_wave(w, vgprs, word & kAgprsSaved, area))
			return "wave save area: wave " + std::to_string(&w - g.waves.data()) + " of slot " +
			       std::to_string(ge.slot) + " is truncated";
		w.state = static_cast<Wave::State>(state);
	}
	g.lds.assign(ge.lds, 0);
	area.bytes(g.lds.data(), g.lds.size());
	return area.ok ? "" : "wave save area: the workgroup's LDS is truncated";
}

} // namespace

std::unique_ptr<Dispatch> Dispatch::resume(const Launch &l, Memory &m, const WaveSave &saved, std::string *error)
{
	Entry e;
	uint32_t waves = 0;
	if (!walk(saved.control, &e, &waves))
		return *error = "control stack: not a saved dispatch of this format", nullptr;
	if (e.packet != l.packet)
		return *error = "control stack: saved from another dispatch packet", nullptr;
	if (e.area != saved.area.size())
		return *error = "wave save area of " + std::to_string(saved.area.size()) + " bytes, the control stack "
				"says " + std::to_string(e.area), nullptr;
	auto disp = start(l, m, error);
	if (!disp)
		return nullptr;
	DispatchState &d = *disp->s_;
	const size_t vgprs = declared_vgprs(d);
	if (e.next_group > d.total_groups || e.groups > e.next_group || (e.groups && e.vgprs != vgprs))
		return *error = "control stack: progress or workgroup that does not fit the kernel", nullptr;
	d.next_group = e.next_group, d.instructions = e.instructions, d.lane_ops = e.lane_ops, d.cur = e.cur;
	In in{saved.control}, area{saved.area};
	in.at = kDispatchEntry;
	for (uint32_t i = 0; i < e.groups; ++i) {
		GroupEntry ge;
		read_group(in, &ge); // walk() read the same entries
		if (std::string why = load_group(d, ge, vgprs, in, area); !why.empty())
			return *error = why, nullptr;
	}
	return disp;
}

} // namespace kfdemu::shader
