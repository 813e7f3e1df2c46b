// SPDX-License-Identifier: GPL-2.0-only
//
// The plugin's side of the interop test: the sample checkpoint (sample.h)
// written and read through the plugin's own image layer, printed in the
// same canonical form as upstream_codec.c prints what upstream's code reads.
//
//   our_codec write-kfd DIR ID | read-kfd DIR ID [--no-handle]
//   our_codec write-render DIR ID | read-render DIR ID
//
// --no-handle: leave kfd_bo_entry.handle out of the printout (the CRIU
// 4.0-4.2.1 format has no such field).
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <string>

#include "image/image_dir.h"
#include "image/kfd_image.h"
#include "image/render_image.h"
#include "sample.h"

using namespace amdcr;

namespace {

int fail(const Error &e)
{
	std::fprintf(stderr, "our_codec: %s\n", e.message().c_str());
	return 1;
}

KfdImage sample_kfd()
{
	KfdImage img;
	for (uint32_t i = 0; i < SAMPLE_NODES; i++) {
		KfdDevice d;
		d.node_id = i;
		d.gpu_id = i ? SAMPLE_GPU_ID : 0;
		d.cpu_cores_count = i ? 0 : 8;
		d.simd_count = i ? 480 : 0;
		d.drm_render_minor = i ? SAMPLE_MINOR : 0;
		d.vendor_id = i ? 0x1002 : 0;
		d.device_id = i ? 0x740f : 0;
		d.hive_id = i ? SAMPLE_HIVE : 0;
		d.fw_version = i ? 78 : 0;
		d.vram_public = i ? 1 : 0;
		d.vram_size = i ? SAMPLE_VRAM : 0;
		if (i) {
			d.io_links_count = 1;
			d.iolinks.push_back({2, 0});
		}
		img.devices.push_back(d);
	}
	for (int i = 0; i < SAMPLE_BOS; i++)
		img.bos.push_back({sample_bo_addr(i), sample_bo_size(i), sample_bo_offset(i), sample_bo_flags(i),
				   SAMPLE_GPU_ID, sample_bo_handle(i)});
	img.pid = SAMPLE_PID;
	img.num_of_objects = 3;
	img.shared_mem_size = 4096;
	img.shared_mem_magic = 0x56785678;
	const uint8_t priv[] = SAMPLE_PRIV;
	img.priv_data.assign(priv, priv + sizeof(priv));
	return img;
}

RenderNodeImage sample_render()
{
	RenderNodeImage img;
	img.gpu_id = SAMPLE_GPU_ID;
	img.id = 5;
	img.drm_render_minor = SAMPLE_MINOR;
	for (int i = 0; i < SAMPLE_RENDER_BOS; i++) {
		DrmBo b;
		b.addr = sample_vm_addr(i);
		b.size = sample_bo_size(i);
		b.offset = sample_bo_offset(i);
		b.alloc_flags = 0x40;
		b.alignment = 4096;
		b.preferred_domains = i ? 2 : 4;
		b.handle = static_cast<uint32_t>(i + 1);
		b.is_import = i == 1;
		b.vms.push_back({sample_vm_addr(i), sample_bo_size(i), 0, 0xe});
		// This plugin's own field (bo_metadata, 180): upstream's code
		// must read the same facts with it there.
		if (i == 0)
			b.metadata = GemMetadata{0x8000000000000123ull, 0x3a0000004c05ull, std::vector<uint8_t>(37, 0x5a)};
		img.bos.push_back(b);
	}
	return img;
}

void print_kfd(const KfdImage &m, bool handles)
{
	std::printf("pid %u gpus %u cpus %u objects %u shm %" PRIu64 " magic 0x%x priv %zu\n", m.pid,
		    m.gpu_count(), m.cpu_count(), m.num_of_objects, m.shared_mem_size, m.shared_mem_magic,
		    m.priv_data.size());
	for (const auto &d : m.devices)
		std::printf("node %u gpu 0x%x minor %u simd %u cores %u hive 0x%" PRIx64 " vram %" PRIu64
			    " public %u fw %u links %zu\n",
			    d.node_id, d.gpu_id, d.drm_render_minor, d.simd_count, d.cpu_cores_count, d.hive_id,
			    d.vram_size, d.vram_public, d.fw_version, d.iolinks.size());
	for (const auto &b : m.bos) {
		std::printf("bo 0x%" PRIx64 " size 0x%" PRIx64 " offset 0x%" PRIx64 " flags 0x%x gpu 0x%x", b.addr,
			    b.size, b.offset, b.alloc_flags, b.gpu_id);
		if (handles)
			std::printf(" handle 0x%x", b.handle);
		std::printf("\n");
	}
}

void print_render(const RenderNodeImage &m, bool gpu_only)
{
	if (gpu_only) {
		std::printf("render gpu 0x%x\n", m.gpu_id);
		return;
	}
	std::printf("render gpu 0x%x id %u minor %u bos %zu\n", m.gpu_id, m.id, m.drm_render_minor, m.bos.size());
	for (const auto &b : m.bos) {
		std::printf("bo 0x%" PRIx64 " size 0x%" PRIx64 " offset 0x%" PRIx64 " flags 0x%" PRIx64
			    " align %" PRIu64 " domains 0x%x handle %u import %u vms %zu\n",
			    b.addr, b.size, b.offset, b.alloc_flags, b.alignment, b.preferred_domains, b.handle,
			    b.is_import ? 1u : 0u, b.vms.size());
		for (const auto &v : b.vms)
			std::printf("vm 0x%" PRIx64 " size 0x%" PRIx64 " offset 0x%" PRIx64 " flags 0x%" PRIx64 "\n",
				    v.addr, v.size, v.offset, v.flags);
	}
}

} // namespace

