// SPDX-License-Identifier: GPL-2.0-only
// CRIU_OP at the model level: PROCESS_INFO -> CHECKPOINT -> UNPAUSE on one
// machine, RESTORE -> RESUME into another model instance with different
// gpu_ids: contents, VAs, flags, dma-buf fds, translation of old gpu_ids.
#include "harness.h"

#include <criterion/criterion.h>

#include <array>
#include <atomic>
#include <chrono>
#include <random>
#include <thread>

using namespace kfdemu;
using namespace kfdemu::testing;
using namespace kfdemu::abi::kfd;

namespace {

constexpr uint32_t S0 = 0x1111, S1 = 0x2222; // source host
constexpr uint32_t D0 = 0x3333, D1 = 0x4444; // destination host

std::vector<std::string> field_values(const std::string &json, const std::string &field)
{
	std::vector<std::string> out;
	std::string key = "\"" + field + "\":";
	for (size_t p = json.find(key); p != std::string::npos; p = json.find(key, p + 1)) {
		size_t s = p + key.size();
		size_t e = json.find_first_of(",}", s);
		out.push_back(json.substr(s, e - s));
	}
	return out;
}

struct Source {
	Rig rig;
	FakeCaller app{1000};
	FakeCaller dumper{500, true};
	int kfd = -1;
	uint64_t vram = 0, gtt = 0, uptr = 0, doorbell = 0, low = 0;
	uint8_t *host = nullptr;

	long alloc(uint32_t gpu, uint64_t va, uint64_t size, uint32_t flags, uint64_t *handle, uint64_t *off,
		   uint64_t cpu = 0)
	{
		AllocMemoryOfGpu a{va, size, 0, cpu, gpu, flags};
		long r = rig.kfd(app, kfd, ALLOC_MEMORY_OF_GPU, &a);
		*handle = a.handle;
		if (off)
			*off = a.mmap_offset;
		return r;
	}
	long map(uint64_t handle, std::vector<uint32_t> ids)
	{
		MapMemoryToGpu a{handle, reinterpret_cast<uint64_t>(ids.data()), static_cast<uint32_t>(ids.size()), 0};
		return rig.kfd(app, kfd, MAP_MEMORY_TO_GPU, &a);
	}

	explicit Source(MachineDesc m = make_machine({S0, S1})) : rig(std::move(m))
	{
		dumper.traced.insert(1000);
		kfd = rig.open_kfd(app);
		int r0 = rig.open_render(app, 128), r1 = rig.open_render(app, 129);
		AcquireVm a0{static_cast<uint32_t>(r0), S0}, a1{static_cast<uint32_t>(r1), S1};
		cr_assert_eq(rig.kfd(app, kfd, ACQUIRE_VM, &a0, abi::kIocWrite), 0);
		cr_assert_eq(rig.kfd(app, kfd, ACQUIRE_VM, &a1, abi::kIocWrite), 0);
		uint64_t off;
		cr_assert_eq(alloc(S0, 0x100000000ull, 3 * 4096, ALLOC_VRAM | ALLOC_WRITABLE, &vram, &off), 0);
		cr_assert_eq(map(vram, {S0, S1}), 0);
		auto *p = static_cast<uint8_t *>(rig.map(app, r0, off, 3 * 4096));
		std::mt19937 g(11);
		for (int i = 0; i < 3 * 4096; ++i)
			p[i] = static_cast<uint8_t>(g());
		munmap(p, 3 * 4096);
		cr_assert_eq(alloc(S1, 0x200000000ull, 4096, ALLOC_GTT, &gtt, &off), 0);
		cr_assert_eq(map(gtt, {S1}), 0);
		p = static_cast<uint8_t *>(rig.map(app, r1, off, 4096));
		std::memset(p, 0x42, 4096);
		munmap(p, 4096);
		host = static_cast<uint8_t *>(aligned_alloc(4096, 8192));
		cr_assert_eq(alloc(S0, 0x300000000ull, 8192, ALLOC_USERPTR | ALLOC_WRITABLE, &uptr, nullptr,
				   reinterpret_cast<uint64_t>(host)),
			     0);
		cr_assert_eq(map(uptr, {S0}), 0);
		cr_assert_eq(alloc(S0, 0x400000000ull, 8192, ALLOC_DOORBELL | ALLOC_WRITABLE, &doorbell, nullptr), 0);
		cr_assert_eq(alloc(S0, 0x2000, 4096, ALLOC_GTT, &low, nullptr), 0, "CWSR-like low BO");

		std::vector<uint8_t> ring(4096);
		uint64_t rp = 0, wp = 0;
		CreateQueue q{};
		q.ring_base_address = reinterpret_cast<uint64_t>(ring.data());
		q.ring_size = 4096;
		q.gpu_id = S1;
		q.queue_type = QUEUE_COMPUTE_AQL;
		q.queue_percentage = 100;
		q.read_pointer_address = reinterpret_cast<uint64_t>(&rp);
		q.write_pointer_address = reinterpret_cast<uint64_t>(&wp);
		cr_assert_eq(rig.kfd(app, kfd, CREATE_QUEUE, &q), 0);
		CreateEvent e{};
		e.event_type = EVENT_SIGNAL;
		cr_assert_eq(rig.kfd(app, kfd, CREATE_EVENT, &e), 0);
	}
	~Source() { free(host); }
};

struct Image {
	CriuArgs info{};
	std::vector<CriuDeviceBucket> devs;
	std::vector<CriuBoBucket> bos;
	std::vector<uint8_t> priv;

	// Sized by the PROCESS_INFO answer `pi`, kept as info.
	explicit Image(const CriuArgs &pi) : info(pi), devs(pi.num_devices), bos(pi.num_bos), priv(pi.priv_data_size) {}

