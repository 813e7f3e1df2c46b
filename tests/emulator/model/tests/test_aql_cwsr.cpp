// SPDX-License-Identifier: GPL-2.0-only
// CWSR on AQL queues (aql_queue.cpp's aql_cwsr_save/resume, the layout in
// shader/cwsr.cpp): a long kernel dispatch (64 workgroups of 4 waves, loops,
// LDS exchanged across waves between barriers, private memory carried from
// round to round, divergent EXEC)
// paused by CRIU mid-flight has its waves saved into the queue's control
// stack and CWSR area (their private memory too); checkpointed, the process
// torn down, restored on another GPU id in a fresh model, it resumes them and finishes with the
// result of an uninterrupted run, bit for bit (the CPU's), then runs the
// packet queued behind it. Also: the same pause ended by UNPAUSE, and a
// dispatch whose waves do not fit the CWSR area refused at CHECKPOINT, and a
// damaged control stack stopping the restored queue with an error naming it.
#include "harness.h"
#include "shader/dispatch.h"
#include "shader/state.h"

#include <criterion/criterion.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

using namespace kfdemu;
using namespace kfdemu::testing;
using namespace kfdemu::abi::kfd;

namespace {

constexpr uint32_t S0 = 0x1111, D0 = 0x3333; // source and destination gpu_ids
constexpr uint32_t kSlots = 16;
constexpr uint16_t kInvalid = 1, kDispatch = 2, kAnd = 3;
constexpr uint32_t kGroups = 64, kGroupSize = 256, kItems = kGroups * kGroupSize;
constexpr uint32_t kOuter = 16, kInner = 64;
constexpr uint32_t kCtlStack = 0x1000, kCwsr = 1u << 20;
constexpr uint32_t kPrivate = 16; // private segment bytes per work-item

// The kernel (gfx908 and gfx90a alike; llvm-mc-15's encoding of), one
// work-item per output, x = gid * 0x9e3779b1, then kOuter times:
//   x = x * 0x19660d + 0x3c6ef35f + i for i in 0..kInner-1 (s8 the counter)
//   lds[lid] = x; s_barrier; y = lds[(lid + 1) & 255]; s_barrier
//   x ^= y; x += p; p = x (p: a dword of the lane's private memory, 0 at
//   first); v7 = x; if (lid < 80) x += outer; x = v7 + x + 0x101
// and out[gid] = x (kernarg 0: out; s2 the workgroup id, v0 the lane's id):
//   s_load_dwordx2 s[4:5], s[0:1], 0x0 / s_mov_b32 s6, 0x9e3779b1
//   s_mov_b32 s9, 0x19660d / s_mov_b32 s10, 0x3c6ef35f / s_waitcnt lgkmcnt(0)
//   s_lshl_b32 s3, s2, 8 / v_add_u32 v1, s3, v0 / v_mul_lo_u32 v2, v1, s6
//   v_lshlrev_b32 v3, 2, v0 / v_add_u32 v4, 1, v0 / v_and_b32 v4, 0xff, v4
//   v_lshlrev_b32 v4, 2, v4 / v_mov_b32 v9, 0 / s_mov_b32 s7, 0
// outer: s_mov_b32 s8, 0
// inner: v_mul_lo_u32 v2, v2, s9 / v_add_u32 v2, s10, v2 / v_add_u32 v2, s8, v2
//   s_add_u32 s8, s8, 1 / s_cmp_lt_u32 s8, 64 / s_cbranch_scc1 inner
//   ds_write_b32 v3, v2 / s_waitcnt lgkmcnt(0) / s_barrier / ds_read_b32 v5, v4
//   s_waitcnt lgkmcnt(0) / s_barrier / v_xor_b32 v2, v2, v5
//   scratch_load_dword v8, v9, off / s_waitcnt vmcnt(0) / v_add_u32 v2, v8, v2
//   scratch_store_dword v9, v2, off
//   v_mov_b32 v7, v2 / v_cmp_gt_u32 vcc, 0x50, v0
//   s_and_saveexec_b64 s[12:13], vcc / v_add_u32 v2, s7, v2
//   s_or_b64 exec, exec, s[12:13] / v_mov_b32 v6, v7
//   v_add_u32 v2, v6, v2 / v_add_u32 v2, 0x101, v2 / s_add_u32 s7, s7, 1
//   s_cmp_lt_u32 s7, 16 / s_cbranch_scc1 outer
//   v_lshlrev_b32 v6, 2, v1 / global_store_dword v6, v2, s[4:5] / s_endpgm
constexpr uint32_t kKernel[] = {
	0xc0060100, 0x00000000, 0xbe8600ff, 0x9e3779b1, 0xbe8900ff, 0x0019660d, 0xbe8a00ff, 0x3c6ef35f, 0xbf8cc07f,
	0x8e038802, 0x68020003, 0xd2850002, 0x00000d01, 0x24060082, 0x68080081, 0x260808ff, 0x000000ff, 0x24080882,
	0x7e120280, 0xbe870080, 0xbe880080, 0xd2850002, 0x00001302, 0x6804040a, 0x68040408, 0x80088108, 0xbf0ac008,
	0xbf85fff9, 0xd81a0000, 0x00000203, 0xbf8cc07f, 0xbf8a0000, 0xd86c0000, 0x05000004, 0xbf8cc07f, 0xbf8a0000,
	0x2a040b02, 0xdc504000, 0x087f0009, 0xbf8c0f70, 0x68040508, 0xdc704000, 0x007f0209, 0x7e0e0302, 0x7d9800ff,
	0x00000050, 0xbe8c206a, 0x68040407, 0x87fe0c7e, 0x7e0c0307, 0x68040506, 0x680404ff, 0x00000101, 0x80078107,
	0xbf0a9007, 0xbf85ffdc, 0x240c0282, 0xdc708000, 0x00040206, 0xbf810000};

// What the kernel computes, on the CPU.
std::vector<uint32_t> reference()
{
	std::vector<uint32_t> x(kItems), priv(kItems);
	for (uint32_t g = 0; g < kItems; ++g)
		x[g] = g * 0x9e3779b1u;
	for (uint32_t o = 0; o < kOuter; ++o) {
		for (uint32_t &v : x)
			for (uint32_t i = 0; i < kInner; ++i)
				v = v * 0x19660du + 0x3c6ef35fu + i;
		std::vector<uint32_t> lds = x;
		for (uint32_t g = 0; g < kItems; ++g) {
			const uint32_t lid = g % kGroupSize, base = g - lid;
			const uint32_t a1 = (x[g] ^ lds[base + (lid + 1) % kGroupSize]) + priv[g];
			priv[g] = a1;
			x[g] = a1 + (lid < 80 ? a1 + o : a1) + 0x101;
		}
	}
	return x;
}

uint64_t addr(const void *p) { return reinterpret_cast<uint64_t>(p); }

// The process memory the queue and the kernel live in (a userptr BO).
struct alignas(4096) Host {
	uint8_t ring[kSlots * 64];
	alignas(64) uint8_t amd_queue[256]; // amd_queue_t, by offset
	alignas(256) uint8_t kernel[512];   // kernel descriptor, code at +64
	uint64_t kernarg[2];
	alignas(64) int64_t signal[8];	    // amd_signal_t: kind, value, ...
	uint32_t out[kItems];
	alignas(4096) uint8_t cwsr[kCwsr]; // the queue's CWSR area
};

template <typename T> void put(uint8_t *p, T v) { std::memcpy(p, &v, sizeof v); }

// One process with an AQL queue on `gpu` whose CWSR area is
// `cwsr_size` bytes of h->cwsr.
struct Proc {
	Rig rig;
	FakeCaller app;
	FakeCaller dumper{500, true};
	int kfd = -1, render = -1;
	Host *h;
	volatile uint64_t *doorbell = nullptr;

