// SPDX-License-Identifier: GPL-2.0-only
// KFD topology parsing from fixture trees, and image entry conversion.
#include <criterion/criterion.h>

#include <string>

#include "../common/assert_ok.h"
#include "overlay_fs.h"
#include "topology/topology.h"

using namespace amdcr;
using namespace amdcr::test;

namespace {

Topology parse_ok(const std::string &fixture, const TopologyFs &fs = disk_topology_fs())
{
	auto t = parse_topology(fixture_root(fixture), fs);
	cr_assert_ok(t, "parse %s", fixture.c_str());
	return std::move(t).value();
}

Error parse_fails(const std::string &fixture, const TopologyFs &fs = disk_topology_fs())
{
	auto t = parse_topology(fixture_root(fixture), fs);
	cr_assert(!t.ok(), "parse %s unexpectedly succeeded", fixture.c_str());
	return std::move(t).error();
}

bool has(const std::string &s, const std::string &part)
{
	return s.find(part) != std::string::npos;
}

} // namespace

Test(topology, mi100_nodes)
{
	Topology t = parse_ok("mi100");
	cr_assert_eq(t.nodes().size(), 2u);
	cr_assert_eq(t.cpus().size(), 1u);
	cr_assert_eq(t.gpus().size(), 1u);

	const TopologyNode *cpu = t.node(0);
	cr_assert_not_null(cpu);
	cr_assert(cpu->is_cpu());
	cr_assert_eq(cpu->gpu_id, 0u);
	cr_assert_eq(cpu->cpu_cores_count, 64u);
	cr_assert_eq(cpu->io_links.size(), 1u);
	cr_assert_eq(cpu->io_links[0], (IoLink{kIoLinkTypePcie, 1}));
	cr_assert_str_eq(cpu->name.c_str(), "");
	cr_assert_eq(cpu->vram_size, 0u, "CPU memory banks are not VRAM");

	cr_assert_eq(t.system().platform_oem, 35498446626881u);
	cr_assert_eq(t.system().platform_rev, 1u);
}

Test(topology, mi100_gpu_properties)
{
	Topology t = parse_ok("mi100");
	const TopologyNode *g = t.gpu(42700);
	cr_assert_not_null(g);
	cr_assert_eq(g, t.node(1));
	cr_assert(g->is_gpu && g->accessible);
	cr_assert_str_eq(g->name.c_str(), "arcturus");
	cr_assert_eq(g->cpu_cores_count, 0u);
	cr_assert_eq(g->simd_count, 480u);
	cr_assert_eq(g->mem_banks_count, 1u);
	cr_assert_eq(g->caches_count, 217u);
	cr_assert_eq(g->io_links_count, 1u);
	cr_assert_eq(g->max_waves_per_simd, 10u);
	cr_assert_eq(g->lds_size_in_kb, 64u);
	cr_assert_eq(g->gds_size_in_kb, 0u);
	cr_assert_eq(g->num_gws, 64u);
	cr_assert_eq(g->wave_front_size, 64u);
	cr_assert_eq(g->array_count, 8u);
	cr_assert_eq(g->simd_arrays_per_engine, 1u);
	cr_assert_eq(g->cu_per_simd_array, 16u);
	cr_assert_eq(g->simd_per_cu, 4u);
	cr_assert_eq(g->max_slots_scratch_cu, 32u);
	cr_assert_eq(g->vendor_id, 4098u);
	cr_assert_eq(g->device_id, 29580u);
	cr_assert_eq(g->domain, 0u);
	cr_assert_eq(g->drm_render_minor, 128u);
	cr_assert_eq(g->hive_id, 0u);
	cr_assert_eq(g->num_sdma_engines, 2u);
	cr_assert_eq(g->num_sdma_xgmi_engines, 6u);
	cr_assert_eq(g->num_sdma_queues_per_engine, 8u);
	cr_assert_eq(g->num_cp_queues, 24u);
	cr_assert_eq(g->fw_version, 65u);
	cr_assert_eq(g->capability, 749970048u);
	cr_assert_eq(g->sdma_fw_version, 18u);
	cr_assert(g->vram_public);
	cr_assert_eq(g->vram_size, 34342961152u);
	cr_assert_eq(g->io_links.size(), 1u);
	cr_assert_eq(g->io_links[0], (IoLink{kIoLinkTypePcie, 0}));
	cr_assert_eq(g->caches.size(), 2u);
	cr_assert_eq(g->caches[1].level, 2u);
	cr_assert_eq(g->caches[1].size, 8192u);
	cr_assert_eq(t.gpu_by_render_minor(128), g);
	cr_assert_null(t.gpu_by_render_minor(129));
	cr_assert_null(t.gpu(0), "gpu_id 0 is never a GPU");
	cr_assert(t.hives().empty());
	auto numa = t.cpu_nodes_of_gpu(42700);
	cr_assert_eq(numa.size(), 1u);
	cr_assert_eq(numa[0], 0u);
}

