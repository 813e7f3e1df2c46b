// SPDX-License-Identifier: GPL-2.0-only
//
// The KFD wrapper and the copy engine together on the emulated GPU, the way
// the plugin uses them (run under kfd-emu; skips without /dev/kfd):
// a process allocates VRAM BOs through libhsakmt and fills them; CRIU_OP
// PROCESS_INFO + CHECKPOINT on its own KFD fd give dma-bufs, which the
// SdmaEngine dumps; UNPAUSE. A forked child then RESTOREs the buckets on its
// own KFD fd, writes the dumped bytes into the restored BOs through the
// engine, dumps them again to compare, and the parent RESUMEs it.
#include <criterion/criterion.h>

#include <hsakmt.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "../common/assert_ok.h"
#include "base/unique_fd.h"
#include "copy/sdma_engine.h"
#include "copy/transfer.h"
#include "device/kfd.h"
#include "../copy/fakes.h"
#include "testcommon/pattern.h"

using namespace amdcr;

namespace {

constexpr uint64_t KiB = 1024, MiB = 1024 * 1024;
const char *kTopo = "/sys/class/kfd/kfd/topology/nodes";

// gpu_id -> render minor, from the (emulated) KFD sysfs topology.
std::map<uint32_t, int> render_minors()
{
	std::map<uint32_t, int> out;
	for (int n = 0; n < 64; ++n) {
		std::ifstream id(std::string(kTopo) + "/" + std::to_string(n) + "/gpu_id");
		if (!id)
			break;
		uint32_t gpu = 0;
		id >> gpu;
		if (gpu == 0)
			continue;
		std::ifstream props(std::string(kTopo) + "/" + std::to_string(n) + "/properties");
		std::string key;
		long long v = 0;
		while (props >> key >> v)
			if (key == "drm_render_minor")
				out[gpu] = static_cast<int>(v);
	}
	return out;
}

UniqueFd open_render(int minor)
{
	const std::string path = "/dev/dri/renderD" + std::to_string(minor);
	return UniqueFd(::open(path.c_str(), O_RDWR | O_CLOEXEC));
}

// Dumps the BOs with the given dma-bufs on render node `minor`.
Result<std::vector<uint8_t>> dump(int minor, const std::vector<const KfdBoBucket *> &bos)
{
	UniqueFd render = open_render(minor);
	if (!render)
		return make_error(ENODEV, "no renderD%d", minor);
	auto eng = SdmaEngine::create(render.get());
	if (!eng)
		return std::move(eng).error();
	std::vector<GpuBuffer> bufs;
	for (const auto *b : bos) {
		auto g = (*eng)->import_dmabuf(b->dmabuf.get(), b->size);
		if (!g)
			return std::move(g).error();
		bufs.push_back(*g);
	}
	test::VectorSink sink;
	auto st = transfer_to_file(**eng, bufs, sink, 256 * KiB);
	if (!st)
		return std::move(st).error();
	return std::move(sink.data);
}

// The child's side: RESTORE, write `image` into the restored BOs, read it
// back. Returns an exit code; says why on stderr.
int restore_child(const KfdCheckpoint &cp, const KfdProcessInfo &info,
		  const std::vector<size_t> &ours, const std::vector<uint8_t> &image, int minor)
{
	auto kfd = Kfd::open();
	if (!kfd) {
		std::fprintf(stderr, "child: %s\n", kfd.error().message().c_str());
		return 10;
	}
	const auto minors = render_minors();
	std::vector<UniqueFd> renders;
	std::vector<KfdDeviceBucket> devs;
	for (const auto &d : cp.devices) {
		auto it = minors.find(d.actual_gpu_id);
		if (it == minors.end())
			return 11;
		renders.push_back(open_render(it->second));
		devs.push_back(KfdDeviceBucket{d.user_gpu_id, d.actual_gpu_id, renders.back().get()});
	}
	KfdRestoreRequest req;
	req.devices = devs;
	req.bos = cp.bos;
	req.priv_data = cp.priv_data;
	req.num_objects = info.num_objects;
	auto restored = kfd->restore(req);
	if (!restored) {
		std::fprintf(stderr, "child: %s\n", restored.error().message().c_str());
		return 12;
	}
	if (restored->bos.size() != cp.bos.size())
		return 13;

	std::vector<const KfdBoBucket *> mine;
	for (size_t i : ours) {
		if (!restored->bos[i].dmabuf.valid())
			return 14;
		mine.push_back(&restored->bos[i]);
	}
	{
		UniqueFd render = open_render(minor);
		auto eng = SdmaEngine::create(render.get());
		if (!eng)
			return 15;
		std::vector<GpuBuffer> bufs;
		for (const auto *b : mine) {
			auto g = (*eng)->import_dmabuf(b->dmabuf.get(), b->size);
			if (!g)
				return 16;
			bufs.push_back(*g);
		}
		test::VectorSource source(image);
		auto st = transfer_from_file(**eng, bufs, source, 256 * KiB);
		if (!st) {
			std::fprintf(stderr, "child: %s\n", st.error().message().c_str());
			return 17;
		}
	}
	auto again = dump(minor, mine);
	if (!again) {
		std::fprintf(stderr, "child: %s\n", again.error().message().c_str());
		return 18;
	}
	if (*again != image)
		return 19;
	return 0;
}

} // namespace

