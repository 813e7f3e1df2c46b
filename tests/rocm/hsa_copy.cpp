// SPDX-License-Identifier: GPL-2.0-only
//
// An HSA program that uses Debian's ROCm runtime (libhsa-runtime64 5.2) as
// a training job's data loader would: it finds the agents and their memory
// pools, allocates system and VRAM buffers, grants access, creates an AQL
// queue per GPU, and moves data with hsa_amd_memory_async_copy over the
// runtime's SDMA queues: host -> VRAM -> host on every GPU (chained by a
// dependency signal), several copies in flight at once, and VRAM -> VRAM
// between GPUs. Every result is compared byte for byte with what was sent.
//
//   hsa_copy [--gpus N] [--isa NAME].. [--rounds R] [--size BYTES]..
//            [--stream N --progress FILE [--gate GATE]]
//
// --gpus/--isa: the agents the machine must show (gfx names in order).
// --stream N: N rounds of copies back to back, appending "round K ok" to
// FILE after each verified round (a checkpoint harness watches it).
// --gate GATE: the stream goes on after its N rounds until the file GATE
// exists (at most 10 minutes), then ends after the round in progress: a
// checkpoint harness decides when it ends, whatever the machine's speed,
// and can look at the runtime's queues while they still exist.
// Exit 0 when every copy verified, 1 on a mismatch or error, 2 on usage.
// A copy that does not complete within 60 s is an error (no hang).
#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "testcommon/pattern.h"

namespace {

int g_failures = 0;

#define CHECK_HSA(expr)                                                                          \
	do {                                                                                     \
		hsa_status_t s_ = (expr);                                                        \
		if (s_ != HSA_STATUS_SUCCESS) {                                                  \
			const char *m_ = nullptr;                                                \
			hsa_status_string(s_, &m_);                                              \
			std::fprintf(stderr, "FAIL %s:%d: %s -> 0x%x %s\n", __FILE__, __LINE__, #expr, \
				     unsigned(s_), m_ ? m_ : "");                                \
			std::exit(1);                                                            \
		}                                                                                \
	} while (0)

struct Gpu {
	hsa_agent_t agent{};
	std::string name;
	uint32_t node = 0;
	hsa_amd_memory_pool_t vram{};
	size_t vram_size = 0;
	bool have_vram = false;
};

struct Machine {
	hsa_agent_t cpu{};
	bool have_cpu = false;
	hsa_amd_memory_pool_t sys{};
	bool have_sys = false;
	std::vector<Gpu> gpus;
};

hsa_status_t find_pools(hsa_amd_memory_pool_t pool, void *data)
{
	auto *out = static_cast<std::pair<Machine *, Gpu *> *>(data);
	hsa_amd_segment_t seg;
	CHECK_HSA(hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_SEGMENT, &seg));
	if (seg != HSA_AMD_SEGMENT_GLOBAL)
		return HSA_STATUS_SUCCESS;
	bool alloc = false;
	CHECK_HSA(hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED, &alloc));
	if (!alloc)
		return HSA_STATUS_SUCCESS;
	uint32_t flags = 0;
	CHECK_HSA(hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS, &flags));
	size_t size = 0;
	CHECK_HSA(hsa_amd_memory_pool_get_info(pool, HSA_AMD_MEMORY_POOL_INFO_SIZE, &size));
	if (Gpu *g = out->second) {
		if ((flags & HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED) && !g->have_vram) {
			g->vram = pool;
			g->vram_size = size;
			g->have_vram = true;
		}
	} else if ((flags & HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED) && !out->first->have_sys) {
		out->first->sys = pool;
		out->first->have_sys = true;
	}
	return HSA_STATUS_SUCCESS;
}

