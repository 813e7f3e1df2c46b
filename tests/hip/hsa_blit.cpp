// SPDX-License-Identifier: GPL-2.0-only
//
// ROCr's own GPU kernels (its "blit kernels", raw GFX9 code run on an AQL
// queue of the runtime's), reached through the HSA API as a ROCm library
// does, on every GPU of the machine:
//   fill   hsa_amd_memory_fill of VRAM (the Fill kernel) with 4 bytes to
//          3 MiB + 4 at several 4-byte aligned offsets; the words around
//          the range are left untouched;
//   copy   hsa_amd_memory_async_copy VRAM -> VRAM on the same GPU (the
//          CopyAligned kernel; CopyMisaligned when source and destination
//          offsets differ modulo 4), 1 MiB and more, aligned and not.
// Results are read back with the runtime's SDMA copies (what tests/rocm's
// hsa_copy already checks) and compared with the CPU's.
//   hsa_blit [--list] [--case NAME]...
#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>

#include "testkit.h"

namespace {

using hiptest::step;

#define HSA_CHECK(expr)                                                                          \
	do {                                                                                     \
		hsa_status_t s_ = (expr);                                                        \
		if (s_ != HSA_STATUS_SUCCESS) {                                                  \
			const char *m_ = nullptr;                                                \
			hsa_status_string(s_, &m_);                                              \
			::hiptest::fail("%s:%d: %s -> 0x%x %s", __FILE__, __LINE__, #expr,       \
					unsigned(s_), m_ ? m_ : "");                             \
		}                                                                                \
	} while (0)

struct Gpu {
	hsa_agent_t agent{};
	hsa_amd_memory_pool_t vram{};
	bool have_vram = false;
	std::string name;
};

struct Machine {
	hsa_agent_t cpu{};
	hsa_amd_memory_pool_t sys{};
	bool have_cpu = false, have_sys = false;
	std::vector<Gpu> gpus;
};

// The first global pool the runtime may allocate from, of the wanted grain.
hsa_status_t pick_pool(hsa_amd_memory_pool_t pool, void *data)
{
	auto *want = static_cast<std::pair<uint32_t, std::pair<hsa_amd_memory_pool_t, bool> *> *>(data);
	hsa_amd_segment_t seg;
	bool alloc = false;
	uint32_t flags = 0;
	HSA_CHECK(hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_SEGMENT, &seg));
	HSA_CHECK(hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED, &alloc));
	HSA_CHECK(hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS, &flags));
	if (seg == HSA_AMD_SEGMENT_GLOBAL && alloc && (flags & want->first) && !want->second->second)
		*want->second = {pool, true};
	return HSA_STATUS_SUCCESS;
}

hsa_status_t add_agent(hsa_agent_t agent, void *data)
{
	auto *m = static_cast<Machine *>(data);
	hsa_device_type_t type;
	HSA_CHECK(hsa_agent_get_info(agent, HSA_AGENT_INFO_DEVICE, &type));
	std::pair<hsa_amd_memory_pool_t, bool> found{};
	if (type == HSA_DEVICE_TYPE_CPU && !m->have_cpu) {
		std::pair<uint32_t, std::pair<hsa_amd_memory_pool_t, bool> *> want{
			HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED, &found};
		HSA_CHECK(hsa_amd_agent_iterate_memory_pools(agent, pick_pool, &want));
		m->cpu = agent;
		m->have_cpu = true;
		m->sys = found.first;
		m->have_sys = found.second;
	} else if (type == HSA_DEVICE_TYPE_GPU) {
		std::pair<uint32_t, std::pair<hsa_amd_memory_pool_t, bool> *> want{
			HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED, &found};
		HSA_CHECK(hsa_amd_agent_iterate_memory_pools(agent, pick_pool, &want));
		char name[64] = {};
		HSA_CHECK(hsa_agent_get_info(agent, HSA_AGENT_INFO_NAME, name));
		m->gpus.push_back({agent, found.first, found.second, name});
	}
	return HSA_STATUS_SUCCESS;
}

struct PoolMem {
	void *p = nullptr;
	PoolMem(const Machine &m, hsa_amd_memory_pool_t pool, size_t n)
	{
		HSA_CHECK(hsa_amd_memory_pool_allocate(pool, n, 0, &p));
		std::vector<hsa_agent_t> all{m.cpu};
		for (const Gpu &g : m.gpus)
			all.push_back(g.agent);
		HSA_CHECK(hsa_amd_agents_allow_access(uint32_t(all.size()), all.data(), nullptr, p));
	}
	~PoolMem() { hsa_amd_memory_pool_free(p); }
	PoolMem(const PoolMem &) = delete;
	PoolMem &operator=(const PoolMem &) = delete;
	uint8_t *b() const { return static_cast<uint8_t *>(p); }
};

struct Signal {
	hsa_signal_t s{};
	Signal() { HSA_CHECK(hsa_signal_create(1, 0, nullptr, &s)); }
	~Signal() { hsa_signal_destroy(s); }
	Signal(const Signal &) = delete;
	Signal &operator=(const Signal &) = delete;
	void wait() const
	{
		while (hsa_signal_wait_scacquire(s, HSA_SIGNAL_CONDITION_LT, 1, UINT64_MAX, HSA_WAIT_STATE_BLOCKED) >= 1) {
		}
	}
};

