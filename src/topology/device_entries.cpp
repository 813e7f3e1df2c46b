// SPDX-License-Identifier: GPL-2.0-only
#include "topology/device_entries.h"

#include <set>

namespace amdcr {

// The properties stored per node, by name: KfdDevice and TopologyNode use
// the kfd_device_entry field names, so one list serves both directions.
#define AMDCR_DEVICE_PROPERTIES(X)                                                                 \
	X(cpu_cores_count)                                                                         \
	X(simd_count)                                                                              \
	X(mem_banks_count)                                                                         \
	X(caches_count)                                                                            \
	X(io_links_count)                                                                          \
	X(max_waves_per_simd)                                                                      \
	X(lds_size_in_kb)                                                                          \
	X(gds_size_in_kb)                                                                          \
	X(num_gws)                                                                                 \
	X(wave_front_size)                                                                         \
	X(array_count)                                                                             \
	X(simd_arrays_per_engine)                                                                  \
	X(cu_per_simd_array)                                                                       \
	X(simd_per_cu)                                                                             \
	X(max_slots_scratch_cu)                                                                    \
	X(vendor_id)                                                                               \
	X(device_id)                                                                               \
	X(domain)                                                                                  \
	X(drm_render_minor)                                                                        \
	X(hive_id)                                                                                 \
	X(num_sdma_engines)                                                                        \
	X(num_sdma_xgmi_engines)                                                                   \
	X(num_sdma_queues_per_engine)                                                              \
	X(num_cp_queues)                                                                           \
	X(fw_version)                                                                              \
	X(capability)                                                                              \
	X(sdma_fw_version)                                                                         \
	X(vram_size)

KfdDevice device_from_node(const Topology &topo, const TopologyNode &node, uint32_t image_gpu_id)
{
	KfdDevice d;
	d.node_id = node.node_id;
	d.gpu_id = node.is_gpu ? image_gpu_id : 0;
#define X(f) d.f = node.f;
	AMDCR_DEVICE_PROPERTIES(X)
#undef X
	d.vram_public = node.vram_public ? 1 : 0;
	for (const auto &l : node.io_links)
		if (topo.link_valid(l))
			d.iolinks.push_back({l.type, l.node_to});
	return d;
}

TopologyNode node_from_device(const KfdDevice &dev)
{
	TopologyNode n;
	n.node_id = dev.node_id;
	n.gpu_id = dev.gpu_id;
	n.is_gpu = dev.gpu_id != 0;
	n.accessible = true;
#define X(f) n.f = dev.f;
	AMDCR_DEVICE_PROPERTIES(X)
#undef X
	n.vram_public = dev.vram_public != 0;
	for (const auto &l : dev.iolinks)
		n.io_links.push_back({l.type, l.node_to_id});
	return n;
}

#undef AMDCR_DEVICE_PROPERTIES

Result<Topology> topology_from_devices(const std::vector<KfdDevice> &devices)
{
	std::vector<TopologyNode> nodes;
	std::set<uint32_t> node_ids, gpu_ids;
	for (const auto &d : devices) {
		if (!node_ids.insert(d.node_id).second)
			return make_error(EINVAL, "device entries: node %u appears twice", d.node_id);
		if (d.gpu_id && !gpu_ids.insert(d.gpu_id).second)
			return make_error(EINVAL, "device entries: gpu 0x%04x appears twice", d.gpu_id);
		nodes.push_back(node_from_device(d));
	}
	return Topology(std::move(nodes));
}

} // namespace amdcr