hsa_status_t find_agents(hsa_agent_t agent, void *data)
{
	auto *m = static_cast<Machine *>(data);
	hsa_device_type_t type;
	CHECK_HSA(hsa_agent_get_info(agent, HSA_AGENT_INFO_DEVICE, &type));
	if (type == HSA_DEVICE_TYPE_CPU && !m->have_cpu) {
		m->cpu = agent;
		m->have_cpu = true;
		std::pair<Machine *, Gpu *> ctx{m, nullptr};
		CHECK_HSA(hsa_amd_agent_iterate_memory_pools(agent, find_pools, &ctx));
	} else if (type == HSA_DEVICE_TYPE_GPU) {
		Gpu g;
		g.agent = agent;
		char name[64] = {};
		CHECK_HSA(hsa_agent_get_info(agent, HSA_AGENT_INFO_NAME, name));
		g.name = name;
		CHECK_HSA(hsa_agent_get_info(agent, HSA_AGENT_INFO_NODE, &g.node));
		m->gpus.push_back(g);
		std::pair<Machine *, Gpu *> ctx{m, &m->gpus.back()};
		CHECK_HSA(hsa_amd_agent_iterate_memory_pools(agent, find_pools, &ctx));
	}
	return HSA_STATUS_SUCCESS;
}

// Pool memory, freed with the owner.
struct PoolMem {
	void *p = nullptr;
	size_t size = 0;
	PoolMem(hsa_amd_memory_pool_t pool, size_t n) : size(n) { CHECK_HSA(hsa_amd_memory_pool_allocate(pool, n, 0, &p)); }
	~PoolMem()
	{
		if (p)
			hsa_amd_memory_pool_free(p);
	}
	PoolMem(const PoolMem &) = delete;
	PoolMem &operator=(const PoolMem &) = delete;
	uint8_t *bytes() const { return static_cast<uint8_t *>(p); }
};

struct Signal {
	hsa_signal_t s{};
	explicit Signal(hsa_signal_value_t v = 1) { CHECK_HSA(hsa_signal_create(v, 0, nullptr, &s)); }
	~Signal() { hsa_signal_destroy(s); }
	Signal(const Signal &) = delete;
	Signal &operator=(const Signal &) = delete;
};

uint64_t g_ts_freq = 0;

// Waits until `s` drops below 1; false after 60 s.
bool wait_done(const Signal &sig, const char *what)
{
	auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
	while (std::chrono::steady_clock::now() < deadline) {
		hsa_signal_value_t v = hsa_signal_wait_scacquire(sig.s, HSA_SIGNAL_CONDITION_LT, 1, g_ts_freq,
								 HSA_WAIT_STATE_BLOCKED);
		if (v < 1)
			return true;
	}
	std::fprintf(stderr, "FAIL %s: copy did not complete within 60 s (signal %" PRId64 ")\n", what,
		     int64_t(hsa_signal_load_relaxed(sig.s)));
	++g_failures;
	return false;
}

bool same(const uint8_t *a, const uint8_t *b, size_t n, const std::string &what)
{
	for (size_t i = 0; i < n; ++i)
		if (a[i] != b[i]) {
			std::fprintf(stderr, "FAIL %s: byte %zu of %zu differs (0x%02x, expected 0x%02x)\n", what.c_str(), i,
				     n, b[i], a[i]);
			++g_failures;
			return false;
		}
	return true;
}

void allow(const Machine &m, const void *p)
{
	std::vector<hsa_agent_t> all{m.cpu};
	for (const Gpu &g : m.gpus)
		all.push_back(g.agent);
	CHECK_HSA(hsa_amd_agents_allow_access(uint32_t(all.size()), all.data(), nullptr, p));
}

// host -> VRAM -> host on one GPU, the second copy depending on the first.
void round_trip(const Machine &m, const Gpu &g, size_t n, uint64_t seed)
{
	PoolMem src(m.sys, n), dst(m.sys, n), vram(g.vram, n);
	allow(m, src.p);
	allow(m, dst.p);
	allow(m, vram.p);
	testcommon::fill_pattern(src.bytes(), n, seed);
	std::memset(dst.p, 0, n);
	Signal up, down;
	CHECK_HSA(hsa_amd_memory_async_copy(vram.p, g.agent, src.p, m.cpu, n, 0, nullptr, up.s));
	CHECK_HSA(hsa_amd_memory_async_copy(dst.p, m.cpu, vram.p, g.agent, n, 1, &up.s, down.s));
	const std::string what = g.name + " node " + std::to_string(g.node) + " host->vram->host " + std::to_string(n);
	if (wait_done(down, what.c_str()) && wait_done(up, what.c_str()) && same(src.bytes(), dst.bytes(), n, what))
		std::printf("ok %s\n", what.c_str());
}