int main(int argc, char **argv)
{
	if (argc < 4) {
		std::fprintf(stderr, "usage: our_codec write-kfd|read-kfd|write-render|read-render DIR ID [--no-handle|--gpu-only|--resolve KFD_ID]\n");
		return 2;
	}
	const std::string cmd = argv[1];
	const int id = std::atoi(argv[3]);
	const bool handles = !(argc > 4 && std::strcmp(argv[4], "--no-handle") == 0);
	auto dir = ImageDir::open(argv[2]);
	if (!dir)
		return fail(dir.error());
	if (cmd == "write-kfd") {
		auto st = write_kfd_image(*dir, id, sample_kfd());
		return st ? 0 : fail(st.error());
	}
	if (cmd == "read-kfd") {
		auto img = read_kfd_image(*dir, id);
		if (!img)
			return fail(img.error());
		print_kfd(*img, handles);
		return 0;
	}
	if (cmd == "write-render") {
		auto st = write_render_image(*dir, id, sample_render());
		return st ? 0 : fail(st.error());
	}
	if (cmd == "read-render") {
		auto img = read_render_image(*dir, id);
		if (!img)
			return fail(img.error());
		// --gpu-only: as CRIU 4.0-4.2.1's plugin reads it (gpu_id alone).
		// --resolve KFD_ID: a gpu_id-only image's render minor from
		// amdgpu-kfd-<KFD_ID>.img in DIR, and whether it was one.
		const bool gpu_only = argc > 4 && std::strcmp(argv[4], "--gpu-only") == 0;
		if (argc > 5 && std::strcmp(argv[4], "--resolve") == 0) {
			auto kfd = read_kfd_image(*dir, std::atoi(argv[5]));
			if (!kfd)
				return fail(kfd.error());
			if (!resolve_render_minor(*img, *kfd))
				return fail(make_error(ENOENT, "no device entry of gpu 0x%x", img->gpu_id));
			std::printf("gpu_id_only %d\n", img->gpu_id_only ? 1 : 0);
		}
		print_render(*img, gpu_only);
		return 0;
	}
	return 2;
}
