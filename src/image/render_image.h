// SPDX-License-Identifier: GPL-2.0-only
//
// The render node image (amdgpu-renderD-<id>.img) and the dma-buf image
// (amdgpu-dmabuf_<id>.img), as plain C++ types.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/drm.h"
#include "base/result.h"
#include "image/binding.h"
#include "image/content_checksum.h"
#include "image/framing.h"
#include "image/image_dir.h"
#include "image/kfd_image.h"

namespace amdcr {

// One GPU VM mapping of a BO: [addr, addr + size) maps the BO from byte
// `offset` with GEM_VA's AMDGPU_VM_PAGE_* `flags` (32 bits in a 64-bit
// field: AMDGPU_GEM_OP_GET_MAPPING_INFO's fields).
struct DrmVm {
	uint64_t addr = 0;
	uint64_t size = 0;
	uint64_t offset = 0;
	uint64_t flags = 0;
	bool operator==(const DrmVm &) const = default;
};

// Whether a BO of these GEM domains has contents a checkpoint keeps (VRAM
// or GTT memory).
constexpr bool gem_domains_have_contents(uint32_t preferred_domains)
{
	return (preferred_domains & (kGemDomainGtt | kGemDomainVram)) != 0;
}

// The highest shared BO id an image may carry (shared_bo_entry.id, 1..):
// bounds the restore's table of shared BOs.
constexpr uint32_t kMaxSharedBoId = 1u << 16;

// A BO that several files of the checkpoint may hold (shared_bo_entry,
// this project's): the exporter's render file, importing render files (of
// this or other processes) and bare dma-buf fds. Every holder's entry
// carries the same description, so whichever holder is restored first can
// recreate the BO; its contents are once in the checkpoint, in one
// amdgpu-drm-pages file.
struct SharedBo {
	uint32_t id = 0;     // the same in every holder's entry, 1..kMaxSharedBoId
	uint32_t gpu_id = 0; // the GPU whose memory it is (checkpointed gpu_id)
	uint64_t size = 0;
	uint64_t alignment = 0; // bytes
	uint32_t preferred_domains = 0;
	uint64_t alloc_flags = 0;
	// Its contents: amdgpu-drm-pages file (contents_id, contents_minor,
	// contents_index), when gem_domains_have_contents.
	uint32_t contents_id = 0;
	uint32_t contents_minor = 0;
	uint32_t contents_index = 0;
	// Checksums of the contents, so the holder restored first, which fills
	// the BO, checks them: in the entries of the holders dumped after the
	// render file that holds the contents (that file's DrmBo::checksum has
	// them) and in a bare dma-buf's that holds them; none with
	// KFD_VERIFY=0.
	std::optional<BoChecksum> checksum{};
	// Its amdgpu metadata (bo_metadata), set by the holder that creates
	// it at restore; none: a new BO's.
	std::optional<GemMetadata> metadata{};
	bool has_contents() const { return gem_domains_have_contents(preferred_domains); }
	bool operator==(const SharedBo &) const = default;
};

// One GEM BO of the render node file (drm_bo_entry).
struct DrmBo {
	uint64_t addr = 0;	  // the VA of its last mapping (as upstream), 0 without
	uint64_t size = 0;
	uint64_t offset = 0;	  // CPU mmap offset through the render node (0: not mappable)
	uint64_t alloc_flags = 0; // AMDGPU_GEM_CREATE_*
	uint64_t alignment = 0;	  // bytes, as GEM_CREATE takes it
	uint32_t preferred_domains = 0;
	uint32_t handle = 0;	  // its GEM handle in the process
	bool is_import = false;	  // held through another file: contents not in its own pages file
	std::vector<DrmVm> vms;
	std::optional<SharedBo> shared; // this project's images: the BO as a shareable one
	// Checksums of its contents in its amdgpu-drm-pages file
	// (image/content_checksum.h): this plugin's images have them for every
	// BO with contents (unless dumped with KFD_VERIFY=0), upstream's none.
	std::optional<BoChecksum> checksum{};
	// This project's images: its amdgpu metadata (bo_metadata), when it
	// differs from a new BO's; the same as its shared BO's.
	std::optional<GemMetadata> metadata{};

