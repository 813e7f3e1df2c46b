// SPDX-License-Identifier: GPL-2.0-only
//
// Kernel ABI facts used by the device model: ioctl numbers and argument
// layouts of /dev/kfd (uAPI up to 1.14) and of amdgpu render nodes
// (including the post-6.18 GEM_LIST_HANDLES, 24-byte GEM_OP and
// GEM_CHANGE_HANDLE). Written from the published layouts; the installed
// headers are not used because they lag behind (no EXPORT_DMABUF, 16-byte
// GEM_OP) and <linux/kfd_ioctl.h> needs <drm/drm.h>, absent here.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kfdemu::abi {

// ---- _IOC encoding --------------------------------------------------------
constexpr unsigned ioc_nr(unsigned long cmd) { return cmd & 0xff; }
constexpr unsigned ioc_type(unsigned long cmd) { return (cmd >> 8) & 0xff; }
constexpr unsigned ioc_size(unsigned long cmd) { return (cmd >> 16) & 0x3fff; }
constexpr unsigned ioc_dir(unsigned long cmd) { return (cmd >> 30) & 3; }
constexpr unsigned kIocWrite = 1; // user -> kernel (_IOC_WRITE)
constexpr unsigned kIocRead = 2;  // kernel -> user (_IOC_READ)
constexpr unsigned long ioc(unsigned dir, unsigned type, unsigned nr, unsigned size)
{
	return (static_cast<unsigned long>(dir) << 30) | (static_cast<unsigned long>(size) << 16) |
	       (type << 8) | nr;
}

// include/linux/errno.h: ERESTARTSYS, a system call interrupted before it did
// anything, made again when the thread next runs (a frozen thread's ioctl).
constexpr long kErestartsys = 512;

