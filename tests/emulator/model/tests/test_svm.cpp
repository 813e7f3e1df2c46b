// SPDX-License-Identifier: GPL-2.0-only
// AMDKFD_IOC_SVM (svm.cpp) with amdkfd's checks and errnos: SET_ATTR splits
// the ranges it overlaps and never merges, GET_ATTR gives the merged view,
// a prefetch to a GPU takes that GPU's VRAM (and gives it back); KFD CRIU
// carries the ranges (RESTORE keeps them, RESUME sets them again); and
// SMI_EVENTS gives an event fd with no events.
#include "harness.h"

#include <criterion/criterion.h>
#include <sys/mman.h>

#include <cerrno>

using namespace kfdemu;
using namespace kfdemu::testing;
using namespace kfdemu::abi::kfd;

namespace {

constexpr uint32_t G0 = 0x1111, G1 = 0x2222;
constexpr uint64_t kPg = 4096;
constexpr uint32_t kDefaultFlags = SVM_FLAG_HOST_ACCESS | SVM_FLAG_COHERENT;

// kfd_ioctl_svm_args with its attributes, as libhsakmt lays them out.
struct SvmCall {
	SvmArgs a{};
	SvmAttribute attrs[8]{};
};

size_t count_of(const std::string &s, const std::string &needle)
{
	size_t n = 0;
	for (size_t p = s.find(needle); p != std::string::npos; p = s.find(needle, p + 1))
		++n;
	return n;
}

// A process with both GPUs' VMs (a 2-GPU machine, `machine`) and `pages`
// pages of its own memory at `mem`.
struct App {
	Rig rig;
	FakeCaller c;
	int kfd = -1;
	static constexpr uint64_t pages = 16;
	// 2 MiB aligned: the 16 pages never cross the boundary at which SET_ATTR
	// cuts new ranges (2 MiB on the smallest VRAM).
	static constexpr size_t kAlign = 2 << 20;
	uint8_t *mem = nullptr;

	explicit App(MachineDesc machine = make_machine({G0, G1}), pid_t pid = 1000) : rig(std::move(machine)), c(pid)
	{
		mem = static_cast<uint8_t *>(aligned_alloc(kAlign, kAlign));
		std::memset(mem, 0x5a, pages * kPg);
		kfd = rig.open_kfd(c);
		const int r0 = rig.open_render(c, 128), r1 = rig.open_render(c, 129);
		AcquireVm a0{static_cast<uint32_t>(r0), G0}, a1{static_cast<uint32_t>(r1), G1};
		cr_assert_eq(rig.kfd(c, kfd, ACQUIRE_VM, &a0, abi::kIocWrite), 0);
		cr_assert_eq(rig.kfd(c, kfd, ACQUIRE_VM, &a1, abi::kIocWrite), 0);
	}
	~App() { free(mem); }
	App(const App &) = delete;
	App &operator=(const App &) = delete;

	uint64_t at(uint64_t page) const { return reinterpret_cast<uint64_t>(mem) + page * kPg; }

	// AMDKFD_IOC_SVM with the cmd's size for `nattr` attributes (less
	// `short_by` bytes).
	long svm(uint32_t op, uint64_t start, uint64_t size, std::vector<SvmAttribute> &attrs, size_t short_by = 0)
	{
		SvmCall call{};
		call.a = SvmArgs{start, size, op, static_cast<uint32_t>(attrs.size())};
		cr_assert_leq(attrs.size(), 8u);
		std::copy(attrs.begin(), attrs.end(), call.attrs);
		const size_t sz = sizeof(SvmArgs) + attrs.size() * sizeof(SvmAttribute) - short_by;
		const unsigned long cmd = abi::ioc(3, 'K', SVM, sz);
		const long r = rig.model->ioctl(c, key_of(kfd), cmd, reinterpret_cast<uint64_t>(&call));
		std::copy(call.attrs, call.attrs + attrs.size(), attrs.begin());
		return r;
	}
	long set(uint64_t first_page, uint64_t npages, std::vector<SvmAttribute> attrs)
	{
		return svm(SVM_OP_SET_ATTR, at(first_page), npages * kPg, attrs);
	}
	// GET_ATTR of every attribute (ACCESS for both GPUs) over the pages.
	std::vector<SvmAttribute> get(uint64_t first_page, uint64_t npages)
	{
		std::vector<SvmAttribute> q{{SVM_ATTR_PREFERRED_LOC, 0}, {SVM_ATTR_PREFETCH_LOC, 0},
					    {SVM_ATTR_SET_FLAGS, 0},	 {SVM_ATTR_CLR_FLAGS, 0},
					    {SVM_ATTR_GRANULARITY, 0},	 {SVM_ATTR_ACCESS, G0},
					    {SVM_ATTR_ACCESS, G1}};
		cr_assert_eq(svm(SVM_OP_GET_ATTR, at(first_page), npages * kPg, q), 0);
		return q;
	}
	std::string ranges() { return rig.model->introspect("svm " + std::to_string(c.identity().tgid)); }
	uint64_t available(uint32_t gpu)
	{
		AvailableMemory m{0, gpu, 0};
		cr_assert_eq(rig.kfd(c, kfd, AVAILABLE_MEMORY, &m), 0);
		return m.available;
	}
};

} // namespace