Test(topology, two_mi210_on_pcie)
{
	Topology t = parse_ok("2xmi210");
	auto gpus = t.gpus();
	cr_assert_eq(gpus.size(), 2u);
	cr_assert_eq(gpus[0]->gpu_id, 53474u);
	cr_assert_eq(gpus[0]->drm_render_minor, 128u);
	cr_assert_eq(gpus[1]->gpu_id, 61132u);
	cr_assert_eq(gpus[1]->drm_render_minor, 129u);
	for (const auto *g : gpus) {
		cr_assert_eq(g->device_id, 29711u);
		cr_assert_eq(g->simd_count, 416u);
		cr_assert_eq(g->vram_size, 68702699520u);
		cr_assert_eq(g->io_links.size(), 1u);
		cr_assert_eq(t.cpu_nodes_of_gpu(g->gpu_id), std::vector<uint32_t>{0});
	}
	cr_assert(!t.xgmi_peers(53474, 61132));
	cr_assert(t.bidirectional(0, 1, kIoLinkTypePcie));
	cr_assert(t.hives().empty());
	cr_assert_eq(t.node(0)->io_links.size(), 2u);
}

// Each node keeps its place in the nodes directory's listing (the order
// upstream's plugin writes device entries in), whatever the node ids.
Test(topology, nodes_remember_their_listing_order)
{
	const std::string root = test::fixture_root("2xmi210");
	const std::string nodes = topology_dir(root) + "/nodes";
	auto listed = disk_topology_fs().list_dir(nodes);
	cr_assert_ok(listed);
	for (bool reversed : {false, true}) {
		test::OverlayFs fs;
		if (reversed)
			fs.reverse_listing(nodes);
		auto t = parse_topology(root, fs);
		cr_assert_ok(t);
		const size_t n = listed->size();
		cr_assert_eq(t->nodes().size(), n);
		for (size_t i = 0; i < n; i++) {
			const uint32_t id = static_cast<uint32_t>(std::stoul((*listed)[i].name));
			const uint32_t want = static_cast<uint32_t>(reversed ? n - 1 - i : i);
			cr_assert_eq(t->node(id)->listing_index, want, "node %u listed %u, want %u (reversed %d)", id,
				     t->node(id)->listing_index, want, reversed);
		}
		// Nodes stay sorted by id for every other use.
		for (size_t i = 0; i + 1 < n; i++)
			cr_assert_lt(t->nodes()[i].node_id, t->nodes()[i + 1].node_id);
	}
}

