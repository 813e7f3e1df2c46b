// SPDX-License-Identifier: GPL-2.0-only
//
// The shader core's test rig: a fake GPU address space (FakeMemory), code
// objects loaded into it, kernel arguments, one dispatch run to its end,
// and a minimal check/case harness (the program prints "N passed, N
// failed"; it exits 77, NOT RUN, when its code objects were not built).
#pragma once

#include <elf.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "shader/dispatch.h"

namespace kfdemu::shader::test {

// GPU memory as regions of host bytes; a "userptr" region has no host
// bytes (host() refuses it) and is reached through read()/write().
class FakeMemory : public Memory {
public:
	uint64_t map(uint64_t va, size_t size, bool userptr = false, bool readonly = false)
	{
		regions_[va] = Region{std::vector<uint8_t>(size), userptr, readonly};
		return va;
	}
	uint8_t *bytes(uint64_t va)
	{
		Region *r = find(va, 1);
		return r ? &r->data[va - base_of(va)] : nullptr;
	}
	template <class T>
	T *at(uint64_t va) { return reinterpret_cast<T *>(static_cast<void *>(bytes(va))); }

	uint8_t *host(uint64_t va, bool write, uint64_t *len) override
	{
		Region *r = find(va, 1);
		if (!r || r->userptr || (write && r->readonly))
			return nullptr;
		uint64_t off = va - base_of(va);
		*len = r->data.size() - off;
		return &r->data[off];
	}
	int read(uint64_t va, void *dst, size_t n) override
	{
		Region *r = find(va, n);
		if (!r)
			return -14;
		std::memcpy(dst, &r->data[va - base_of(va)], n);
		return 0;
	}
	int write(uint64_t va, const void *src, size_t n) override
	{
		Region *r = find(va, n);
		if (!r || r->readonly)
			return -14;
		std::memcpy(&r->data[va - base_of(va)], src, n);
		return 0;
	}

private:
	struct Region {
		std::vector<uint8_t> data;
		bool userptr = false, readonly = false;
	};
	uint64_t base_of(uint64_t va) const { return std::prev(regions_.upper_bound(va))->first; }
	Region *find(uint64_t va, size_t n)
	{
		auto it = regions_.upper_bound(va);
		if (it == regions_.begin())
			return nullptr;
		--it;
		if (va - it->first + n > it->second.data.size())
			return nullptr;
		return &it->second;
	}
	std::map<uint64_t, Region> regions_;
};

// An AMDGPU ELF code object loaded at `base`: its PT_LOAD segments copied
// in, its symbols' addresses known.
class CodeObject {
public:
	bool load(const std::string &path, FakeMemory &m, uint64_t base)
	{
		std::ifstream f(path, std::ios::binary);
		std::vector<char> e((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
		Elf64_Ehdr eh;
		if (e.size() < sizeof(eh))
			return false;
		std::memcpy(&eh, e.data(), sizeof(eh));
		uint64_t end = 0;
		for (unsigned i = 0; i < eh.e_phnum; i++) {
			Elf64_Phdr ph;
			std::memcpy(&ph, e.data() + eh.e_phoff + i * sizeof(ph), sizeof(ph));
			if (ph.p_type == PT_LOAD)
				end = std::max<uint64_t>(end, ph.p_vaddr + ph.p_memsz);
		}
		m.map(base, (end + 0xfff) & ~0xfffull);
		for (unsigned i = 0; i < eh.e_phnum; i++) {
			Elf64_Phdr ph;
			std::memcpy(&ph, e.data() + eh.e_phoff + i * sizeof(ph), sizeof(ph));
			if (ph.p_type == PT_LOAD)
				std::memcpy(m.bytes(base + ph.p_vaddr), e.data() + ph.p_offset, ph.p_filesz);
		}
		for (unsigned i = 0; i < eh.e_shnum; i++) {
			Elf64_Shdr sh, strs;
			std::memcpy(&sh, e.data() + eh.e_shoff + i * sizeof(sh), sizeof(sh));
			if (sh.sh_type != SHT_SYMTAB)
				continue;
			std::memcpy(&strs, e.data() + eh.e_shoff + sh.sh_link * sizeof(strs), sizeof(strs));
			for (uint64_t k = 0; k < sh.sh_size / sizeof(Elf64_Sym); k++) {
				Elf64_Sym s;
				std::memcpy(&s, e.data() + sh.sh_offset + k * sizeof(s), sizeof(s));
				symbols_[e.data() + strs.sh_offset + s.st_name] = base + s.st_value;
			}
		}
		return true;
	}
	uint64_t symbol(const std::string &name) const
	{
		auto it = symbols_.find(name);
		return it == symbols_.end() ? 0 : it->second;
	}

private:
	std::map<std::string, uint64_t> symbols_;
};

// Kernel arguments laid out at their natural alignment.
class Args {
public:
	template <class T>
	Args &add(T v)
	{
		size_t off = (bytes_.size() + alignof(T) - 1) & ~(alignof(T) - 1);
		bytes_.resize(off + sizeof(T));
		std::memcpy(&bytes_[off], &v, sizeof(T));
		return *this;
	}
	const std::vector<uint8_t> &bytes() const { return bytes_; }

private:
	std::vector<uint8_t> bytes_;
};

struct Grid {
	uint32_t grid[3] = {1, 1, 1};
	uint16_t wg[3] = {1, 1, 1};
	unsigned dims = 1;
};

constexpr uint64_t kKernargVa = 0x7f0000000000ull, kPacketVa = 0x7f1000000000ull;

struct Result {
	Dispatch::Status status;
	std::string why;
	uint64_t fault_va = 0, instructions = 0, lane_ops = 0;
	std::string error;	// start() refused
	SaveSummary saved;	// with cwsr_at: what the save held
};

// Runs `kd` over the grid to its end, `budget` wave-instructions a call.
// With `cwsr_at`, once that many have run the dispatch is saved
// (Dispatch::save), dropped, and a new one resumed from the save
// (Dispatch::resume), as a CRIU pause and a restore do; a save or resume
// that fails ends the run with its reason in `error`.
// With `limit`, a dispatch still Running after that many is left so.
inline Result run(FakeMemory &m, Target t, uint64_t kd, const Grid &g, const Args &args,
		  uint64_t budget = 10000, uint64_t cwsr_at = 0, uint64_t limit = 0)
{
	uint8_t desc[64];
	m.read(kd, desc, sizeof(desc));
	uint32_t group, priv, kernarg_size;
	std::memcpy(&group, desc, 4), std::memcpy(&priv, desc + 4, 4), std::memcpy(&kernarg_size, desc + 8, 4);
	m.map(kKernargVa, std::max<size_t>(kernarg_size, args.bytes().size()) + 256, false, true);
	if (!args.bytes().empty())
		std::memcpy(m.bytes(kKernargVa), args.bytes().data(), args.bytes().size());
	Launch l;
	l.target = t;
	uint16_t setup = static_cast<uint16_t>(g.dims);
	std::memcpy(&l.packet[2], &setup, 2);
	for (unsigned i = 0; i < 3; i++) {
		std::memcpy(&l.packet[4 + 2 * i], &g.wg[i], 2);
		std::memcpy(&l.packet[12 + 4 * i], &g.grid[i], 4);
	}
	std::memcpy(&l.packet[24], &priv, 4), std::memcpy(&l.packet[28], &group, 4);
	std::memcpy(&l.packet[32], &kd, 8);
	uint64_t ka = kKernargVa;
	std::memcpy(&l.packet[40], &ka, 8);
	m.map(kPacketVa, 64, false, true);
	std::memcpy(m.bytes(kPacketVa), l.packet.data(), 64);
	l.packet_va = kPacketVa;
	Result r{};
	auto d = Dispatch::start(l, m, &r.error);
	if (!d) {
		r.status = Dispatch::Status::IllegalInstruction;
		return r;
	}
	if (cwsr_at) {
		while ((r.status = d->run(m, cwsr_at - d->instructions())) == Dispatch::Status::Running &&
		       d->instructions() < cwsr_at) {
		}
		WaveSave save;
		if (!d->save(&save, &r.error) || !Dispatch::describe(save.control, &r.saved))
			return r.error = "save: " + r.error, r;
		d = Dispatch::resume(l, m, save, &r.error);
		if (!d)
			return r.error = "resume: " + r.error, r;
	}
	while ((r.status = d->run(m, budget)) == Dispatch::Status::Running && (!limit || d->instructions() < limit)) {
	}
	r.why = d->why(), r.fault_va = d->fault_va();
	r.instructions = d->instructions(), r.lane_ops = d->lane_ops();
	return r;
}

// binary16 for the f16 checks, written independently of the executor's
// conversions: a half's value, and a value rounded to the nearest binary16
// (ties to even) through frexp/ldexp; NaNs come out as 0x7e00.
inline long double half_value(uint32_t a)
{
	const uint32_t e = a >> 10 & 31, m = a & 0x3ff;
	const long double v = e == 31 ? (m ? NAN : INFINITY)
				      : e ? std::ldexp(1024.0L + m, int(e) - 25) : std::ldexp((long double)m, -24);
	return a & 0x8000 ? -v : v;
}

inline uint32_t to_half(long double v)
{
	const uint32_t sign = std::signbit(v) ? 0x8000 : 0;
	v = std::fabs(v);
	if (std::isnan(v))
		return 0x7e00;
	int e;
	std::frexp(v, &e);  // v = f * 2^e, f in [0.5, 1)
	const int q = std::max(e - 11, -24);  // the quantum: 11 significant bits, or 2^-24
	const long double back = std::ldexp(std::nearbyint(std::ldexp(v, -q)), q);  // ties to even
	if (back >= 65520.0L || std::isinf(v))
		return sign | 0x7c00;
	if (back == 0)
		return sign;
	int e2;
	std::frexp(back, &e2);
	if (e2 - 1 < -14)  // subnormal
		return sign | uint32_t(std::ldexp(back, 24));
	return sign | uint32_t(e2 - 1 + 15) << 10 | (uint32_t(std::ldexp(back, 11 - e2)) & 0x3ff);
}

// --- checks ---------------------------------------------------------------------

struct Cases {
	std::vector<std::pair<std::string, std::function<void()>>> list;
	int failures = 0;
	void add(std::string n, std::function<void()> f) { list.emplace_back(std::move(n), std::move(f)); }
	int run()
	{
		int passed = 0, failed = 0;
		for (auto &[name, f] : list) {
			int before = failures;
			f();
			bool ok = failures == before;
			std::printf("%s %s\n", ok ? "PASS" : "FAIL", name.c_str());
			(ok ? passed : failed)++;
		}
		std::printf("%d passed, %d failed\n", passed, failed);
		return failed ? 1 : 0;
	}
};

inline Cases &cases()
{
	static Cases c;
	return c;
}

#define SHADER_CHECK(cond, ...)                                                      \
	do {                                                                         \
		if (!(cond)) {                                                       \
			std::printf("  %s:%d: %s: ", __FILE__, __LINE__, #cond);     \
			std::printf(__VA_ARGS__);                                    \
			std::printf("\n");                                           \
			kfdemu::shader::test::cases().failures++;                    \
		}                                                                    \
	} while (0)

inline const char *status_name(Dispatch::Status s)
{
	static constexpr const char *kNames[] = {"Running", "Done", "VmFault", "IllegalInstruction", "Trap"};
	return kNames[static_cast<int>(s)];
}

}  // namespace kfdemu::shader::test
