// SPDX-License-Identifier: GPL-2.0-only
//
// Synthetic KFD topologies for the mapping and remap tests, written as the
// kernel would list them: GPU -> CPU and XGMI links under io_links, PCIe peer
// links (large BAR) under p2p_links, io_links_count equal to the number of
// io_links written. Peer links can instead go to io_links (PeerLinks::Io),
// where upstream's test topologies put them, to show that both lists count.
#pragma once

#include <criterion/criterion.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <vector>

#include "topology/topology.h"

namespace amdcr::test {

enum class PeerLinks { P2p, Io };

// The device_id of machine_gpu() when none is given.
inline constexpr uint32_t kDefaultKind = 0x74a1;

// A GPU of one kind (an MI300X-like shape); device_id tells kinds apart.
inline TopologyNode machine_gpu(uint32_t node_id, uint32_t gpu_id, uint32_t device_id)
{
	TopologyNode g;
	g.node_id = node_id;
	g.gpu_id = gpu_id;
	g.is_gpu = true;
	g.simd_count = 1216;
	g.mem_banks_count = 1;
	g.caches_count = 358;
	g.max_waves_per_simd = 8;
	g.lds_size_in_kb = 64;
	g.num_gws = 64;
	g.wave_front_size = 64;
	g.array_count = 32;
	g.simd_arrays_per_engine = 1;
	g.cu_per_simd_array = 10;
	g.simd_per_cu = 4;
	g.max_slots_scratch_cu = 32;
	g.vendor_id = 4098;
	g.device_id = device_id;
	g.drm_render_minor = 128 + node_id;
	g.num_sdma_engines = 2;
	g.num_sdma_xgmi_engines = 14;
	g.num_sdma_queues_per_engine = 8;
	g.num_cp_queues = 24;
	g.fw_version = 150;
	g.capability = 0x3ae5c280;
	g.sdma_fw_version = 19;
	g.vram_public = true;
	g.vram_size = 192ull << 30;
	return g;
}

// A GPU of an older kind (an MI100-like shape) with render minor `minor`:
// machine_gpu()'s shape where the two kinds differ.
inline TopologyNode mi100_gpu(uint32_t node_id, uint32_t gpu_id, uint32_t minor)
{
	TopologyNode g = machine_gpu(node_id, gpu_id, 29711);
	g.simd_count = 416;
	g.caches_count = 193;
	g.array_count = 8;
	g.cu_per_simd_array = 16;
	g.drm_render_minor = minor;
	g.num_sdma_xgmi_engines = 3;
	g.fw_version = 78;
	g.capability = 1008312960;
	g.sdma_fw_version = 8;
	g.vram_size = 64ull << 30;
	return g;
}

using NodeTweak = std::function<void(TopologyNode &)>;

class Machine {
public:
	Machine &cpu(uint32_t node_id)
	{
		TopologyNode c;
		c.node_id = node_id;
		c.cpu_cores_count = 96;
		nodes_.push_back(c);
		return *this;
	}
	Machine &gpu(uint32_t node_id, uint32_t gpu_id, uint32_t device_id = kDefaultKind,
		     const NodeTweak &tweak = {})
	{
		TopologyNode g = machine_gpu(node_id, gpu_id, device_id);
		if (tweak)
			tweak(g);
		nodes_.push_back(g);
		return *this;
	}
	// The GPU `g` (any shape), tweaked, with its PCIe links to and from
	// `cpu_node`.
	Machine &gpu_on(uint32_t cpu_node, TopologyNode g, const NodeTweak &tweak = {})
	{
		if (tweak)
			tweak(g);
		const uint32_t node_id = g.node_id;
		nodes_.push_back(std::move(g));
		return on_cpu(node_id, cpu_node);
	}
	// The GPU's PCIe link to its CPU, and the CPU's back to it if `back`.
	Machine &on_cpu(uint32_t gpu, uint32_t cpu, bool back = true)
	{
		find(gpu).io_links.push_back({kIoLinkTypePcie, cpu});
		if (back)
			find(cpu).io_links.push_back({kIoLinkTypePcie, gpu});
		return *this;
	}
	// XGMI links both ways between every two of `gpus`.
	Machine &hive(std::initializer_list<uint32_t> gpus)
	{
		for (uint32_t a : gpus)
			for (uint32_t b : gpus)
				if (a != b)
					find(a).io_links.push_back({kIoLinkTypeXgmi, b});
		return *this;
	}
	// XGMI links both ways between `a` and `b`.
	Machine &xgmi(uint32_t a, uint32_t b) { return hive({a, b}); }
	// PCIe peer links from `from` to each of `to` (one direction).
	Machine &p2p(uint32_t from, std::initializer_list<uint32_t> to)
	{
		for (uint32_t t : to)
			peers_.push_back({from, t});
		return *this;
	}
	// A node, to tweak after the fact.
	TopologyNode &find(uint32_t node_id)
	{
		for (auto &n : nodes_)
			if (n.node_id == node_id)
				return n;
		cr_assert_fail("no node %u", node_id);
		return nodes_.front();
	}

	Topology build(PeerLinks where = PeerLinks::P2p) const
	{
		std::vector<TopologyNode> nodes = nodes_;
		for (const auto &[from, to] : peers_)
			for (auto &n : nodes)
				if (n.node_id == from)
					(where == PeerLinks::P2p ? n.p2p_links : n.io_links)
						.push_back({kIoLinkTypePcie, to});
		for (auto &n : nodes)
			n.io_links_count = static_cast<uint32_t>(n.io_links.size());
		return Topology(std::move(nodes));
	}

private:
	std::vector<TopologyNode> nodes_;
	std::vector<std::pair<uint32_t, uint32_t>> peers_;
};

} // namespace amdcr::test