	Proc(Host *host, uint32_t gpu, pid_t pid) : rig(make_machine({gpu})), app(pid, true), h(host)
	{
		dumper.traced.insert(pid);
		kfd = rig.open_kfd(app);
		render = rig.open_render(app, 128);
	}
	void acquire(uint32_t gpu)
	{
		AcquireVm av{static_cast<uint32_t>(render), gpu};
		cr_assert_eq(rig.kfd(app, kfd, ACQUIRE_VM, &av, abi::kIocWrite), 0);
	}
	uint64_t queues_field(const char *field)
	{
		const std::string q = rig.model->introspect("queues " + std::to_string(app.id_.tgid));
		const std::string key = std::string("\"") + field + "\":";
		const size_t at = q.find(key);
		return at == std::string::npos ? 0 : std::stoull(q.substr(at + key.size()));
	}
	long criu(CriuArgs &a) { return rig.kfd(dumper, kfd, CRIU_OP, &a); }
	// GET_QUEUE_WAVE_STATE of queue 0: the used sizes and the control
	// stack's used bytes (GFX 9 copies them behind the header).
	std::vector<uint8_t> wave_state(GetQueueWaveState *w)
	{
		std::vector<uint8_t> buf(kCtlStack);
		*w = GetQueueWaveState{addr(buf.data()), 0, 0, 0, 0};
		cr_assert_eq(rig.kfd(app, kfd, GET_QUEUE_WAVE_STATE, w), 0);
		return {buf.begin() + (kCtlStack - w->ctl_stack_used_size), buf.end()};
	}
};

Host *new_host()
{
	auto *h = static_cast<Host *>(aligned_alloc(4096, sizeof(Host)));
	std::memset(static_cast<void *>(h), 0, sizeof(Host));
	for (uint32_t i = 0; i < kSlots; ++i)
		put<uint16_t>(h->ring + 64 * i, kInvalid);
	put<uint32_t>(h->amd_queue + 136, 128); // read_dispatch_id_field_base_byte_offset
	// Kernel descriptor: group segment, entry at +64, 12 VGPRs (RSRC1), two
	// user SGPRs and the workgroup id x (RSRC2), the kernarg pointer.
	put<uint32_t>(h->kernel, 1024);
	put<int64_t>(h->kernel + 16, 64);
	put<uint32_t>(h->kernel + 48, 2);
	put<uint32_t>(h->kernel + 52, 2u << 1 | 1u << 7);
	put<uint16_t>(h->kernel + 56, 1u << 3);
	std::memcpy(h->kernel + 64, kKernel, sizeof kKernel);
	h->kernarg[0] = addr(h->out);
	h->signal[0] = 1, h->signal[1] = 2; // kind, value: two packets complete it
	// The dispatch (barrier bit, system fences), then a barrier-AND behind it.
	uint8_t *d = h->ring;
	put<uint16_t>(d + 2, 1);
	put<uint16_t>(d + 4, kGroupSize), put<uint16_t>(d + 6, 1), put<uint16_t>(d + 8, 1);
	put<uint32_t>(d + 12, kItems), put<uint32_t>(d + 16, 1), put<uint32_t>(d + 20, 1);
	put<uint32_t>(d + 24, kPrivate), put<uint32_t>(d + 28, 1024);
	put<uint64_t>(d + 32, addr(h->kernel)), put<uint64_t>(d + 40, addr(h->kernarg));
	put<uint64_t>(d + 56, addr(h->signal));
	put<uint64_t>(h->ring + 64 + 56, addr(h->signal));
	return h;
}

// The source process: the host block registered, the queue made, both
// packets' headers written and the doorbell rung.
std::unique_ptr<Proc> start(Host *h, uint32_t cwsr_size)
{
	auto p = std::make_unique<Proc>(h, S0, 1000);
	p->acquire(S0);
	AllocMemoryOfGpu a{addr(h), sizeof(Host), 0, addr(h), S0, ALLOC_USERPTR | ALLOC_WRITABLE};
	cr_assert_eq(p->rig.kfd(p->app, p->kfd, ALLOC_MEMORY_OF_GPU, &a), 0);
	uint32_t id = S0;
	MapMemoryToGpu m{a.handle, addr(&id), 1, 0};
	cr_assert_eq(p->rig.kfd(p->app, p->kfd, MAP_MEMORY_TO_GPU, &m), 0);
	CreateQueue q{};
	q.ring_base_address = addr(h->ring);
	q.ring_size = sizeof h->ring;
	q.write_pointer_address = addr(h->amd_queue + 56);
	q.read_pointer_address = addr(h->amd_queue + 128);
	q.gpu_id = S0;
	q.queue_type = QUEUE_COMPUTE_AQL;
	q.queue_percentage = 100;
	q.ctx_save_restore_address = addr(h->cwsr);
	q.ctx_save_restore_size = cwsr_size;
	q.ctl_stack_size = kCtlStack;
	cr_assert_eq(p->rig.kfd(p->app, p->kfd, CREATE_QUEUE, &q), 0);
	p->doorbell = p->rig.map_doorbell(p->app, p->kfd, q.doorbell_offset);
	cr_assert_not_null(p->doorbell);
	const uint16_t header = 1u << 8 | 2u << 9 | 2u << 11;
	std::atomic_ref<uint16_t>(*reinterpret_cast<uint16_t *>(h->ring)).store(kDispatch | header);
	std::atomic_ref<uint16_t>(*reinterpret_cast<uint16_t *>(h->ring + 64)).store(kAnd | header);
	std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t *>(h->amd_queue + 56)).store(2);
	*p->doorbell = 1;
	return p;
}

