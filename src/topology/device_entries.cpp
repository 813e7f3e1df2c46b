// SPDX-License-Identifier: GPL-2.0-only
#include "topology/device_entries.h"

#include <set>

namespace amdcr {

KfdDevice device_from_node(const Topology &topo, const TopologyNode &node, uint32_t image_gpu_id)
{
	KfdDevice d;
	d.node_id = node.node_id;
	d.gpu_id = node.is_gpu ? image_gpu_id : 0;
#define AMDCR_COPY(name, rule, check) d.name = node.name;
	AMDCR_NODE_PROPERTIES(AMDCR_COPY)
#undef AMDCR_COPY
	d.hive_id = node.hive_id;
	d.vram_size = node.vram_size;
	d.vram_public = node.vram_public ? 1 : 0;
	for (const auto &l : node.io_links)
		if (topo.link_valid(l))
			d.iolinks.push_back({l.type, l.node_to});
	for (const auto &l : node.p2p_links)
		if (topo.link_valid(l))
			d.p2p_links.push_back({l.type, l.node_to});
	return d;
}

TopologyNode node_from_device(const KfdDevice &dev)
{
	TopologyNode n;
	n.node_id = dev.node_id;
	n.gpu_id = dev.gpu_id;
	n.is_gpu = dev.gpu_id != 0;
	n.accessible = true;
#define AMDCR_COPY(name, rule, check) n.name = dev.name;
	AMDCR_NODE_PROPERTIES(AMDCR_COPY)
#undef AMDCR_COPY
	n.hive_id = dev.hive_id;
	n.vram_size = dev.vram_size;
	n.vram_public = dev.vram_public != 0;
	for (const auto &l : dev.iolinks)
		n.io_links.push_back({l.type, l.node_to_id});
	for (const auto &l : dev.p2p_links)
		n.p2p_links.push_back({l.type, l.node_to_id});
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