Test(svm, argument_checks_and_errnos)
{
	App app;
	std::vector<SvmAttribute> none;
	cr_assert_eq(app.svm(SVM_OP_SET_ATTR, app.at(0) + 8, kPg, none), -EINVAL, "start not page aligned");
	cr_assert_eq(app.svm(SVM_OP_SET_ATTR, app.at(0), 100, none), -EINVAL, "size not page aligned");
	cr_assert_eq(app.svm(SVM_OP_SET_ATTR, app.at(0), 0, none), -EINVAL, "size 0");
	cr_assert_eq(app.svm(SVM_OP_SET_ATTR, 0, kPg, none), -EINVAL, "start 0");
	std::vector<SvmAttribute> one{{SVM_ATTR_GRANULARITY, 4}};
	cr_assert_eq(app.svm(SVM_OP_SET_ATTR, app.at(0), kPg, one, 8), -EINVAL, "cmd too small for nattr");
	cr_assert_eq(app.svm(7, app.at(0), kPg, one), EINVAL, "unknown op: the kernel's positive EINVAL");
	cr_assert_eq(app.set(0, 1, {{8, 0}}), -EINVAL, "unknown attribute");
	cr_assert_eq(app.set(0, 1, {{SVM_ATTR_ACCESS, 0x9999}}), -EINVAL, "unknown GPU");
	cr_assert_eq(app.set(0, 1, {{SVM_ATTR_PREFETCH_LOC, SVM_LOCATION_UNDEFINED}}), -EINVAL,
		     "an undefined prefetch location is no GPU");
	cr_assert_eq(app.set(0, 1, {{SVM_ATTR_PREFERRED_LOC, SVM_LOCATION_UNDEFINED}}), 0);
	std::vector<SvmAttribute> aip{{SVM_ATTR_ACCESS_IN_PLACE, G0}};
	cr_assert_eq(app.svm(SVM_OP_GET_ATTR, app.at(0), kPg, aip), -EINVAL, "GET takes ACCESS only");
	std::vector<SvmAttribute> bad_gpu{{SVM_ATTR_ACCESS, 0x9999}};
	cr_assert_eq(app.svm(SVM_OP_GET_ATTR, app.at(0), kPg, bad_gpu), -EINVAL);

	// Not the process's memory: EFAULT.
	void *hole = mmap(nullptr, 4 * kPg, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(hole, MAP_FAILED);
	cr_assert_eq(app.svm(SVM_OP_SET_ATTR, reinterpret_cast<uint64_t>(hole), 4 * kPg, none), -EFAULT);
	munmap(hole, 4 * kPg);

	// Memory a BO mapped to a GPU covers: EADDRINUSE. And a BO's VA inside
	// an SVM range cannot be allocated: EADDRINUSE.
	AllocMemoryOfGpu u{app.at(8), 2 * kPg, 0, app.at(8), G0, ALLOC_USERPTR | ALLOC_WRITABLE};
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, ALLOC_MEMORY_OF_GPU, &u), 0);
	uint32_t id = G0;
	MapMemoryToGpu m{u.handle, reinterpret_cast<uint64_t>(&id), 1, 0};
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, MAP_MEMORY_TO_GPU, &m), 0);
	cr_assert_eq(app.set(7, 2, {{SVM_ATTR_ACCESS, G0}}), -EADDRINUSE);
	AllocMemoryOfGpu v{app.at(0), kPg, 0, 0, G0, ALLOC_VRAM | ALLOC_WRITABLE};
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, ALLOC_MEMORY_OF_GPU, &v), -EADDRINUSE, "page 0 is an SVM range");
	cr_assert(app.ranges().find("\"ranges\":[{") != std::string::npos, "%s", app.ranges().c_str());
}