	// CRIU_OP CHECKPOINT with info's counts, into devs, bos and priv.
	CriuArgs checkpoint_args()
	{
		CriuArgs a = info;
		a.op = CRIU_CHECKPOINT;
		a.devices = reinterpret_cast<uint64_t>(devs.data());
		a.bos = reinterpret_cast<uint64_t>(bos.data());
		a.priv_data = reinterpret_cast<uint64_t>(priv.data());
		return a;
	}
};

CriuArgs process_info_args()
{
	CriuArgs a{};
	a.op = CRIU_PROCESS_INFO;
	return a;
}

Image checkpoint(Source &s)
{
	CriuArgs info = process_info_args();
	cr_assert_eq(s.rig.kfd(s.dumper, s.kfd, CRIU_OP, &info), 0);
	Image im(info);
	CriuArgs a = im.checkpoint_args();
	cr_assert_eq(s.rig.kfd(s.dumper, s.kfd, CRIU_OP, &a), 0);
	return im;
}

// The destination host of a restore, gpu_ids D0 and D1: the restoring task
// (pid 2000) with its /dev/kfd and both render files open, device buckets
// S0 -> D0 and S1 -> D1 on those render files, and a copy of the image's
// BO buckets (which RESTORE fills in).
struct Destination {
	Rig rig;
	FakeCaller task{2000, true};
	int kfd = -1, r0 = -1, r1 = -1;
	std::vector<CriuDeviceBucket> devs;
	std::vector<CriuBoBucket> bos;

	explicit Destination(const Image &im, MachineDesc machine = make_machine({D0, D1}))
		: rig(std::move(machine)), bos(im.bos)
	{
		kfd = rig.open_kfd(task);
		r0 = rig.open_render(task, 128);
		r1 = rig.open_render(task, 129);
		devs = {{S0, D0, static_cast<uint32_t>(r0), 0}, {S1, D1, static_cast<uint32_t>(r1), 0}};
	}

	// CRIU_OP RESTORE of `im` with devs and bos.
	CriuArgs restore_args(const Image &im)
	{
		CriuArgs a{};
		a.op = CRIU_RESTORE;
		a.devices = reinterpret_cast<uint64_t>(devs.data());
		a.bos = reinterpret_cast<uint64_t>(bos.data());
		a.priv_data = reinterpret_cast<uint64_t>(im.priv.data());
		a.priv_data_size = im.priv.size();
		a.num_devices = static_cast<uint32_t>(devs.size());
		a.num_bos = static_cast<uint32_t>(bos.size());
		a.num_objects = im.info.num_objects;
		return a;
	}
};

} // namespace

Test(criu, permissions)
{
	Source s;
	CriuArgs a = process_info_args();
	FakeCaller stranger(600, true);
	cr_assert_eq(s.rig.kfd(stranger, s.kfd, CRIU_OP, &a), -EBADF, "not the tracer");
	FakeCaller nocap(500, false);
	nocap.traced.insert(1000);
	cr_assert_eq(s.rig.kfd(nocap, s.kfd, CRIU_OP, &a), -EACCES);
	GetVersion v{};
	cr_assert_eq(s.rig.kfd(s.dumper, s.kfd, GET_VERSION, &v, abi::kIocRead), -EBADF,
		     "only CRIU_OP is allowed to the tracer");
	a.op = 9;
	cr_assert_eq(s.rig.kfd(s.dumper, s.kfd, CRIU_OP, &a), -EINVAL);
}

// A process that holds the file without having opened it (received
// through SCM_RIGHTS, or inherited) is not its KFD process: kfd_ioctl
// answers EBADF to it and, for CRIU_OP, to the tracer of that holder, who
// is not the tracer of the file's own process. A paused process stays
// paused until its own tracer's UNPAUSE (the guardian tries each holder).
Test(criu, a_holders_tracer_gets_ebadf)
{
	Source s;
	CriuArgs a = process_info_args();
	cr_assert_eq(s.rig.kfd(s.dumper, s.kfd, CRIU_OP, &a), 0);
	FakeCaller holder(999, true); // older than the file's process (1000)
	GetVersion v{};
	cr_assert_eq(s.rig.kfd(holder, s.kfd, GET_VERSION, &v, abi::kIocRead), -EBADF);
	FakeCaller holders_tracer(600, true);
	holders_tracer.traced.insert(999);
	a = CriuArgs{};
	a.op = CRIU_UNPAUSE;
	cr_assert_eq(s.rig.kfd(holders_tracer, s.kfd, CRIU_OP, &a), -EBADF, "the tracer of a holder only");
	std::string p = s.rig.model->introspect("processes");
	cr_assert(p.find("\"pid\":1000,\"paused\":true") != std::string::npos, "%s", p.c_str());
	holders_tracer.traced.insert(1000);
	cr_assert_eq(s.rig.kfd(holders_tracer, s.kfd, CRIU_OP, &a), 0, "the tracer of the file's process");
	p = s.rig.model->introspect("processes");
	cr_assert(p.find("\"pid\":1000,\"paused\":false") != std::string::npos, "%s", p.c_str());
}

// PROCESS_INFO reports the target's pid in its own pid namespace (the
// kernel's task_pid_nr_ns of its leader in its active namespace), which is
// the pid CRIU's pstree.img has for it and a restored task has again.
Test(criu, process_info_reports_the_pid_in_the_targets_namespace)
{
	Source s;
	CriuArgs a = process_info_args();
	cr_assert_eq(s.rig.kfd(s.dumper, s.kfd, CRIU_OP, &a), 0);
	cr_assert_eq(a.pid, 1000u, "no pid namespace of its own: its pid");
	a = CriuArgs{};
	a.op = CRIU_UNPAUSE;
	cr_assert_eq(s.rig.kfd(s.dumper, s.kfd, CRIU_OP, &a), 0);
	s.dumper.ns_pids[1000] = 7;
	a = process_info_args();
	cr_assert_eq(s.rig.kfd(s.dumper, s.kfd, CRIU_OP, &a), 0);
	cr_assert_eq(a.pid, 7u, "in a container's pid namespace: its pid there");
}