// Several copies in flight on one GPU before any is waited for.
void in_flight(const Machine &m, const Gpu &g, size_t n, int count, uint64_t seed)
{
	std::vector<std::unique_ptr<PoolMem>> src, vram, dst;
	std::vector<std::unique_ptr<Signal>> up, down;
	for (int i = 0; i < count; ++i) {
		src.push_back(std::make_unique<PoolMem>(m.sys, n));
		dst.push_back(std::make_unique<PoolMem>(m.sys, n));
		vram.push_back(std::make_unique<PoolMem>(g.vram, n));
		allow(m, src.back()->p);
		allow(m, dst.back()->p);
		allow(m, vram.back()->p);
		testcommon::fill_pattern(src.back()->bytes(), n, seed + uint64_t(i));
		std::memset(dst.back()->p, 0, n);
		up.push_back(std::make_unique<Signal>());
		down.push_back(std::make_unique<Signal>());
	}
	for (int i = 0; i < count; ++i)
		CHECK_HSA(hsa_amd_memory_async_copy(vram[i]->p, g.agent, src[i]->p, m.cpu, n, 0, nullptr, up[i]->s));
	for (int i = 0; i < count; ++i)
		CHECK_HSA(hsa_amd_memory_async_copy(dst[i]->p, m.cpu, vram[i]->p, g.agent, n, 1, &up[i]->s,
						    down[i]->s));
	bool ok = true;
	for (int i = 0; i < count; ++i) {
		const std::string what = g.name + " node " + std::to_string(g.node) + " in flight #" + std::to_string(i);
		ok = wait_done(*down[i], what.c_str()) && same(src[i]->bytes(), dst[i]->bytes(), n, what) && ok;
	}
	if (ok)
		std::printf("ok %s node %u %d copies of %zu in flight\n", g.name.c_str(), g.node, count, n);
}

// VRAM of GPU a -> VRAM of GPU b -> host.
void peer(const Machine &m, const Gpu &a, const Gpu &b, size_t n, uint64_t seed)
{
	PoolMem src(m.sys, n), va(a.vram, n), vb(b.vram, n), dst(m.sys, n);
	allow(m, src.p);
	allow(m, dst.p);
	allow(m, va.p);
	allow(m, vb.p);
	testcommon::fill_pattern(src.bytes(), n, seed);
	std::memset(dst.p, 0, n);
	Signal s1, s2, s3;
	CHECK_HSA(hsa_amd_memory_async_copy(va.p, a.agent, src.p, m.cpu, n, 0, nullptr, s1.s));
	CHECK_HSA(hsa_amd_memory_async_copy(vb.p, b.agent, va.p, a.agent, n, 1, &s1.s, s2.s));
	CHECK_HSA(hsa_amd_memory_async_copy(dst.p, m.cpu, vb.p, b.agent, n, 1, &s2.s, s3.s));
	const std::string what = "node " + std::to_string(a.node) + " vram -> node " + std::to_string(b.node) +
				 " vram " + std::to_string(n);
	if (wait_done(s3, what.c_str()) && same(src.bytes(), dst.bytes(), n, what))
		std::printf("ok %s\n", what.c_str());
}

void usage()
{
	std::fprintf(stderr, "usage: hsa_copy [--gpus N] [--isa NAME].. [--rounds R] [--size BYTES].. "
			     "[--stream N --progress FILE]\n");
	std::exit(2);
}

} // namespace