Test(topology, eight_mi300x_hive_and_numa)
{
	Topology t = parse_ok("8xmi300x");
	cr_assert_eq(t.nodes().size(), 10u);
	cr_assert_eq(t.cpus().size(), 2u);
	auto gpus = t.gpus();
	cr_assert_eq(gpus.size(), 8u);

	auto hives = t.hives();
	cr_assert_eq(hives.size(), 1u);
	cr_assert_eq(hives[0].size(), 8u);
	for (size_t i = 0; i < 8; i++)
		cr_assert_eq(hives[0][i], gpus[i]->gpu_id);

	for (size_t i = 0; i < 8; i++) {
		const TopologyNode *g = gpus[i];
		cr_assert_eq(g->node_id, 2 + i);
		cr_assert_eq(g->io_links.size(), 8u);
		cr_assert_eq(g->io_links_count, 8u);
		cr_assert_eq(g->hive_id, 8651938209236470231u);
		auto numa = t.cpu_nodes_of_gpu(g->gpu_id);
		cr_assert_eq(numa.size(), 1u);
		cr_assert_eq(numa[0], i < 4 ? 0u : 1u, "GPU %zu on CPU %u", i, numa[0]);
		for (size_t j = 0; j < 8; j++)
			cr_assert_eq(t.xgmi_peers(g->gpu_id, gpus[j]->gpu_id), i != j);
	}
	// The CPU-CPU link is of type 1 and dropped; io_links_count keeps it.
	cr_assert_eq(t.node(0)->io_links.size(), 4u);
	cr_assert_eq(t.node(0)->io_links_count, 5u);
	cr_assert_eq(t.node(1)->cpu_cores_count, 96u);
}

Test(topology, malformed_properties_names_file_and_line)
{
	Error e = parse_fails("malformed");
	cr_assert_eq(e.code(), EINVAL);
	const std::string want = node_path("malformed", 1, "properties") + ":5:";
	cr_assert(has(e.message(), want), "message: %s", e.message().c_str());
	cr_assert(has(e.message(), "io_links_count 1 extra"), "message: %s", e.message().c_str());
}

Test(topology, malformed_iolink_names_file_and_line)
{
	Error e = parse_fails("malformed-iolink");
	cr_assert_eq(e.code(), EINVAL);
	const std::string want = node_path("malformed-iolink", 1, "io_links/0/properties") + ":2:";
	cr_assert(has(e.message(), want), "message: %s", e.message().c_str());
}

Test(topology, directory_where_file_expected)
{
	Error e = parse_fails("dir-as-file");
	cr_assert_eq(e.code(), EISDIR, "code %d: %s", e.code(), e.message().c_str());
	cr_assert(has(e.message(), node_path("dir-as-file", 1, "properties")), "message: %s", e.message().c_str());
}

Test(topology, gpu_without_vram_bank)
{
	Error e = parse_fails("no-vram");
	cr_assert_eq(e.code(), EINVAL);
	cr_assert(has(e.message(), "no VRAM bank"), "message: %s", e.message().c_str());
	cr_assert(has(e.message(), "gpu 0xa6cc"), "message: %s", e.message().c_str());
}

Test(topology, missing_topology_directory)
{
	auto t = parse_topology(fixture_root("does-not-exist"));
	cr_assert(!t.ok());
	cr_assert_eq(t.error().code(), ENOENT);
	cr_assert(has(t.error().message(), "sys/class/kfd/kfd/topology/nodes"), "%s", t.error().message().c_str());
}

Test(topology, value_too_large_for_property)
{
	OverlayFs fs;
	fs.replace(node_path("mi100", 1, "properties"), "simd_count 480\nnum_gws 4294967296\n");
	Error e = parse_fails("mi100", fs);
	cr_assert_eq(e.code(), EINVAL);
	cr_assert(has(e.message(), node_path("mi100", 1, "properties") + ":2"), "%s", e.message().c_str());
}

Test(topology, unknown_keys_ignored_and_blank_line_rejected)
{
	OverlayFs fs;
	fs.replace(node_path("mi100", 1, "properties"), "simd_count 480\nsome_future_key 12345678901234\n");
	Topology t = parse_ok("mi100", fs);
	cr_assert_eq(t.gpu(42700)->simd_count, 480u);

	OverlayFs bad;
	bad.replace(node_path("mi100", 1, "properties"), "simd_count 480\n\nnum_gws 64\n");
	Error e = parse_fails("mi100", bad);
	cr_assert(has(e.message(), "properties:2:"), "%s", e.message().c_str());

	OverlayFs neg;
	neg.replace(node_path("mi100", 1, "properties"), "simd_count -480\n");
	e = parse_fails("mi100", neg);
	cr_assert(has(e.message(), "properties:1:"), "%s", e.message().c_str());
}

