// SPDX-License-Identifier: GPL-2.0-only
//
// Restore-time GPU mapping: each GPU the checkpointed process held is given
// a distinct local GPU that can stand in for it.
//
// A local GPU can stand in for a checkpointed one when
//  - each property of image/node_properties.h meets its rule there: the
//    compute shape, vendor_id and device_id are equal; memory banks, caches,
//    GWS, SDMA engines and queues, CP queues and firmware are at least as
//    many (caches, GWS and firmware unless switched off in Config);
//    capability is equal (unless switched off); io_links_count is not
//    compared (the links are). vram_public is equal, vram_size at least as
//    large (unless switched off);
//  - its links to CPUs are at least as good (XGMI can replace PCIe,
//    bidirectional can replace one-way), and with the NUMA check on, GPUs
//    that shared a CPU node share one locally and GPUs on distinct CPU nodes
//    stay on distinct ones;
//  - every peer link between two held GPUs, each direction on its own
//    (io_links and p2p_links: XGMI, or PCIe P2P through a large BAR), is
//    kept by a link at least as good between the two local GPUs (XGMI can
//    replace PCIe). So a hive lands inside a hive, and larger hives, more
//    peers and more GPUs are fine.
// The search is exhaustive (backtracking, most-constrained GPU first, the
// same gpu_id tried first, local GPUs with too few peers pruned up front),
// so it finds a mapping whenever one exists. docs/topology.md says why.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "config/config.h"
#include "topology/topology.h"

namespace amdcr {

struct GpuMapEntry {
	uint32_t checkpointed_gpu_id = 0;
	uint32_t local_gpu_id = 0;
	uint32_t local_render_minor = 0;
	uint32_t local_node_id = 0;
};

class GpuMap {
public:
	GpuMap() = default;
	explicit GpuMap(std::vector<GpuMapEntry> entries) : entries_(std::move(entries)) {}

	// In the order of the checkpointed gpu_ids given to map_gpus().
	const std::vector<GpuMapEntry> &entries() const { return entries_; }
	const GpuMapEntry *find_checkpointed(uint32_t checkpointed_gpu_id) const;

private:
	std::vector<GpuMapEntry> entries_;
};

// One property a local GPU does not satisfy.
struct PropertyMismatch {
	std::string property;	    // e.g. "vram_size"
	uint64_t checkpointed = 0;
	uint64_t local = 0;
	std::string requirement;    // "equal" or "checkpointed <= local"
	std::optional<Check> check; // the switch that relaxes it, if any

	// "vram_size: checkpointed 68702699520 > local 34342961152
	//  (relax with KFD_VRAM_SIZE_CHECK=0)"
	std::string describe() const;
};

// The node-property part of the rules, for one pair.
std::vector<PropertyMismatch> compare_gpu_properties(const TopologyNode &checkpointed,
						     const TopologyNode &local, const Config &config);

struct MappingInput {
	const Topology *checkpointed = nullptr; // e.g. topology_from_devices() of the image
	const Topology *local = nullptr;	// e.g. parse_topology()
	// gpu_ids (checkpointed) the process held; empty means every
	// accessible GPU of the checkpointed topology.
	std::vector<uint32_t> held_gpu_ids;
	// Which local GPUs the process may use (e.g. its render node opens).
	// Unset means every accessible local GPU. Inaccessible GPUs are never
	// candidates.
	std::function<bool(const TopologyNode &)> usable;
	Config config;
};

// The mapping, or EINVAL with a message that names the checkpointed GPU that
// could not be placed, each candidate tried and why it was refused, and the
// KFD_*_CHECK that would relax it (or that it cannot be relaxed).
Result<GpuMap> map_gpus(const MappingInput &input);

} // namespace amdcr
