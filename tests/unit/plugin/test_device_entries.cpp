// SPDX-License-Identifier: GPL-2.0-only
//
// The topology <-> image device entry bridge: what a dump stores about each
// node comes back as the same node at restore.
#include <criterion/criterion.h>

#include "plugin/device_entries.h"

using namespace amdcr;

static Topology fixture(const char *name)
{
	auto t = parse_topology(std::string(AMDCR_SOURCE_DIR) + "/tests/fixtures/topology/" + name);
	cr_assert(t.ok(), "%s: %s", name, t.ok() ? "" : t.error().message().c_str());
	return std::move(*t);
}

Test(device_entries, every_node_round_trips)
{
	for (const char *name : {"mi100", "2xmi210", "8xmi300x"}) {
		const Topology topo = fixture(name);
		std::vector<KfdDevice> devs;
		for (const auto &n : topo.nodes())
			devs.push_back(device_from_node(topo, n, n.gpu_id));
		auto back = topology_from_devices(devs);
		cr_assert(back.ok(), "%s", back.ok() ? "" : back.error().message().c_str());
		cr_assert_eq(back->nodes().size(), topo.nodes().size());
		for (size_t i = 0; i < devs.size(); i++) {
			const TopologyNode &a = topo.nodes()[i];
			const TopologyNode &b = back->nodes()[i];
			cr_expect_eq(a.node_id, b.node_id);
			cr_expect_eq(a.gpu_id, b.gpu_id);
			cr_expect_eq(a.is_gpu, b.is_gpu);
			cr_expect_eq(a.simd_count, b.simd_count, "%s node %u", name, a.node_id);
			cr_expect_eq(a.vram_size, b.vram_size);
			cr_expect_eq(a.vram_public, b.vram_public);
			cr_expect_eq(a.fw_version, b.fw_version);
			cr_expect_eq(a.sdma_fw_version, b.sdma_fw_version);
			cr_expect_eq(a.capability, b.capability);
			cr_expect_eq(a.hive_id, b.hive_id);
			cr_expect_eq(a.drm_render_minor, b.drm_render_minor);
			cr_expect(a.io_links == b.io_links, "%s node %u: io links differ", name, a.node_id);
			// Re-encoding the round-tripped node gives the same entry.
			cr_expect(device_from_node(*back, b, b.gpu_id) == devs[i]);
		}
		cr_expect_eq(back->hives().size(), topo.hives().size(), "%s: hives", name);
	}
}

Test(device_entries, stored_under_the_process_gpu_id)
{
	const Topology topo = fixture("2xmi210");
	const TopologyNode *gpu = topo.gpus().front();
	const KfdDevice d = device_from_node(topo, *gpu, 0xbeef);
	cr_expect_eq(d.gpu_id, 0xbeefu);
	cr_expect_eq(d.node_id, gpu->node_id);
	const KfdDevice cpu = device_from_node(topo, *topo.cpus().front(), 0xbeef);
	cr_expect_eq(cpu.gpu_id, 0u, "a CPU node never gets a gpu_id");
}

Test(device_entries, duplicates_are_rejected)
{
	const Topology topo = fixture("2xmi210");
	std::vector<KfdDevice> devs;
	for (const auto &n : topo.nodes())
		devs.push_back(device_from_node(topo, n, n.gpu_id));
	auto dup_node = devs;
	dup_node.push_back(devs.back());
	auto r = topology_from_devices(dup_node);
	cr_assert_not(r.ok());
	cr_expect_eq(r.error().code(), EINVAL);

	auto dup_gpu = devs;
	dup_gpu.back().node_id = 99;
	dup_gpu.back().gpu_id = devs[devs.size() - 2].gpu_id;
	auto r2 = topology_from_devices(dup_gpu);
	cr_assert_not(r2.ok());
	cr_expect(r2.error().message().find("appears twice") != std::string::npos);
}