uint64_t read_index(Host *h) { return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t *>(h->amd_queue + 128)).load(); }

bool wait_done(Host *h, int ms = 60000)
{
	auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
	while (read_index(h) < 2 || std::atomic_ref<int64_t>(h->signal[1]).load() != 0) {
		if (std::chrono::steady_clock::now() >= end)
			return false;
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
	}
	return true;
}

// Pauses `p` (CRIU PROCESS_INFO) once its dispatch has run `at` of its
// roughly 1.7 M wave-instructions; the PROCESS_INFO answer.
CriuArgs pause_mid_flight(Proc &p, uint64_t at = 250000)
{
	for (int i = 0; i < 60000 && p.queues_field("instructions") < at; ++i)
		std::this_thread::sleep_for(std::chrono::microseconds(500));
	CriuArgs info{};
	info.op = CRIU_PROCESS_INFO;
	cr_assert_eq(p.criu(info), 0);
	return info;
}

// CRIU CHECKPOINT after the PROCESS_INFO answer `info`, into buffers of
// the sizes it gave.
struct Checkpoint {
	std::vector<CriuDeviceBucket> devs;
	std::vector<CriuBoBucket> bos;
	std::vector<uint8_t> priv;
	CriuArgs args;

	explicit Checkpoint(const CriuArgs &info)
		: devs(info.num_devices), bos(info.num_bos), priv(info.priv_data_size), args(info)
	{
		args.op = CRIU_CHECKPOINT;
		args.devices = addr(devs.data()), args.bos = addr(bos.data()), args.priv_data = addr(priv.data());
	}
	long run(Proc &p) { return p.criu(args); }
};

