// SPDX-License-Identifier: GPL-2.0-only
// The queue state a client changes after CREATE_QUEUE (kfd_queue.cpp), with
// amdkfd's checks and errnos: UPDATE_QUEUE with a NULL ring makes an SDMA
// queue inactive and giving the ring back runs what was rung meanwhile;
// SET_CU_MASK stores the mask per queue (pairs of CUs from GFX 10 on);
// ALLOC_QUEUE_GWS gives a GPU's GWS to one queue per process;
// GET_QUEUE_WAVE_STATE reads a stopped compute queue's MQD; with the
// machine's queue_size_checks CREATE_QUEUE checks the CWSR sizes as Linux
// 6.12 does. The CRIU
// round trip of these states is in test_criu.cpp.
#include "harness.h"

#include <criterion/criterion.h>

#include <array>
#include <atomic>
#include <chrono>
#include <thread>

using namespace kfdemu;
using namespace kfdemu::testing;
using namespace kfdemu::abi::kfd;

namespace {

constexpr uint32_t G0 = 0x1111;
constexpr uint32_t kRing = 4096;

struct alignas(4096) Host {
	uint8_t ring[kRing];
	uint64_t rptr, wptr;
	uint32_t fence;
	uint8_t pad[4096 - 20];
};

uint64_t addr(const void *p) { return reinterpret_cast<uint64_t>(p); }

// One GPU (`machine`), a process with its VM, its host memory registered
// at its own address (as libhsakmt does) and an SDMA queue on that memory.
struct App {
	Rig rig;
	FakeCaller c{1000};
	int kfd = -1;
	std::unique_ptr<Host> h{new Host{}};
	uint64_t wptr = 0;
	volatile uint64_t *doorbell = nullptr;
	uint32_t sdma = 0;

