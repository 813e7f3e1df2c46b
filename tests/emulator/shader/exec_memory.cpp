// SPDX-License-Identifier: GPL-2.0-only
//
// Vector memory instructions: DS (LDS), FLAT / GLOBAL / SCRATCH, MUBUF.
// Memory is synchronous (an access completes when its instruction runs).
// Flat addresses in the LDS aperture reach the workgroup's LDS, those in
// the private aperture the lane's private segment (kept in the wave).
#include <cmath>
#include <unordered_map>

#include "shader/exec.h"

namespace kfdemu::shader {

namespace {

// Where a lane's access goes.
enum class Space { Global, Lds, Private };

struct Target {
	Space space;
	uint64_t addr;	// VA (Global) or offset (LDS, private)
};

Target classify(const Exec &x, uint64_t va)
{
	const Apertures &a = x.d.launch.apertures;
	if (va - a.shared_base < (1ull << 32))
		return {Space::Lds, va - a.shared_base};
	if (va - a.private_base < (1ull << 32))
		return {Space::Private, va - a.private_base};
	return {Space::Global, va};
}

uint32_t *vreg(Wave &w, unsigned reg, bool acc)
{
	if (!acc)
		return w.v(reg);
	if (w.agpr.empty())
		w.agpr.assign(kVgprFile, 0);
	return &w.agpr[reg * kWaveSize];
}

// Host bytes of lane l's private segment at `off`, allocated at first use;
// nullptr when out of the dispatch's private_segment_size.
uint8_t *private_bytes(Exec &x, Wave &w, unsigned l, uint64_t off, unsigned n)
{
	uint32_t size = x.d.k.private_size;
	if (off + n > size)
		return nullptr;
	if (w.scratch.empty())
		w.scratch.assign(size_t(size) * kWaveSize, 0);
	return &w.scratch[size_t(l) * size + off];
}

uint8_t *lds_bytes(Exec &x, uint64_t off, unsigned n)
{
	std::vector<uint8_t> &lds = x.wg->lds;
	return off + n <= lds.size() ? &lds[off] : nullptr;
}

// One lane's load / store of n bytes (n <= 16) at a classified address.
// LDS out of range reads zeros and drops writes (as the hardware's LDS
// bounds check does); private or global out of range is a VM fault.
bool lane_access(Exec &x, Wave &w, unsigned l, Target t, void *data, unsigned n, bool write)
{
	if (t.space == Space::Global)
		return write ? x.store(t.addr, data, n) : x.load(t.addr, data, n);
	uint8_t *p = t.space == Space::Lds ? lds_bytes(x, t.addr, n) : private_bytes(x, w, l, t.addr, n);
	if (!p) {
		if (t.space == Space::Lds) {
			if (!write)
				std::memset(data, 0, n);
			return true;
		}
		x.fault(x.d.launch.apertures.private_base + t.addr, "private segment access out of range");
		return false;
	}
	write ? std::memcpy(p, data, n) : std::memcpy(data, p, n);
	return true;
}

// --- load / store shapes -------------------------------------------------

// How a load widens into its destination: Bytes read, Sign extends,
// Dwords written.
struct Shape {
	unsigned bytes;
	bool sign;
	unsigned dwords;
};

constexpr Shape kUbyte{1, false, 1}, kSbyte{1, true, 1}, kUshort{2, false, 1}, kSshort{2, true, 1};
constexpr Shape kDword{4, false, 1}, kX2{8, false, 2}, kX3{12, false, 3}, kX4{16, false, 4};

void to_regs(uint32_t *const *d, unsigned l, const uint8_t *buf, Shape s)
{
	if (s.bytes < 4) {
		uint32_t v = s.bytes == 1 ? buf[0] : uint32_t(buf[0] | buf[1] << 8);
		if (s.sign)
			v = s.bytes == 1 ? uint32_t(int32_t(int8_t(v))) : uint32_t(int32_t(int16_t(v)));
		d[0][l] = v;
		return;
	}
	for (unsigned i = 0; i < s.dwords; i++)
		std::memcpy(&d[i][l], buf + 4 * i, 4);
}

void from_regs(uint32_t *const *s, unsigned l, uint8_t *buf, unsigned bytes)
{
	for (unsigned i = 0; i < (bytes + 3) / 4; i++) {
		uint32_t v = s[i][l];
		std::memcpy(buf + 4 * i, &v, bytes < 4 ? bytes : 4);
	}
}

// Each active lane's address for FLAT / GLOBAL / SCRATCH.
uint64_t flat_address(const Exec &x, const Wave &w, const Inst &in, unsigned l)
{
	if (in.family == Family::Scratch) {
		uint64_t base = in.saddr != 0x7f ? sread(w, x, in.saddr, in) : w.v(in.src0)[l];
		return x.d.launch.apertures.private_base + ((w.flat_scratch + base + in.offset) & 0xffffffffull);
	}
	if (in.family == Family::Global && in.saddr != 0x7f)
		return sread64(w, x, in.saddr, in, false) + w.v(in.src0)[l] + static_cast<int64_t>(in.offset);
	return (w.v(in.src0)[l] | uint64_t(w.v(in.src0 + 1)[l]) << 32) + static_cast<int64_t>(in.offset);
}

template <Shape S>
int flat_load(Exec &x, Wave &w, const Inst &in)
{
	uint32_t *d[4];
	for (unsigned i = 0; i < S.dwords; i++)
		d[i] = vreg(w, in.dst + i, in.acc);
	bool ok = true;
	for_lanes(w.exec, [&](unsigned l) {
		uint8_t buf[16];
		if (ok && (ok = lane_access(x, w, l, classify(x, flat_address(x, w, in, l)), buf, S.bytes, false)))
			to_regs(d, l, buf, S);
	});
	return ok ? kNext : kFault;
}

template <unsigned Bytes>
int flat_store(Exec &x, Wave &w, const Inst &in)
{
	uint32_t *s[4];
	for (unsigned i = 0; i < (Bytes + 3) / 4; i++)
		s[i] = vreg(w, in.src1 + i, in.acc);
	bool ok = true;
	for_lanes(w.exec, [&](unsigned l) {
		uint8_t buf[16];
		from_regs(s, l, buf, Bytes);
		if (ok)
			ok = lane_access(x, w, l, classify(x, flat_address(x, w, in, l)), buf, Bytes, true);
	});
	return ok ? kNext : kFault;
}

// --- atomics -------------------------------------------------------------------

enum class Rmw { Swap, Cmpswap, Add, Sub, Rsub, Smin, Umin, Smax, Umax, And, Or, Xor, Inc, Dec, Fadd, Fmin, Fmax };

template <class T>
T rmw(Rmw op, T old, T src, T cmp)
{
	using S = std::make_signed_t<T>;
	using Fl = std::conditional_t<sizeof(T) == 4, float, double>;
	auto fl = [](T v) { return std::bit_cast<Fl>(v); };
	auto bits = [](Fl v) { return std::bit_cast<T>(v); };
	switch (op) {
	case Rmw::Swap: return src;
	case Rmw::Cmpswap: return old == cmp ? src : old;
	case Rmw::Add: return old + src;
	case Rmw::Sub: return old - src;
	case Rmw::Rsub: return src - old;
	case Rmw::Smin: return S(old) < S(src) ? old : src;
	case Rmw::Umin: return old < src ? old : src;
	case Rmw::Smax: return S(old) > S(src) ? old : src;
	case Rmw::Umax: return old > src ? old : src;
	case Rmw::And: return old & src;
	case Rmw::Or: return old | src;
	case Rmw::Xor: return old ^ src;
	case Rmw::Inc: return old >= src ? 0 : old + 1;
	case Rmw::Dec: return old == 0 || old > src ? src : old - 1;
	case Rmw::Fadd: return bits(fl(old) + fl(src));
	case Rmw::Fmin: return bits(std::fmin(fl(old), fl(src)));
	default: return bits(std::fmax(fl(old), fl(src)));
	}
}

// An atomic read-modify-write of a T at a classified address; *old gets
// the value before. Global memory the caller maps is updated with a host
// atomic (the process's CPU threads may race with it); memory reached only
// through Memory::read/write, LDS and private memory are updated in place.
template <class T>
bool atomic(Exec &x, Wave &w, unsigned l, Target t, Rmw op, T src, T cmp, T *old)
{
	if (t.space == Space::Global && t.addr % sizeof(T) == 0) {
		if (uint8_t *p = x.host(t.addr, sizeof(T), true)) {
			T *q = reinterpret_cast<T *>(static_cast<void *>(p));
			T cur = __atomic_load_n(q, __ATOMIC_RELAXED);
			while (!__atomic_compare_exchange_n(q, &cur, rmw(op, cur, src, cmp), false,
							    __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
			}
			*old = cur;
			return true;
		}
	}
	T cur;
	if (!lane_access(x, w, l, t, &cur, sizeof(T), false))
		return false;
	T next = rmw(op, cur, src, cmp);
	*old = cur;
	return lane_access(x, w, l, t, &next, sizeof(T), true);
}

template <class T>
T reg_value(uint32_t *const *r, unsigned l, unsigned first)
{
	if constexpr (sizeof(T) == 4)
		return r[first][l];
	else
		return r[first][l] | uint64_t(r[first + 1][l]) << 32;
}

template <class T>
void set_reg(uint32_t *const *r, unsigned l, T v)
{
	r[0][l] = static_cast<uint32_t>(v);
	if constexpr (sizeof(T) == 8)
		r[1][l] = static_cast<uint32_t>(v >> 32);
}

template <class T, Rmw Op>
int flat_atomic(Exec &x, Wave &w, const Inst &in)
{
	constexpr unsigned n = sizeof(T) / 4;
	uint32_t *data[2 * n], *dst[n];
	for (unsigned i = 0; i < 2 * n; i++)
		data[i] = vreg(w, in.src1 + i, in.acc);
	for (unsigned i = 0; i < n; i++)
		dst[i] = vreg(w, in.dst + i, in.acc);
	bool ok = true;
	for_lanes(w.exec, [&](unsigned l) {
		T src = reg_value<T>(data, l, 0), cmp = Op == Rmw::Cmpswap ? reg_value<T>(data, l, n) : T(0), old;
		if (ok && (ok = atomic(x, w, l, classify(x, flat_address(x, w, in, l)), Op, src, cmp, &old)) && in.glc)
			set_reg(dst, l, old);
	});
	return ok ? kNext : kFault;
}

// --- DS -------------------------------------------------------------------------

uint64_t ds_address(const Wave &w, const Inst &in, unsigned l, unsigned off)
{
	return uint32_t(w.v(in.src0)[l] + off);
}

unsigned ds_offset(const Inst &in) { return unsigned(in.offset) | unsigned(in.offset1) << 8; }

template <Shape S>
int ds_read(Exec &x, Wave &w, const Inst &in)
{
	uint32_t *d[4];
	for (unsigned i = 0; i < S.dwords; i++)
		d[i] = vreg(w, in.dst + i, in.acc);
	for_lanes(w.exec, [&](unsigned l) {
		uint8_t buf[16];
		lane_access(x, w, l, {Space::Lds, ds_address(w, in, l, ds_offset(in))}, buf, S.bytes, false);
		to_regs(d, l, buf, S);
	});
	return kNext;
}

template <unsigned Bytes>
int ds_write(Exec &x, Wave &w, const Inst &in)
{
	uint32_t *s[4];
	for (unsigned i = 0; i < (Bytes + 3) / 4; i++)
		s[i] = vreg(w, in.src1 + i, in.acc);
	for_lanes(w.exec, [&](unsigned l) {
		uint8_t buf[16];
		from_regs(s, l, buf, Bytes);
		lane_access(x, w, l, {Space::Lds, ds_address(w, in, l, ds_offset(in))}, buf, Bytes, true);
	});
	return kNext;
}

// ds_read2 / ds_write2: two elements at offset0 and offset1 (x64 for st64).
template <unsigned Bytes, unsigned Stride, bool Write>
int ds_2(Exec &x, Wave &w, const Inst &in)
{
	constexpr unsigned n = Bytes / 4;
	uint32_t *r[2 * n];
	for (unsigned i = 0; i < 2 * n; i++)
		r[i] = vreg(w, (Write ? (i < n ? in.src1 + i : in.src2 + i - n) : in.dst + i), in.acc);
	for_lanes(w.exec, [&](unsigned l) {
		for (unsigned e = 0; e < 2; e++) {
			unsigned off = (e ? in.offset1 : unsigned(in.offset)) * Bytes * Stride;
			uint8_t buf[8];
			Target t{Space::Lds, ds_address(w, in, l, off)};
			if (Write) {
				from_regs(r + e * n, l, buf, Bytes);
				lane_access(x, w, l, t, buf, Bytes, true);
			} else {
				lane_access(x, w, l, t, buf, Bytes, false);
				to_regs(r + e * n, l, buf, {Bytes, false, n});
			}
		}
	});
	return kNext;
}

template <class T, Rmw Op, bool Rtn>
int ds_atomic(Exec &x, Wave &w, const Inst &in)
{
	constexpr unsigned n = sizeof(T) / 4;
	uint32_t *d0[n], *d1[n], *dst[n];
	for (unsigned i = 0; i < n; i++)
		d0[i] = vreg(w, in.src1 + i, in.acc), d1[i] = vreg(w, in.src2 + i, in.acc),
		dst[i] = vreg(w, in.dst + i, in.acc);
	for_lanes(w.exec, [&](unsigned l) {
		// ds_cmpst: data0 is the compare value, data1 the new one.
		T src = Op == Rmw::Cmpswap ? reg_value<T>(d1, l, 0) : reg_value<T>(d0, l, 0);
		T cmp = Op == Rmw::Cmpswap ? reg_value<T>(d0, l, 0) : T(0), old;
		atomic(x, w, l, {Space::Lds, ds_address(w, in, l, ds_offset(in))}, Op, src, cmp, &old);
		if (Rtn)
			set_reg(dst, l, old);
	});
	return kNext;
}

// ds_bpermute_b32: each lane reads data0 of the lane its address names;
// ds_permute_b32: each lane writes its data0 to the lane its address names.
template <bool Back>
int ds_permute(Exec &, Wave &w, const Inst &in)
{
	uint32_t tmp[kWaveSize] = {};
	const uint32_t *src = w.v(in.src1);
	for_lanes(w.exec, [&](unsigned l) {
		unsigned other = (ds_address(w, in, l, ds_offset(in)) / 4) % kWaveSize;
		if (Back)
			tmp[l] = src[other];
		else
			tmp[other] = src[l];
	});
	uint32_t *d = w.v(in.dst);
	for_lanes(w.exec, [&](unsigned l) { d[l] = tmp[l]; });
	return kNext;
}

// ds_swizzle_b32 (no LDS access): each lane reads the source (the ADDR
// field's VGPR) of the lane its 16-bit offset names. Offset bit 15 set: a
// quad permutation, lane l of each quad reading lane offset[2(l%4)+1 :
// 2(l%4)]; clear: within each 32 lanes, lane j reads ((j & and) | or) ^
// xor with the masks in bits 4:0, 9:5 and 14:10. As ds_bpermute_b32, an
// inactive source lane's register is read.
int ds_swizzle(Exec &, Wave &w, const Inst &in)
{
	uint32_t tmp[kWaveSize] = {};
	const uint32_t *src = w.v(in.src0); // the address field holds the data
	const unsigned pattern = ds_offset(in);
	const unsigned and_mask = pattern & 31, or_mask = pattern >> 5 & 31, xor_mask = pattern >> 10 & 31;
	for_lanes(w.exec, [&](unsigned l) {
		const unsigned other = pattern >> 15 ? (l & ~3u) | (pattern >> (2 * (l & 3)) & 3)
						    : (l & 32) | (((l & and_mask) | or_mask) ^ xor_mask);
		tmp[l] = src[other];
	});
	uint32_t *d = w.v(in.dst);
	for_lanes(w.exec, [&](unsigned l) { d[l] = tmp[l]; });
	return kNext;
}

// --- MUBUF ---------------------------------------------------------------------

// A buffer resource (V#). A swizzled buffer is the private segment: the
// V# a wave receives as its private segment buffer has SWIZZLE_ENABLE set
// and base 0, and the shader core serves every swizzled access from the
// lane's own private memory at the unswizzled offset (compute code uses
// swizzling for nothing else; the private aperture does not fit a V#'s
// 48-bit base).
struct Buffer {
	uint64_t base;
	uint32_t stride, records;
	bool add_tid, swizzle;
};

Buffer descriptor(const Wave &w, const Exec &x, const Inst &in)
{
	uint32_t d[4];
	for (unsigned i = 0; i < 4; i++)
		d[i] = sread(w, x, in.src1 + i, in);
	return {d[0] | uint64_t(d[1] & 0xffff) << 32, d[1] >> 16 & 0x3fff, d[2], (d[3] >> 23 & 1) != 0,
		(d[1] >> 31) != 0};
}

// Lane l's target, or false when out of the buffer's range (the access is
// dropped: loads read zeros).
bool buffer_target(const Exec &x, const Wave &w, const Inst &in, const Buffer &b, unsigned l,
		   unsigned n, Target *t)
{
	uint64_t off = (in.offen ? w.v(in.src0 + in.idxen)[l] : 0) + uint32_t(in.offset) +
		       sread(w, x, in.soffset, in);
	if (b.swizzle) {
		*t = {Space::Private, (b.base + off) & 0xffffffffull};
		return true;
	}
	uint64_t index = (in.idxen ? w.v(in.src0)[l] : 0) + (b.add_tid ? l : 0);
	if (b.stride == 0 ? off + n > b.records : index >= b.records)
		return false;
	*t = classify(x, b.base + index * b.stride + off);
	return true;
}

template <Shape S>
int buffer_load(Exec &x, Wave &w, const Inst &in)
{
	if (in.lds)
		return x.illegal(w, in, "MUBUF load to LDS");
	Buffer b = descriptor(w, x, in);
	uint32_t *d[4];
	for (unsigned i = 0; i < S.dwords; i++)
		d[i] = vreg(w, in.dst + i, in.acc);
	bool ok = true;
	for_lanes(w.exec, [&](unsigned l) {
		uint8_t buf[16] = {};
		Target t;
		if (ok && buffer_target(x, w, in, b, l, S.bytes, &t))
			ok = lane_access(x, w, l, t, buf, S.bytes, false);
		to_regs(d, l, buf, S);
	});
	return ok ? kNext : kFault;
}

template <unsigned Bytes>
int buffer_store(Exec &x, Wave &w, const Inst &in)
{
	Buffer b = descriptor(w, x, in);
	uint32_t *s[4];
	for (unsigned i = 0; i < (Bytes + 3) / 4; i++)
		s[i] = vreg(w, in.dst + i, in.acc);
	bool ok = true;
	for_lanes(w.exec, [&](unsigned l) {
		uint8_t buf[16];
		Target t;
		from_regs(s, l, buf, Bytes);
		if (ok && buffer_target(x, w, in, b, l, Bytes, &t))
			ok = lane_access(x, w, l, t, buf, Bytes, true);
	});
	return ok ? kNext : kFault;
}

template <class T, Rmw Op>
int buffer_atomic(Exec &x, Wave &w, const Inst &in)
{
	constexpr unsigned n = sizeof(T) / 4;
	Buffer b = descriptor(w, x, in);
	uint32_t *data[2 * n];
	for (unsigned i = 0; i < 2 * n; i++)
		data[i] = vreg(w, in.dst + i, in.acc);
	bool ok = true;
	for_lanes(w.exec, [&](unsigned l) {
		T src = reg_value<T>(data, l, 0), cmp = Op == Rmw::Cmpswap ? reg_value<T>(data, l, n) : T(0), old = 0;
		Target t;
		if (ok && buffer_target(x, w, in, b, l, sizeof(T), &t))
			ok = atomic(x, w, l, t, Op, src, cmp, &old);
		if (in.glc)
			set_reg(data, l, old);
	});
	return ok ? kNext : kFault;
}

// The atomics every family names the same way (<prefix>atomic_<op>[_x2]).
void add_atomics(std::unordered_map<std::string, Handler> &t)
{
#define ATOMIC(name, op)                                                              \
	t["flat_atomic_" name] = flat_atomic<uint32_t, Rmw::op>;                      \
	t["global_atomic_" name] = flat_atomic<uint32_t, Rmw::op>;                    \
	t["buffer_atomic_" name] = buffer_atomic<uint32_t, Rmw::op>;                  \
	t["flat_atomic_" name "_x2"] = flat_atomic<uint64_t, Rmw::op>;                \
	t["global_atomic_" name "_x2"] = flat_atomic<uint64_t, Rmw::op>;              \
	t["buffer_atomic_" name "_x2"] = buffer_atomic<uint64_t, Rmw::op>;
	ATOMIC("swap", Swap) ATOMIC("cmpswap", Cmpswap) ATOMIC("add", Add) ATOMIC("sub", Sub)
	ATOMIC("smin", Smin) ATOMIC("umin", Umin) ATOMIC("smax", Smax) ATOMIC("umax", Umax)
	ATOMIC("and", And) ATOMIC("or", Or) ATOMIC("xor", Xor) ATOMIC("inc", Inc) ATOMIC("dec", Dec)
#undef ATOMIC
	for (const char *p : {"flat_atomic_", "global_atomic_"}) {
		std::string s = p;
		t[s + "add_f32"] = flat_atomic<uint32_t, Rmw::Fadd>;
		t[s + "add_f64"] = flat_atomic<uint64_t, Rmw::Fadd>;
		t[s + "min_f64"] = flat_atomic<uint64_t, Rmw::Fmin>;
		t[s + "max_f64"] = flat_atomic<uint64_t, Rmw::Fmax>;
	}
	t["buffer_atomic_add_f32"] = buffer_atomic<uint32_t, Rmw::Fadd>;
	// The vector caches' write-backs and invalidations around atomics'
	// acquire/release: memory here is coherent, so none has anything to do.
	for (const char *op : {"buffer_wbinvl1", "buffer_wbinvl1_vol", "buffer_invl2", "buffer_wbl2"})
		t[op] = [](Exec &, Wave &, const Inst &) { return static_cast<int>(kNext); };
#define DS_ATOMIC(name, T, op)                                 \
	t["ds_" name] = ds_atomic<T, Rmw::op, false>;
#define DS_RTN(name, rtn, T, op)                               \
	t["ds_" name] = ds_atomic<T, Rmw::op, false>;          \
	t["ds_" rtn] = ds_atomic<T, Rmw::op, true>;
	DS_RTN("add_u32", "add_rtn_u32", uint32_t, Add) DS_RTN("sub_u32", "sub_rtn_u32", uint32_t, Sub)
	DS_RTN("rsub_u32", "rsub_rtn_u32", uint32_t, Rsub) DS_RTN("inc_u32", "inc_rtn_u32", uint32_t, Inc)
	DS_RTN("dec_u32", "dec_rtn_u32", uint32_t, Dec) DS_RTN("min_i32", "min_rtn_i32", uint32_t, Smin)
	DS_RTN("max_i32", "max_rtn_i32", uint32_t, Smax) DS_RTN("min_u32", "min_rtn_u32", uint32_t, Umin)
	DS_RTN("max_u32", "max_rtn_u32", uint32_t, Umax) DS_RTN("and_b32", "and_rtn_b32", uint32_t, And)
	DS_RTN("or_b32", "or_rtn_b32", uint32_t, Or) DS_RTN("xor_b32", "xor_rtn_b32", uint32_t, Xor)
	DS_RTN("cmpst_b32", "cmpst_rtn_b32", uint32_t, Cmpswap) DS_RTN("add_f32", "add_rtn_f32", uint32_t, Fadd)
	DS_RTN("min_f32", "min_rtn_f32", uint32_t, Fmin) DS_RTN("max_f32", "max_rtn_f32", uint32_t, Fmax)
	DS_RTN("add_u64", "add_rtn_u64", uint64_t, Add) DS_RTN("sub_u64", "sub_rtn_u64", uint64_t, Sub)
	DS_RTN("min_i64", "min_rtn_i64", uint64_t, Smin) DS_RTN("max_i64", "max_rtn_i64", uint64_t, Smax)
	DS_RTN("min_u64", "min_rtn_u64", uint64_t, Umin) DS_RTN("max_u64", "max_rtn_u64", uint64_t, Umax)
	DS_RTN("and_b64", "and_rtn_b64", uint64_t, And) DS_RTN("or_b64", "or_rtn_b64", uint64_t, Or)
	DS_RTN("xor_b64", "xor_rtn_b64", uint64_t, Xor) DS_RTN("cmpst_b64", "cmpst_rtn_b64", uint64_t, Cmpswap)
	DS_RTN("add_f64", "add_rtn_f64", uint64_t, Fadd)
	t["ds_wrxchg_rtn_b32"] = ds_atomic<uint32_t, Rmw::Swap, true>;
	t["ds_wrxchg_rtn_b64"] = ds_atomic<uint64_t, Rmw::Swap, true>;
#undef DS_ATOMIC
#undef DS_RTN
}

const std::unordered_map<std::string, Handler> &memory_table()
{
	static const std::unordered_map<std::string, Handler> t = [] {
		std::unordered_map<std::string, Handler> m;
		for (const char *p : {"flat_", "global_", "scratch_"}) {
			std::string s = p;
			m[s + "load_ubyte"] = flat_load<kUbyte>;
			m[s + "load_sbyte"] = flat_load<kSbyte>;
			m[s + "load_ushort"] = flat_load<kUshort>;
			m[s + "load_sshort"] = flat_load<kSshort>;
			m[s + "load_dword"] = flat_load<kDword>;
			m[s + "load_dwordx2"] = flat_load<kX2>;
			m[s + "load_dwordx3"] = flat_load<kX3>;
			m[s + "load_dwordx4"] = flat_load<kX4>;
			m[s + "store_byte"] = flat_store<1>;
			m[s + "store_short"] = flat_store<2>;
			m[s + "store_dword"] = flat_store<4>;
			m[s + "store_dwordx2"] = flat_store<8>;
			m[s + "store_dwordx3"] = flat_store<12>;
			m[s + "store_dwordx4"] = flat_store<16>;
		}
		m["buffer_load_ubyte"] = buffer_load<kUbyte>;
		m["buffer_load_sbyte"] = buffer_load<kSbyte>;
		m["buffer_load_ushort"] = buffer_load<kUshort>;
		m["buffer_load_sshort"] = buffer_load<kSshort>;
		m["buffer_load_dword"] = buffer_load<kDword>;
		m["buffer_load_dwordx2"] = buffer_load<kX2>;
		m["buffer_load_dwordx3"] = buffer_load<kX3>;
		m["buffer_load_dwordx4"] = buffer_load<kX4>;
		m["buffer_store_byte"] = buffer_store<1>;
		m["buffer_store_short"] = buffer_store<2>;
		m["buffer_store_dword"] = buffer_store<4>;
		m["buffer_store_dwordx2"] = buffer_store<8>;
		m["buffer_store_dwordx3"] = buffer_store<12>;
		m["buffer_store_dwordx4"] = buffer_store<16>;
		m["ds_read_u8"] = ds_read<kUbyte>;
		m["ds_read_i8"] = ds_read<kSbyte>;
		m["ds_read_u16"] = ds_read<kUshort>;
		m["ds_read_i16"] = ds_read<kSshort>;
		m["ds_read_b32"] = ds_read<kDword>;
		m["ds_read_b64"] = ds_read<kX2>;
		m["ds_read_b96"] = ds_read<kX3>;
		m["ds_read_b128"] = ds_read<kX4>;
		m["ds_write_b8"] = ds_write<1>;
		m["ds_write_b16"] = ds_write<2>;
		m["ds_write_b32"] = ds_write<4>;
		m["ds_write_b64"] = ds_write<8>;
		m["ds_write_b96"] = ds_write<12>;
		m["ds_write_b128"] = ds_write<16>;
		m["ds_read2_b32"] = ds_2<4, 1, false>;
		m["ds_read2_b64"] = ds_2<8, 1, false>;
		m["ds_read2st64_b32"] = ds_2<4, 64, false>;
		m["ds_read2st64_b64"] = ds_2<8, 64, false>;
		m["ds_write2_b32"] = ds_2<4, 1, true>;
		m["ds_write2_b64"] = ds_2<8, 1, true>;
		m["ds_write2st64_b32"] = ds_2<4, 64, true>;
		m["ds_write2st64_b64"] = ds_2<8, 64, true>;
		m["ds_bpermute_b32"] = ds_permute<true>;
		m["ds_permute_b32"] = ds_permute<false>;
		m["ds_swizzle_b32"] = ds_swizzle;
		m["ds_nop"] = [](Exec &, Wave &, const Inst &) { return int(kNext); };
		add_atomics(m);
		return m;
	}();
	return t;
}

}  // namespace

Handler memory_handler(const std::string &name)
{
	auto it = memory_table().find(name);
	return it == memory_table().end() ? nullptr : it->second;
}

}  // namespace kfdemu::shader