Test(kfd_emulator, version)
{
	if (::access("/dev/kfd", F_OK) != 0)
		cr_skip_test("no /dev/kfd (run under kfd-emu)");
	auto kfd = Kfd::open();
	cr_assert_ok(kfd);
	auto v = kfd->get_version();
	cr_assert_ok(v);
	cr_assert_eq(v->major, 1u);
	cr_assert_geq(v->minor, 8u, "CRIU with GTT dma-bufs needs KFD 1.8");
}

Test(kfd_emulator, resume_of_a_non_gpu_process_is_esrch)
{
	if (::access("/dev/kfd", F_OK) != 0)
		cr_skip_test("no /dev/kfd (run under kfd-emu)");
	auto kfd = Kfd::open();
	cr_assert(kfd.ok());
	const pid_t child = ::fork();
	if (child == 0) {
		::pause();
		_exit(0);
	}
	auto st = kfd->resume(static_cast<uint32_t>(child));
	::kill(child, SIGKILL);
	::waitpid(child, nullptr, 0);
	cr_assert(!st.ok());
	cr_assert_eq(st.error().code(), ESRCH, "%s", st.error().message().c_str());
}

Test(kfd_emulator, checkpoint_dump_restore_resume)
{
	if (::access("/dev/kfd", F_OK) != 0)
		cr_skip_test("no /dev/kfd (run under kfd-emu)");
	cr_assert_eq(hsaKmtOpenKFD(), HSAKMT_STATUS_SUCCESS);
	HsaSystemProperties sys{};
	cr_assert_eq(hsaKmtAcquireSystemProperties(&sys), HSAKMT_STATUS_SUCCESS);
	uint32_t node = 0;
	int minor = -1;
	for (uint32_t n = 0; n < sys.NumNodes && minor < 0; ++n) {
		HsaNodeProperties props{};
		cr_assert_eq(hsaKmtGetNodeProperties(n, &props), HSAKMT_STATUS_SUCCESS);
		if (props.NumFComputeCores && props.DrmRenderMinor > 0) {
			node = n;
			minor = props.DrmRenderMinor;
		}
	}
	cr_assert_geq(minor, 128, "no GPU node");

	// Two VRAM BOs with known contents.
	const uint64_t sizes[] = {1 * MiB + 64 * KiB, 12 * KiB};
	std::vector<void *> addrs;
	std::vector<uint8_t> expect;
	uint32_t seed = 7;
	for (uint64_t size : sizes) {
		HsaMemFlags f{};
		f.ui32.NonPaged = 1;
		f.ui32.HostAccess = 1;
		f.ui32.NoSubstitute = 1;
		f.ui32.PageSize = HSA_PAGE_SIZE_4KB;
		void *addr = nullptr;
		cr_assert_eq(hsaKmtAllocMemory(node, size, f, &addr), HSAKMT_STATUS_SUCCESS);
		HSAuint64 gpuva = 0;
		cr_assert_eq(hsaKmtMapMemoryToGPU(addr, size, &gpuva), HSAKMT_STATUS_SUCCESS);
		testcommon::fill_pattern(addr, size, seed++);
		const auto *p = static_cast<const uint8_t *>(addr);
		expect.insert(expect.end(), p, p + size);
		addrs.push_back(addr);
	}

	auto kfd = Kfd::open();
	cr_assert(kfd.ok());
	auto info = kfd->process_info();
	cr_assert_ok(info);
	cr_assert_eq(info->pid, static_cast<uint32_t>(::getpid()));
	cr_assert_geq(info->num_bos, 2u);
	cr_assert_geq(info->num_devices, 1u);
	cr_assert_gt(info->priv_data_size, 0u);

	auto cp = kfd->checkpoint(*info);
	cr_assert_ok(cp);
	cr_assert_eq(cp->bos.size(), info->num_bos);
	cr_assert_eq(cp->devices.size(), info->num_devices);
	cr_assert_eq(cp->priv_data.size(), info->priv_data_size);

	// Our BOs, in bucket order, by address.
	std::vector<size_t> ours;
	for (void *a : addrs)
		for (size_t i = 0; i < cp->bos.size(); ++i)
			if (cp->bos[i].addr == reinterpret_cast<uint64_t>(a))
				ours.push_back(i);
	cr_assert_eq(ours.size(), 2u, "checkpoint lacks our BOs");
	std::vector<const KfdBoBucket *> mine;
	for (size_t i : ours) {
		cr_assert(cp->bos[i].dmabuf.valid(), "VRAM BO without a dma-buf");
		mine.push_back(&cp->bos[i]);
	}

	auto image = dump(minor, mine);
	cr_assert_ok(image);
	cr_assert(*image == expect, "dumped bytes differ from the BOs");

	auto st = kfd->unpause();
	cr_assert_ok(st);
	// A second UNPAUSE: not paused any more.
	st = kfd->unpause();
	cr_assert(!st.ok());
	cr_assert_eq(st.error().code(), EINVAL);

	// Restore in a fresh process (its own KFD process), then RESUME it.
	int ready[2], resumed_pipe[2];
	cr_assert_eq(::pipe(ready), 0);
	cr_assert_eq(::pipe(resumed_pipe), 0);
	const pid_t child = ::fork();
	cr_assert_geq(child, 0);
	if (child == 0) {
		::close(ready[0]);
		::close(resumed_pipe[1]);
		const int rc = restore_child(*cp, *info, ours, *image, minor);
		const char c = static_cast<char>(rc);
		(void)!::write(ready[1], &c, 1);
		// Stay a KFD process until the parent has resumed us.
		char go = 0;
		(void)!::read(resumed_pipe[0], &go, 1);
		_exit(rc);
	}
	::close(ready[1]);
	::close(resumed_pipe[0]);
	char rc = -1;
	cr_assert_eq(::read(ready[0], &rc, 1), 1);
	::close(ready[0]);
	if (rc != 0) {
		::close(resumed_pipe[1]);
		::waitpid(child, nullptr, 0);
		cr_assert_fail("restore in the child failed (code %d)", rc);
	}
	auto resumed = kfd->resume(static_cast<uint32_t>(child));
	::close(resumed_pipe[1]);
	int status = 0;
	::waitpid(child, &status, 0);
	cr_assert_ok(resumed);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);

	for (size_t i = 0; i < addrs.size(); ++i) {
		cr_assert_eq(hsaKmtUnmapMemoryToGPU(addrs[i]), HSAKMT_STATUS_SUCCESS);
		cr_assert_eq(hsaKmtFreeMemory(addrs[i], sizes[i]), HSAKMT_STATUS_SUCCESS);
	}
	hsaKmtCloseKFD();
}