	explicit App(MachineDesc machine = make_machine({G0})) : rig(std::move(machine))
	{
		kfd = rig.open_kfd(c);
		const int r0 = rig.open_render(c, 128);
		AcquireVm av{static_cast<uint32_t>(r0), G0};
		cr_assert_eq(rig.kfd(c, kfd, ACQUIRE_VM, &av, abi::kIocWrite), 0);
		AllocMemoryOfGpu a{addr(h.get()), sizeof(Host), 0, addr(h.get()), G0, ALLOC_USERPTR | ALLOC_WRITABLE};
		cr_assert_eq(rig.kfd(c, kfd, ALLOC_MEMORY_OF_GPU, &a), 0);
		uint32_t id = G0;
		MapMemoryToGpu m{a.handle, addr(&id), 1, 0};
		cr_assert_eq(rig.kfd(c, kfd, MAP_MEMORY_TO_GPU, &m), 0);
		CreateQueue q = queue_args(QUEUE_SDMA);
		cr_assert_eq(rig.kfd(c, kfd, CREATE_QUEUE, &q), 0);
		sdma = q.queue_id;
		doorbell = rig.map_doorbell(c, kfd, q.doorbell_offset);
		cr_assert_not_null(doorbell);
	}
	CreateQueue queue_args(uint32_t type)
	{
		CreateQueue q{};
		q.ring_base_address = addr(h->ring);
		q.ring_size = kRing;
		q.read_pointer_address = addr(&h->rptr);
		q.write_pointer_address = addr(&h->wptr);
		q.gpu_id = G0;
		q.queue_type = type;
		q.queue_percentage = 100;
		q.queue_priority = 7;
		return q;
	}
	// Another queue (not run: compute queues have no engine here).
	uint32_t new_queue(uint32_t type = QUEUE_COMPUTE_AQL)
	{
		CreateQueue q = queue_args(type);
		cr_assert_eq(rig.kfd(c, kfd, CREATE_QUEUE, &q), 0);
		return q.queue_id;
	}
	long update(uint32_t qid, uint64_t ring, uint32_t size, uint32_t percentage = 100, uint32_t priority = 7)
	{
		UpdateQueue u{ring, qid, size, percentage, priority};
		return rig.kfd(c, kfd, UPDATE_QUEUE, &u, abi::kIocWrite);
	}
	long cu_mask(uint32_t qid, uint32_t bits, const void *mask)
	{
		SetCuMask a{qid, bits, addr(mask)};
		return rig.kfd(c, kfd, SET_CU_MASK, &a, abi::kIocWrite);
	}
	long gws(uint32_t qid, uint32_t num, uint32_t *first = nullptr)
	{
		AllocQueueGws a{qid, num, 0xdead, 0};
		long r = rig.kfd(c, kfd, ALLOC_QUEUE_GWS, &a);
		if (first)
			*first = a.first_gws;
		return r;
	}
	// A FENCE writing `v` to h->fence, and the doorbell.
	void fence_and_ring(uint32_t v)
	{
		const uint64_t va = addr(&h->fence);
		for (uint32_t d : {abi::sdma::OP_FENCE, uint32_t(va), uint32_t(va >> 32), v}) {
			std::memcpy(h->ring + (wptr % kRing), &d, 4);
			wptr += 4;
		}
		std::atomic_ref<uint64_t>(h->wptr).store(wptr);
		*doorbell = wptr;
	}
	uint32_t fence() { return std::atomic_ref<uint32_t>(h->fence).load(); }
	bool wait_fence(uint32_t v, int ms = 5000)
	{
		auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
		while (fence() != v)
			if (std::chrono::steady_clock::now() >= end)
				return false;
			else
				std::this_thread::sleep_for(std::chrono::microseconds(200));
		return true;
	}
	std::string queue_json(uint32_t qid)
	{
		const std::string all = rig.model->introspect("queues 1000");
		const size_t at = all.find("{\"id\":" + std::to_string(qid) + ",");
		cr_assert_neq(at, std::string::npos, "%s", all.c_str());
		const size_t next = all.find(",{\"id\":", at);
		return all.substr(at, next == std::string::npos ? std::string::npos : next - at);
	}
};

bool has(const std::string &json, const std::string &what) { return json.find(what) != std::string::npos; }

// The GPU node of a one-GPU test machine with `key` set to `value`.
MachineDesc machine_with(const char *key, uint64_t value)
{
	MachineDesc m = make_machine({G0});
	for (auto &[k, v] : m.nodes[1].properties)
		if (k == key)
			v = value;
	return m;
}

} // namespace

Test(queue_state, a_null_ring_makes_a_queue_inactive_and_the_ring_given_back_runs_what_was_rung)
{
	App app;
	app.fence_and_ring(1);
	cr_assert(app.wait_fence(1), "an active queue runs its ring");

	cr_assert_eq(app.update(app.sdma, 0, 0), 0, "a NULL ring of size 0 is not an error");
	std::string q = app.queue_json(app.sdma);
	cr_assert(has(q, "\"state\":\"inactive\"") && has(q, "\"ring_size\":1024"),
		  "inactive, the size raised to KFD's minimum: %s", q.c_str());
	app.fence_and_ring(2);
	std::this_thread::sleep_for(std::chrono::milliseconds(50));
	cr_assert_eq(app.fence(), 1u, "an inactive queue runs nothing");
	cr_assert_eq(app.h->rptr, 16u, "and keeps its read pointer");
	q = app.queue_json(app.sdma);
	cr_assert(has(q, "\"hung\":false"), "inactive is not stopped: %s", q.c_str());

	cr_assert_eq(app.update(app.sdma, addr(app.h->ring), kRing), 0);
	cr_assert(app.wait_fence(2), "the packet rung while inactive runs once the ring is back");
	cr_assert(has(app.queue_json(app.sdma), "\"state\":\"active\""));

	// A percentage of 0 deactivates the queue too (QUEUE_IS_ACTIVE).
	cr_assert_eq(app.update(app.sdma, addr(app.h->ring), kRing, 0), 0);
	app.fence_and_ring(3);
	std::this_thread::sleep_for(std::chrono::milliseconds(50));
	cr_assert_eq(app.fence(), 2u);
	cr_assert(has(app.queue_json(app.sdma), "\"percentage\":0,\"state\":\"inactive\""));
	cr_assert_eq(app.update(app.sdma, addr(app.h->ring), kRing, 100), 0);
	cr_assert(app.wait_fence(3));
}