// KFD's RESUME acts only on a process RESTORE left evicted
// (amdgpu_amdkfd_criu_resume: -EINVAL without block_mmu_notifications): a
// dump's pause is not ended by RESUME from any process, only by UNPAUSE
// through the target's file.
Test(criu, resume_does_not_end_a_dump_pause)
{
	Source s;
	CriuArgs a = process_info_args();
	cr_assert_eq(s.rig.kfd(s.dumper, s.kfd, CRIU_OP, &a), 0);
	const std::string paused = "\"pid\":1000,\"paused\":true,\"evicted\":false,\"evict_count\":1";
	FakeCaller master(1, true);
	master.alive.insert(1000);
	int mk = s.rig.open_kfd(master);
	CriuArgs r{};
	r.op = CRIU_RESUME;
	r.pid = 1000;
	cr_assert_eq(s.rig.kfd(master, mk, CRIU_OP, &r), -EINVAL);
	std::string p = s.rig.model->introspect("processes");
	cr_assert(p.find(paused) != std::string::npos, "RESUME changed nothing: %s", p.c_str());
	a = CriuArgs{};
	a.op = CRIU_UNPAUSE;
	cr_assert_eq(s.rig.kfd(s.dumper, s.kfd, CRIU_OP, &a), 0);
	p = s.rig.model->introspect("processes");
	cr_assert(p.find("\"pid\":1000,\"paused\":false,\"evicted\":false,\"evict_count\":0") != std::string::npos,
		  "%s", p.c_str());
	cr_assert_eq(s.rig.kfd(master, mk, CRIU_OP, &r), -EINVAL, "nor on a process never paused");
}

Test(criu, process_info_and_checkpoint)
{
	Source s;
	CriuArgs a{};
	a.op = CRIU_UNPAUSE;
	cr_assert_eq(s.rig.kfd(s.dumper, s.kfd, CRIU_OP, &a), -EINVAL, "unpause without pause");
	std::vector<uint8_t> dummy(4096);
	a = CriuArgs{};
	a.op = CRIU_CHECKPOINT;
	a.devices = a.bos = a.priv_data = reinterpret_cast<uint64_t>(dummy.data());
	cr_assert_eq(s.rig.kfd(s.dumper, s.kfd, CRIU_OP, &a), -EINVAL, "checkpoint without pause");

	CriuArgs info = process_info_args();
	cr_assert_eq(s.rig.kfd(s.dumper, s.kfd, CRIU_OP, &info), 0);
	cr_assert_eq(info.pid, 1000);
	cr_assert_eq(info.num_devices, 2);
	cr_assert_eq(info.num_bos, 4, "the low BO is excluded");
	cr_assert_eq(info.num_objects, 2);
	cr_assert_gt(info.priv_data_size, 0);
	std::string p = s.rig.model->introspect("processes");
	cr_assert(p.find("\"pid\":1000,\"paused\":true") != std::string::npos, "%s", p.c_str());
	std::string q = s.rig.model->introspect("queues 1000");
	cr_assert(q.find("\"state\":\"paused\"") != std::string::npos, "%s", q.c_str());

	a = info;
	a.op = CRIU_CHECKPOINT;
	a.devices = a.bos = a.priv_data = reinterpret_cast<uint64_t>(dummy.data());
	a.num_bos = 3;
	cr_assert_eq(s.rig.kfd(s.dumper, s.kfd, CRIU_OP, &a), -EINVAL, "count mismatch");
	a.num_bos = 4;
	a.priv_data = 0;
	cr_assert_eq(s.rig.kfd(s.dumper, s.kfd, CRIU_OP, &a), -EINVAL, "NULL priv_data");
	size_t fds_before = s.dumper.owned.size();
	a.priv_data = 8; // faults: no fd may be delivered
	cr_assert_eq(s.rig.kfd(s.dumper, s.kfd, CRIU_OP, &a), -EFAULT);
	cr_assert_eq(s.dumper.owned.size(), fds_before);

	// CHECKPOINT with the counts of the one PROCESS_INFO above.
	Image im(info);
	a = im.checkpoint_args();
	cr_assert_eq(s.rig.kfd(s.dumper, s.kfd, CRIU_OP, &a), 0);
	cr_assert_eq(im.devs[0].user_gpu_id, S0);
	cr_assert_eq(im.devs[0].actual_gpu_id, S0);
	cr_assert_eq(im.devs[1].user_gpu_id, S1);
	// Per-device order, then id order: S0 {vram, userptr, doorbell}, S1 {gtt}.
	cr_assert_eq(im.bos[0].addr, 0x100000000ull);
	cr_assert_eq(im.bos[0].size, 3 * 4096);
	cr_assert_eq(im.bos[0].alloc_flags, ALLOC_VRAM | ALLOC_WRITABLE);
	cr_assert_eq(im.bos[1].alloc_flags & ALLOC_USERPTR, ALLOC_USERPTR);
	cr_assert_eq(im.bos[1].dmabuf_fd, INVALID_FD);
	cr_assert_eq(im.bos[2].offset, MMAP_TYPE_DOORBELL | mmap_gpu_id(S0));
	cr_assert_eq(im.bos[2].dmabuf_fd, INVALID_FD);
	cr_assert_eq(im.bos[3].gpu_id, S1);
	// The VRAM/GTT dma-bufs are real fds holding the contents.
	int fd = static_cast<int>(im.bos[0].dmabuf_fd);
	cr_assert_eq(lseek(fd, 0, SEEK_END), 3 * 4096);
	auto *m = static_cast<uint8_t *>(::mmap(nullptr, 3 * 4096, PROT_READ, MAP_SHARED, fd, 0));
	std::mt19937 g(11);
	bool same = true;
	for (int i = 0; i < 3 * 4096; ++i)
		same &= m[i] == static_cast<uint8_t>(g());
	cr_assert(same);
	munmap(m, 3 * 4096);
	uint8_t b = 0;
	cr_assert_eq(pread(static_cast<int>(im.bos[3].dmabuf_fd), &b, 1, 100), 1);
	cr_assert_eq(b, 0x42);

	a = CriuArgs{};
	a.op = CRIU_UNPAUSE;
	cr_assert_eq(s.rig.kfd(s.dumper, s.kfd, CRIU_OP, &a), 0);
	cr_assert_eq(s.rig.kfd(s.dumper, s.kfd, CRIU_OP, &a), -EINVAL);
	q = s.rig.model->introspect("queues 1000");
	cr_assert(q.find("\"state\":\"active\"") != std::string::npos, "%s", q.c_str());

	// Two PROCESS_INFO, one UNPAUSE: KFD's eviction counter keeps the queues
	// evicted although the process is no longer "paused".
	CriuArgs pi = process_info_args();
	cr_assert_eq(s.rig.kfd(s.dumper, s.kfd, CRIU_OP, &pi), 0);
	cr_assert_eq(s.rig.kfd(s.dumper, s.kfd, CRIU_OP, &pi), 0);
	cr_assert_eq(s.rig.kfd(s.dumper, s.kfd, CRIU_OP, &a), 0);
	q = s.rig.model->introspect("queues 1000");
	cr_assert(q.find("\"state\":\"evicted\"") != std::string::npos, "%s", q.c_str());
	cr_assert_eq(s.rig.kfd(s.dumper, s.kfd, CRIU_OP, &a), -EINVAL);
}

