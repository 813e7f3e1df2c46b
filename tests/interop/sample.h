/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * The sample checkpoint both codecs of the interop test write: one CPU node,
 * one GPU, KFD BOs of every kind, and a render node with two BOs. Shared by
 * upstream_codec.c (upstream's generated code) and our_codec.cpp (the
 * plugin's image layer), so each side writes the same facts.
 */
#ifndef AMDCR_INTEROP_SAMPLE_H
#define AMDCR_INTEROP_SAMPLE_H

#include <stdint.h>

#define SAMPLE_PID 4242u
#define SAMPLE_NODES 2
#define SAMPLE_GPU_ID 0x1a2bu
#define SAMPLE_MINOR 129u
#define SAMPLE_HIVE 0x5a5a5a5a01ull
#define SAMPLE_VRAM (64ull << 30)
#define SAMPLE_BOS 4
#define SAMPLE_RENDER_BOS 2
#define SAMPLE_PRIV { 'p', 'r', 'i', 'v', 0, 1, 2, 3 }

/* VRAM, GTT, VRAM, doorbell (no contents). */
static inline uint32_t sample_bo_flags(int i)
{
	static const uint32_t f[SAMPLE_BOS] = { 0x1, 0x2, 0x1, 0x8 };
	return f[i];
}
static inline uint64_t sample_bo_addr(int i) { return 0x7f0000000000ull + (uint64_t)i * 0x200000; }
static inline uint64_t sample_bo_size(int i) { return 0x1000ull << i; }
static inline uint64_t sample_bo_offset(int i) { return 0x100000000ull + (uint64_t)i * 0x10000; }
/* criu-dev writes a GEM handle per BO, 0xFFFFFFFF where there is none. */
static inline uint32_t sample_bo_handle(int i) { return i == 3 ? 0xFFFFFFFFu : (uint32_t)(i + 1); }
static inline uint64_t sample_vm_addr(int i) { return 0x800000000ull + (uint64_t)i * 0x100000; }

#endif