Test(queue_state, update_queue_checks_its_arguments_as_kfd)
{
	App app;
	cr_assert_eq(app.update(app.sdma, addr(app.h->ring), kRing, 101), -EINVAL, "percentage over 100");
	cr_assert_eq(app.update(app.sdma, addr(app.h->ring), kRing, 100, 16), -EINVAL, "priority over 15");
	cr_assert_eq(app.update(app.sdma, 0xffff800000000000ull, kRing), -EFAULT, "ring outside user space");
	cr_assert_eq(app.update(app.sdma, addr(app.h->ring), 3000), -EINVAL, "size not a power of 2");
	cr_assert_eq(app.update(77, addr(app.h->ring), kRing), -EFAULT, "unknown queue: pqm's EFAULT");
	cr_assert_eq(app.update(77, addr(app.h->ring), kRing, 101), -EINVAL, "arguments are checked first");
	// Bits 8-15 of the percentage are the PM4 target XCC, not percent.
	cr_assert_eq(app.update(app.sdma, addr(app.h->ring), kRing, 0x0164), 0);
	cr_assert(has(app.queue_json(app.sdma), "\"percentage\":100,\"state\":\"active\""));
	CreateQueue q = app.queue_args(QUEUE_COMPUTE_AQL);
	q.queue_percentage = 0x0164;
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, CREATE_QUEUE, &q), 0, "CREATE_QUEUE masks the XCC bits too");
}

// set_queue_properties_from_user's checks, in its order: an address outside
// user space is EFAULT (access_ok, not a read), the queue type comes last.
Test(queue_state, create_queue_checks_its_arguments_in_kfds_order)
{
	App app;
	constexpr uint64_t kernel = 0xffff800000000000ull;
	auto create = [&](auto change) {
		CreateQueue q = app.queue_args(QUEUE_COMPUTE_AQL);
		change(q);
		return app.rig.kfd(app.c, app.kfd, CREATE_QUEUE, &q);
	};
	cr_assert_eq(create([](CreateQueue &q) { q.queue_type = 9; }), -524, "ENOTSUPP");
	cr_assert_eq(create([](CreateQueue &q) { q.queue_type = 9, q.queue_percentage = 101; }), -EINVAL,
		     "the type is checked last");
	cr_assert_eq(create([&](CreateQueue &q) { q.queue_type = 9, q.ring_base_address = kernel; }), -EFAULT);
	cr_assert_eq(create([&](CreateQueue &q) { q.ring_base_address = kernel, q.ring_size = 3000; }), -EFAULT,
		     "the ring's address before its size");
	cr_assert_eq(create([&](CreateQueue &q) { q.ring_size = 3000, q.read_pointer_address = kernel; }), -EINVAL);
	cr_assert_eq(create([&](CreateQueue &q) { q.read_pointer_address = kernel; }), -EFAULT);
	cr_assert_eq(create([&](CreateQueue &q) { q.write_pointer_address = kernel; }), -EFAULT);
	cr_assert_eq(create([&](CreateQueue &q) { q.eop_buffer_address = kernel; }), -EFAULT);
	cr_assert_eq(create([&](CreateQueue &q) { q.ctx_save_restore_address = kernel; }), -EFAULT);
	cr_assert_eq(create([&](CreateQueue &q) { q.ctx_save_restore_address = kernel, q.gpu_id = 0x9999; }), -EFAULT,
		     "the GPU is looked up after the arguments");
	cr_assert_eq(create([&](CreateQueue &q) { q.gpu_id = 0x9999; }), -EINVAL, "unknown GPU");
	cr_assert_eq(create([&](CreateQueue &q) { q.read_pointer_address = 0, q.write_pointer_address = 0; }), 0,
		     "NULL pointers pass access_ok");
}

