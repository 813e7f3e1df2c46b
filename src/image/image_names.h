// SPDX-License-Identifier: GPL-2.0-only
//
// Names of the image files, exactly as the upstream plugin spells them, so
// that either plugin finds the other's files. `id` is CRIU's file id (the
// `id` argument of DUMP_EXT_FILE / RESTORE_EXT_FILE), printed with %d.
//
//   amdgpu-kfd-<id>.img                       CriuKfd (metadata of /dev/kfd)
//   amdgpu-pages-<id>-<gpu_id %04x>.img       contents of that GPU's KFD BOs
//   amdgpu-renderD-<id>.img                   CriuRenderNode (a renderD fd)
//   amdgpu-dmabuf_<id>.img                    CriuDmabufNode (a dma-buf fd)
//   amdgpu-drm-pages-<id>-<minor>-<bo %04x>.img
//                                             contents of one render-node BO;
//                                             the last field is the BO's index
//                                             in the render image (upstream
//                                             passes the loop index there,
//                                             not a gpu_id)
//   amdgpu-binding.img                        this project's own: the dump
//                                             manifest (image/binding.h)
#pragma once

#include <cstdint>
#include <string>

namespace amdcr {

std::string kfd_image_name(int id);
std::string kfd_pages_image_name(int id, uint32_t gpu_id);
std::string render_image_name(int id);
std::string dmabuf_image_name(int id);
std::string drm_pages_image_name(int id, uint32_t render_minor, uint32_t bo_index);

// File name prefixes, for scanning a directory (the restore finds its
// images; amdgpu-img lists every kind).
inline constexpr const char *kKfdImagePrefix = "amdgpu-kfd-";
inline constexpr const char *kRenderImagePrefix = "amdgpu-renderD-";
inline constexpr const char *kDmabufImagePrefix = "amdgpu-dmabuf_";
inline constexpr const char *kPagesImagePrefix = "amdgpu-pages-";
inline constexpr const char *kDrmPagesImagePrefix = "amdgpu-drm-pages-";
inline constexpr const char *kDumpManifestName = "amdgpu-binding.img";

} // namespace amdcr
