// SPDX-License-Identifier: GPL-2.0-only
//
// The walker of the KFD CRIU op's private data at restore. The plugin keeps
// that blob opaque (stored verbatim in the KFD image, handed back to
// CRIU_OP RESTORE), so the code that walks it is the kernel's; here, the
// emulated kernel's (tests/emulator/model/criu.cpp, criu_restore), which the
// e2e tests restore every damaged image through. Each input is one RESTORE
// on a fresh in-process model of a 2-GPU machine, by a task that opened
// /dev/kfd and both render nodes:
//
//   u32 user gpu_id of GPU 0, u32 of GPU 1 (little-endian), u16 BO count N,
//   N x 48-byte kfd_criu_bo_bucket, then the private data (its header's
//   object count is passed as num_objects, as the plugin passes the image's)
//
// Properties besides "no crash, no sanitizer report": a failed RESTORE
// installs no fd; a successful one gives a dma-buf for every VRAM/GTT BO
// and none for the others.
#include <cstdint>
#include <cstring>
#include <vector>

#include "fuzz_common.h"
#include "model/tests/harness.h"

namespace {

using namespace kfdemu;
using namespace kfdemu::testing;
using namespace kfdemu::abi::kfd;

constexpr uint32_t kGpu0 = 0x3333, kGpu1 = 0x4444; // the model's (actual) gpu_ids
constexpr size_t kMaxBos = 512;			     // bounds the work per input

template <typename T> T load(const uint8_t *p)
{
	T v;
	std::memcpy(&v, p, sizeof v);
	return v;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 10)
		return 0;
	const uint32_t user0 = load<uint32_t>(data), user1 = load<uint32_t>(data + 4);
	const size_t n_bos = load<uint16_t>(data + 8);
	if (n_bos > kMaxBos || size < 10 + n_bos * sizeof(CriuBoBucket))
		return 0;
	std::vector<CriuBoBucket> bos(n_bos);
	if (n_bos)
		std::memcpy(bos.data(), data + 10, n_bos * sizeof(CriuBoBucket));
	std::vector<uint8_t> priv(data + 10 + n_bos * sizeof(CriuBoBucket), data + size);
	if (priv.empty())
		return 0;
	const uint32_t num_objects = priv.size() >= 24 ? load<uint32_t>(priv.data() + 20) : 0;

	Rig rig{make_machine({kGpu0, kGpu1}, 141, 64ull << 20)};
	FakeCaller task{2000, true};
	const int kfd = rig.open_kfd(task);
	const int r0 = rig.open_render(task, 128), r1 = rig.open_render(task, 129);
	fuzz::require(kfd >= 0 && r0 >= 0 && r1 >= 0, "the model opens /dev/kfd and both render nodes");
	std::vector<CriuDeviceBucket> devs = {{user0, kGpu0, static_cast<uint32_t>(r0), 0},
					      {user1, kGpu1, static_cast<uint32_t>(r1), 0}};
	CriuArgs a{};
	a.op = CRIU_RESTORE;
	a.devices = reinterpret_cast<uint64_t>(devs.data());
	a.bos = reinterpret_cast<uint64_t>(bos.data());
	a.priv_data = reinterpret_cast<uint64_t>(priv.data());
	a.priv_data_size = priv.size();
	a.num_devices = 2;
	a.num_bos = static_cast<uint32_t>(n_bos);
	a.num_objects = num_objects;
	task.last_fds.clear();
	const long r = rig.kfd(task, kfd, CRIU_OP, &a);
	if (r != 0) {
		fuzz::require(task.last_fds.empty(), "a failed RESTORE installs no fd");
		return 0;
	}
	size_t with_contents = 0;
	for (const auto &b : bos) {
		const bool contents = (b.alloc_flags & (ALLOC_VRAM | ALLOC_GTT)) != 0;
		with_contents += contents ? 1 : 0;
		fuzz::require(contents == (b.dmabuf_fd != INVALID_FD),
			      "a restored BO has a dma-buf exactly when it has contents");
	}
	fuzz::require(task.last_fds.size() == with_contents, "one fd per restored VRAM/GTT BO");
	return 0;
}