// The saved control stack: waves and workgroups done mid-grid.
shader::SaveSummary check_saved_mid_flight(Proc &p)
{
	GetQueueWaveState w{};
	const std::vector<uint8_t> stack = p.wave_state(&w);
	shader::SaveSummary s;
	cr_assert(shader::Dispatch::describe(stack, &s), "a saved dispatch in the control stack (%u bytes)",
		  w.ctl_stack_used_size);
	cr_assert_eq(s.groups, kGroups);
	cr_assert(s.waves == shader::kGroupsInFlight * kGroupSize / 64 && s.groups_done > 0 &&
			  s.groups_done + shader::kGroupsInFlight < kGroups,
		  "mid-flight: %u waves saved, %llu of %llu workgroups done", s.waves,
		  static_cast<unsigned long long>(s.groups_done), static_cast<unsigned long long>(s.groups));
	cr_assert_eq(w.save_area_used_size, s.area_bytes);
	cr_assert_gt(s.area_bytes, 4u * (12 * 256 + 64 * kPrivate) + 1024,
		     "each wave's 12 VGPRs and private memory, and the LDS");
	return s;
}

void check_result(Host *h)
{
	const std::vector<uint32_t> want = reference();
	for (uint32_t i = 0; i < kItems; ++i)
		cr_assert_eq(h->out[i], want[i], "out[%u] = %#x, the uninterrupted result is %#x", i, h->out[i], want[i]);
}

// The source paused mid-flight and checkpointed, its process torn down and
// its memory put back as CRIU restores it (the plugin dumped it as BO
// contents), then RESTORE (its private data through `tamper` first) and
// RESUME in a fresh model on another gpu_id.
std::unique_ptr<Proc> checkpoint_and_restore(Host *h, void (*tamper)(std::vector<uint8_t> &) = nullptr)
{
	auto src = start(h, kCwsr);
	CriuArgs info = pause_mid_flight(*src);
	const uint64_t paused_at = src->queues_field("instructions");
	check_saved_mid_flight(*src);
	std::this_thread::sleep_for(std::chrono::milliseconds(30));
	cr_assert_eq(src->queues_field("instructions"), paused_at, "no wave runs while paused");
	cr_assert_eq(read_index(h), 0u);

	Checkpoint ck(info);
	cr_assert_eq(ck.run(*src), 0, "the saved dispatch is checkpointed");
	std::vector<CriuBoBucket> &bos = ck.bos;
	std::vector<uint8_t> &priv = ck.priv;
	std::vector<uint8_t> image(reinterpret_cast<uint8_t *>(h), reinterpret_cast<uint8_t *>(h) + sizeof(Host));
	src.reset(); // the source process and its GPU are gone
	std::memset(static_cast<void *>(h), 0xa5, sizeof(Host));
	std::memcpy(static_cast<void *>(h), image.data(), image.size());
	if (tamper)
		tamper(priv);

	auto dst = std::make_unique<Proc>(h, D0, 2000);
	CriuDeviceBucket dev{S0, D0, static_cast<uint32_t>(dst->render), 0};
	CriuArgs r{};
	r.op = CRIU_RESTORE;
	r.devices = addr(&dev), r.num_devices = 1;
	r.bos = addr(bos.data()), r.num_bos = info.num_bos;
	r.priv_data = addr(priv.data()), r.priv_data_size = priv.size();
	r.num_objects = info.num_objects;
	const long restored = dst->rig.kfd(dst->app, dst->kfd, CRIU_OP, &r);
	cr_assert_eq(restored, 0, "RESTORE: %ld", restored);
	FakeCaller master(1, true);
	const int mk = dst->rig.open_kfd(master);
	master.alive.insert(2000);
	CriuArgs resume{};
	resume.op = CRIU_RESUME;
	resume.pid = 2000;
	cr_assert_eq(dst->rig.kfd(master, mk, CRIU_OP, &resume), 0);
	return dst;
}

} // namespace