// GET_ATTR where no range is: a new range's defaults (no GPU access with
// XNACK off).
Test(svm, get_without_ranges_gives_the_defaults)
{
	App app;
	auto g = app.get(0, 4);
	cr_assert_eq(g[0].value, SVM_LOCATION_UNDEFINED);
	cr_assert_eq(g[1].value, SVM_LOCATION_UNDEFINED);
	cr_assert_eq(g[2].value, kDefaultFlags);
	cr_assert_eq(g[3].value, ~kDefaultFlags);
	cr_assert_eq(g[4].value, 9u);
	cr_assert_eq(g[5].type, SVM_ATTR_NO_ACCESS);
	cr_assert_eq(g[6].type, SVM_ATTR_NO_ACCESS);
	cr_assert_eq(app.ranges().find("\"start\""), std::string::npos, "GET makes no range");
}

// A SET inside a range splits it in three; the view over all of them is
// merged by the kernel's rules; a range with the attributes already (and
// mapped) is left whole; ranges are never merged.
Test(svm, set_splits_get_merges)
{
	App app;
	cr_assert_eq(app.set(0, 8, {{SVM_ATTR_ACCESS, G0}, {SVM_ATTR_PREFERRED_LOC, G0}, {SVM_ATTR_GRANULARITY, 6}}), 0);
	cr_assert_eq(count_of(app.ranges(), "\"start\""), 1u, "%s", app.ranges().c_str());

	// The same attributes again on a part: nothing to do (mapped already).
	cr_assert_eq(app.set(2, 2, {{SVM_ATTR_ACCESS, G0}}), 0);
	cr_assert_eq(count_of(app.ranges(), "\"start\""), 1u, "%s", app.ranges().c_str());

	cr_assert_eq(app.set(2, 2, {{SVM_ATTR_PREFERRED_LOC, G1}, {SVM_ATTR_ACCESS_IN_PLACE, G1},
				    {SVM_ATTR_SET_FLAGS, SVM_FLAG_GPU_RO}, {SVM_ATTR_GRANULARITY, 3}}),
		     0);
	const std::string r = app.ranges();
	cr_assert_eq(count_of(r, "\"start\""), 3u, "%s", r.c_str());
	const std::string mid = "\"start\":" + std::to_string(app.at(2)) + ",\"size\":" + std::to_string(2 * kPg);
	cr_assert(r.find(mid) != std::string::npos, "%s", r.c_str());

	auto inner = app.get(2, 2);
	cr_assert_eq(inner[0].value, G1);
	cr_assert_eq(inner[2].value, kDefaultFlags | SVM_FLAG_GPU_RO);
	cr_assert_eq(inner[4].value, 3u);
	cr_assert_eq(inner[5].type, SVM_ATTR_ACCESS);
	cr_assert_eq(inner[6].type, SVM_ATTR_ACCESS_IN_PLACE);

	auto all = app.get(0, 8);
	cr_assert_eq(all[0].value, SVM_LOCATION_UNDEFINED, "preferred locations differ");
	cr_assert_eq(all[2].value, kDefaultFlags, "SET_FLAGS: the flags all have");
	cr_assert_eq(all[3].value, ~(kDefaultFlags | SVM_FLAG_GPU_RO), "CLR_FLAGS: the flags none has");
	cr_assert_eq(all[4].value, 3u, "the smallest granularity");
	cr_assert_eq(all[5].type, SVM_ATTR_ACCESS, "every range grants G0");
	cr_assert_eq(all[6].type, SVM_ATTR_NO_ACCESS, "only one grants G1");

	auto head = app.get(0, 2);
	cr_assert_eq(head[0].value, G0, "the split-off head keeps its attributes");
	cr_assert_eq(head[4].value, 6u);

	// Over the hole after the ranges and a new adjacent one: no merge.
	cr_assert_eq(app.set(8, 2, {{SVM_ATTR_ACCESS, G0}, {SVM_ATTR_PREFERRED_LOC, G0}, {SVM_ATTR_GRANULARITY, 6}}),
		     0);
	cr_assert_eq(count_of(app.ranges(), "\"start\""), 4u, "%s", app.ranges().c_str());
	// A SET across a gap fills it with a range of its own.
	cr_assert_eq(app.set(12, 1, {}), 0);
	cr_assert_eq(app.set(10, 4, {{SVM_ATTR_CLR_FLAGS, SVM_FLAG_COHERENT}}), 0);
	cr_assert_eq(count_of(app.ranges(), "\"start\""), 7u, "10-11, 12, 13 new; %s", app.ranges().c_str());
	cr_assert_eq(app.get(10, 4)[2].value, SVM_FLAG_HOST_ACCESS);
}