// dst <- src (n bytes) by hsa_amd_memory_async_copy, waited for; `what`
// names the step for the watchdog.
void copy(const std::string &what, void *dst, hsa_agent_t dst_agent, const void *src, hsa_agent_t src_agent, size_t n)
{
	step(what);
	Signal done;
	HSA_CHECK(hsa_amd_memory_async_copy(dst, dst_agent, src, src_agent, n, 0, nullptr, done.s));
	done.wait();
}

const size_t kMax = (3u << 20) + 64;

void fill_on(const Machine &m, const Gpu &g)
{
	PoolMem vram(m, g.vram, kMax), host(m, m.sys, kMax);
	std::vector<uint32_t> want(kMax / 4);
	const size_t counts[] = {1, 3, 64, 1000, (1u << 18) + 1, (3u << 20) / 4 + 1};
	int round = 0;
	for (size_t count : counts)
		for (size_t off : {size_t(0), size_t(4), size_t(12)}) {
			const uint32_t v = 0x01020304u * uint32_t(++round);
			const std::string what = g.name + ": hsa_amd_memory_fill of " + std::to_string(count) +
						 " words at byte offset " + std::to_string(off);
			std::fill(want.begin(), want.end(), 0xdeadbeefu);
			std::memcpy(host.p, want.data(), kMax);
			copy(what + " (setup)", vram.p, g.agent, host.p, m.cpu, kMax);
			step(what);
			HSA_CHECK(hsa_amd_memory_fill(vram.b() + off, v, count));
			std::fill(want.begin() + long(off / 4), want.begin() + long(off / 4 + count), v);
			copy(what + " (read back)", host.p, m.cpu, vram.p, g.agent, kMax);
			hiptest::expect_equal(what.c_str(), want.data(), static_cast<const uint32_t *>(host.p), kMax / 4);
		}
}

void copy_on(const Machine &m, const Gpu &g)
{
	const size_t n_max = (2u << 20) + 8;
	PoolMem a(m, g.vram, n_max + 64), b(m, g.vram, n_max + 64), host(m, m.sys, n_max + 64);
	std::vector<uint8_t> src(n_max + 64), fill(n_max + 64, 0xa5);
	struct Shape {
		size_t n, src_off, dst_off;
	};
	for (Shape s : {Shape{1u << 20, 0, 0}, Shape{(2u << 20) + 8, 16, 48}, Shape{(1u << 20) + 3, 4, 8},
			Shape{(1u << 20) + 5, 1, 6}}) {
		const std::string what = g.name + ": VRAM -> VRAM copy of " + std::to_string(s.n) + " bytes, offsets " +
					 std::to_string(s.src_off) + " -> " + std::to_string(s.dst_off);
		testcommon::fill_pattern(src.data(), src.size(), s.n);
		std::memcpy(host.p, src.data(), src.size());
		copy(what + " (upload)", a.p, g.agent, host.p, m.cpu, src.size());
		std::memcpy(host.p, fill.data(), fill.size());
		copy(what + " (clear the destination)", b.p, g.agent, host.p, m.cpu, fill.size());
		copy(what, b.b() + s.dst_off, g.agent, a.b() + s.src_off, g.agent, s.n);
		copy(what + " (read back)", host.p, m.cpu, b.p, g.agent, fill.size());
		std::vector<uint8_t> want = fill;
		std::memcpy(want.data() + s.dst_off, src.data() + s.src_off, s.n);
		hiptest::expect_equal(what.c_str(), want.data(), host.b(), want.size());
	}
}

} // namespace

int main(int argc, char **argv)
{
	Machine m;
	bool started = false;
	auto init = [&m, &started] {
		step("hsa_init", hiptest::kInitSeconds);
		hsa_status_t s = hsa_init();
		if (s == HSA_STATUS_ERROR_OUT_OF_RESOURCES)
			hiptest::not_run("hsa_init found no GPU (HSA_STATUS_ERROR_OUT_OF_RESOURCES)");
		HSA_CHECK(s);
		started = true;
		step("hsa_iterate_agents");
		HSA_CHECK(hsa_iterate_agents(add_agent, &m));
		if (!m.have_cpu || !m.have_sys || m.gpus.empty())
			hiptest::not_run("no GPU agent with its memory pools");
		for (const Gpu &g : m.gpus)
			if (!g.have_vram)
				hiptest::fail("%s: no coarse-grained VRAM pool", g.name.c_str());
	};
	auto each = [&m](void (*fn)(const Machine &, const Gpu &)) {
		return [&m, fn] {
			for (const Gpu &g : m.gpus)
				fn(m, g);
		};
	};
	int rc = hiptest::run_cases(argc, argv, init, {{"fill", each(fill_on)}, {"copy", each(copy_on)}});
	if (started)
		HSA_CHECK(hsa_shut_down());
	return rc;
}