// With the machine's queue_size_checks (Linux 6.12's
// kfd_queue_acquire_buffers), a compute queue's EOP buffer, control stack
// and CWSR area sizes must be the GPU's (the EOP's from kfd_cwsr_sizes,
// the others the node's cwsr_size and ctl_stack_size: on this MI100-like
// node 4096, 0x9000 and 73273344), each EINVAL otherwise; an SDMA queue is
// not checked. Without the checks
// any sizes pass.
Test(queue_state, create_queue_checks_the_cwsr_sizes_against_the_gpu_as_linux_6_12)
{
	MachineDesc machine = make_machine({G0});
	machine.nodes[1].properties.push_back({"cwsr_size", 73273344});
	machine.nodes[1].properties.push_back({"ctl_stack_size", 0x9000});
	machine.queue_size_checks = true;
	App app(machine);
	auto create = [&](auto change) {
		CreateQueue q = app.queue_args(QUEUE_COMPUTE_AQL);
		q.eop_buffer_address = addr(app.h->pad), q.eop_buffer_size = 4096;
		q.ctx_save_restore_address = addr(app.h->pad), q.ctx_save_restore_size = 73273344;
		q.ctl_stack_size = 0x9000;
		change(q);
		return app.rig.kfd(app.c, app.kfd, CREATE_QUEUE, &q);
	};
	cr_assert_eq(create([](CreateQueue &) {}), 0, "the GPU's sizes");
	cr_assert_eq(create([](CreateQueue &q) { q.eop_buffer_size = 8192; }), -EINVAL, "EOP buffer");
	cr_assert_eq(create([](CreateQueue &q) { q.eop_buffer_address = 0, q.eop_buffer_size = 8192; }), 0,
		     "no EOP buffer, no EOP check");
	cr_assert_eq(create([](CreateQueue &q) { q.ctl_stack_size = 0x18000; }), -EINVAL, "control stack");
	cr_assert_eq(create([](CreateQueue &q) { q.ctx_save_restore_address = 0, q.ctx_save_restore_size = 0,
						 q.ctl_stack_size = 0; }), -EINVAL, "a compute queue needs them");
	cr_assert_eq(create([](CreateQueue &q) { q.ctx_save_restore_size = 73273344 + 4096; }), -EINVAL,
		     "CWSR area (6.12: exactly the node's)");
	cr_assert_eq(create([](CreateQueue &q) { q.queue_type = QUEUE_COMPUTE, q.ctl_stack_size = 0x1000; }),
		     -EINVAL, "a PM4 compute queue too");
	cr_assert_eq(create([](CreateQueue &q) { q.queue_type = QUEUE_SDMA, q.ctl_stack_size = 1; }), 0, "SDMA");
	App unchecked;
	CreateQueue q = unchecked.queue_args(QUEUE_COMPUTE_AQL);
	q.ctl_stack_size = 0x18000;
	cr_assert_eq(unchecked.rig.kfd(unchecked.c, unchecked.kfd, CREATE_QUEUE, &q), 0, "without the checks");
}