Test(criu, round_trip_to_other_gpu_ids)
{
	Source s;
	std::string src_bos = s.rig.model->introspect("bos 1000");
	Image im = checkpoint(s);
	std::vector<int> dump_fds = {static_cast<int>(im.bos[0].dmabuf_fd), static_cast<int>(im.bos[3].dmabuf_fd)};

	// Destination machine: same shape, other gpu_ids.
	Destination d(im);
	Rig &dst = d.rig;
	FakeCaller &task = d.task;
	const int kfd = d.kfd, r0 = d.r0, r1 = d.r1;
	std::vector<CriuBoBucket> &bos = d.bos;
	CriuArgs a = d.restore_args(im);

	// Wrong GPU for a render fd: rejected.
	std::vector<CriuDeviceBucket> swapped = {{S0, D0, static_cast<uint32_t>(r1), 0},
						 {S1, D1, static_cast<uint32_t>(r0), 0}};
	CriuArgs bad = a;
	bad.devices = reinterpret_cast<uint64_t>(swapped.data());
	cr_assert_eq(dst.kfd(task, kfd, CRIU_OP, &bad), -EINVAL);
	// Another process, its own render files: a short priv blob is rejected.
	FakeCaller task2(2001, true);
	int kfd2 = dst.open_kfd(task2);
	std::vector<CriuDeviceBucket> devs2 = {{S0, D0, static_cast<uint32_t>(dst.open_render(task2, 128)), 0},
					       {S1, D1, static_cast<uint32_t>(dst.open_render(task2, 129)), 0}};
	bad = a;
	bad.devices = reinterpret_cast<uint64_t>(devs2.data());
	bad.priv_data_size -= 8;
	cr_assert_eq(dst.kfd(task2, kfd2, CRIU_OP, &bad), -EINVAL, "priv size mismatch");

	cr_assert_eq(dst.kfd(task, kfd, CRIU_OP, &a), 0);
	cr_assert_neq(bos[0].dmabuf_fd, INVALID_FD);
	cr_assert_neq(bos[3].dmabuf_fd, INVALID_FD);
	cr_assert_eq(bos[1].dmabuf_fd, INVALID_FD);
	cr_assert_eq(bos[2].restored_offset, MMAP_TYPE_DOORBELL | mmap_gpu_id(D0), "new actual id");
	cr_assert_geq(bos[0].restored_offset, 0x100000000ull);

	// Copy the contents back through the new dma-bufs (what the plugin's SDMA does).
	for (int i : {0, 3}) {
		int from = dump_fds[i == 0 ? 0 : 1], to = static_cast<int>(bos[i].dmabuf_fd);
		std::vector<uint8_t> buf(bos[i].size);
		cr_assert_eq(pread(from, buf.data(), buf.size(), 0), static_cast<ssize_t>(buf.size()));
		cr_assert_eq(pwrite(to, buf.data(), buf.size(), 0), static_cast<ssize_t>(buf.size()));
	}
	std::string dst_bos = dst.model->introspect("bos 2000");
	auto sum_src = field_values(src_bos, "checksum"), sum_dst = field_values(dst_bos, "checksum");
	auto va_src = field_values(src_bos, "va"), va_dst = field_values(dst_bos, "va");
	auto gid_dst = field_values(dst_bos, "gpu_id"), act_dst = field_values(dst_bos, "actual_gpu_id");
	auto h_src = field_values(src_bos, "handle"), h_dst = field_values(dst_bos, "handle");
	// The source also lists the excluded low BO (id 4 on S0); compare the rest.
	cr_assert_eq(sum_dst.size(), 4, "%s", dst_bos.c_str());
	std::vector<size_t> src_idx = {0, 1, 2, 4}; // S0: vram, uptr, doorbell, (low), S1: gtt
	for (size_t i = 0; i < 4; ++i) {
		if (i == 1 || i == 2)
			continue; // userptr/doorbell contents are not carried by KFD
		cr_assert(sum_src[src_idx[i]] == sum_dst[i], "checksum %zu: %s vs %s", i, sum_src[src_idx[i]].c_str(),
			  sum_dst[i].c_str());
	}
	for (size_t i = 0; i < 4; ++i) {
		cr_assert(va_src[src_idx[i]] == va_dst[i], "va %zu", i);
		cr_assert(h_src[src_idx[i]] == h_dst[i], "handle %zu", i);
	}
	cr_assert(gid_dst[0] == std::to_string(S0) && act_dst[0] == std::to_string(D0));
	cr_assert(gid_dst[3] == std::to_string(S1) && act_dst[3] == std::to_string(D1));
	std::string mapped = dst_bos.substr(dst_bos.find("\"mapped_on\":"), 40);
	cr_assert(mapped.rfind("\"mapped_on\":[4369,8738]", 0) == 0, "%s", mapped.c_str());

	std::string p = dst.model->introspect("processes");
	cr_assert(p.find("\"pid\":2000,\"paused\":false,\"evicted\":true") != std::string::npos, "%s", p.c_str());
	std::string q = dst.model->introspect("queues 2000");
	cr_assert(q.find("\"gpu_id\":8738") != std::string::npos && q.find("evicted") != std::string::npos, "%s",
		  q.c_str());
	std::string ev = dst.model->introspect("events 2000");
	cr_assert(ev.find("\"id\":0") != std::string::npos, "%s", ev.c_str());

	// The restored process keeps using the old gpu_ids.
	AllocMemoryOfGpu al{0x500000000ull, 4096, 0, 0, S0, ALLOC_VRAM};
	cr_assert_eq(dst.kfd(task, kfd, ALLOC_MEMORY_OF_GPU, &al), 0);
	cr_assert_eq(al.handle >> 32, S0);
	AllocMemoryOfGpu al2{0x500000000ull, 4096, 0, 0, D0, ALLOC_VRAM};
	cr_assert_eq(dst.kfd(task, kfd, ALLOC_MEMORY_OF_GPU, &al2), -EINVAL, "actual id is not a user id");
	uint32_t ids[1] = {S1};
	MapMemoryToGpu mp{(uint64_t{S0} << 32) | 0, reinterpret_cast<uint64_t>(ids), 1, 0};
	cr_assert_eq(dst.kfd(task, kfd, UNMAP_MEMORY_FROM_GPU, &mp), 0, "restored mapping on old S1");
	GetProcessAperturesNew ga{0, 0, 0};
	ProcessDeviceApertures ap[2] = {};
	ga.kfd_process_device_apertures_ptr = reinterpret_cast<uint64_t>(ap);
	ga.num_of_nodes = 2;
	cr_assert_eq(dst.kfd(task, kfd, GET_PROCESS_APERTURES_NEW, &ga), 0);
	cr_assert_eq(ap[0].gpu_id, S0);
	cr_assert_eq(ap[1].gpu_id, S1);
	// The restored BO is CPU-mappable through the bound render fd at the new offset.
	auto *m = static_cast<uint8_t *>(dst.map(task, r0, bos[0].restored_offset, 3 * 4096));
	cr_assert_not_null(m);
	std::mt19937 g(11);
	cr_assert_eq(m[0], static_cast<uint8_t>(g()));
	munmap(m, 3 * 4096);

	// RESUME from the master, by pid.
	FakeCaller master(1, true);
	int mk = dst.open_kfd(master);
	CriuArgs r{};
	r.op = CRIU_RESUME;
	r.pid = 4242;
	cr_assert_eq(dst.kfd(master, mk, CRIU_OP, &r), -ESRCH);
	r.pid = 2000;
	cr_assert_eq(dst.kfd(master, mk, CRIU_OP, &r), -ESRCH, "not alive in the caller's namespace");
	master.alive.insert(2000);
	cr_assert_eq(dst.kfd(master, mk, CRIU_OP, &r), 0);
	p = dst.model->introspect("processes");
	cr_assert(p.find("\"pid\":2000,\"paused\":false,\"evicted\":false") != std::string::npos, "%s", p.c_str());
	cr_assert_eq(dst.kfd(master, mk, CRIU_OP, &r), -EINVAL, "a second RESUME: nothing left to resume");
}

