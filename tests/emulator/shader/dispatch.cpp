// SPDX-License-Identifier: GPL-2.0-only
//
// A dispatch: reading the packet and kernel descriptor (start), launching
// workgroups with the AMDHSA initial register state, and running their
// waves round robin under a wave-instruction budget (run).
#include <algorithm>
#include <bit>
#include <cstring>

#include "shader/exec.h"

namespace kfdemu::shader {

namespace {

// Field offsets of hsa_kernel_dispatch_packet_t.
constexpr unsigned kSetup = 2, kWgSize = 4, kGrid = 12, kPrivateSize = 24, kGroupSize = 28,
		   kKernelObject = 32, kKernarg = 40;
// Field offsets shared by the AMDHSA kernel descriptor (code object v3+)
// and ROCr's amd_kernel_code_t (its blit kernels): the entry offset,
// COMPUTE_PGM_RSRC1/2 and the enable_sgpr_* properties.
constexpr unsigned kKdEntry = 16, kKdRsrc3 = 44, kKdRsrc1 = 48, kKdRsrc2 = 52, kKdProperties = 56;
constexpr uint16_t kPropWave32 = 1u << 10;
// Work-items per workgroup (the hardware's limit).
constexpr uint32_t kMaxWorkgroup = 1024;
// Wave-instructions one wave runs before the next wave of its workgroup
// gets a turn (so waves spinning on each other's stores progress).
constexpr uint64_t kQuantum = 256;

template <class T>
T field(const std::array<uint8_t, 64> &p, unsigned off)
{
	T v;
	std::memcpy(&v, p.data() + off, sizeof(v));
	return v;
}

template <class T>
T field(const uint8_t *p, unsigned off)
{
	T v;
	std::memcpy(&v, p + off, sizeof(v));
	return v;
}

unsigned user_sgprs(uint16_t props)
{
	static constexpr unsigned kSizes[] = {4, 2, 2, 2, 2, 2, 1};  // enable_sgpr_* bits 0-6
	unsigned n = 0;
	for (unsigned i = 0; i < 7; i++)
		n += (props >> i & 1) * kSizes[i];
	return n;
}

// The packet's grid and the descriptor's fields; false with *error.
bool read_kernel(const Launch &l, Exec &x, Kernel &k, std::string *error)
{
	const auto &p = l.packet;
	k.dims = field<uint16_t>(p, kSetup) & 3;
	for (unsigned i = 0; i < 3; i++) {
		k.wg_size[i] = field<uint16_t>(p, kWgSize + 2 * i);
		k.grid[i] = field<uint32_t>(p, kGrid + 4 * i);
		if (i >= k.dims)
			k.wg_size[i] = std::max(k.wg_size[i], 1u), k.grid[i] = std::max(k.grid[i], 1u);
	}
	k.private_size = field<uint32_t>(p, kPrivateSize);
	k.group_size = field<uint32_t>(p, kGroupSize);
	k.kernarg = field<uint64_t>(p, kKernarg);
	uint64_t kd = field<uint64_t>(p, kKernelObject);
	uint64_t items = uint64_t(k.wg_size[0]) * k.wg_size[1] * k.wg_size[2];
	if (k.dims < 1 || k.dims > 3)
		return *error = "dispatch packet: setup.dimensions " + std::to_string(k.dims) + " (1-3)", false;
	if (items == 0 || items > kMaxWorkgroup || !k.grid[0] || !k.grid[1] || !k.grid[2])
		return *error = "dispatch packet: workgroup of " + std::to_string(items) +
				" work-items (1-1024) or an empty grid", false;
	if (k.group_size > l.lds_limit)
		return *error = "dispatch packet: group_segment_size " + std::to_string(k.group_size) +
				" exceeds the workgroup's LDS (" + std::to_string(l.lds_limit) + ")", false;
	uint8_t d[64];
	if (!x.load(kd, d, sizeof(d)))
		return *error = "kernel descriptor at kernel_object " + std::to_string(kd) + " is not mapped", false;
	k.entry = kd + field<int64_t>(d, kKdEntry);
	k.rsrc1 = field<uint32_t>(d, kKdRsrc1), k.rsrc2 = field<uint32_t>(d, kKdRsrc2);
	k.rsrc3 = field<uint32_t>(d, kKdRsrc3), k.properties = field<uint16_t>(d, kKdProperties);
	if (k.properties & kPropWave32)
		return *error = "kernel descriptor: wavefront32 set (GFX9 runs wave64 only)", false;
	if ((k.rsrc1 >> 12 & 15) != 0)
		return *error = "kernel descriptor: FLOAT_ROUND_MODE other than round-to-nearest-even is not emulated", false;
	unsigned declared = k.rsrc2 >> 1 & 31;
	if (user_sgprs(k.properties) > declared)
		return *error = "kernel descriptor: enable_sgpr_* bits need " + std::to_string(user_sgprs(k.properties)) +
				" user SGPRs, USER_SGPR_COUNT is " + std::to_string(declared), false;
	for (unsigned i = 0; i < 3; i++)
		k.groups[i] = (k.grid[i] + k.wg_size[i] - 1) / k.wg_size[i];
	return true;
}

// The user and system SGPRs and the work-item id VGPRs of a new wave
// (AMDGPUUsage "Initial Kernel Execution State").
void init_registers(const DispatchState &d, const Workgroup &g, Wave &w, unsigned first_item)
{
	const Kernel &k = d.k;
	unsigned n = 0;
	auto put64 = [&](uint64_t v) { w.sgpr[n++] = static_cast<uint32_t>(v), w.sgpr[n++] = static_cast<uint32_t>(v >> 32); };
	if (k.properties & 1) {  // private segment buffer: base 0, SWIZZLE_ENABLE (see exec_memory.cpp)
		w.sgpr[n++] = 0;
		w.sgpr[n++] = 1u << 31;
		w.sgpr[n++] = 0xffffffff;
		w.sgpr[n++] = 0;
	}
	if (k.properties & 2)
		put64(d.launch.packet_va);
	if (k.properties & 4)
		put64(d.launch.queue_va);
	if (k.properties & 8)
		put64(k.kernarg);
	if (k.properties & 16)
		put64(d.launch.dispatch_id);
	if (k.properties & 32)
		put64(0);  // flat scratch init: the private segment is per wave here
	if (k.properties & 64)
		w.sgpr[n++] = k.private_size;
	n = k.rsrc2 >> 1 & 31;
	for (unsigned i = 0; i < 3; i++)
		if (k.rsrc2 >> (7 + i) & 1)
			w.sgpr[n++] = g.id[i];
	if (k.rsrc2 >> 10 & 1)
		w.sgpr[n++] = static_cast<uint32_t>(g.waves.size());
	if (k.rsrc2 & 1)
		w.sgpr[n++] = 0;  // private segment wave offset
	unsigned tid_dims = k.rsrc2 >> 11 & 3;
	bool packed = d.launch.target == Target::Gfx90a;
	for (unsigned l = 0; l < kWaveSize; l++) {
		unsigned item = first_item + l;
		unsigned x = item % g.size[0], y = item / g.size[0] % g.size[1], z = item / (g.size[0] * g.size[1]);
		if (item >= g.size[0] * g.size[1] * g.size[2])
			continue;
		w.exec |= 1ull << l;
		if (packed) {
			w.v(0)[l] = x | (tid_dims >= 1 ? y << 10 : 0) | (tid_dims >= 2 ? z << 20 : 0);
		} else {
			w.v(0)[l] = x;
			if (tid_dims >= 1)
				w.v(1)[l] = y;
			if (tid_dims >= 2)
				w.v(2)[l] = z;
		}
	}
	// MODE from COMPUTE_PGM_RSRC1: denorm modes [7:4], DX10 clamp, IEEE.
	w.mode = (k.rsrc1 >> 16 & 15) << 4 | (k.rsrc1 >> 21 & 1) << 8 | (k.rsrc1 >> 23 & 1) << 9;
	w.pc = k.entry;
}

void launch_group(DispatchState &d, Workgroup &g)
{
	const Kernel &k = d.k;
	uint64_t i = d.next_group++;
	g.id = {static_cast<uint32_t>(i % k.groups[0]), static_cast<uint32_t>(i / k.groups[0] % k.groups[1]),
		static_cast<uint32_t>(i / (uint64_t(k.groups[0]) * k.groups[1]))};
	for (unsigned j = 0; j < 3; j++)
		g.size[j] = std::min(k.wg_size[j], k.grid[j] - g.id[j] * k.wg_size[j]);
	unsigned items = g.size[0] * g.size[1] * g.size[2];
	// The waves' register files are reused from workgroup to workgroup:
	// only the VGPRs the kernel declares are cleared (the others are
	// undefined on hardware too).
	g.waves.resize((items + kWaveSize - 1) / kWaveSize);
	g.lds.assign(k.group_size, 0);
	g.current = 0;
	const size_t vgprs = declared_vgprs(d);
	for (unsigned j = 0; j < g.waves.size(); j++) {
		Wave &w = g.waves[j];
		std::vector<uint32_t> vgpr = std::move(w.vgpr), agpr = std::move(w.agpr);
		std::vector<uint8_t> scratch = std::move(w.scratch);
		w = Wave{};
		w.vgpr = std::move(vgpr), w.agpr = std::move(agpr), w.scratch = std::move(scratch);
		if (w.vgpr.empty())
			w.vgpr.resize(kVgprFile);
		std::fill_n(w.vgpr.begin(), vgprs * kWaveSize, 0u);
		std::fill(w.agpr.begin(), w.agpr.end(), 0u);
		std::fill(w.scratch.begin(), w.scratch.end(), uint8_t(0));
		w.id_in_group = j;
		init_registers(d, g, w, j * kWaveSize);
	}
	g.live = true;
}

std::string hex(uint64_t v)
{
	char b[24];
	std::snprintf(b, sizeof(b), "0x%llx", static_cast<unsigned long long>(v));
	return b;
}

// The decoded instruction at pc (decoded once per code address).
const Decoded *fetch(Exec &x, uint64_t pc)
{
	DispatchState::Recent &slot = x.d.recent[(pc >> 2) % DispatchState::kRecent];
	if (slot.pc == pc && slot.dec)
		return slot.dec;
	auto it = x.d.code.find(pc);
	if (it != x.d.code.end())
		return slot = {pc, &it->second}, &it->second;
	uint32_t words[2];
	size_t n = 2;
	if (!x.load(pc, words, 8)) {
		n = 1;
		if (!x.load(pc, words, 4))
			return nullptr;
	}
	Decoded dec;
	dec.in = decode(x.d.launch.target, words, n);
	dec.fn = handler_for(dec.in);
	const Decoded *p = &x.d.code.emplace(pc, dec).first->second;
	slot = {pc, p};
	return p;
}

// Runs wave w of workgroup g for at most `budget` instructions; the
// number run.
uint64_t run_wave(Exec &x, const Workgroup &g, Wave &w, uint64_t budget)
{
	DispatchState &d = x.d;
	uint64_t n = 0;
	while (n < budget && w.state == Wave::State::Ready) {
		const Decoded *dec = fetch(x, w.pc);
		int r;
		if (!dec) {
			x.why = "VM fault fetching the instruction";
			r = kFault;
		} else if (!dec->fn) {
			r = x.illegal(w, dec->in, dec->in.info ? "not implemented" : "not a gfx9 instruction");
		} else {
			d.lane_ops += static_cast<unsigned>(std::popcount(w.exec));
			r = dec->in.sdwa ? run_sdwa(x, w, dec->in, dec->fn)
			    : dec->in.dpp ? run_dpp(x, w, dec->in, dec->fn) : dec->fn(x, w, dec->in);
		}
		n++;
		d.instructions++;
		switch (r) {
		case kNext: w.pc += dec->in.size; break;
		case kJumped: break;
		case kBarrier: w.pc += dec->in.size, w.state = Wave::State::Barrier; break;
		case kEnd: w.state = Wave::State::Done; break;
		default:
			d.status = r == kFault ? Dispatch::Status::VmFault
				 : r == kTrap ? Dispatch::Status::Trap : Dispatch::Status::IllegalInstruction;
			d.fault_va = x.fault_va;
			d.why = x.why + " at PC " + hex(w.pc) + (dec ? " (" + disassemble(dec->in) + ")" : "") +
				", workgroup (" + std::to_string(g.id[0]) + "," + std::to_string(g.id[1]) +
				"," + std::to_string(g.id[2]) + ") wave " + std::to_string(w.id_in_group);
			return n;
		}
	}
	return n;
}

// Releases the barrier when every wave still running has reached it.
void barrier_check(Workgroup &g)
{
	bool any = false;
	for (const Wave &w : g.waves) {
		if (w.state == Wave::State::Ready)
			return;
		any |= w.state == Wave::State::Barrier;
	}
	if (any)
		for (Wave &w : g.waves)
			if (w.state == Wave::State::Barrier)
				w.state = Wave::State::Ready;
}

bool group_done(const Workgroup &g)
{
	for (const Wave &w : g.waves)
		if (w.state != Wave::State::Done)
			return false;
	return true;
}

// Launches the next workgroups into the free slots; false when none is
// in flight any more (the grid is done).
bool fill_slots(DispatchState &d)
{
	bool any = false;
	for (Workgroup &g : d.groups) {
		if (!g.live && d.next_group < d.total_groups)
			launch_group(d, g);
		any |= g.live;
	}
	return any;
}

}  // namespace

size_t declared_vgprs(const DispatchState &d)
{
	const size_t granule = d.launch.target == Target::Gfx90a ? 8 : 4;
	return std::min<size_t>(kVgprs, ((d.k.rsrc1 & 63) + 1) * granule);
}

// --- Exec: memory through the caller ----------------------------------------

uint8_t *Exec::host(uint64_t va, uint64_t n, bool write)
{
	auto hit = [&](const Tlb::Entry &e) {
		return e.p && va - e.va < e.len && n <= e.len - (va - e.va) && (e.write || !write);
	};
	if (hit(tlb.e[tlb.last]))
		return tlb.e[tlb.last].p + (va - tlb.e[tlb.last].va);
	for (unsigned i = 0; i < Tlb::kEntries; i++)
		if (hit(tlb.e[i]))
			return tlb.last = i, tlb.e[i].p + (va - tlb.e[i].va);
	uint64_t len = 0;
	uint8_t *p = m.host(va, write, &len);
	if (!p || len < n)
		return nullptr;
	tlb.last = tlb.next++ % Tlb::kEntries;
	tlb.e[tlb.last] = {va, len, p, write};
	return p;
}

bool Exec::load(uint64_t va, void *dst, uint64_t n)
{
	auto *out = static_cast<uint8_t *>(dst);
	if (uint8_t *p = host(va, n, false))
		return std::memcpy(out, p, n), true;
	while (n) {
		uint64_t len = 0;
		uint8_t *p = m.host(va, false, &len);
		if (!p)
			return m.read(va, out, n) == 0 || fault(va, "read");
		uint64_t k = std::min(len, n);
		std::memcpy(out, p, k);
		va += k, out += k, n -= k;
	}
	return true;
}

bool Exec::store(uint64_t va, const void *src, uint64_t n)
{
	auto *in = static_cast<const uint8_t *>(src);
	if (uint8_t *p = host(va, n, true))
		return std::memcpy(p, in, n), true;
	while (n) {
		uint64_t len = 0;
		uint8_t *p = m.host(va, true, &len);
		if (!p)
			return m.write(va, in, n) == 0 || fault(va, "write");
		uint64_t k = std::min(len, n);
		std::memcpy(p, in, k);
		va += k, in += k, n -= k;
	}
	return true;
}

int Exec::fault(uint64_t va, const char *what)
{
	fault_va = va;
	why = std::string("VM fault: ") + what + " at " + hex(va);
	return 0;
}

int Exec::illegal(const Wave &, const Inst &in, const char *what)
{
	why = std::string("illegal instruction: ") + (in.info ? in.info->name : "") + " [" +
	      family_name(in.family) + " opcode " + std::to_string(in.op) + "] " + what;
	return kIllegal;
}

Handler handler_for(const Inst &in)
{
	if (!in.info || ((in.dpp || in.sdwa) && in.family == Family::Vopc))
		return nullptr;
	std::string name = in.info->name;
	if (name.size() > 4 && (name.ends_with("_e32") || name.ends_with("_e64")))
		name.resize(name.size() - 4);
	if (in.family == Family::Vop3 && in.opsel)
		return nullptr;  // op_sel (16-bit halves) is not emulated
	if (name.starts_with("s_"))
		return scalar_handler(name);
	if (name.starts_with("v_"))
		return vector_handler(name);
	return memory_handler(name);
}

// --- Dispatch ------------------------------------------------------------------

Dispatch::Dispatch(std::unique_ptr<DispatchState> s) : s_(std::move(s)) {}
Dispatch::~Dispatch() = default;

std::unique_ptr<Dispatch> Dispatch::start(const Launch &l, Memory &m, std::string *error)
{
	auto s = std::make_unique<DispatchState>();
	s->launch = l;
	Exec x{*s, m, {}, {}, 0, nullptr};
	if (!read_kernel(l, x, s->k, error))
		return nullptr;
	s->total_groups = uint64_t(s->k.groups[0]) * s->k.groups[1] * s->k.groups[2];
	return std::unique_ptr<Dispatch>(new Dispatch(std::move(s)));
}

Dispatch::Status Dispatch::run(Memory &m, uint64_t budget)
{
	DispatchState &d = *s_;
	Exec x{d, m, {}, {}, 0, nullptr};
	budget = std::max<uint64_t>(budget, 1);
	while (budget && d.status == Status::Running) {
		if (!fill_slots(d)) {
			d.status = Status::Done;
			break;
		}
		while (!d.groups[d.cur].live)
			d.cur = (d.cur + 1) % kGroupsInFlight;
		Workgroup &g = d.groups[d.cur];
		x.wg = &g;
		Wave &w = g.waves[g.current];
		budget -= run_wave(x, g, w, std::min(budget, kQuantum));
		if (d.status != Status::Running)
			break;
		if (w.state != Wave::State::Ready)
			barrier_check(g);
		if (group_done(g))
			g.live = false;
		for (unsigned i = 0; g.live && i < g.waves.size(); i++) {  // its next ready wave
			g.current = (g.current + 1) % static_cast<unsigned>(g.waves.size());
			if (g.waves[g.current].state == Wave::State::Ready)
				break;
		}
		d.cur = (d.cur + 1) % kGroupsInFlight;  // the next workgroup's turn
	}
	return d.status;
}

std::string Dispatch::why() const { return s_->why; }
uint64_t Dispatch::fault_va() const { return s_->fault_va; }
uint64_t Dispatch::instructions() const { return s_->instructions; }
uint64_t Dispatch::lane_ops() const { return s_->lane_ops; }

}  // namespace kfdemu::shader