	// Whether its contents are in its own amdgpu-drm-pages file (dumped
	// and restored with this file); an import's are in its shared BO's.
	bool has_contents() const { return gem_domains_have_contents(preferred_domains) && !is_import; }
	bool operator==(const DrmBo &) const = default;
};

struct RenderNodeImage {
	uint32_t gpu_id = 0;
	uint32_t id = 0;	       // the CRIU file id it was dumped for (its file name's)
	uint32_t drm_render_minor = 0; // 0 in a gpu_id-only image until resolve_render_minor
	std::vector<DrmBo> bos;
	// Written by the plugin of CRIU 4.0-4.2.1, whose criu_render_node has
	// gpu_id alone and no BOs: `id` is then the file name's, and the render
	// minor is the one its GPU has in the checkpoint's KFD images
	// (resolve_render_minor).
	bool gpu_id_only = false;
	// This plugin's images: the dump and CRIU file it belongs to
	// (image/binding.h); upstream's have none.
	std::optional<DumpBinding> binding;
	bool operator==(const RenderNodeImage &) const = default;
};

// Fills a gpu_id-only image's drm_render_minor from the device entries of
// one of the checkpoint's KFD images; true when `img` has its minor now
// (it had one already, or `kfd` lists its GPU).
bool resolve_render_minor(RenderNodeImage &img, const KfdImage &kfd);

// The render node an image names, for messages: "renderD<minor>", or "render
// minor unknown" for a gpu_id-only image whose GPU no KFD image lists.
std::string render_node_label(const RenderNodeImage &img);

// amdgpu-dmabuf_<id>.img: a dma-buf fd a process holds.
struct DmabufImage {
	uint32_t gem_handle = 0; // a handle of its BO in a dumped render file (0: none)
	std::optional<SharedBo> shared; // the BO; required by this plugin's restore
	std::optional<DumpBinding> binding{}; // as RenderNodeImage's
	bool operator==(const DmabufImage &) const = default;
};

Status validate_shared_bo(const SharedBo &s, const std::string &where);
Status validate_render_image(const RenderNodeImage &img, const std::string &name);

// The seal fields (image/framing.h) of criu_render_node and
// criu_dmabuf_node: both images are sealed as the KFD image is.
inline constexpr uint32_t kRenderSealField = 100;
inline constexpr uint32_t kDmabufSealField = 100;

// Packed and sealed. Unpacking checks the seal and the BO checksums as
// unpack_kfd_image does (Verify::On: a seal must match, BO checksums without
// a seal are refused; Verify::Off: neither, and the BO checksums are
// dropped); `integrity`, when given, receives what could be checked.
Result<std::vector<uint8_t>> pack_render_image(const RenderNodeImage &img);
Result<RenderNodeImage> unpack_render_image(std::span<const uint8_t> payload, const std::string &name,
					    Verify verify = Verify::On, Integrity *integrity = nullptr);
Status write_render_image(const ImageDir &dir, int id, const RenderNodeImage &img);
// Reads amdgpu-renderD-<id>.img: a gpu_id-only image takes `id` as its id,
// any other must carry it (an image of another file is refused).
Result<RenderNodeImage> read_render_image(const ImageDir &dir, int id, Verify verify = Verify::On,
					  Integrity *integrity = nullptr);

Result<std::vector<uint8_t>> pack_dmabuf_image(const DmabufImage &img);
Result<DmabufImage> unpack_dmabuf_image(std::span<const uint8_t> payload, const std::string &name,
					Verify verify = Verify::On, Integrity *integrity = nullptr);
Status write_dmabuf_image(const ImageDir &dir, int id, const DmabufImage &img);
Result<DmabufImage> read_dmabuf_image(const ImageDir &dir, int id, Verify verify = Verify::On,
				      Integrity *integrity = nullptr);

} // namespace amdcr