Test(criu, restore_id_collision)
{
	Source s;
	Image im = checkpoint(s);
	Destination d(im);
	d.bos[0].gpu_id = 0x9999; // no such user gpu
	CriuArgs a = d.restore_args(im);
	size_t before = d.task.owned.size();
	cr_assert_eq(d.rig.kfd(d.task, d.kfd, CRIU_OP, &a), -EINVAL);
	cr_assert_eq(d.task.owned.size(), before, "no fds on failure");
	CriuArgs z = a;
	z.num_devices = 0;
	cr_assert_eq(d.rig.kfd(d.task, d.kfd, CRIU_OP, &z), -EINVAL);
}

// What the plugin does with the dma-bufs: import into a render file, SDMA to
// and from a userptr staging buffer, on both sides.
namespace {

struct Copier {
	Rig &rig;
	FakeCaller &c;
	int fd;
	uint32_t ctx = 0, hib = 0;
	uint32_t *ib = nullptr;
	uint64_t ib_va;
	Copier(Rig &r, FakeCaller &cc, int f, uint64_t ibva) : rig(r), c(cc), fd(f), ib_va(ibva)
	{
		hib = rig.gem_create(c, fd, 4096, abi::drm::DOMAIN_GTT);
		cr_assert_eq(rig.gem_va(c, fd, hib, abi::drm::VA_OP_MAP, ib_va, 4096), 0);
		ib = static_cast<uint32_t *>(rig.map(c, fd, rig.gem_mmap_offset(c, fd, hib), 4096));
		ctx = rig.ctx_alloc(c, fd);
	}
	~Copier() { munmap(ib, 4096); }
	long copy(uint64_t src, uint64_t dst, uint64_t n)
	{
		std::vector<uint32_t> v;
		pkt_copy(v, src, dst, n);
		pad_ib(v);
		std::memcpy(ib, v.data(), v.size() * 4);
		long r;
		uint64_t seq = rig.submit(c, fd, ctx, ib_va, static_cast<uint32_t>(v.size() * 4), &r);
		if (r)
			return r;
		uint64_t st;
		return rig.wait_cs(c, fd, ctx, seq, ~0ull, &st);
	}
};

uint32_t import(Rig &rig, FakeCaller &c, int fd, int dmabuf)
{
	abi::drm::PrimeHandle p{0, 0, dmabuf};
	cr_assert_eq(rig.drm(c, fd, abi::drm::PRIME_FD_TO_HANDLE, &p), 0);
	return p.handle;
}

} // namespace

