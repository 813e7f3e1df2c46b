/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The upstream plugin's side of the image format: this program is linked
 * with protobuf-c code generated from criu-amdgpu.proto as a CRIU release
 * ships it (extracted from its tarball at build time, never from our
 * proto/), so what it writes is what that CRIU's amdgpu plugin would write
 * and what it reads is what that plugin accepts. UPSTREAM_HAS_RENDER_BOS:
 * the criu-dev proto (kfd_bo_entry.handle, drm_bo_entry, drm_vm_entry);
 * without it, CRIU 4.0-4.2.1's, whose render node image has gpu_id alone.
 *
 *   upstream_codec write-kfd FILE     the sample KFD image (sample.h)
 *   upstream_codec write-render FILE  the sample render node image (criu-dev:
 *                                     its BOs; 4.x: gpu_id alone)
 *   upstream_codec read-kfd FILE      unpack and print it canonically
 *   upstream_codec read-render FILE   likewise (4.x: the gpu_id line only)
 *
 * Files are framed as the plugin frames them: an 8-byte little-endian
 * payload size, then the message.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "criu-amdgpu.pb-c.h"
#include "sample.h"

static int write_framed(const char *path, const uint8_t *buf, size_t len)
{
	FILE *f = fopen(path, "wb");
	uint8_t hdr[8];

	if (!f)
		return 1;
	for (int i = 0; i < 8; i++)
		hdr[i] = (uint8_t)((uint64_t)len >> (8 * i));
	if (fwrite(hdr, 1, 8, f) != 8 || fwrite(buf, 1, len, f) != len) {
		fclose(f);
		return 1;
	}
	return fclose(f) != 0;
}

static uint8_t *read_framed(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t hdr[8];
	uint64_t n = 0;
	uint8_t *buf;

	if (!f || fread(hdr, 1, 8, f) != 8)
		return NULL;
	for (int i = 0; i < 8; i++)
		n |= (uint64_t)hdr[i] << (8 * i);
	buf = malloc(n ? n : 1);
	if (!buf || fread(buf, 1, n, f) != n) {
		fclose(f);
		return NULL;
	}
	fclose(f);
	*len = n;
	return buf;
}

static int write_kfd(const char *path)
{
	CriuKfd m = CRIU_KFD__INIT;
	KfdDeviceEntry dev[SAMPLE_NODES];
	KfdDeviceEntry *devp[SAMPLE_NODES];
	DevIolink link = DEV_IOLINK__INIT, *linkp = &link;
	KfdBoEntry bo[SAMPLE_BOS];
	KfdBoEntry *bop[SAMPLE_BOS];
	static const uint8_t priv[] = SAMPLE_PRIV;

	for (int i = 0; i < SAMPLE_NODES; i++) {
		kfd_device_entry__init(&dev[i]);
		dev[i].node_id = (uint32_t)i;
		dev[i].gpu_id = i ? SAMPLE_GPU_ID : 0;
		dev[i].cpu_cores_count = i ? 0 : 8;
		dev[i].simd_count = i ? 480 : 0;
		dev[i].drm_render_minor = i ? SAMPLE_MINOR : 0;
		dev[i].vendor_id = i ? 0x1002 : 0;
		dev[i].device_id = i ? 0x740f : 0;
		dev[i].hive_id = i ? SAMPLE_HIVE : 0;
		dev[i].fw_version = i ? 78 : 0;
		dev[i].vram_public = i ? 1 : 0;
		dev[i].vram_size = i ? SAMPLE_VRAM : 0;
		devp[i] = &dev[i];
	}
	link.type = 2;
	link.node_to_id = 0;
	dev[1].io_links_count = 1;
	dev[1].n_iolinks = 1;
	dev[1].iolinks = &linkp;
	for (int i = 0; i < SAMPLE_BOS; i++) {
		kfd_bo_entry__init(&bo[i]);
		bo[i].addr = sample_bo_addr(i);
		bo[i].size = sample_bo_size(i);
		bo[i].offset = sample_bo_offset(i);
		bo[i].alloc_flags = sample_bo_flags(i);
		bo[i].gpu_id = SAMPLE_GPU_ID;
#ifdef UPSTREAM_HAS_RENDER_BOS
		bo[i].handle = sample_bo_handle(i);
#endif
		bop[i] = &bo[i];
	}
	m.pid = SAMPLE_PID;
	m.num_of_gpus = 1;
	m.num_of_cpus = 1;
	m.n_device_entries = SAMPLE_NODES;
	m.device_entries = devp;
	m.num_of_bos = SAMPLE_BOS;
	m.n_bo_entries = SAMPLE_BOS;
	m.bo_entries = bop;
	m.num_of_objects = 3;
	m.shared_mem_size = 4096;
	m.shared_mem_magic = 0x56785678;
	m.priv_data.len = sizeof(priv);
	m.priv_data.data = (uint8_t *)priv;

	size_t len = criu_kfd__get_packed_size(&m);
	uint8_t *buf = malloc(len);
	if (!buf || criu_kfd__pack(&m, buf) != len)
		return 1;
	int ret = write_framed(path, buf, len);
	free(buf);
	return ret;
}