Test(topology, malformed_gpu_id)
{
	OverlayFs fs;
	fs.replace(node_path("mi100", 1, "gpu_id"), "4x2700\n");
	Error e = parse_fails("mi100", fs);
	cr_assert_eq(e.code(), EINVAL);
	cr_assert(has(e.message(), node_path("mi100", 1, "gpu_id") + ":1:"), "%s", e.message().c_str());
}

Test(topology, eperm_gpu_is_recorded_not_accessible)
{
	// The device cgroup hides nodes 3 and 6 (their gpu_id is unreadable).
	OverlayFs fs;
	fs.fail(node_path("8xmi300x", 3, "gpu_id"), EPERM);
	fs.fail(node_path("8xmi300x", 3, "properties"), EPERM);
	fs.fail(node_path("8xmi300x", 6, "gpu_id"), EPERM);
	fs.fail(node_path("8xmi300x", 6, "io_links"), EPERM);
	Topology t = parse_ok("8xmi300x", fs);
	cr_assert_eq(t.gpus().size(), 8u);
	cr_assert_eq(t.accessible_gpus().size(), 6u);
	const TopologyNode *hidden = t.node(3);
	cr_assert(hidden->is_gpu);
	cr_assert(!hidden->accessible);
	cr_assert_eq(hidden->gpu_id, 0u);
	cr_assert(hidden->io_links.empty());
	cr_assert(!t.node(6)->accessible);

	auto hives = t.hives();
	cr_assert_eq(hives.size(), 1u);
	cr_assert_eq(hives[0].size(), 6u);
	// Links to hidden nodes are invalid.
	cr_assert(!t.link_valid(IoLink{kIoLinkTypeXgmi, 3}));
	cr_assert(t.link_valid(IoLink{kIoLinkTypeXgmi, 4}));
	cr_assert_null(t.find_link(2, 3, kIoLinkTypeXgmi));
}

Test(topology, eperm_after_gpu_id_keeps_gpu_id)
{
	OverlayFs fs;
	fs.fail(node_path("2xmi210", 2, "mem_banks"), EPERM);
	Topology t = parse_ok("2xmi210", fs);
	const TopologyNode *g = t.node(2);
	cr_assert(!g->accessible);
	cr_assert_eq(g->gpu_id, 61132u);
	cr_assert_eq(g->vram_size, 0u, "no partial data is kept for a hidden GPU");
	cr_assert_null(t.gpu_by_render_minor(129));
	cr_assert_eq(t.accessible_gpus().size(), 1u);
}

Test(topology, eperm_on_cpu_node_is_an_error)
{
	OverlayFs fs;
	fs.fail(node_path("mi100", 0, "properties"), EPERM);
	Error e = parse_fails("mi100", fs);
	cr_assert_eq(e.code(), EPERM);
	cr_assert(has(e.message(), node_path("mi100", 0, "properties")), "%s", e.message().c_str());
}

Test(topology, other_read_errors_fail)
{
	OverlayFs fs;
	fs.fail(node_path("mi100", 1, "properties"), EIO);
	Error e = parse_fails("mi100", fs);
	cr_assert_eq(e.code(), EIO);
}

Test(topology, describe)
{
	OverlayFs fs;
	fs.fail(node_path("8xmi300x", 9, "gpu_id"), EPERM);
	Topology t = parse_ok("8xmi300x", fs);
	const std::string d = describe_topology(t);
	cr_assert(has(d, "node 0: CPU, 96 cores; links PCIe->2 PCIe->3 PCIe->4 PCIe->5\n"), "%s", d.c_str());
	cr_assert(has(d, "node 2: gpu 0xa1e2 renderD128 aqua_vanjaram device_id 0x74a1, VRAM 206141652992 bytes "
			 "(public); links PCIe->0 XGMI->3"),
		  "%s", d.c_str());
	cr_assert(has(d, "node 9: gpu 0x0000, not accessible"), "%s", d.c_str());
	cr_assert(has(d, "\nXGMI hive: 0xa1e2 0xcd9f 0x2911 0x70d1 0x1dc1 0xfa12 0x81bb"), "%s", d.c_str());
	cr_assert(!has(d, "->9"), "links to a hidden node are not shown: %s", d.c_str());
}