// kfd_chardev.c (Linux 6.15, KFD_MIN_QUEUE_RING_SIZE): a ring size is 0 or
// a power of 2; below 1 KiB it is raised to 1 KiB, by CREATE_QUEUE (which
// copies the raised size back) and UPDATE_QUEUE alike.
Test(queue_state, a_ring_size_under_1_kib_is_raised_to_1_kib)
{
	App app;
	for (uint32_t size : {0u, 1u, 64u, 512u, 1024u, 2048u}) {
		CreateQueue q = app.queue_args(QUEUE_COMPUTE_AQL);
		q.ring_size = size;
		cr_assert_eq(app.rig.kfd(app.c, app.kfd, CREATE_QUEUE, &q), 0, "size %u", size);
		const uint32_t want = size < 1024 ? 1024 : size;
		cr_assert_eq(q.ring_size, want, "size %u comes back as %u", size, q.ring_size);
		cr_assert(has(app.queue_json(q.queue_id), "\"ring_size\":" + std::to_string(want) + ","), "%s",
			  app.queue_json(q.queue_id).c_str());
	}
	CreateQueue bad = app.queue_args(QUEUE_COMPUTE_AQL);
	bad.ring_size = 768;
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, CREATE_QUEUE, &bad), -EINVAL, "not a power of 2: refused, not raised");
	cr_assert_eq(bad.ring_size, 768u);

	cr_assert_eq(app.update(app.sdma, addr(app.h->ring), 256), 0);
	cr_assert(has(app.queue_json(app.sdma), "\"ring_size\":1024,"), "%s", app.queue_json(app.sdma).c_str());
	cr_assert_eq(app.update(app.sdma, addr(app.h->ring), 768), -EINVAL);
	cr_assert(has(app.queue_json(app.sdma), "\"ring_size\":1024,"), "a refused update changes nothing");
	cr_assert(has(app.queue_json(app.sdma), "\"state\":\"active\""), "a raised size is a ring: active");
}

// A compute queue with a CWSR area; its control stack is ctl_stack_size.
constexpr uint32_t kCtlStack = 0x3000;
uint32_t cwsr_queue(App &app, const void *cwsr)
{
	CreateQueue q = app.queue_args(QUEUE_COMPUTE_AQL);
	q.ctx_save_restore_address = addr(cwsr);
	q.ctx_save_restore_size = 0x10000;
	q.ctl_stack_size = kCtlStack;
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, CREATE_QUEUE, &q), 0);
	return q.queue_id;
}

// kfd_ioctl_get_queue_wave_state: an unknown queue EFAULT (pqm); an SDMA
// queue or a running compute queue EINVAL; a stopped one answers from its
// MQD: nothing used (no shader ever ran), and the save-area header's
// wave_state is written (offsets at the control stack's size, sizes 0).
Test(queue_state, get_queue_wave_state_answers_for_a_stopped_compute_queue)
{
	App app;
	std::vector<uint8_t> cwsr(0x10000);
	const uint32_t qid = cwsr_queue(app, cwsr.data());
	std::array<uint32_t, 8> out;
	out.fill(0xaaaaaaaau);
	GetQueueWaveState w{addr(out.data()), 77, 77, 99, 0};
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, GET_QUEUE_WAVE_STATE, &w), -EFAULT, "unknown queue");
	w.queue_id = app.sdma;
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, GET_QUEUE_WAVE_STATE, &w), -EINVAL, "not a compute queue");
	w.queue_id = qid;
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, GET_QUEUE_WAVE_STATE, &w), -EINVAL, "the CP runs it");
	cr_assert_eq(out[0], 0xaaaaaaaau, "nothing written");

	cr_assert_eq(app.update(qid, 0, 0), 0, "inactive: the CP no longer runs it");
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, GET_QUEUE_WAVE_STATE, &w), 0);
	cr_assert_eq(w.ctl_stack_used_size, 0u);
	cr_assert_eq(w.save_area_used_size, 0u);
	cr_assert(out[0] == kCtlStack && out[1] == 0 && out[2] == kCtlStack && out[3] == 0,
		  "header {%#x, %u, %#x, %u}", out[0], out[1], out[2], out[3]);
	cr_assert_eq(out[4], 0xaaaaaaaau, "only the header's wave_state part");
	w.ctl_stack_address = 8;
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, GET_QUEUE_WAVE_STATE, &w), -EFAULT, "unwritable buffer");

	// Without a CWSR area the MQD has no control stack: all 0.
	CreateQueue plain = app.queue_args(QUEUE_COMPUTE);
	plain.ctl_stack_size = kCtlStack;
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, CREATE_QUEUE, &plain), 0);
	cr_assert_eq(app.update(plain.queue_id, addr(app.h->ring), kRing, 0), 0);
	out.fill(0xaaaaaaaau);
	GetQueueWaveState p{addr(out.data()), 77, 77, plain.queue_id, 0};
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, GET_QUEUE_WAVE_STATE, &p), 0);
	cr_assert(out[0] == 0 && out[1] == 0 && out[2] == 0 && out[3] == 0 && p.ctl_stack_used_size == 0);
}