Test(criu, plugin_style_sdma_through_dmabufs)
{
	Source s;
	std::string src_bos = s.rig.model->introspect("bos 1000");
	Image im = checkpoint(s);
	const uint64_t n = 3 * 4096;

	// Dump: the dumper's own render fd, staging registered as userptr.
	int pr = s.rig.open_render(s.dumper, 128);
	uint32_t hv = import(s.rig, s.dumper, pr, static_cast<int>(im.bos[0].dmabuf_fd));
	auto *staging = static_cast<uint8_t *>(aligned_alloc(4096, 4 * 4096));
	std::memset(staging, 0, 4 * 4096);
	abi::drm::GemUserptr u{reinterpret_cast<uint64_t>(staging), 4 * 4096, 0xe, 0};
	cr_assert_eq(s.rig.amdgpu(s.dumper, pr, abi::drm::GEM_USERPTR, &u), 0);
	cr_assert_eq(s.rig.gem_va(s.dumper, pr, hv, abi::drm::VA_OP_MAP, 0x100000000ull, n), 0);
	cr_assert_eq(s.rig.gem_va(s.dumper, pr, u.handle, abi::drm::VA_OP_MAP, 0x100004000ull, 4 * 4096), 0);
	{
		Copier cp(s.rig, s.dumper, pr, 0x100010000ull);
		cr_assert_eq(cp.copy(0x100000000ull, 0x100004000ull, n), 0);
	}
	std::mt19937 g(11);
	bool same = true;
	for (uint64_t i = 0; i < n; ++i)
		same &= staging[i] == static_cast<uint8_t>(g());
	cr_assert(same, "staging holds the VRAM contents");
	std::string up = s.rig.model->introspect("userptr 500");
	cr_assert(up == "{\"pid\":500,\"current\":16384,\"peak\":16384}", "%s", up.c_str());

	// Restore into another machine.
	Destination d(im);
	Rig &dst = d.rig;
	FakeCaller &task = d.task;
	const int kfd = d.kfd, r0 = d.r0;
	std::vector<CriuBoBucket> &bos = d.bos;
	CriuArgs a = d.restore_args(im);
	cr_assert_eq(dst.kfd(task, kfd, CRIU_OP, &a), 0);

	// The plugin's render fd is the KFD-acquired VM: the VA its VA manager
	// picks first (4 GiB) collides with the restored KFD BO there.
	uint32_t hr = import(dst, task, r0, static_cast<int>(bos[0].dmabuf_fd));
	cr_assert_eq(dst.gem_va(task, r0, hr, abi::drm::VA_OP_MAP, 0x100000000ull, n), -EINVAL);
	cr_assert_eq(dst.gem_va(task, r0, hr, abi::drm::VA_OP_MAP, 0x800000000ull, n), 0);
	abi::drm::GemUserptr u2{reinterpret_cast<uint64_t>(staging), 4 * 4096, 0xe, 0};
	cr_assert_eq(dst.amdgpu(task, r0, abi::drm::GEM_USERPTR, &u2), 0);
	cr_assert_eq(dst.gem_va(task, r0, u2.handle, abi::drm::VA_OP_MAP, 0x800004000ull, 4 * 4096), 0);
	{
		Copier cp(dst, task, r0, 0x800010000ull);
		cr_assert_eq(cp.copy(0x800004000ull, 0x800000000ull, n), 0);
	}
	std::string dst_bos = dst.model->introspect("bos 2000");
	auto sum_src = field_values(src_bos, "checksum"), sum_dst = field_values(dst_bos, "checksum");
	cr_assert(sum_src[0] == sum_dst[0], "%s vs %s", sum_src[0].c_str(), sum_dst[0].c_str());
	// Closing the plugin's handle leaves the KFD mapping in place.
	abi::drm::GemClose cl{hr, 0};
	cr_assert_eq(dst.drm(task, r0, abi::drm::GEM_CLOSE, &cl, abi::kIocWrite), 0);
	std::string files = dst.model->introspect("files nosum");
	cr_assert(files.find("{\"va\":4294967296,\"size\":12288,\"offset\":0,\"flags\":14,\"handle\":0,\"kfd\":true}") !=
			  std::string::npos,
		  "%s", files.c_str());
	cr_assert(files.find("\"va\":34359738368") == std::string::npos, "the GEM mapping is gone: %s", files.c_str());
	free(staging);
}

namespace {

uint64_t addr(const void *p) { return reinterpret_cast<uint64_t>(p); }

std::string queue_json(Rig &rig, pid_t pid, uint32_t qid)
{
	const std::string all = rig.model->introspect("queues " + std::to_string(pid));
	const size_t at = all.find("{\"id\":" + std::to_string(qid) + ",");
	cr_assert_neq(at, std::string::npos, "%s", all.c_str());
	return all.substr(at, all.find(']', all.find("\"cu_mask\":", at)) + 1 - at);
}

} // namespace

