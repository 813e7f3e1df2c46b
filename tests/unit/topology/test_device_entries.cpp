// SPDX-License-Identifier: GPL-2.0-only
//
// The topology <-> image device entry bridge: what a dump stores about each
// node comes back as the same node at restore.
#include <criterion/criterion.h>

#include "../common/assert_ok.h"
#include "overlay_fs.h"
#include "topology/device_entries.h"

using namespace amdcr;

static Topology fixture(const char *name)
{
	auto t = parse_topology(std::string(AMDCR_SOURCE_DIR) + "/tests/fixtures/topology/" + name);
	cr_assert_ok(t, "%s", name);
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
		cr_assert_ok(back);
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

// The MI100 node as the image stores it (values of the fixture, from a
// real node's sysfs).
Test(device_entries, mi100_fields)
{
	const Topology t = fixture("mi100");
	const KfdDevice d = device_from_node(t, *t.gpu(42700), 42700);
	cr_expect_eq(d.node_id, 1u);
	cr_expect_eq(d.gpu_id, 42700u);
	cr_expect_eq(d.simd_count, 480u);
	cr_expect_eq(d.caches_count, 217u);
	cr_expect_eq(d.device_id, 29580u);
	cr_expect_eq(d.drm_render_minor, 128u);
	cr_expect_eq(d.capability, 749970048u);
	cr_expect_eq(d.sdma_fw_version, 18u);
	cr_expect_eq(d.vram_public, 1u);
	cr_expect_eq(d.vram_size, 34342961152u);
	cr_assert_eq(d.iolinks.size(), 1u);
	cr_expect_eq(d.iolinks[0].type, 2u);
	cr_expect_eq(d.iolinks[0].node_to_id, 0u);
}

// A GPU the device cgroup hides is not a valid link target: no stored
// node links to it, and the hive shrinks accordingly.
Test(device_entries, links_to_hidden_gpus_are_not_stored)
{
	test::OverlayFs fs;
	fs.fail(test::node_path("8xmi300x", 5, "gpu_id"), EPERM);
	auto t = parse_topology(std::string(AMDCR_SOURCE_DIR) + "/tests/fixtures/topology/8xmi300x", fs);
	cr_assert(t.ok());
	std::vector<KfdDevice> devs;
	for (const auto &n : t->nodes())
		if (n.accessible)
			devs.push_back(device_from_node(*t, n, n.gpu_id));
	cr_assert_eq(devs.size(), 9u);
	for (const auto &d : devs) {
		cr_expect_neq(d.node_id, 5u);
		for (const auto &l : d.iolinks)
			cr_expect_neq(l.node_to_id, 5u, "node %u links to the hidden node", d.node_id);
	}
	auto back = topology_from_devices(devs);
	cr_assert(back.ok());
	cr_expect_eq(back->gpus().size(), 7u);
	cr_assert_eq(back->hives().size(), 1u);
	cr_expect_eq(back->hives()[0].size(), 7u);
}