int main(int argc, char **argv)
{
	int want_gpus = -1, rounds = 1, stream = 0;
	std::vector<std::string> isas;
	std::vector<size_t> sizes;
	std::string progress, gate;
	for (int i = 1; i < argc; ++i) {
		std::string a = argv[i];
		auto next = [&]() -> std::string {
			if (i + 1 >= argc)
				usage();
			return argv[++i];
		};
		if (a == "--gpus")
			want_gpus = std::atoi(next().c_str());
		else if (a == "--isa")
			isas.push_back(next());
		else if (a == "--rounds")
			rounds = std::atoi(next().c_str());
		else if (a == "--size")
			sizes.push_back(std::strtoull(next().c_str(), nullptr, 0));
		else if (a == "--stream")
			stream = std::atoi(next().c_str());
		else if (a == "--progress")
			progress = next();
		else if (a == "--gate")
			gate = next();
		else
			usage();
	}
	if (sizes.empty())
		// A page, an odd size, and one that needs three copy packets
		// (ROCr splits copies at 4 MiB - 32 bytes on SDMA v4).
		sizes = {4096, (1u << 20) + 13, (9u << 20) + 4};
	if (stream && progress.empty())
		usage();
	setvbuf(stdout, nullptr, _IOLBF, 0);

	CHECK_HSA(hsa_init());
	CHECK_HSA(hsa_system_get_info(HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY, &g_ts_freq));
	{
		Machine m;
		CHECK_HSA(hsa_iterate_agents(find_agents, &m));
		if (!m.have_cpu || !m.have_sys) {
			std::fprintf(stderr, "FAIL: no CPU agent with a fine-grained system pool\n");
			return 1;
		}
		for (const Gpu &g : m.gpus)
			std::printf("gpu node %u %s vram %zu\n", g.node, g.name.c_str(), g.vram_size);
		if (want_gpus >= 0 && int(m.gpus.size()) != want_gpus) {
			std::fprintf(stderr, "FAIL: %zu GPU agents, expected %d\n", m.gpus.size(), want_gpus);
			return 1;
		}
		for (size_t i = 0; i < isas.size(); ++i)
			if (i >= m.gpus.size() || m.gpus[i].name != isas[i]) {
				std::fprintf(stderr, "FAIL: GPU %zu is %s, expected %s\n", i,
					     i < m.gpus.size() ? m.gpus[i].name.c_str() : "(none)", isas[i].c_str());
				return 1;
			}
		for (const Gpu &g : m.gpus)
			if (!g.have_vram) {
				std::fprintf(stderr, "FAIL: %s node %u has no VRAM pool\n", g.name.c_str(), g.node);
				return 1;
			}

		// An AQL queue per GPU (created and destroyed; the emulator runs
		// no shaders, so nothing is dispatched to it).
		for (const Gpu &g : m.gpus) {
			hsa_queue_t *q = nullptr;
			CHECK_HSA(hsa_queue_create(g.agent, 64, HSA_QUEUE_TYPE_MULTI, nullptr, nullptr, UINT32_MAX,
						   UINT32_MAX, &q));
			if (q->size != 64 || !q->base_address) {
				std::fprintf(stderr, "FAIL: queue on node %u: size %u\n", g.node, q->size);
				++g_failures;
			}
			CHECK_HSA(hsa_queue_destroy(q));
			std::printf("ok %s node %u queue\n", g.name.c_str(), g.node);
		}

		const int total = stream ? stream : rounds;
		const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(10);
		auto more = [&](int r) {
			if (r < total)
				return true;
			return !gate.empty() && std::ifstream(gate).fail() && std::chrono::steady_clock::now() < give_up;
		};
		for (int r = 0; more(r); ++r) {
			const uint64_t seed = uint64_t(r) * 1000;
			for (const Gpu &g : m.gpus)
				for (size_t n : sizes)
					round_trip(m, g, n, seed + n);
			for (const Gpu &g : m.gpus)
				in_flight(m, g, 256 << 10, 8, seed + 7);
			for (size_t a = 0; a < m.gpus.size(); ++a)
				for (size_t b = 0; b < m.gpus.size(); ++b)
					if (a != b)
						peer(m, m.gpus[a], m.gpus[b], sizes.back(), seed + 31 * a + b);
			if (stream) {
				std::ofstream(progress, std::ios::app) << "round " << r << (g_failures ? " FAIL" : " ok") << "\n";
				if (g_failures)
					break;
			}
		}
	}
	CHECK_HSA(hsa_shut_down());
	if (g_failures) {
		std::printf("%d failure(s)\n", g_failures);
		return 1;
	}
	std::printf("all copies verified\n");
	return 0;
}