// GFX 10 and 11's MQD managers write the same header (Linux 6.4 on).
Test(queue_state, get_queue_wave_state_on_gfx10_writes_the_header_too)
{
	App app(machine_with("gfx_target_version", 100300));
	std::vector<uint8_t> cwsr(0x10000);
	const uint32_t qid = cwsr_queue(app, cwsr.data());
	cr_assert_eq(app.update(qid, 0, 0), 0);
	std::array<uint32_t, 4> out;
	out.fill(0xaaaaaaaau);
	GetQueueWaveState w{addr(out.data()), 77, 77, qid, 0};
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, GET_QUEUE_WAVE_STATE, &w), 0);
	cr_assert(w.ctl_stack_used_size == 0 && w.save_area_used_size == 0);
	cr_assert(out[0] == kCtlStack && out[1] == 0 && out[2] == kCtlStack && out[3] == 0);
}

Test(queue_state, set_cu_mask_stores_the_mask_with_kfds_checks)
{
	App app;
	const uint32_t aql = app.new_queue();
	uint32_t mask[40] = {0x0000ffff, 0x0f0f0f0f};
	for (uint32_t i = 2; i < 40; ++i)
		mask[i] = i;
	cr_assert_eq(app.cu_mask(aql, 0, mask), -EINVAL, "a mask of 0 bits");
	cr_assert_eq(app.cu_mask(aql, 48, mask), -EINVAL, "not a multiple of 32");
	cr_assert_eq(app.cu_mask(aql, 64, reinterpret_cast<void *>(8)), -EFAULT, "unreadable mask");
	cr_assert_eq(app.cu_mask(99, 64, reinterpret_cast<void *>(8)), -EFAULT, "read before the queue lookup");
	cr_assert_eq(app.cu_mask(99, 64, mask), -EFAULT, "unknown queue: pqm's EFAULT");
	cr_assert(has(app.queue_json(aql), "\"cu_mask\":[]"), "nothing stored by a failed call");

	cr_assert_eq(app.cu_mask(aql, 64, mask), 0);
	cr_assert(has(app.queue_json(aql), "\"cu_mask\":[65535,252645135]"), "%s", app.queue_json(aql).c_str());
	// Longer than 1024 bits: the first 1024 are kept (and only they are read).
	cr_assert_eq(app.cu_mask(aql, 40 * 32 + 4096, mask), 0);
	const std::string q = app.queue_json(aql);
	cr_assert(has(q, ",30,31]") && !has(q, ",31,32"), "cut to 32 words: %s", q.c_str());
	// An SDMA queue takes one as well (KFD's SDMA MQD ignores it).
	cr_assert_eq(app.cu_mask(app.sdma, 32, mask), 0);
	cr_assert(has(app.queue_json(app.sdma), "\"cu_mask\":[65535]"));
	// Until GFX 10 CUs need not come in pairs.
	const uint32_t odd[1] = {0x5};
	cr_assert_eq(app.cu_mask(aql, 32, odd), 0);
}

Test(queue_state, set_cu_mask_wants_cu_pairs_from_gfx10)
{
	App app(machine_with("gfx_target_version", 100300));
	const uint32_t aql = app.new_queue();
	const uint32_t odd[2] = {0x3, 0x10000}, pairs[2] = {0xf3, 0x30000};
	cr_assert_eq(app.cu_mask(aql, 64, odd), -EINVAL, "CU 32 without CU 33 (a WGP is two CUs)");
	cr_assert(has(app.queue_json(aql), "\"cu_mask\":[]"));
	cr_assert_eq(app.cu_mask(aql, 64, pairs), 0);
	cr_assert(has(app.queue_json(aql), "\"cu_mask\":[243,196608]"));
}