// ---- KFD --------------------------------------------------------------------
namespace kfd {
constexpr unsigned kType = 'K';
enum Nr : unsigned {
	GET_VERSION = 0x01, CREATE_QUEUE = 0x02, DESTROY_QUEUE = 0x03,
	SET_MEMORY_POLICY = 0x04, GET_CLOCK_COUNTERS = 0x05,
	GET_PROCESS_APERTURES = 0x06, UPDATE_QUEUE = 0x07, CREATE_EVENT = 0x08,
	DESTROY_EVENT = 0x09, SET_EVENT = 0x0A, RESET_EVENT = 0x0B,
	WAIT_EVENTS = 0x0C, SET_SCRATCH_BACKING_VA = 0x11, GET_TILE_CONFIG = 0x12,
	SET_TRAP_HANDLER = 0x13, GET_PROCESS_APERTURES_NEW = 0x14, ACQUIRE_VM = 0x15,
	ALLOC_MEMORY_OF_GPU = 0x16, FREE_MEMORY_OF_GPU = 0x17,
	MAP_MEMORY_TO_GPU = 0x18, UNMAP_MEMORY_FROM_GPU = 0x19, SET_CU_MASK = 0x1A,
	GET_QUEUE_WAVE_STATE = 0x1B, GET_DMABUF_INFO = 0x1C, IMPORT_DMABUF = 0x1D,
	ALLOC_QUEUE_GWS = 0x1E, SMI_EVENTS = 0x1F, SVM = 0x20, SET_XNACK_MODE = 0x21,
	CRIU_OP = 0x22, AVAILABLE_MEMORY = 0x23, EXPORT_DMABUF = 0x24,
	RUNTIME_ENABLE = 0x25, DBG_TRAP = 0x26, COMMAND_END = 0x27,
};

constexpr uint32_t ALLOC_VRAM = 1u << 0, ALLOC_GTT = 1u << 1, ALLOC_USERPTR = 1u << 2,
		   ALLOC_DOORBELL = 1u << 3, ALLOC_MMIO_REMAP = 1u << 4;
constexpr uint32_t ALLOC_TYPE_MASK = 0x1f;
constexpr uint32_t ALLOC_WRITABLE = 1u << 31, ALLOC_EXECUTABLE = 1u << 30,
		   ALLOC_PUBLIC = 1u << 29, ALLOC_NO_SUBSTITUTE = 1u << 28,
		   ALLOC_AQL_QUEUE_MEM = 1u << 27, ALLOC_COHERENT = 1u << 26,
		   ALLOC_UNCACHED = 1u << 25, ALLOC_EXT_COHERENT = 1u << 24;

constexpr uint64_t MMAP_TYPE_SHIFT = 62, MMAP_TYPE_MASK = 3ull << 62;
constexpr uint64_t MMAP_TYPE_DOORBELL = 3ull << 62, MMAP_TYPE_EVENTS = 2ull << 62,
		   MMAP_TYPE_RESERVED_MEM = 1ull << 62, MMAP_TYPE_MMIO = 0;
constexpr unsigned MMAP_GPU_ID_SHIFT = 46;
constexpr uint64_t MMAP_GPU_ID_MASK = ((1ull << 16) - 1) << MMAP_GPU_ID_SHIFT;
constexpr uint64_t mmap_gpu_id(uint32_t id) { return (static_cast<uint64_t>(id) << MMAP_GPU_ID_SHIFT) & MMAP_GPU_ID_MASK; }
constexpr uint32_t mmap_get_gpu_id(uint64_t off) { return static_cast<uint32_t>((off & MMAP_GPU_ID_MASK) >> MMAP_GPU_ID_SHIFT); }

constexpr uint32_t QUEUE_COMPUTE = 0, QUEUE_SDMA = 1, QUEUE_COMPUTE_AQL = 2, QUEUE_SDMA_XGMI = 3;
constexpr uint32_t MAX_QUEUE_PERCENTAGE = 100, MAX_QUEUE_PRIORITY = 15;
// KFD_MIN_QUEUE_RING_SIZE (kfd_ioctl.h, Linux 6.15): a smaller ring size
// given to CREATE_QUEUE or UPDATE_QUEUE is raised to it.
constexpr uint32_t MIN_QUEUE_RING_SIZE = 1024;
constexpr uint32_t MAX_QUEUES_PER_PROCESS = 1024;
// kfd_ioctl_set_cu_mask: masks longer than this many bits are cut to it.
constexpr uint32_t MAX_CU_MASK_BITS = 1024;

constexpr uint32_t EVENT_SIGNAL = 0, EVENT_NODECHANGE = 1, EVENT_DEVICESTATECHANGE = 2,
		   EVENT_HW_EXCEPTION = 3, EVENT_SYSTEM = 4, EVENT_DEBUG = 5, EVENT_PROFILE = 6,
		   EVENT_QUEUE = 7, EVENT_MEMORY = 8;
constexpr uint32_t SIGNAL_EVENT_LIMIT = 4096;
constexpr uint32_t FIRST_NONSIGNAL_EVENT_ID = 0x80000000u; // KFD_FIRST_NONSIGNAL_EVENT_ID
constexpr uint32_t WAIT_COMPLETE = 0, WAIT_TIMEOUT = 1, WAIT_ERROR = 2;

constexpr uint32_t CRIU_PROCESS_INFO = 0, CRIU_CHECKPOINT = 1, CRIU_UNPAUSE = 2,
		   CRIU_RESTORE = 3, CRIU_RESUME = 4;
constexpr uint32_t INVALID_FD = 0xffffffffu;

struct GetVersion { uint32_t major_version, minor_version; };
struct CreateQueue {
	uint64_t ring_base_address, write_pointer_address, read_pointer_address, doorbell_offset;
	uint32_t ring_size, gpu_id, queue_type, queue_percentage, queue_priority, queue_id;
	uint64_t eop_buffer_address, eop_buffer_size, ctx_save_restore_address;
	uint32_t ctx_save_restore_size, ctl_stack_size;
};
struct DestroyQueue { uint32_t queue_id, pad; };
struct UpdateQueue { uint64_t ring_base_address; uint32_t queue_id, ring_size, queue_percentage, queue_priority; };
struct SetMemoryPolicy {
	uint64_t alternate_aperture_base, alternate_aperture_size;
	uint32_t gpu_id, default_policy, alternate_policy, pad;
};
struct GetClockCounters {
	uint64_t gpu_clock_counter, cpu_clock_counter, system_clock_counter, system_clock_freq;
	uint32_t gpu_id, pad;
};
struct ProcessDeviceApertures {
	uint64_t lds_base, lds_limit, scratch_base, scratch_limit, gpuvm_base, gpuvm_limit;
	uint32_t gpu_id, pad;
};
struct GetProcessAperturesNew { uint64_t kfd_process_device_apertures_ptr; uint32_t num_of_nodes, pad; };
struct CreateEvent {
	uint64_t event_page_offset;
	uint32_t event_trigger_data, event_type, auto_reset, node_id, event_id, event_slot_index;
};
struct EventId { uint32_t event_id, pad; };
struct WaitEvents { uint64_t events_ptr; uint32_t num_events, wait_for_all, timeout, wait_result; };
struct EventData { uint8_t exception_data[32]; uint64_t ext; uint32_t event_id, pad; };
struct SetScratchBackingVa { uint64_t va_addr; uint32_t gpu_id, pad; };
struct GetTileConfig {
	uint64_t tile_config_ptr, macro_tile_config_ptr;
	uint32_t num_tile_configs, num_macro_tile_configs, gpu_id, gb_addr_config, num_banks, num_ranks;
};
struct SetTrapHandler { uint64_t tba_addr, tma_addr; uint32_t gpu_id, pad; };
struct AcquireVm { uint32_t drm_fd, gpu_id; };
struct AllocMemoryOfGpu { uint64_t va_addr, size, handle, mmap_offset; uint32_t gpu_id, flags; };
struct FreeMemoryOfGpu { uint64_t handle; };
struct MapMemoryToGpu { uint64_t handle, device_ids_array_ptr; uint32_t n_devices, n_success; };
struct SetCuMask { uint32_t queue_id, num_cu_mask; uint64_t cu_mask_ptr; };
struct GetQueueWaveState { uint64_t ctl_stack_address; uint32_t ctl_stack_used_size, save_area_used_size, queue_id, pad; };
// kfd_context_save_area_header's first member (Linux 6.4), which
// GET_QUEUE_WAVE_STATE writes at ctl_stack_address.
struct WaveStateHeader { uint32_t control_stack_offset, control_stack_size, wave_state_offset, wave_state_size; };
struct AllocQueueGws { uint32_t queue_id, num_gws, first_gws, pad; };
struct GetDmabufInfo { uint64_t size, metadata_ptr; uint32_t metadata_size, gpu_id, flags, dmabuf_fd; };
struct ImportDmabuf { uint64_t va_addr, handle; uint32_t gpu_id, dmabuf_fd; };
struct SetXnackMode { int32_t xnack_enabled; };
struct CriuArgs {
	uint64_t devices, bos, priv_data, priv_data_size;
	uint32_t num_devices, num_bos, num_objects, pid, op;
	uint32_t pad_;
};
struct CriuDeviceBucket { uint32_t user_gpu_id, actual_gpu_id, drm_fd, pad; };
struct CriuBoBucket {
	uint64_t addr, size, offset, restored_offset;
	uint32_t gpu_id, alloc_flags, dmabuf_fd, pad;
};
struct AvailableMemory { uint64_t available; uint32_t gpu_id, pad; };
struct ExportDmabuf { uint64_t handle; uint32_t flags, dmabuf_fd; };
struct RuntimeEnable { uint64_t r_debug; uint32_t mode_mask, capabilities_mask; };
// AMDKFD_IOC_SVM: kfd_ioctl_svm_args, followed by nattr attributes (the
// caller's cmd carries their size: _IOC_SIZE = 24 + 8 * nattr).
struct SvmArgs { uint64_t start_addr, size; uint32_t op, nattr; };
struct SvmAttribute { uint32_t type, value; };
inline constexpr uint32_t SVM_OP_SET_ATTR = 0, SVM_OP_GET_ATTR = 1;
inline constexpr uint32_t SVM_ATTR_PREFERRED_LOC = 0, SVM_ATTR_PREFETCH_LOC = 1, SVM_ATTR_ACCESS = 2,
			  SVM_ATTR_ACCESS_IN_PLACE = 3, SVM_ATTR_NO_ACCESS = 4, SVM_ATTR_SET_FLAGS = 5,
			  SVM_ATTR_CLR_FLAGS = 6, SVM_ATTR_GRANULARITY = 7;
inline constexpr uint32_t SVM_LOCATION_SYSMEM = 0, SVM_LOCATION_UNDEFINED = 0xffffffff;
inline constexpr uint32_t SVM_FLAG_HOST_ACCESS = 0x1, SVM_FLAG_COHERENT = 0x2, SVM_FLAG_GPU_RO = 0x8,
			  SVM_FLAG_GPU_EXEC = 0x10, SVM_FLAG_GPU_ALWAYS_MAPPED = 0x40;
// AMDKFD_IOC_SMI_EVENTS: kfd_ioctl_smi_events_args.
struct SmiEvents { uint32_t gpuid, anon_fd; };
// enum kfd_smi_event (a client's mask bit for event i is 1 << (i - 1)) and
// the triggers its migration, queue eviction and unmap events name.
inline constexpr uint32_t SMI_EVENT_VMFAULT = 1, SMI_EVENT_MIGRATE_START = 5, SMI_EVENT_MIGRATE_END = 6,
			  SMI_EVENT_PAGE_FAULT_START = 7, SMI_EVENT_PAGE_FAULT_END = 8,
			  SMI_EVENT_QUEUE_EVICTION = 9, SMI_EVENT_QUEUE_RESTORE = 10,
			  SMI_EVENT_UNMAP_FROM_GPU = 11, SMI_EVENT_ALL_PROCESS = 64;
inline constexpr uint32_t MIGRATE_TRIGGER_PREFETCH = 0, MIGRATE_TRIGGER_PAGEFAULT_GPU = 1,
			  MIGRATE_TRIGGER_TTM_EVICTION = 3;
inline constexpr uint32_t QUEUE_EVICTION_TRIGGER_TTM = 2;
inline constexpr uint32_t SVM_UNMAP_TRIGGER_UNMAP_FROM_CPU = 2;

static_assert(sizeof(SvmArgs) == 24 && sizeof(SvmAttribute) == 8 && sizeof(SmiEvents) == 8);
static_assert(sizeof(CreateQueue) == 88 && sizeof(CreateEvent) == 32 && sizeof(WaitEvents) == 24);
static_assert(sizeof(EventData) == 48 && sizeof(ProcessDeviceApertures) == 56);
static_assert(sizeof(AllocMemoryOfGpu) == 40 && sizeof(MapMemoryToGpu) == 24);
static_assert(offsetof(CriuArgs, op) == 48 && sizeof(CriuArgs) == 56);
static_assert(sizeof(CriuBoBucket) == 48 && sizeof(CriuDeviceBucket) == 16);
static_assert(sizeof(GetTileConfig) == 40 && sizeof(GetClockCounters) == 40);
static_assert(sizeof(SetCuMask) == 16 && sizeof(AllocQueueGws) == 16 && sizeof(GetDmabufInfo) == 32);
} // namespace kfd

