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
#include "image/content_checksum.h"
#include "image/framing.h"
#include "image/image_dir.h"

namespace amdcr {

// One GPU VM mapping of a BO: [addr, addr + size) maps the BO from byte
// `offset` (AMDGPU_GEM_OP_GET_MAPPING_INFO's fields).
struct DrmVm {
	uint64_t addr = 0;
	uint64_t size = 0;
	uint64_t offset = 0;
	uint64_t flags = 0;
	bool operator==(const DrmVm &) const = default;
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
	bool is_import = false;	  // a dma-buf the process imported
	std::vector<DrmVm> vms;
	// Checksums of its contents in its amdgpu-drm-pages file
	// (image/content_checksum.h): this plugin's images have them for every
	// BO with contents (unless dumped with KFD_VERIFY=0), upstream's none.
	std::optional<BoChecksum> checksum{};

	// Whether its contents are in an amdgpu-drm-pages file (dumped and
	// restored).
	bool has_contents() const
	{
		return (preferred_domains & (kGemDomainGtt | kGemDomainVram)) != 0;
	}
	bool operator==(const DrmBo &) const = default;
};

struct RenderNodeImage {
	uint32_t gpu_id = 0;
	uint32_t id = 0;
	uint32_t drm_render_minor = 0;
	std::vector<DrmBo> bos;
	bool operator==(const RenderNodeImage &) const = default;
};

struct DmabufImage {
	uint32_t gem_handle = 0;
	bool operator==(const DmabufImage &) const = default;
};

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
Result<RenderNodeImage> read_render_image(const ImageDir &dir, int id, Verify verify = Verify::On,
					  Integrity *integrity = nullptr);

Result<std::vector<uint8_t>> pack_dmabuf_image(const DmabufImage &img);
Result<DmabufImage> unpack_dmabuf_image(std::span<const uint8_t> payload, const std::string &name,
					Verify verify = Verify::On, Integrity *integrity = nullptr);
Status write_dmabuf_image(const ImageDir &dir, int id, const DmabufImage &img);
Result<DmabufImage> read_dmabuf_image(const ImageDir &dir, int id, Verify verify = Verify::On,
				      Integrity *integrity = nullptr);

} // namespace amdcr