// KFD's CRIU carries what a queue was given after CREATE_QUEUE: the CU mask
// of a compute queue (in its MQD), the GWS flag and the queue properties,
// so an inactive queue is restored inactive, with what was pending on it.
Test(criu, cu_mask_gws_and_an_inactive_queue_survive_the_round_trip)
{
	Source s;
	const uint32_t mask[2] = {0xff00ff00u, 0x1u};
	SetCuMask cm{0, 64, addr(mask)};
	cr_assert_eq(s.rig.kfd(s.app, s.kfd, SET_CU_MASK, &cm, abi::kIocWrite), 0);
	AllocQueueGws g{0, 1, 0, 0};
	cr_assert_eq(s.rig.kfd(s.app, s.kfd, ALLOC_QUEUE_GWS, &g), 0);
	// An SDMA queue on S0 whose ring, pointers and fence live in host
	// memory registered at its own address, deactivated, a FENCE pending.
	std::unique_ptr<uint8_t, decltype(&free)> mem(static_cast<uint8_t *>(aligned_alloc(4096, 8192)), &free);
	std::memset(mem.get(), 0, 8192);
	const uint64_t va = addr(mem.get());
	uint64_t handle = 0;
	cr_assert_eq(s.alloc(S0, va, 8192, ALLOC_USERPTR | ALLOC_WRITABLE, &handle, nullptr, va), 0);
	cr_assert_eq(s.map(handle, {S0}), 0);
	CreateQueue q{};
	q.ring_base_address = va;
	q.ring_size = 4096;
	q.read_pointer_address = va + 4096;
	q.write_pointer_address = va + 4104;
	q.gpu_id = S0;
	q.queue_type = QUEUE_SDMA;
	q.queue_percentage = 100;
	cr_assert_eq(s.rig.kfd(s.app, s.kfd, CREATE_QUEUE, &q), 0);
	SetCuMask sm{q.queue_id, 32, addr(mask)};
	cr_assert_eq(s.rig.kfd(s.app, s.kfd, SET_CU_MASK, &sm, abi::kIocWrite), 0);
	UpdateQueue off{0, q.queue_id, 0, 100, 0};
	cr_assert_eq(s.rig.kfd(s.app, s.kfd, UPDATE_QUEUE, &off, abi::kIocWrite), 0);
	const uint32_t fence[4] = {abi::sdma::OP_FENCE, uint32_t(va + 4112), uint32_t((va + 4112) >> 32), 0xc0ffeeu};
	std::memcpy(mem.get(), fence, sizeof fence);
	std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t *>(mem.get() + 4104)).store(sizeof fence);
	auto fence_value = [&] { return std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t *>(mem.get() + 4112)).load(); };

	Image im = checkpoint(s);
	Destination d(im);
	CriuArgs a = d.restore_args(im);
	cr_assert_eq(d.rig.kfd(d.task, d.kfd, CRIU_OP, &a), 0);
	FakeCaller master(1, true);
	const int mk = d.rig.open_kfd(master);
	master.alive.insert(2000);
	CriuArgs r{};
	r.op = CRIU_RESUME;
	r.pid = 2000;
	cr_assert_eq(d.rig.kfd(master, mk, CRIU_OP, &r), 0);

	const std::string aql = queue_json(d.rig, 2000, 0), sdma = queue_json(d.rig, 2000, q.queue_id);
	cr_assert(aql.find("\"gws\":true,\"cu_mask\":[4278255360,1]") != std::string::npos, "%s", aql.c_str());
	cr_assert(sdma.find("\"state\":\"inactive\",\"gws\":false,\"cu_mask\":[]") != std::string::npos,
		  "inactive; an SDMA queue's CU mask is not in its MQD: %s", sdma.c_str());
	std::this_thread::sleep_for(std::chrono::milliseconds(50));
	cr_assert_eq(fence_value(), 0u, "still inactive after RESUME");
	// The restored GWS is held: the process gets no second one on D1.
	AllocQueueGws again{0, 1, 0, 0};
	cr_assert_eq(d.rig.kfd(d.task, d.kfd, ALLOC_QUEUE_GWS, &again), -EBUSY);

	UpdateQueue on{va, q.queue_id, 4096, 100, 0};
	cr_assert_eq(d.rig.kfd(d.task, d.kfd, UPDATE_QUEUE, &on, abi::kIocWrite), 0);
	auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
	while (fence_value() != 0xc0ffeeu && std::chrono::steady_clock::now() < end)
		std::this_thread::sleep_for(std::chrono::microseconds(200));
	cr_assert_eq(fence_value(), 0xc0ffeeu, "the pending FENCE runs once the ring is given back");
}

// A compute queue's control stack (KFD's checkpoint_mqd / restore_mqd): its
// bytes, ctl_stack_size per XCC, are in the private data of a queue with a
// CWSR area and not of one without; restored, the queue's MQD answers
// GET_QUEUE_WAVE_STATE as before the dump (nothing used, GFX 9 header).
Test(criu, a_compute_queues_control_stack_is_saved_and_restored)
{
	MachineDesc m = make_machine({S0, S1});
	m.nodes[1].properties.push_back({"num_xcc", 2}); // S0: one MQD and stack per XCC
	Source s(std::move(m));
	std::vector<uint8_t> cwsr(0x10000), ring(4096);
	uint64_t rp = 0, wp = 0;
	auto create = [&](bool with_cwsr) {
		CreateQueue q{};
		q.ring_base_address = addr(ring.data());
		q.ring_size = 4096;
		q.read_pointer_address = addr(&rp);
		q.write_pointer_address = addr(&wp);
		q.gpu_id = S0;
		q.queue_type = QUEUE_COMPUTE_AQL;
		q.queue_percentage = 100;
		q.ctx_save_restore_address = with_cwsr ? addr(cwsr.data()) : 0;
		q.ctx_save_restore_size = 0x10000;
		q.ctl_stack_size = 0x3000;
		cr_assert_eq(s.rig.kfd(s.app, s.kfd, CREATE_QUEUE, &q), 0);
		return q.queue_id;
	};
	auto priv_size = [&] {
		CriuArgs info = process_info_args();
		cr_assert_eq(s.rig.kfd(s.dumper, s.kfd, CRIU_OP, &info), 0);
		CriuArgs u{};
		u.op = CRIU_UNPAUSE;
		cr_assert_eq(s.rig.kfd(s.dumper, s.kfd, CRIU_OP, &u), 0);
		return info.priv_data_size;
	};
	const uint32_t plain = create(false);
	const uint64_t without = priv_size();
	DestroyQueue dq{plain, 0};
	cr_assert_eq(s.rig.kfd(s.app, s.kfd, DESTROY_QUEUE, &dq), 0);
	const uint32_t qid = create(true);
	cr_assert_eq(priv_size() - without, 2u * 0x3000, "two XCCs' control stacks");

	Image im = checkpoint(s);
	std::array<uint32_t, 4> out{};
	GetQueueWaveState w{addr(out.data()), 77, 77, qid, 0};
	cr_assert_eq(s.rig.kfd(s.app, s.kfd, GET_QUEUE_WAVE_STATE, &w), 0, "paused by the dump");
	cr_assert(out[0] == 0x3000 && out[1] == 0 && out[2] == 0x3000 && out[3] == 0);

	MachineDesc dm = make_machine({D0, D1});
	dm.nodes[1].properties.push_back({"num_xcc", 2});
	Destination d(im, dm);
	CriuArgs a = d.restore_args(im);
	cr_assert_eq(d.rig.kfd(d.task, d.kfd, CRIU_OP, &a), 0);
	out.fill(0xaaaaaaaau);
	w = GetQueueWaveState{addr(out.data()), 77, 77, qid, 0};
	cr_assert_eq(d.rig.kfd(d.task, d.kfd, GET_QUEUE_WAVE_STATE, &w), 0, "restored, not yet resumed");
	cr_assert(w.ctl_stack_used_size == 0 && w.save_area_used_size == 0);
	cr_assert(out[0] == 0x3000 && out[1] == 0 && out[2] == 0x3000 && out[3] == 0,
		  "header {%#x, %u, %#x, %u}", out[0], out[1], out[2], out[3]);

	// A destination GPU with another number of XCCs has other MQDs.
	Destination one(im);
	CriuArgs b = one.restore_args(im);
	cr_assert_eq(one.rig.kfd(one.task, one.kfd, CRIU_OP, &b), -EINVAL);
}

