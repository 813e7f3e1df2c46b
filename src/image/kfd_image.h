// SPDX-License-Identifier: GPL-2.0-only
//
// The KFD image (amdgpu-kfd-<id>.img): the process's KFD topology as seen at
// checkpoint, its BO table and the opaque private data of the KFD CRIU op.
//
// Callers use these plain C++ types; the protobuf-c structs never leave
// kfd_image.cpp. KfdDevice has exactly the fields of the proto message
// kfd_device_entry (same names), so topology code can fill it directly.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "image/binding.h"
#include "image/chunk_index.h"
#include "image/content_checksum.h"
#include "image/framing.h"
#include "image/from_parent.h"
#include "image/node_properties.h"
#include "image/image_dir.h"

namespace amdcr {

// KFD_IOC_ALLOC_MEM_FLAGS_* of <linux/kfd_ioctl.h> that decide whether a BO
// has contents in the pages file.
inline constexpr uint32_t kKfdAllocVram = 1u << 0;
inline constexpr uint32_t kKfdAllocGtt = 1u << 1;
inline constexpr uint32_t kNoGemHandle = 0xFFFFFFFF;
inline constexpr uint32_t kKfdAllocDoorbell = 1u << 3;
inline constexpr uint32_t kKfdAllocMmioRemap = 1u << 4;

struct KfdIoLink {
	uint32_t type = 0; // 2 = PCIe, 11 = XGMI
	uint32_t node_to_id = 0;
	bool operator==(const KfdIoLink &) const = default;
};

// One topology node; a CPU node has gpu_id == 0. iolinks and p2p_links are
// the node's io_links/ and p2p_links/ of KFD's topology.
struct KfdDevice {
	uint32_t node_id = 0;
	uint32_t gpu_id = 0;
	AMDCR_NODE_PROPERTIES(AMDCR_NODE_PROPERTY_FIELD)
	uint64_t hive_id = 0;
	uint32_t vram_public = 0;
	uint64_t vram_size = 0;
	std::vector<KfdIoLink> iolinks;
	// This project's field 120 (empty in upstream's images): p2p_links.
	std::vector<KfdIoLink> p2p_links;

	bool is_gpu() const { return gpu_id != 0; }
	bool operator==(const KfdDevice &) const = default;
};

// One KFD BO (a bucket of the CHECKPOINT op).
struct KfdBo {
	uint64_t addr = 0;
	uint64_t size = 0;
	uint64_t offset = 0; // mmap offset
	uint32_t alloc_flags = 0;
	uint32_t gpu_id = 0;
	// A GEM handle naming the BO across the checkpoint's processes, or
	// kNoGemHandle (what this plugin writes: it does not track dma-buf
	// sharing yet, and upstream's restore takes equal handles for one
	// shared BO). Images of CRIU 4.0-4.2.1's plugin have none.
	uint32_t handle = kNoGemHandle;
	// Checksums of its contents in the pages file (image/content_checksum.h);
	// every BO with contents has them in this plugin's images, none in
	// upstream's.
	std::optional<BoChecksum> checksum{};
	// This project's field 160: the chunks of its contents that are in the
	// parent checkpoint (an incremental dump); none without it.
	std::optional<FromParent> from_parent{};
	// This project's field 190: the chunks of its contents stored elsewhere
	// in this checkpoint (a deduplicated dump); none without it.
	std::optional<ChunkRefs> dedup{};

	// The bytes of its contents its own pages file holds (all but the
	// chunks in the parent and those stored elsewhere).
	uint64_t stored_bytes() const;
	// VRAM and GTT BOs have their contents in the pages file.
	bool has_contents() const { return (alloc_flags & (kKfdAllocVram | kKfdAllocGtt)) != 0; }
	// Doorbell and MMIO pages: mapped through /dev/kfd, no contents.
	bool maps_through_kfd() const { return (alloc_flags & (kKfdAllocDoorbell | kKfdAllocMmioRemap)) != 0; }
	bool operator==(const KfdBo &) const = default;
};

// The parent of a chain's link: the dump that wrote it, and its KFD image
// of the same process.
struct ChainParent {
	DumpId dump_id{};
	uint32_t file_id = 0;
	bool operator==(const ChainParent &) const = default;
};

struct KfdImage {
	uint32_t pid = 0;
	// All topology nodes, CPUs and GPUs, in topology order. On disk,
	// num_of_gpus = number of GPU entries, num_of_cpus = the rest.
	std::vector<KfdDevice> devices;
	// In the order of the CHECKPOINT op's BO buckets; this order is the
	// order of the contents in the pages files.
	std::vector<KfdBo> bos;
	uint32_t num_of_objects = 0;
	uint64_t shared_mem_size = 0;
	uint32_t shared_mem_magic = 0;
	std::vector<uint8_t> priv_data;
	// This plugin's images: the dump and CRIU file it belongs to
	// (image/binding.h); upstream's have none.
	std::optional<DumpBinding> binding;
	// This project's field 160: the parent checkpoint when the image is a
	// link of a chain (proto/criu-amdgpu.proto's top comment).
	std::optional<ChainParent> parent;

	uint32_t gpu_count() const;
	uint32_t cpu_count() const;
	// The device entry of `gpu_id`, or nullptr.
	const KfdDevice *find_gpu(uint32_t gpu_id) const;
	// Sum of the bytes of gpu_id's VRAM/GTT BOs that its pages file holds
	// (all of their sizes but for the chunks in the parent and those
	// stored elsewhere, KfdBo::stored_bytes): the file's payload. Errors
	// on overflow.
	Result<uint64_t> pages_size(uint32_t gpu_id) const;

	bool operator==(const KfdImage &) const = default;
};

// Checks a KfdImage for everything read_kfd_image checks (used on write
// too, so that we never write what we would refuse to read). `name` is put
// in the messages.
Status validate_kfd_image(const KfdImage &img, const std::string &name);

// The seal field of criu_kfd (image/framing.h).
inline constexpr uint32_t kKfdSealField = 100;

// Packed protobuf payload (no framing), sealed.
Result<std::vector<uint8_t>> pack_kfd_image(const KfdImage &img);
// Unpacks and validates a payload; errors name `name`. Verify::On checks
// the seal when there is one (EBADMSG on a mismatch) and refuses BO
// checksums without a seal (a damaged seal's key would otherwise pass as an
// upstream image); Verify::Off checks neither and drops the BO checksums.
// `integrity`, when given, receives what could be checked.
Result<KfdImage> unpack_kfd_image(std::span<const uint8_t> payload, const std::string &name,
				  Verify verify = Verify::On, Integrity *integrity = nullptr);

// amdgpu-kfd-<id>.img, framed, atomically.
Status write_kfd_image(const ImageDir &dir, int id, const KfdImage &img);
Result<KfdImage> read_kfd_image(const ImageDir &dir, int id, Verify verify = Verify::On,
				Integrity *integrity = nullptr);

} // namespace amdcr