// ---- DRM core and amdgpu ------------------------------------------------------
namespace drm {
constexpr unsigned kType = 'd';
enum CoreNr : unsigned {
	VERSION = 0x00, GET_UNIQUE = 0x01, GET_MAGIC = 0x02, IRQ_BUSID = 0x03,
	GET_MAP = 0x04, GET_CLIENT = 0x05, GET_STATS = 0x06, SET_VERSION = 0x07,
	MODESET_CTL = 0x08, GEM_CLOSE = 0x09, GEM_FLINK = 0x0a, GEM_OPEN = 0x0b,
	GET_CAP = 0x0c, SET_CLIENT_CAP = 0x0d, SET_UNIQUE = 0x10, AUTH_MAGIC = 0x11,
	PRIME_HANDLE_TO_FD = 0x2d, PRIME_FD_TO_HANDLE = 0x2e,
	GEM_CHANGE_HANDLE = 0xd2,
};
constexpr unsigned kCommandBase = 0x40, kCommandEnd = 0xa0;
enum AmdgpuNr : unsigned {
	GEM_CREATE = 0x00, GEM_MMAP = 0x01, CTX = 0x02, BO_LIST = 0x03, CS = 0x04,
	INFO = 0x05, GEM_METADATA = 0x06, GEM_WAIT_IDLE = 0x07, GEM_VA = 0x08,
	WAIT_CS = 0x09, GEM_OP = 0x10, GEM_USERPTR = 0x11, WAIT_FENCES = 0x12,
	VM = 0x13, FENCE_TO_HANDLE = 0x14, SCHED = 0x15, GEM_LIST_HANDLES = 0x19,
};

constexpr uint64_t CAP_DUMB_BUFFER = 1, CAP_PRIME = 5, CAP_TIMESTAMP_MONOTONIC = 6,
		   CAP_ADDFB2_MODIFIERS = 0x10, CAP_SYNCOBJ = 0x13, CAP_SYNCOBJ_TIMELINE = 0x14;
constexpr uint32_t CLOEXEC = 02000000, RDWR = 02;

constexpr uint32_t DOMAIN_CPU = 1, DOMAIN_GTT = 2, DOMAIN_VRAM = 4, DOMAIN_GDS = 8,
		   DOMAIN_GWS = 0x10, DOMAIN_OA = 0x20, DOMAIN_DOORBELL = 0x40, DOMAIN_MMIO_REMAP = 0x80;
constexpr uint64_t DOMAIN_MASK = 0xff;
constexpr uint64_t CREATE_CPU_ACCESS_REQUIRED = 1u << 0, CREATE_NO_CPU_ACCESS = 1u << 1,
		   CREATE_CPU_GTT_USWC = 1u << 2, CREATE_VRAM_CLEARED = 1u << 3,
		   CREATE_VM_ALWAYS_VALID = 1u << 6, CREATE_EXPLICIT_SYNC = 1u << 7,
		   CREATE_VRAM_WIPE_ON_RELEASE = 1u << 9, CREATE_ENCRYPTED = 1u << 10,
		   CREATE_DISCARDABLE = 1u << 12, CREATE_COHERENT = 1u << 13, CREATE_UNCACHED = 1u << 14,
		   CREATE_EXT_COHERENT = 1u << 15, CREATE_GFX12_DCC = 1u << 16;
// AMDGPU_GEM_CREATE_SETTABLE_MASK (amdgpu_gem.h): what GEM_CREATE accepts and
// what GEM_LIST_HANDLES reports of a BO's flags.
constexpr uint64_t CREATE_SETTABLE_MASK =
	CREATE_CPU_ACCESS_REQUIRED | CREATE_NO_CPU_ACCESS | CREATE_CPU_GTT_USWC | CREATE_VRAM_CLEARED |
	CREATE_VM_ALWAYS_VALID | CREATE_EXPLICIT_SYNC | CREATE_VRAM_WIPE_ON_RELEASE | CREATE_ENCRYPTED |
	CREATE_GFX12_DCC | CREATE_DISCARDABLE | CREATE_COHERENT | CREATE_UNCACHED | CREATE_EXT_COHERENT;
// amdgpu_bo_create() sets this on every BO since Linux 6.10 (clear-page
// tracking), so every BO's flags, as GEM_LIST_HANDLES reports them, have it.
constexpr uint64_t CREATE_ON_EVERY_BO = CREATE_VRAM_WIPE_ON_RELEASE;
// What an import from another amdgpu device inherits of the exporter's flags
// (amdgpu_dma_buf_create_obj).
constexpr uint64_t CREATE_IMPORT_INHERITED = CREATE_CPU_GTT_USWC | CREATE_COHERENT | CREATE_UNCACHED;

constexpr uint32_t USERPTR_READONLY = 1, USERPTR_ANONONLY = 2, USERPTR_VALIDATE = 4,
		   USERPTR_REGISTER = 8;

constexpr uint32_t VA_OP_MAP = 1, VA_OP_UNMAP = 2, VA_OP_CLEAR = 3, VA_OP_REPLACE = 4;
constexpr uint32_t VM_DELAY_UPDATE = 1, VM_PAGE_READABLE = 2, VM_PAGE_WRITEABLE = 4,
		   VM_PAGE_EXECUTABLE = 8, VM_PAGE_PRT = 0x10, VM_MTYPE_MASK = 0xf << 5,
		   VM_PAGE_NOALLOC = 1 << 9;
constexpr uint32_t VA_VALID_FLAGS = VM_DELAY_UPDATE | VM_PAGE_READABLE | VM_PAGE_WRITEABLE |
				    VM_PAGE_EXECUTABLE | VM_PAGE_PRT | VM_MTYPE_MASK | VM_PAGE_NOALLOC;

constexpr uint32_t CTX_OP_ALLOC = 1, CTX_OP_FREE = 2, CTX_OP_QUERY_STATE = 3, CTX_OP_QUERY_STATE2 = 4;
// AMDGPU_CTX_OP_{GET,SET}_STABLE_PSTATE and the pstates (in.flags / out.pstate.flags).
constexpr uint32_t CTX_OP_GET_STABLE_PSTATE = 5, CTX_OP_SET_STABLE_PSTATE = 6;
constexpr uint32_t CTX_STABLE_PSTATE_FLAGS_MASK = 0xf, CTX_STABLE_PSTATE_PEAK = 4;
constexpr uint32_t BO_LIST_CREATE = 0, BO_LIST_DESTROY = 1, BO_LIST_UPDATE = 2;
constexpr uint32_t CHUNK_IB = 1, CHUNK_FENCE = 2, CHUNK_DEPENDENCIES = 3, CHUNK_SYNCOBJ_IN = 4,
		   CHUNK_SYNCOBJ_OUT = 5, CHUNK_BO_HANDLES = 6, CHUNK_SCHEDULED_DEPENDENCIES = 7;
constexpr uint32_t HW_IP_GFX = 0, HW_IP_COMPUTE = 1, HW_IP_DMA = 2, HW_IP_UVD = 3,
		   HW_IP_VCE = 4, HW_IP_NUM = 9;
constexpr uint32_t GEM_OP_GET_GEM_CREATE_INFO = 0, GEM_OP_SET_PLACEMENT = 1,
		   GEM_OP_GET_MAPPING_INFO = 2;
constexpr uint32_t LIST_HANDLES_IS_IMPORT = 1;

constexpr uint32_t INFO_ACCEL_WORKING = 0x00, INFO_CRTC_FROM_ID = 0x01, INFO_HW_IP_INFO = 0x02,
		   INFO_HW_IP_COUNT = 0x03, INFO_TIMESTAMP = 0x05, INFO_FW_VERSION = 0x0e,
		   INFO_NUM_BYTES_MOVED = 0x0f, INFO_VRAM_USAGE = 0x10, INFO_GTT_USAGE = 0x11,
		   INFO_GDS_CONFIG = 0x13, INFO_VRAM_GTT = 0x14, INFO_READ_MMR_REG = 0x15,
		   INFO_DEV_INFO = 0x16, INFO_VIS_VRAM_USAGE = 0x17, INFO_NUM_EVICTIONS = 0x18,
		   INFO_MEMORY = 0x19, INFO_VCE_CLOCK_TABLE = 0x1A, INFO_VBIOS = 0x1B,
		   INFO_NUM_HANDLES = 0x1C, INFO_SENSOR = 0x1D, INFO_VRAM_LOST_COUNTER = 0x1F;

struct Version {
	int32_t version_major, version_minor, version_patchlevel, pad_;
	uint64_t name_len, name, date_len, date, desc_len, desc;
};
struct GetCap { uint64_t capability, value; };
struct GemClose { uint32_t handle, pad; };
struct PrimeHandle { uint32_t handle, flags; int32_t fd; };
struct GemChangeHandle { uint32_t handle, new_handle; };

struct GemCreate { uint64_t bo_size, alignment, domains, domain_flags; }; // out: u32 handle
struct GemMmap { uint64_t handle_or_addr; };
struct Ctx { uint32_t op, flags, ctx_id; int32_t priority; };
struct BoList { uint32_t operation, list_handle, bo_number, bo_info_size; uint64_t bo_info_ptr; };
struct BoListEntry { uint32_t bo_handle, bo_priority; };
struct Cs { uint32_t ctx_id, bo_list_handle, num_chunks, flags; uint64_t chunks; };
struct CsChunk { uint32_t chunk_id, length_dw; uint64_t chunk_data; };
struct CsChunkIb { uint32_t pad_, flags; uint64_t va_start; uint32_t ib_bytes, ip_type, ip_instance, ring; };
struct Info {
	uint64_t return_pointer;
	uint32_t return_size, query;
	uint32_t u[4];
};
struct GemMetadata {
	uint32_t handle, op;
	uint64_t flags, tiling_info;
	uint32_t data_size_bytes, data[64], pad_;
};
struct GemWaitIdle { uint32_t handle, flags; uint64_t timeout; }; // out: u32 status, domain
struct GemVa { uint32_t handle, pad_, operation, flags; uint64_t va_address, offset_in_bo, map_size; };
struct WaitCs { uint64_t handle, timeout; uint32_t ip_type, ip_instance, ring, ctx_id; }; // out: u64 status
struct GemOp { uint32_t handle, op; uint64_t value; uint32_t num_entries, padding; };
struct GemVmEntry { uint64_t addr, size, offset, flags; };
struct GemUserptr { uint64_t addr, size; uint32_t flags, handle; };
struct WaitFences { uint64_t fences; uint32_t fence_count, wait_all; uint64_t timeout_ns; }; // out: u32 status, first
struct Fence { uint32_t ctx_id, ip_type, ip_instance, ring; uint64_t seq_no; };
struct Vm { uint32_t op, flags; };
struct GemListHandles { uint64_t entries; uint32_t num_entries, padding; };
struct GemListHandlesEntry { uint32_t gem_handle, flags; uint64_t size, preferred_domains, alloc_flags, alignment; };
struct HwIpInfo {
	uint32_t hw_ip_version_major, hw_ip_version_minor;
	uint64_t capabilities_flags;
	uint32_t ib_start_alignment, ib_size_alignment, available_rings, ip_discovery_version;
};
struct FirmwareInfo { uint32_t ver, feature; };
struct HeapInfo { uint64_t total_heap_size, usable_heap_size, heap_usage, max_allocation; };
struct MemoryInfo { HeapInfo vram, cpu_accessible_vram, gtt; };
struct VramGtt { uint64_t vram_size, vram_cpu_accessible_size, gtt_size; };

static_assert(sizeof(Version) == 64 && sizeof(GemVa) == 40 && sizeof(GemOp) == 24);
static_assert(sizeof(GemMetadata) == 288 && sizeof(CsChunkIb) == 32 && sizeof(Info) == 32);
static_assert(sizeof(GemListHandlesEntry) == 40 && sizeof(WaitCs) == 32);

// drm_amdgpu_info_device: byte offsets of the fields the model fills
// (the struct grew over time; 368 bytes in libdrm 2.4.114, more in newer
// kernels: the kernel copies min(return_size, its size)).
namespace devinfo {
constexpr size_t kSize = 368;
constexpr size_t device_id = 0, chip_rev = 4, external_rev = 8, pci_rev = 12, family = 16,
		 num_shader_engines = 20, num_shader_arrays_per_engine = 24, gpu_counter_freq = 28,
		 max_engine_clock = 32, max_memory_clock = 40, cu_active_number = 48,
		 cu_ao_mask = 52, cu_bitmap = 56 /* u32[4][4] */, enabled_rb_pipes_mask = 120,
		 num_rb_pipes = 124, num_hw_gfx_contexts = 128, ids_flags = 136,
		 virtual_address_offset = 144, virtual_address_max = 152,
		 virtual_address_alignment = 160, pte_fragment_size = 164, gart_page_size = 168,
		 ce_ram_size = 172, vram_type = 176, vram_bit_width = 180, vce_harvest_config = 184,
		 wave_front_size = 240, num_shader_visible_vgprs = 244, num_cu_per_sh = 248,
		 num_tcc_blocks = 252, cu_ao_bitmap = 272 /* u32[4][4] */,
		 high_va_offset = 336, high_va_max = 344, tcc_disabled_mask = 360;
} // namespace devinfo
} // namespace drm