Test(queue_state, alloc_queue_gws_gives_the_gpus_gws_to_one_queue)
{
	App app;
	const uint32_t a = app.new_queue(), b = app.new_queue();
	uint32_t first = 7;
	cr_assert_eq(app.gws(42, 1), -EINVAL, "unknown queue");
	cr_assert_eq(app.gws(a, 0), -EINVAL, "nothing to give back");
	cr_assert_eq(app.gws(a, 1, &first), 0);
	cr_assert_eq(first, 0u, "first_gws is always 0");
	cr_assert(has(app.queue_json(a), "\"gws\":true") && has(app.queue_json(b), "\"gws\":false"));
	cr_assert_eq(app.gws(b, 1), -EBUSY, "one GWS queue per process and GPU");
	cr_assert_eq(app.gws(a, 1), -EBUSY, "also for the holder itself");
	cr_assert_eq(app.gws(a, 0), 0, "given back");
	cr_assert(has(app.queue_json(a), "\"gws\":false"));
	cr_assert_eq(app.gws(b, 64), 0);
	// Destroying the holder frees the GWS (pqm_clean_queue_resource).
	DestroyQueue d{b, 0};
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, DESTROY_QUEUE, &d), 0);
	cr_assert_eq(app.gws(app.sdma, 1), 0, "any queue type may hold it");
}

Test(queue_state, alloc_queue_gws_on_a_gpu_without_gws_is_enodev)
{
	App app(machine_with("num_gws", 0));
	cr_assert_eq(app.gws(app.new_queue(), 1), -ENODEV);
	cr_assert_eq(app.gws(99, 1), -EINVAL, "the queue is looked up first");
}

// A KFD BO evicted from VRAM (eviction.cpp) evicts its process's queues:
// a packet rung meanwhile runs only once the restore worker has brought
// the BO back, the restore delay later (1 s here, so that a loaded machine
// cannot restore before the test looks; the kernel's is 100 ms).
Test(queue_state, a_vram_eviction_evicts_the_queues_until_the_restore)
{
	MachineDesc m = make_machine({G0}, 141, 64ull << 20);
	m.restore_delay_ms = 1000;
	App app(std::move(m));
	app.fence_and_ring(1);
	cr_assert(app.wait_fence(1));
	AllocMemoryOfGpu k{1ull << 32, 48ull << 20, 0, 0, G0, ALLOC_VRAM | ALLOC_WRITABLE};
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, ALLOC_MEMORY_OF_GPU, &k), 0);

	FakeCaller other(2000);
	const int r = app.rig.open_render(other, 128);
	long err = 0;
	app.rig.gem_create(other, r, 32ull << 20, abi::drm::DOMAIN_VRAM, &err);
	cr_assert_eq(err, 0);
	const auto evicted_at = std::chrono::steady_clock::now();
	cr_assert(has(app.queue_json(app.sdma), "\"state\":\"evicted\""), "%s", app.queue_json(app.sdma).c_str());
	app.fence_and_ring(2);
	// Whenever the fence is seen, the process must already be restored.
	while (app.fence() != 2) {
		cr_assert_lt(std::chrono::steady_clock::now() - evicted_at, std::chrono::seconds(10), "never ran");
		std::this_thread::sleep_for(std::chrono::microseconds(200));
	}
	const std::string p = app.rig.model->introspect("processes");
	cr_assert(has(p, "\"evict_count\":0,\"restored\":false,\"mem_evicted\":false,\"mem_evictions\":1,\"mem_restores\":1"),
		  "the packet ran while evicted: %s", p.c_str());
	cr_assert_geq(std::chrono::steady_clock::now() - evicted_at, std::chrono::milliseconds(900));
	cr_assert(has(app.queue_json(app.sdma), "\"state\":\"active\""));
}