static int read_kfd(const char *path)
{
	size_t len = 0;
	uint8_t *buf = read_framed(path, &len);
	CriuKfd *m;

	if (!buf) {
		fprintf(stderr, "upstream_codec: cannot read %s\n", path);
		return 1;
	}
	m = criu_kfd__unpack(NULL, len, buf);
	free(buf);
	if (!m) {
		fprintf(stderr, "upstream_codec: %s is not a criu_kfd message for this CRIU\n", path);
		return 1;
	}
	printf("pid %u gpus %u cpus %u objects %u shm %" PRIu64 " magic 0x%x priv %zu\n", m->pid,
	       m->num_of_gpus, m->num_of_cpus, m->num_of_objects, m->shared_mem_size, m->shared_mem_magic,
	       m->priv_data.len);
	for (size_t i = 0; i < m->n_device_entries; i++) {
		const KfdDeviceEntry *d = m->device_entries[i];
		printf("node %u gpu 0x%x minor %u simd %u cores %u hive 0x%" PRIx64 " vram %" PRIu64
		       " public %u fw %u links %zu\n",
		       d->node_id, d->gpu_id, d->drm_render_minor, d->simd_count, d->cpu_cores_count,
		       d->hive_id, d->vram_size, d->vram_public, d->fw_version, d->n_iolinks);
	}
	for (size_t i = 0; i < m->n_bo_entries; i++) {
		const KfdBoEntry *b = m->bo_entries[i];
		printf("bo 0x%" PRIx64 " size 0x%" PRIx64 " offset 0x%" PRIx64 " flags 0x%x gpu 0x%x", b->addr,
		       b->size, b->offset, b->alloc_flags, b->gpu_id);
#ifdef UPSTREAM_HAS_RENDER_BOS
		printf(" handle 0x%x", b->handle);
#endif
		printf("\n");
	}
	criu_kfd__free_unpacked(m, NULL);
	return 0;
}

static int write_render(const char *path)
{
	CriuRenderNode m = CRIU_RENDER_NODE__INIT;

	m.gpu_id = SAMPLE_GPU_ID;
#ifdef UPSTREAM_HAS_RENDER_BOS
	DrmBoEntry bo[SAMPLE_RENDER_BOS], *bop[SAMPLE_RENDER_BOS];
	DrmVmEntry vm[SAMPLE_RENDER_BOS], *vmp[SAMPLE_RENDER_BOS];

	for (int i = 0; i < SAMPLE_RENDER_BOS; i++) {
		drm_bo_entry__init(&bo[i]);
		drm_vm_entry__init(&vm[i]);
		vm[i].addr = sample_vm_addr(i);
		vm[i].size = sample_bo_size(i);
		vm[i].offset = 0;
		vm[i].flags = 0xe;
		vmp[i] = &vm[i];
		bo[i].addr = sample_vm_addr(i);
		bo[i].size = sample_bo_size(i);
		bo[i].offset = sample_bo_offset(i);
		bo[i].alloc_flags = 0x40;
		bo[i].alignment = 4096;
		bo[i].preferred_domains = i ? 2 : 4;
		bo[i].handle = (uint32_t)(i + 1);
		bo[i].is_import = (uint32_t)(i == 1);
		bo[i].num_of_vms = 1;
		bo[i].n_vm_entries = 1;
		bo[i].vm_entries = &vmp[i];
		bop[i] = &bo[i];
	}
	m.id = 5;
	m.drm_render_minor = SAMPLE_MINOR;
	m.num_of_bos = SAMPLE_RENDER_BOS;
	m.n_bo_entries = SAMPLE_RENDER_BOS;
	m.bo_entries = bop;
#endif /* CRIU 4.0-4.2.1: criu_render_node has gpu_id alone */
	size_t len = criu_render_node__get_packed_size(&m);
	uint8_t *buf = malloc(len);
	if (!buf || criu_render_node__pack(&m, buf) != len)
		return 1;
	int ret = write_framed(path, buf, len);
	free(buf);
	return ret;
}

static int read_render(const char *path)
{
	size_t len = 0;
	uint8_t *buf = read_framed(path, &len);
	CriuRenderNode *m;

	if (!buf)
		return 1;
	m = criu_render_node__unpack(NULL, len, buf);
	free(buf);
	if (!m) {
		fprintf(stderr, "upstream_codec: %s is not a criu_render_node message\n", path);
		return 1;
	}
#ifndef UPSTREAM_HAS_RENDER_BOS
	printf("render gpu 0x%x\n", m->gpu_id);
#else
	printf("render gpu 0x%x id %u minor %u bos %" PRIu64 "\n", m->gpu_id, m->id, m->drm_render_minor,
	       m->num_of_bos);
	for (size_t i = 0; i < m->n_bo_entries; i++) {
		const DrmBoEntry *b = m->bo_entries[i];
		printf("bo 0x%" PRIx64 " size 0x%" PRIx64 " offset 0x%" PRIx64 " flags 0x%" PRIx64
		       " align %" PRIu64 " domains 0x%x handle %u import %u vms %u\n",
		       b->addr, b->size, b->offset, b->alloc_flags, b->alignment, b->preferred_domains, b->handle,
		       b->is_import, b->num_of_vms);
		for (size_t j = 0; j < b->n_vm_entries; j++)
			printf("vm 0x%" PRIx64 " size 0x%" PRIx64 " offset 0x%" PRIx64 " flags 0x%" PRIx64 "\n",
			       b->vm_entries[j]->addr, b->vm_entries[j]->size, b->vm_entries[j]->offset,
			       b->vm_entries[j]->flags);
	}
#endif
	criu_render_node__free_unpacked(m, NULL);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 3)
		goto usage;
	if (!strcmp(argv[1], "write-kfd"))
		return write_kfd(argv[2]);
	if (!strcmp(argv[1], "read-kfd"))
		return read_kfd(argv[2]);
	if (!strcmp(argv[1], "write-render"))
		return write_render(argv[2]);
	if (!strcmp(argv[1], "read-render"))
		return read_render(argv[2]);
usage:
	fprintf(stderr, "usage: upstream_codec write-kfd|read-kfd|write-render|read-render FILE\n");
	return 2;
}
