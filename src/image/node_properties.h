// SPDX-License-Identifier: GPL-2.0-only
//
// The one list of the 32-bit properties of a KFD topology node that the
// KFD image stores. Each name is at once the key in sysfs
// (topology/nodes/N/properties), the field of KfdDevice, TopologyNode and
// the kfd_device_entry message, so parsing, the image and the topology
// bridge all expand this list. hive_id (64 bits) and the VRAM bank
// (vram_public, vram_size; from mem_banks/) are the other stored facts.
//
// X(name, rule, check) also says how a restore compares a checkpointed GPU
// with a local one: `equal`, `at_least` (local >= checkpointed) or `none`
// (not compared); `check` names the config Check (KFD_*_CHECK) that turns
// the comparison off, `None` if nothing does. This header only carries the
// tokens; topology/mapping.cpp gives them meaning.
//
// The rules follow what the process depends on (docs/topology.md): the
// compute shape and device id (the code objects and the scratch layout the
// runtime built for them) are `equal`; what more of is harmless (memory
// banks, caches, GWS, SDMA engines and their queues, CP queues, firmware)
// is `at_least`; io_links_count is `none` because it counts the machine's
// links, not the ones the process used: the mapper compares the links
// themselves (to CPUs and between the process's GPUs).
#pragma once

#define AMDCR_NODE_PROPERTIES(X)                                                                   \
	X(cpu_cores_count, none, None)                                                             \
	X(simd_count, equal, None)                                                                 \
	X(mem_banks_count, at_least, None)                                                         \
	X(caches_count, at_least, CachesCount)                                                     \
	X(io_links_count, none, None)                                                              \
	X(max_waves_per_simd, equal, None)                                                         \
	X(lds_size_in_kb, equal, None)                                                             \
	X(gds_size_in_kb, none, None)                                                              \
	X(num_gws, at_least, NumGws)                                                               \
	X(wave_front_size, equal, None)                                                            \
	X(array_count, equal, None)                                                                \
	X(simd_arrays_per_engine, equal, None)                                                     \
	X(cu_per_simd_array, equal, None)                                                          \
	X(simd_per_cu, equal, None)                                                                \
	X(max_slots_scratch_cu, equal, None)                                                       \
	X(vendor_id, equal, None)                                                                  \
	X(device_id, equal, None)                                                                  \
	X(domain, none, None)                                                                      \
	X(drm_render_minor, none, None)                                                            \
	X(num_sdma_engines, at_least, None)                                                        \
	X(num_sdma_xgmi_engines, at_least, None)                                                   \
	X(num_sdma_queues_per_engine, at_least, None)                                              \
	X(num_cp_queues, at_least, None)                                                           \
	X(fw_version, at_least, FwVersion)                                                         \
	X(capability, equal, Capability)                                                           \
	X(sdma_fw_version, at_least, SdmaFwVersion)

// Declares the fields of AMDCR_NODE_PROPERTIES in a struct.
#define AMDCR_NODE_PROPERTY_FIELD(name, rule, check) uint32_t name = 0;