Test(aql_cwsr, an_uninterrupted_run_computes_the_cpus_result)
{
	Host *h = new_host();
	auto p = start(h, kCwsr);
	cr_assert(wait_done(h), "the dispatch and the barrier behind it complete");
	check_result(h);
	p.reset();
	free(h);
}

Test(aql_cwsr, waves_saved_mid_flight_resume_after_a_restore_on_another_gpu)
{
	Host *h = new_host();
	auto dst = checkpoint_and_restore(h);
	cr_assert(wait_done(h), "the restored queue finishes the dispatch and the barrier behind it");
	cr_assert_eq(dst->queues_field("resumes"), 1u, "the restored queue resumed the saved waves");
	cr_assert_eq(dst->queues_field("waves"), shader::kGroupsInFlight * kGroupSize / 64,
		     "the waves of every workgroup in flight");
	check_result(h);
	cr_assert_lt(dst->queues_field("instructions"), 1700000u, "only what was left ran after the restore");
	dst.reset();
	free(h);
}

// A control stack that is not a saved dispatch (its dispatch entry's magic
// changed in the private data: the last bytes of the queue's stack are its
// wave entries, the entry is before them) stops the restored queue with a
// queue error naming it, instead of running from a wrong state.
Test(aql_cwsr, a_damaged_control_stack_stops_the_restored_queue_named)
{
	Host *h = new_host();
	auto dst = checkpoint_and_restore(h, [](std::vector<uint8_t> &priv) {
		const uint8_t magic[] = {'C', 'W', 'S', 'R'};
		auto at = std::search(priv.begin(), priv.end(), std::begin(magic), std::end(magic));
		cr_assert(at != priv.end(), "the saved control stack is in the private data");
		*at = 'X';
	});
	auto queues = [&] { return dst->rig.model->introspect("queues 2000"); };
	for (int i = 0; i < 5000 && queues().find("\"hung\":true") == std::string::npos; ++i)
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
	const std::string q = queues();
	cr_assert(q.find("\"hung\":true") != std::string::npos &&
			  q.find("saved waves cannot be resumed: control stack: not a saved dispatch") != std::string::npos,
		  "%s", q.c_str());
	cr_assert_eq(read_index(h), 0u, "nothing ran");
	dst.reset();
	free(h);
}

Test(aql_cwsr, waves_saved_at_a_pause_resume_after_unpause)
{
	Host *h = new_host();
	auto p = start(h, kCwsr);
	pause_mid_flight(*p);
	check_saved_mid_flight(*p);
	CriuArgs u{};
	u.op = CRIU_UNPAUSE;
	cr_assert_eq(p->criu(u), 0);
	cr_assert(wait_done(h));
	check_result(h);
	CriuArgs again{};
	again.op = CRIU_PROCESS_INFO;
	cr_assert_eq(p->criu(again), 0);
	GetQueueWaveState w{};
	p->wave_state(&w);
	cr_assert(w.ctl_stack_used_size == 0 && w.save_area_used_size == 0, "nothing saved once resumed");
	p.reset();
	free(h);
}

Test(aql_cwsr, waves_that_do_not_fit_the_cwsr_area_are_refused_at_checkpoint)
{
	Host *h = new_host();
	auto p = start(h, kCtlStack + 4096); // room for the control stack, not the waves
	CriuArgs info = pause_mid_flight(*p, 1000);
	GetQueueWaveState w{};
	p->wave_state(&w);
	cr_assert_eq(w.ctl_stack_used_size, 0u, "not saved");
	cr_assert_eq(Checkpoint(info).run(*p), -EBUSY);
	CriuArgs u{};
	u.op = CRIU_UNPAUSE;
	cr_assert_eq(p->criu(u), 0);
	cr_assert(wait_done(h), "kept in the shader core, the dispatch goes on after UNPAUSE");
	check_result(h);
	p.reset();
	free(h);
}