// The amdgpu BO flags amdgpu_amdkfd_gpuvm_alloc_memory_of_gpu() gives a KFD
// allocation (what GEM_LIST_HANDLES would report of it in a render file).
constexpr uint64_t gem_flags_of_kfd_alloc(uint32_t kfd_flags)
{
	uint64_t f = drm::CREATE_ON_EVERY_BO;
	if ((kfd_flags & kfd::ALLOC_VRAM) && (kfd_flags & kfd::ALLOC_PUBLIC))
		f |= drm::CREATE_CPU_ACCESS_REQUIRED; // VRAM also gets WIPE_ON_RELEASE: every BO has it
	if (kfd_flags & kfd::ALLOC_COHERENT)
		f |= drm::CREATE_COHERENT;
	if (kfd_flags & kfd::ALLOC_EXT_COHERENT)
		f |= drm::CREATE_EXT_COHERENT;
	if (kfd_flags & kfd::ALLOC_UNCACHED)
		f |= drm::CREATE_UNCACHED;
	return f;
}

// ---- SDMA packets -------------------------------------------------------------
namespace sdma {
constexpr uint32_t OP_NOP = 0, OP_COPY = 1, OP_WRITE = 2, OP_FENCE = 5, OP_TRAP = 6,
		   OP_POLL_REGMEM = 8, OP_TIMESTAMP = 13, OP_CONST_FILL = 11;
constexpr uint32_t SUBOP_COPY_LINEAR = 0, SUBOP_WRITE_LINEAR = 0;
constexpr uint32_t kFamilyAi = 141, kFamilyNv = 143, kFamilyGc11 = 145;
} // namespace sdma

} // namespace kfdemu::abi