// pqm_set_gws at restore: a GPU without GWS cannot take the GWS queue.
Test(criu, a_gws_queue_restored_on_a_gpu_without_gws_is_einval)
{
	Source s;
	AllocQueueGws g{0, 1, 0, 0};
	cr_assert_eq(s.rig.kfd(s.app, s.kfd, ALLOC_QUEUE_GWS, &g), 0);
	Image im = checkpoint(s);
	MachineDesc m = make_machine({D0, D1});
	for (auto &[k, v] : m.nodes[2].properties) // D1, where S1's queue goes
		if (k == "num_gws")
			v = 0;
	Destination d(im, m);
	CriuArgs a = d.restore_args(im);
	cr_assert_eq(d.rig.kfd(d.task, d.kfd, CRIU_OP, &a), -EINVAL);
}

// A VRAM BO evicted to GTT while the dump has the process paused (another
// process's GEM BO took the VRAM) is checkpointed as KFD does: a VRAM BO
// (its allocation flags), its contents readable through its dma-buf; the
// restore creates it in VRAM, on a destination whose VRAM another
// process's GEM BO fills (evicted to GTT for it).
Test(criu, a_bo_evicted_at_dump_is_checkpointed_as_vram_and_restored_resident)
{
	MachineDesc m = make_machine({S0, S1});
	m.restore_delay_ms = 10000; // still evicted when the test looks, however loaded the machine
	Source s(std::move(m));
	const std::string sum = field_values(s.rig.model->introspect("bos 1000"), "checksum")[0];
	CriuArgs info = process_info_args();
	cr_assert_eq(s.rig.kfd(s.dumper, s.kfd, CRIU_OP, &info), 0);
	FakeCaller other(3000);
	const int r = s.rig.open_render(other, 128);
	long err = 0;
	s.rig.gem_create(other, r, 1ull << 30, abi::drm::DOMAIN_VRAM, &err); // all of S0's VRAM
	cr_assert_eq(err, 0);
	std::string bos = s.rig.model->introspect("bos 1000 nosum");
	cr_assert(bos.find("\"type\":\"vram\",\"resident\":\"gtt\",\"evictions\":1") != std::string::npos, "%s",
		  bos.c_str());
	Image im(info);
	CriuArgs a = im.checkpoint_args();
	cr_assert_eq(s.rig.kfd(s.dumper, s.kfd, CRIU_OP, &a), 0);
	cr_assert_eq(im.bos[0].alloc_flags, ALLOC_VRAM | ALLOC_WRITABLE, "checkpointed as the VRAM BO it is");
	cr_assert_eq(im.bos[0].size, 3 * 4096);
	std::vector<uint8_t> data(3 * 4096);
	cr_assert_eq(pread(static_cast<int>(im.bos[0].dmabuf_fd), data.data(), data.size(), 0), 3 * 4096);
	std::mt19937 g(11);
	cr_assert_eq(data[0], static_cast<uint8_t>(g()), "the evicted BO's contents, through its dma-buf");

	Destination d(im);
	FakeCaller filler(4000);
	const int fr = d.rig.open_render(filler, 128);
	const uint32_t gem = d.rig.gem_create(filler, fr, 1ull << 30, abi::drm::DOMAIN_VRAM, &err);
	cr_assert_eq(err, 0);
	CriuArgs ra = d.restore_args(im);
	cr_assert_eq(d.rig.kfd(d.task, d.kfd, CRIU_OP, &ra), 0, "the restore evicts the GEM BO instead of ENOMEM");
	cr_assert_eq(pwrite(static_cast<int>(d.bos[0].dmabuf_fd), data.data(), data.size(), 0), 3 * 4096);
	bos = d.rig.model->introspect("bos 2000");
	cr_assert(bos.find("\"type\":\"vram\",\"resident\":\"vram\",\"evictions\":0") != std::string::npos, "%s",
		  bos.c_str());
	cr_assert(field_values(bos, "checksum")[0] == sum, "%s", bos.c_str());
	const std::string files = d.rig.model->introspect("files 4000 nosum");
	cr_assert(files.find("{\"handle\":" + std::to_string(gem) + ",") != std::string::npos &&
		      files.find("\"resident\":\"gtt\",\"evictions\":1") != std::string::npos,
		  "%s", files.c_str());
}
