// SPDX-License-Identifier: GPL-2.0-only
//
// Between the topology (src/topology) and the KFD image's device entries
// (src/image): what a dump stores about the machine, and the checkpointed
// topology a restore maps from.
#pragma once

#include <cstdint>
#include <vector>

#include "base/result.h"
#include "image/kfd_image.h"
#include "topology/topology.h"

namespace amdcr {

// One topology node as an image entry, stored under `image_gpu_id` (the
// gpu_id the process uses, which differs from the node's after a restore
// on another machine). Only valid PCIe/XGMI links are stored, io_links and
// p2p_links alike (p2p_links in this project's field 120).
KfdDevice device_from_node(const Topology &topo, const TopologyNode &node, uint32_t image_gpu_id);

// The image entry back as an accessible topology node.
TopologyNode node_from_device(const KfdDevice &dev);

// The checkpointed machine, as a topology, from the image's entries.
Result<Topology> topology_from_devices(const std::vector<KfdDevice> &devices);

} // namespace amdcr