// A prefetch to a GPU puts the range in its VRAM (accounted: AVAILABLE_MEMORY
// and the introspection say so); back to system memory gives it back; a
// split keeps the total; a GPU that may access the range from outside the
// hive keeps it in system memory; the VRAM goes with the process.
Test(svm, prefetch_accounts_vram)
{
	const uint64_t bytes = 8 * kPg;
	{
		App app;
		const uint64_t before = app.available(G0);
		cr_assert_eq(app.set(0, 8, {{SVM_ATTR_ACCESS, G0}, {SVM_ATTR_PREFETCH_LOC, G0}}), 0);
		cr_assert_eq(app.available(G0), before - bytes);
		cr_assert_eq(app.available(G1), before);
		cr_assert(app.ranges().find("\"vram_gpu_id\":" + std::to_string(G0)) != std::string::npos, "%s",
			  app.ranges().c_str());
		cr_assert_eq(app.get(0, 8)[1].value, G0);
		cr_assert_eq(app.mem[5 * kPg], 0x5a, "the bytes stay the process's");

		cr_assert_eq(app.set(2, 2, {{SVM_ATTR_GRANULARITY, 2}}), 0);
		cr_assert_eq(count_of(app.ranges(), "\"vram_gpu_id\":" + std::to_string(G0)), 3u, "%s",
			     app.ranges().c_str());
		cr_assert_eq(app.available(G0), before - bytes, "a split keeps the VRAM");

		cr_assert_eq(app.set(0, 2, {{SVM_ATTR_PREFETCH_LOC, SVM_LOCATION_SYSMEM}}), 0);
		cr_assert_eq(app.available(G0), before - 6 * kPg);

		// G1 may access it too and is in no hive with G0: system memory.
		cr_assert_eq(app.set(2, 6, {{SVM_ATTR_ACCESS, G1}}), 0);
		cr_assert_eq(app.available(G0), before);
		cr_assert_eq(app.ranges().find("\"vram_gpu_id\":" + std::to_string(G0)), std::string::npos);

		cr_assert_eq(app.set(0, 8, {{SVM_ATTR_NO_ACCESS, G0}, {SVM_ATTR_ACCESS, G1}, {SVM_ATTR_PREFETCH_LOC, G1}}), 0);
		cr_assert_eq(app.available(G1), before - bytes);
		app.rig.model->process_exit(1000);
		FakeCaller other(1001);
		const int k = app.rig.open_kfd(other);
		const int r1 = app.rig.open_render(other, 129);
		AcquireVm av{static_cast<uint32_t>(r1), G1};
		cr_assert_eq(app.rig.kfd(other, k, ACQUIRE_VM, &av, abi::kIocWrite), 0);
		AvailableMemory m{0, G1, 0};
		cr_assert_eq(app.rig.kfd(other, k, AVAILABLE_MEMORY, &m), 0);
		cr_assert_eq(m.available, before, "the exited process's VRAM is free again");
	}
	{
		// Both GPUs in one XGMI hive: the range goes to G0's VRAM though G1
		// may access it.
		MachineDesc m = make_machine({G0, G1});
		for (auto &n : m.nodes)
			if (n.is_gpu)
				n.properties.push_back({"hive_id", 0x77});
		App app(std::move(m));
		const uint64_t before = app.available(G0);
		cr_assert_eq(app.set(0, 8, {{SVM_ATTR_ACCESS, G0}, {SVM_ATTR_ACCESS, G1}, {SVM_ATTR_PREFETCH_LOC, G0}}),
			     0);
		cr_assert_eq(app.available(G0), before - bytes);
	}
	{
		// More than the GPU's VRAM: ENOMEM, attributes applied.
		App app(make_machine({G0, G1}, 141, 4 * kPg));
		cr_assert_eq(app.set(0, 8, {{SVM_ATTR_ACCESS, G0}, {SVM_ATTR_PREFETCH_LOC, G0}}), -ENOMEM);
		cr_assert_eq(app.get(0, 8)[1].value, G0);
		cr_assert_eq(app.available(G0), 4 * kPg);
	}
}

