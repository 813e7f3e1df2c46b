// SPDX-License-Identifier: GPL-2.0-only
//
// The KFD topology: what /sys/class/kfd/kfd/topology describes (CPU and GPU
// nodes, their properties, memory banks and io links), and the same
// information as stored in the checkpoint image (kfd_device_entry).
//
// Parsing is rooted at an injectable directory ("/" in production, a fixture
// tree in tests) and goes through an injectable file-system interface, so
// tests can produce the errors of a real sysfs (EPERM from a device cgroup).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "image/node_properties.h"

namespace amdcr {

// io link types kept from sysfs; every other type is dropped.
inline constexpr uint32_t kIoLinkTypePcie = 2;
inline constexpr uint32_t kIoLinkTypeXgmi = 11;
// Memory bank heap types that describe VRAM.
inline constexpr uint32_t kHeapTypeFrameBufferPublic = 1;
inline constexpr uint32_t kHeapTypeFrameBufferPrivate = 2;

// How much a link type can do: no link < PCIe < XGMI. A link stands in
// for another when its rank is at least the other's.
inline constexpr int link_rank(uint32_t type)
{
	return type == kIoLinkTypeXgmi ? 2 : type == kIoLinkTypePcie ? 1 : 0;
}

struct IoLink {
	uint32_t type = 0;    // kIoLinkTypePcie or kIoLinkTypeXgmi
	uint32_t node_to = 0; // topology node id of the other end

	bool operator==(const IoLink &) const = default;
};

// One caches/<i> entry (informational: not stored in images, not compared).
struct CacheInfo {
	uint32_t level = 0;
	uint32_t size = 0; // KiB
	uint32_t cache_line_size = 0;
	uint32_t type = 0;
};

struct TopologyNode {
	uint32_t node_id = 0;
	// 0 for a CPU node. Also 0 for a GPU node that is not accessible and
	// whose gpu_id file could not be read.
	uint32_t gpu_id = 0;
	bool is_gpu = false;
	// False when the device cgroup hides the GPU (its files fail with
	// EPERM): the node is listed, but holds no properties and is never a
	// mapping candidate. CPU nodes are always accessible.
	bool accessible = true;
	std::string name; // "" for CPUs; not stored in images
	// Its place in the nodes directory as readdir lists it (0 first): the
	// order upstream's plugin writes device entries in, and the order its
	// restore matches them to the local nodes in (see dump_kfd.cpp).
	uint32_t listing_index = 0;

	// Properties (the ones the image stores, same names as in sysfs).
	AMDCR_NODE_PROPERTIES(AMDCR_NODE_PROPERTY_FIELD)
	uint64_t hive_id = 0;
	// From the first memory bank with heap type 1 (public) or 2 (private).
	bool vram_public = false;
	uint64_t vram_size = 0;

	// PCIe and XGMI links, in sysfs order (links of other types dropped).
	std::vector<IoLink> io_links;
	// p2p_links/<i> (same filtering): GPUs whose VRAM this one reaches
	// over PCIe (large BAR) and CPU nodes reached through another CPU.
	// Stored in images (field 120); peer links count in peer_link().
	std::vector<IoLink> p2p_links;
	// caches/<i>, in index order. Informational.
	std::vector<CacheInfo> caches;

	bool is_cpu() const { return !is_gpu; }
};

struct SystemProperties {
	uint64_t platform_oem = 0;
	uint64_t platform_id = 0;
	uint64_t platform_rev = 0;
};

class Topology {
public:
	Topology() = default;
	// Nodes are kept sorted by node_id.
	explicit Topology(std::vector<TopologyNode> nodes, SystemProperties system = {});

	const std::vector<TopologyNode> &nodes() const { return nodes_; }
	const SystemProperties &system() const { return system_; }

	const TopologyNode *node(uint32_t node_id) const;
	// A GPU node by gpu_id (gpu_id 0 never matches).
	const TopologyNode *gpu(uint32_t gpu_id) const;
	const TopologyNode *gpu_by_render_minor(uint32_t minor) const;
	// All GPU nodes / accessible GPU nodes / CPU nodes, in node_id order.
	std::vector<const TopologyNode *> gpus() const;
	std::vector<const TopologyNode *> accessible_gpus() const;
	std::vector<const TopologyNode *> cpus() const;

	// A link is valid when its far end is an accessible node of this
	// topology (links to hidden GPUs are ignored, as the kernel still lists
	// them).
	bool link_valid(const IoLink &link) const;
	// The link of `type` from node `from` to node `to`, if it is valid.
	const IoLink *find_link(uint32_t from, uint32_t to, uint32_t type) const;
	// Valid links of `type` both ways between two nodes.
	bool bidirectional(uint32_t node_a, uint32_t node_b, uint32_t type) const;
	// Two GPUs (by gpu_id) joined by a bidirectional XGMI link.
	bool xgmi_peers(uint32_t gpu_a, uint32_t gpu_b) const;
	// How GPU `from` reaches GPU `to`'s memory (by gpu_id): the best valid
	// link of either list (io_links, p2p_links), kIoLinkTypeXgmi before
	// kIoLinkTypePcie; 0 when there is none (or a GPU is unknown).
	uint32_t peer_link(uint32_t from_gpu, uint32_t to_gpu) const;

	// XGMI hives: groups of >= 2 accessible GPUs connected by bidirectional
	// XGMI links (connected components). gpu_ids, each hive in node order,
	// hives ordered by their first node.
	std::vector<std::vector<uint32_t>> hives() const;
	// NUMA affinity: node ids of the CPU nodes a GPU has valid links to
	// (normally exactly one), in link order. Empty for an unknown gpu_id.
	std::vector<uint32_t> cpu_nodes_of_gpu(uint32_t gpu_id) const;

private:
	std::vector<TopologyNode> nodes_;
	SystemProperties system_;
};

// File access used by the parser. Paths are absolute.
class TopologyFs {
public:
	struct DirEntry {
		std::string name;
		bool is_dir = false;
	};

	virtual ~TopologyFs() = default;
	// The whole file, read until EOF. Errors carry the errno (EPERM, ...).
	virtual Result<std::string> read_file(const std::string &path) const = 0;
	virtual Result<std::vector<DirEntry>> list_dir(const std::string &path) const = 0;
};

// The real file system.
const TopologyFs &disk_topology_fs();

// "<root>/sys/class/kfd/kfd/topology" ("/" gives the real sysfs).
std::string topology_dir(const std::string &root);

// Parses the whole topology. Errors: ENOENT/EACCES... when the topology
// directory cannot be listed; EINVAL for a malformed line (the message names
// the file and the 1-based line number) or a GPU without a VRAM bank. A GPU
// node whose files fail with EPERM/EACCES is recorded with accessible=false.
Result<Topology> parse_topology(const std::string &root, const TopologyFs &fs = disk_topology_fs());

// A multi-line summary for the log: one line per node with its kind, ids,
// VRAM and valid links, then the hives.
std::string describe_topology(const Topology &topology);

} // namespace amdcr
