// SPDX-License-Identifier: GPL-2.0-only
// Debian's libhsakmt 5.2.3 against the model (run under kfd-emu): open,
// topology, VRAM and system allocations, GPU mapping, an AQL queue, a signal
// event, teardown. Exits non-zero on the first failure.
#include <hsakmt.h>

#include <cstdio>
#include <cstring>

#define CHECK(x)                                                                      \
	do {                                                                          \
		HSAKMT_STATUS s_ = (x);                                               \
		if (s_ != HSAKMT_STATUS_SUCCESS) {                                    \
			std::fprintf(stderr, "FAIL %s:%d: %s = %d\n", __FILE__, __LINE__, #x, \
				     static_cast<int>(s_));                           \
			return 1;                                                     \
		}                                                                     \
	} while (0)
#define EXPECT(c)                                                                     \
	do {                                                                          \
		if (!(c)) {                                                           \
			std::fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c); \
			return 1;                                                     \
		}                                                                     \
	} while (0)

int main()
{
	CHECK(hsaKmtOpenKFD());
	HsaVersionInfo v{};
	CHECK(hsaKmtGetVersion(&v));
	EXPECT(v.KernelInterfaceMajorVersion == 1);
	HsaSystemProperties sp{};
	CHECK(hsaKmtAcquireSystemProperties(&sp));
	EXPECT(sp.NumNodes >= 2);
	HSAuint32 gpu = 0;
	for (HSAuint32 n = 0; n < sp.NumNodes && !gpu; ++n) {
		HsaNodeProperties np{};
		CHECK(hsaKmtGetNodeProperties(n, &np));
		if (np.NumFComputeCores)
			gpu = n;
	}
	EXPECT(gpu != 0);

	HsaMemFlags vf{};
	vf.ui32.NonPaged = 1;
	vf.ui32.HostAccess = 1;
	vf.ui32.PageSize = HSA_PAGE_SIZE_4KB;
	void *vram = nullptr;
	CHECK(hsaKmtAllocMemory(gpu, 1 << 20, vf, &vram));
	HSAuint64 gva = 0;
	CHECK(hsaKmtMapMemoryToGPU(vram, 1 << 20, &gva));
	std::memset(vram, 0x5a, 1 << 20);
	EXPECT(static_cast<unsigned char *>(vram)[12345] == 0x5a);

	HsaMemFlags sf{};
	sf.ui32.HostAccess = 1;
	sf.ui32.PageSize = HSA_PAGE_SIZE_4KB;
	sf.ui32.ExecuteAccess = 1;
	void *ring = nullptr;
	CHECK(hsaKmtAllocMemory(0, 65536, sf, &ring));
	CHECK(hsaKmtMapMemoryToGPU(ring, 65536, &gva));

	HsaQueueResource qr{};
	CHECK(hsaKmtCreateQueue(gpu, HSA_QUEUE_COMPUTE_AQL, 100, HSA_QUEUE_PRIORITY_NORMAL, ring, 65536, nullptr,
				&qr));
	EXPECT(qr.Queue_DoorBell != nullptr);

	HsaEventDescriptor ed{};
	ed.EventType = HSA_EVENTTYPE_SIGNAL;
	ed.NodeId = gpu;
	HsaEvent *ev = nullptr;
	CHECK(hsaKmtCreateEvent(&ed, true, false, &ev));
	EXPECT(hsaKmtWaitOnEvent(ev, 10) == HSAKMT_STATUS_WAIT_TIMEOUT);
	CHECK(hsaKmtSetEvent(ev));
	CHECK(hsaKmtWaitOnEvent(ev, 1000));
	CHECK(hsaKmtDestroyEvent(ev));

	CHECK(hsaKmtDestroyQueue(qr.QueueId));
	CHECK(hsaKmtUnmapMemoryToGPU(ring));
	CHECK(hsaKmtFreeMemory(ring, 65536));
	CHECK(hsaKmtUnmapMemoryToGPU(vram));
	CHECK(hsaKmtFreeMemory(vram, 1 << 20));
	CHECK(hsaKmtReleaseSystemProperties());
	CHECK(hsaKmtCloseKFD());
	std::puts("ok");
	return 0;
}