// KFD CRIU: the ranges are objects of their own (num_objects, the private
// data); RESTORE keeps them and RESUME sets them again on the restored
// process, with the restored process's (user) gpu_ids, a prefetched range
// back in VRAM.
Test(svm, criu_round_trip)
{
	App src;
	cr_assert_eq(src.set(0, 4, {{SVM_ATTR_ACCESS, G0}, {SVM_ATTR_PREFETCH_LOC, G0}, {SVM_ATTR_PREFERRED_LOC, G0}}),
		     0);
	cr_assert_eq(src.set(4, 4, {{SVM_ATTR_ACCESS_IN_PLACE, G1}, {SVM_ATTR_SET_FLAGS, SVM_FLAG_GPU_EXEC},
				    {SVM_ATTR_CLR_FLAGS, SVM_FLAG_COHERENT}, {SVM_ATTR_GRANULARITY, 4}}),
		     0);
	const std::string before = src.ranges();

	FakeCaller dumper{500, true};
	dumper.traced.insert(1000);
	CriuArgs info{};
	info.op = CRIU_PROCESS_INFO;
	cr_assert_eq(src.rig.kfd(dumper, src.kfd, CRIU_OP, &info), 0);
	cr_assert_eq(info.num_objects, 2u, "two SVM ranges, no queue or event");
	std::vector<CriuDeviceBucket> devs(info.num_devices);
	std::vector<CriuBoBucket> bos(info.num_bos + 1);
	std::vector<uint8_t> priv(info.priv_data_size);
	CriuArgs ck = info;
	ck.op = CRIU_CHECKPOINT;
	ck.devices = reinterpret_cast<uint64_t>(devs.data());
	ck.bos = reinterpret_cast<uint64_t>(bos.data());
	ck.priv_data = reinterpret_cast<uint64_t>(priv.data());
	cr_assert_eq(src.rig.kfd(dumper, src.kfd, CRIU_OP, &ck), 0);

	// Another machine (gpu_ids 0x3333, 0x4444) restores as 2000.
	constexpr uint32_t D0 = 0x3333, D1 = 0x4444;
	Rig dst(make_machine({D0, D1}));
	FakeCaller task{2000, true};
	const int kfd = dst.open_kfd(task);
	const int r0 = dst.open_render(task, 128), r1 = dst.open_render(task, 129);
	std::vector<CriuDeviceBucket> ddevs{{G0, D0, static_cast<uint32_t>(r0), 0}, {G1, D1, static_cast<uint32_t>(r1), 0}};
	CriuArgs rs{};
	rs.op = CRIU_RESTORE;
	rs.devices = reinterpret_cast<uint64_t>(ddevs.data());
	rs.bos = reinterpret_cast<uint64_t>(bos.data());
	rs.priv_data = reinterpret_cast<uint64_t>(priv.data());
	rs.priv_data_size = priv.size();
	rs.num_devices = 2;
	rs.num_bos = info.num_bos;
	rs.num_objects = info.num_objects;
	cr_assert_eq(dst.kfd(task, kfd, CRIU_OP, &rs), 0);
	const std::string pending = dst.model->introspect("svm 2000");
	cr_assert(pending.find("\"pending_restore\":2,\"ranges\":[]") != std::string::npos, "%s", pending.c_str());

	AvailableMemory am{0, G0, 0};
	cr_assert_eq(dst.kfd(task, kfd, AVAILABLE_MEMORY, &am), 0);
	const uint64_t free_before = am.available;
	FakeCaller master(1, true);
	const int mk = dst.open_kfd(master);
	master.alive.insert(2000);
	CriuArgs re{};
	re.op = CRIU_RESUME;
	re.pid = 2000;
	cr_assert_eq(dst.kfd(master, mk, CRIU_OP, &re), 0);

	// The same ranges and attributes, the first in D0's VRAM.
	std::string after = dst.model->introspect("svm 2000");
	cr_assert(after.find("\"pending_restore\":0") != std::string::npos, "%s", after.c_str());
	std::string b = before.substr(before.find("\"ranges\""));
	std::string a = after.substr(after.find("\"ranges\""));
	const std::string src_vram = "\"vram_gpu_id\":" + std::to_string(G0), dst_vram = "\"vram_gpu_id\":" + std::to_string(D0);
	b.replace(b.find(src_vram), src_vram.size(), dst_vram);
	cr_assert_str_eq(a.c_str(), b.c_str());
	cr_assert_eq(dst.kfd(task, kfd, AVAILABLE_MEMORY, &am), 0);
	cr_assert_eq(am.available, free_before - 4 * kPg);

	// The process sees them through GET_ATTR with its own gpu_ids.
	SvmCall call{};
	call.a = SvmArgs{src.at(4), 4 * kPg, SVM_OP_GET_ATTR, 4};
	call.attrs[0] = {SVM_ATTR_SET_FLAGS, 0};
	call.attrs[1] = {SVM_ATTR_GRANULARITY, 0};
	call.attrs[2] = {SVM_ATTR_ACCESS, G1};
	call.attrs[3] = {SVM_ATTR_ACCESS, G0};
	const unsigned long cmd = abi::ioc(3, 'K', SVM, sizeof(SvmArgs) + 4 * sizeof(SvmAttribute));
	cr_assert_eq(dst.model->ioctl(task, key_of(kfd), cmd, reinterpret_cast<uint64_t>(&call)), 0);
	cr_assert_eq(call.attrs[0].value, SVM_FLAG_HOST_ACCESS | SVM_FLAG_GPU_EXEC);
	cr_assert_eq(call.attrs[1].value, 4u);
	cr_assert_eq(call.attrs[2].type, SVM_ATTR_ACCESS_IN_PLACE);
	cr_assert_eq(call.attrs[3].type, SVM_ATTR_NO_ACCESS);

	// A private record with another device count is refused.
	Rig dst2(make_machine({D0, D1}));
	FakeCaller task2{3000, true};
	const int kfd2 = dst2.open_kfd(task2);
	const int s0 = dst2.open_render(task2, 128), s1 = dst2.open_render(task2, 129);
	ddevs = {{G0, D0, static_cast<uint32_t>(s0), 0}, {G1, D1, static_cast<uint32_t>(s1), 0}};
	std::vector<uint8_t> bad = priv;
	// The first object's nattr (after the header, 2 devices and no BO): 6 -> 5.
	const size_t obj = 32 + 2 * 16 + info.num_bos * 80;
	uint32_t nattr;
	std::memcpy(&nattr, bad.data() + obj + 8 + 16, 4);
	cr_assert_eq(nattr, 6u);
	nattr = 5;
	std::memcpy(bad.data() + obj + 8 + 16, &nattr, 4);
	rs.priv_data = reinterpret_cast<uint64_t>(bad.data());
	cr_assert_eq(dst2.kfd(task2, kfd2, CRIU_OP, &rs), -EINVAL);
}

Test(svm, smi_events_gives_an_fd_without_events)
{
	App app;
	SmiEvents a{0x9999, 0};
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, SMI_EVENTS, &a), -EINVAL, "not a GPU of the process");
	a = SmiEvents{G1, 0};
	cr_assert_eq(app.rig.kfd(app.c, app.kfd, SMI_EVENTS, &a), 0);
	const int fd = static_cast<int>(a.anon_fd);
	cr_assert_geq(fd, 0);
	char buf[64];
	errno = 0;
	cr_assert_eq(read(fd, buf, sizeof buf), -1);
	cr_assert_eq(errno, EAGAIN, "no events");
	const uint64_t mask = 0x3;
	cr_assert_eq(write(fd, &mask, sizeof mask), static_cast<ssize_t>(sizeof mask), "the event mask is taken");
	cr_assert_eq(read(fd, buf, sizeof buf), -1, "and is no event");
}
