// SPDX-License-Identifier: GPL-2.0-only
// Restore-time GPU mapping: fixtures (same host, other host, container
// subset) and synthetic topologies for each rule and for the search.
#include <criterion/criterion.h>

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "../common/assert_ok.h"
#include "machine_builder.h"
#include "overlay_fs.h"
#include "topology/device_entries.h"
#include "topology/mapping.h"

using namespace amdcr;
using namespace amdcr::test;

namespace {

// The local gpu_id a checkpointed one maps to; 0 when it is not mapped.
uint32_t local_gpu_id(const GpuMap &m, uint32_t checkpointed_gpu_id)
{
	const GpuMapEntry *e = m.find_checkpointed(checkpointed_gpu_id);
	return e ? e->local_gpu_id : 0;
}

const GpuMapEntry *find_local(const GpuMap &m, uint32_t local)
{
	for (const auto &e : m.entries())
		if (e.local_gpu_id == local)
			return &e;
	return nullptr;
}

Topology parse_ok(const std::string &fixture, const TopologyFs &fs = disk_topology_fs())
{
	auto t = parse_topology(fixture_root(fixture), fs);
	cr_assert_ok(t, "parse %s", fixture.c_str());
	return std::move(t).value();
}

bool has(const std::string &s, const std::string &part)
{
	return s.find(part) != std::string::npos;
}

GpuMap map_ok(const MappingInput &in)
{
	auto r = map_gpus(in);
	cr_assert_ok(r, "mapping failed");
	return std::move(r).value();
}

std::string map_fails(const MappingInput &in)
{
	auto r = map_gpus(in);
	cr_assert(!r.ok(), "mapping unexpectedly succeeded");
	cr_assert_eq(r.error().code(), EINVAL);
	return r.error().message();
}

// Every rule a valid mapping must satisfy, checked independently of the
// search: distinct, usable local GPUs; XGMI pairs and every peer link kept;
// NUMA grouping kept.
void assert_valid(const MappingInput &in, const GpuMap &m, size_t expected)
{
	cr_assert_eq(m.entries().size(), expected);
	std::set<uint32_t> locals;
	for (const auto &e : m.entries()) {
		cr_assert(locals.insert(e.local_gpu_id).second, "local gpu_id %u used twice", e.local_gpu_id);
		const TopologyNode *l = in.local->gpu(e.local_gpu_id);
		cr_assert_not_null(l);
		cr_assert(l->accessible);
		cr_assert(!in.usable || in.usable(*l));
		cr_assert_eq(e.local_render_minor, l->drm_render_minor);
		cr_assert_eq(e.local_node_id, l->node_id);
		const TopologyNode *s = in.checkpointed->gpu(e.checkpointed_gpu_id);
		cr_assert_not_null(s);
		cr_assert(compare_gpu_properties(*s, *l, in.config).empty());
	}
	for (const auto &a : m.entries())
		for (const auto &b : m.entries()) {
			if (a.checkpointed_gpu_id == b.checkpointed_gpu_id)
				continue;
			if (in.checkpointed->xgmi_peers(a.checkpointed_gpu_id, b.checkpointed_gpu_id))
				cr_assert(in.local->xgmi_peers(a.local_gpu_id, b.local_gpu_id),
					  "XGMI pair %u-%u lost", a.checkpointed_gpu_id, b.checkpointed_gpu_id);
			cr_assert_geq(link_rank(in.local->peer_link(a.local_gpu_id, b.local_gpu_id)),
				      link_rank(in.checkpointed->peer_link(a.checkpointed_gpu_id, b.checkpointed_gpu_id)),
				      "peer link %u -> %u lost", a.checkpointed_gpu_id, b.checkpointed_gpu_id);
			if (in.config.numa_check) {
				const auto sa = in.checkpointed->cpu_nodes_of_gpu(a.checkpointed_gpu_id);
				const auto sb = in.checkpointed->cpu_nodes_of_gpu(b.checkpointed_gpu_id);
				const auto la = in.local->cpu_nodes_of_gpu(a.local_gpu_id);
				const auto lb = in.local->cpu_nodes_of_gpu(b.local_gpu_id);
				cr_assert_eq(sa == sb, la == lb, "NUMA grouping of %u and %u not kept",
					     a.checkpointed_gpu_id, b.checkpointed_gpu_id);
			}
		}
}

// ---- synthetic topologies ----------------------------------------------------
// Machines of MI100-like GPUs (machine_builder.h), each GPU on a CPU by PCIe.

MappingInput input(const Topology &src, const Topology &dst, Config config = {})
{
	MappingInput in;
	in.checkpointed = &src;
	in.local = &dst;
	in.config = config;
	return in;
}

} // namespace

// ---- fixtures ----------------------------------------------------------------

Test(mapping, single_mi100_identity)
{
	Topology src = parse_ok("mi100");
	Topology dst = parse_ok("mi100");
	MappingInput in = input(src, dst);
	GpuMap m = map_ok(in);
	assert_valid(in, m, 1);
	cr_assert_eq(local_gpu_id(m, 42700), 42700u);
	cr_assert_eq(m.find_checkpointed(42700)->local_render_minor, 128u);
	cr_assert_eq(find_local(m, 42700)->checkpointed_gpu_id, 42700u);
	cr_assert_eq(local_gpu_id(m, 1), 0u);
}

Test(mapping, same_host_is_identity)
{
	Topology src = parse_ok("8xmi300x");
	Topology dst = parse_ok("8xmi300x");
	MappingInput in = input(src, dst);
	GpuMap m = map_ok(in);
	assert_valid(in, m, 8);
	for (const auto &e : m.entries())
		cr_assert_eq(e.local_gpu_id, e.checkpointed_gpu_id, "identity expected for %u", e.checkpointed_gpu_id);
}

Test(mapping, other_host_permuted_gpu_ids_and_numa)
{
	// Other gpu_ids, reversed minors, and the NUMA halves swapped.
	Topology src = parse_ok("8xmi300x");
	Topology dst = parse_ok("8xmi300x-other");
	MappingInput in = input(src, dst);
	GpuMap m = map_ok(in);
	assert_valid(in, m, 8);
	// The four GPUs of each checkpointed CPU land together on one local
	// CPU, the other four on the other one.
	std::set<uint32_t> cpus_of_first_half, cpus_of_second_half;
	for (size_t i = 0; i < 8; i++) {
		const uint32_t local = local_gpu_id(m, src.gpus()[i]->gpu_id);
		cr_assert_neq(local, 0u);
		(i < 4 ? cpus_of_first_half : cpus_of_second_half).insert(dst.cpu_nodes_of_gpu(local)[0]);
	}
	cr_assert_eq(cpus_of_first_half.size(), 1u);
	cr_assert_eq(cpus_of_second_half.size(), 1u);
	cr_assert(cpus_of_first_half != cpus_of_second_half);
}

Test(mapping, different_render_minors)
{
	Topology src = parse_ok("2xmi210");
	Topology dst = parse_ok("2xmi210-other");
	MappingInput in = input(src, dst);
	GpuMap m = map_ok(in);
	assert_valid(in, m, 2);
	std::set<uint32_t> minors;
	for (const auto &e : m.entries())
		minors.insert(e.local_render_minor);
	cr_assert(minors == (std::set<uint32_t>{130, 131}));
}

Test(mapping, checkpointed_side_from_image_entries)
{
	Topology parsed = parse_ok("2xmi210");
	std::vector<KfdDevice> devices;
	for (const auto &n : parsed.nodes())
		devices.push_back(device_from_node(parsed, n, n.gpu_id));
	auto src = topology_from_devices(devices);
	cr_assert(src.ok());
	Topology dst = parse_ok("2xmi210-other");
	MappingInput in = input(*src, dst);
	in.held_gpu_ids = {61132};
	GpuMap m = map_ok(in);
	assert_valid(in, m, 1);
}

Test(mapping, fixture_fw_version_too_old_locally)
{
	// 2xmi210 has fw_version 78; make the restore host's GPUs older.
	Topology src = parse_ok("2xmi210");
	OverlayFs fs;
	for (unsigned node : {1u, 2u}) {
		auto text = disk_topology_fs().read_file(node_path("2xmi210-other", node, "properties"));
		cr_assert(text.ok());
		std::string t = *text;
		const size_t at = t.find("fw_version ");
		cr_assert_neq(at, std::string::npos);
		const size_t end = t.find('\n', at);
		t.replace(at, end - at, "fw_version 70");
		fs.replace(node_path("2xmi210-other", node, "properties"), t);
	}
	Topology dst = parse_ok("2xmi210-other", fs);
	std::string msg = map_fails(input(src, dst));
	cr_assert(has(msg, "fw_version: checkpointed 78 > local 70 (relax with KFD_FW_VER_CHECK=0)"), "%s", msg.c_str());
	MappingInput relaxed = input(src, dst, Config{}.with(Check::FwVersion, false));
	assert_valid(relaxed, map_ok(relaxed), 2);
}

// ---- each switchable property ------------------------------------------------

namespace {

struct SwitchCase {
	Check check;
	const char *property;
	std::function<void(TopologyNode &)> make_src_bigger;
};

void check_switch(const SwitchCase &c)
{
	Topology src = Machine().cpu(0).gpu_on(0, mi100_gpu(1, 111, 128), c.make_src_bigger).build();
	Topology dst = Machine().cpu(0).gpu_on(0, mi100_gpu(1, 222, 129)).build();
	const std::string msg = map_fails(input(src, dst));
	cr_assert(has(msg, "checkpointed gpu 0x006f"), "%s", msg.c_str());
	cr_assert(has(msg, "on gpu 0x00de"), "%s", msg.c_str());
	cr_assert(has(msg, std::string(c.property) + ": checkpointed"), "%s", msg.c_str());
	cr_assert(has(msg, std::string("relax with ") + check_env_name(c.check) + "=0"), "%s", msg.c_str());
	// Only that property is reported.
	cr_assert(!has(msg, "cannot be relaxed"), "%s", msg.c_str());

	MappingInput relaxed = input(src, dst, Config{}.with(c.check, false));
	GpuMap m = map_ok(relaxed);
	cr_assert_eq(local_gpu_id(m, 111), 222u);
	cr_assert_eq(m.find_checkpointed(111)->local_render_minor, 129u);

	// Switching off another check does not help.
	for (Check other : kAllChecks)
		if (other != c.check)
			(void)map_fails(input(src, dst, Config{}.with(other, false)));
}

} // namespace

Test(mapping_checks, vram_size)
{
	check_switch({Check::VramSize, "vram_size", [](TopologyNode &g) { g.vram_size += 1; }});
}

Test(mapping_checks, num_gws)
{
	check_switch({Check::NumGws, "num_gws", [](TopologyNode &g) { g.num_gws = 65; }});
}

Test(mapping_checks, caches_count)
{
	check_switch({Check::CachesCount, "caches_count", [](TopologyNode &g) { g.caches_count = 200; }});
}

Test(mapping_checks, fw_version)
{
	check_switch({Check::FwVersion, "fw_version", [](TopologyNode &g) { g.fw_version = 79; }});
}

Test(mapping_checks, sdma_fw_version)
{
	check_switch({Check::SdmaFwVersion, "sdma_fw_version", [](TopologyNode &g) { g.sdma_fw_version = 9; }});
}

Test(mapping_checks, capability_must_be_equal)
{
	// Smaller is also a mismatch for capability.
	check_switch({Check::Capability, "capability", [](TopologyNode &g) { g.capability -= 1; }});
	check_switch({Check::Capability, "capability", [](TopologyNode &g) { g.capability += 1; }});
}

Test(mapping_checks, larger_local_values_are_fine)
{
	Topology src = Machine().cpu(0).gpu_on(0, mi100_gpu(1, 111, 128)).build();
	Topology dst = Machine()
			       .cpu(0)
			       .gpu_on(0, mi100_gpu(1, 222, 128), [](TopologyNode &g) {
					    g.vram_size *= 2;
					    g.num_gws += 1;
					    g.caches_count += 1;
					    g.fw_version += 1;
					    g.sdma_fw_version += 1;
				    })
			       .build();
	MappingInput in = input(src, dst);
	assert_valid(in, map_ok(in), 1);
}

Test(mapping_checks, shape_properties_cannot_be_relaxed)
{
	const struct {
		const char *name;
		std::function<void(TopologyNode &)> tweak;
	} cases[] = {
		{"simd_count", [](TopologyNode &g) { g.simd_count = 480; }},
		{"device_id", [](TopologyNode &g) { g.device_id = 29580; }},
		{"vram_public", [](TopologyNode &g) { g.vram_public = false; }},
		{"max_slots_scratch_cu", [](TopologyNode &g) { g.max_slots_scratch_cu = 16; }},
	};
	Config all_off;
	for (Check c : kAllChecks)
		all_off = all_off.with(c, false);
	for (const auto &c : cases) {
		Topology src = Machine().cpu(0).gpu_on(0, mi100_gpu(1, 111, 128)).build();
		Topology dst = Machine().cpu(0).gpu_on(0, mi100_gpu(1, 111, 128), c.tweak).build();
		const std::string msg = map_fails(input(src, dst, all_off));
		cr_assert(has(msg, std::string(c.name) + ": checkpointed"), "%s", msg.c_str());
		cr_assert(has(msg, "!= local"), "%s", msg.c_str());
		cr_assert(has(msg, "cannot be relaxed"), "%s", msg.c_str());
	}
}

Test(mapping_checks, every_candidate_and_reason_listed)
{
	Topology src = Machine().cpu(0).gpu_on(0, mi100_gpu(1, 111, 128)).build();
	Topology dst = Machine()
			       .cpu(0)
			       .gpu_on(0, mi100_gpu(1, 201, 128), [](TopologyNode &g) { g.vram_size /= 2; })
			       .gpu_on(0, mi100_gpu(2, 202, 129), [](TopologyNode &g) {
					    g.device_id = 1;
					    g.fw_version = 1;
				    })
			       .build();
	const std::string msg = map_fails(input(src, dst));
	cr_assert(has(msg, "cannot map checkpointed gpu 0x006f (node 1, renderD128) to a local GPU; the 2 usable "
			   "local GPUs refused it:"),
		  "%s", msg.c_str());
	cr_assert(has(msg, "\n  vram_size: checkpointed 68719476736 > local 34359738368 (relax with "
			   "KFD_VRAM_SIZE_CHECK=0) on gpu 0x00c9\n"),
		  "%s", msg.c_str());
	cr_assert(has(msg, "\n  device_id: checkpointed 29711 != local 1 (cannot be relaxed) on gpu 0x00ca\n"), "%s",
		  msg.c_str());
	cr_assert(has(msg, "\n  fw_version: checkpointed 78 > local 1 (relax with KFD_FW_VER_CHECK=0) on gpu 0x00ca"),
		  "%s", msg.c_str());
}

// ---- links, hives, NUMA --------------------------------------------------------

Test(mapping_links, hive_to_hive)
{
	// Checkpointed: hives {1,2} and {3,4}. Local: hives {5,8} and {6,7}
	// with gpu_ids that give no hint.
	Topology src = Machine()
			       .cpu(0)
			       .gpu_on(0, mi100_gpu(1, 11, 128))
			       .gpu_on(0, mi100_gpu(2, 12, 129))
			       .gpu_on(0, mi100_gpu(3, 13, 130))
			       .gpu_on(0, mi100_gpu(4, 14, 131))
			       .xgmi(1, 2)
			       .xgmi(3, 4)
			       .build();
	Topology dst = Machine()
			       .cpu(0)
			       .gpu_on(0, mi100_gpu(5, 51, 128))
			       .gpu_on(0, mi100_gpu(6, 52, 129))
			       .gpu_on(0, mi100_gpu(7, 53, 130))
			       .gpu_on(0, mi100_gpu(8, 54, 131))
			       .xgmi(5, 8)
			       .xgmi(6, 7)
			       .build();
	cr_assert_eq(src.hives().size(), 2u);
	MappingInput in = input(src, dst);
	GpuMap m = map_ok(in);
	assert_valid(in, m, 4);
	cr_assert(dst.xgmi_peers(local_gpu_id(m, 11), local_gpu_id(m, 12)));
	cr_assert(dst.xgmi_peers(local_gpu_id(m, 13), local_gpu_id(m, 14)));
}

Test(mapping_links, hive_needs_hive)
{
	Topology src = Machine()
		       .cpu(0)
		       .gpu_on(0, mi100_gpu(1, 11, 128))
		       .gpu_on(0, mi100_gpu(2, 12, 129))
		       .xgmi(1, 2)
		       .build();
	Topology dst = Machine()
		       .cpu(0)
		       .gpu_on(0, mi100_gpu(1, 11, 128))
		       .gpu_on(0, mi100_gpu(2, 12, 129))
		       .build();
	Config all_off;
	for (Check c : kAllChecks)
		all_off = all_off.with(c, false);
	const std::string msg = map_fails(input(src, dst, all_off));
	cr_assert(has(msg, "reached 1 of the process's other GPUs by XGMI"), "%s", msg.c_str());
	cr_assert(has(msg, "cannot be relaxed"), "%s", msg.c_str());
}

Test(mapping_links, one_way_xgmi_is_not_a_hive_but_is_kept)
{
	Machine b;
	b.cpu(0).gpu_on(0, mi100_gpu(1, 11, 128)).gpu_on(0, mi100_gpu(2, 12, 129));
	Topology src = b.build();
	// Add only one direction by hand.
	std::vector<TopologyNode> nodes = src.nodes();
	nodes[1].io_links.push_back({kIoLinkTypeXgmi, 2});
	Topology one_way(nodes);
	cr_assert(one_way.hives().empty());
	cr_assert(!one_way.xgmi_peers(11, 12));
	cr_assert_eq(one_way.peer_link(11, 12), kIoLinkTypeXgmi);
	cr_assert_eq(one_way.peer_link(12, 11), 0u);
	// The one direction the process had must be there; a full hive has it.
	Topology none = Machine()
			.cpu(0)
			.gpu_on(0, mi100_gpu(1, 11, 128))
			.gpu_on(0, mi100_gpu(2, 12, 129))
			.build();
	const std::string msg = map_fails(input(one_way, none));
	cr_assert(has(msg, "by XGMI"), "%s", msg.c_str());
	Topology hive = Machine()
			.cpu(0)
			.gpu_on(0, mi100_gpu(1, 11, 128))
			.gpu_on(0, mi100_gpu(2, 12, 129))
			.xgmi(1, 2)
			.build();
	MappingInput in = input(one_way, hive);
	assert_valid(in, map_ok(in), 2);
}

Test(mapping_links, numa_shared_cpu_stays_shared)
{
	Topology src = Machine()
		       .cpu(0)
		       .gpu_on(0, mi100_gpu(1, 11, 128))
		       .gpu_on(0, mi100_gpu(2, 12, 129))
		       .build();
	Topology dst = Machine()
		       .cpu(0)
		       .cpu(1)
		       .gpu_on(0, mi100_gpu(2, 11, 128))
		       .gpu_on(1, mi100_gpu(3, 12, 129))
		       .build();
	const std::string msg = map_fails(input(src, dst));
	cr_assert(has(msg, "KFD_NUMA_CHECK=0"), "%s", msg.c_str());
	cr_assert(has(msg, "cannot map checkpointed gpu 0x000"), "%s", msg.c_str());
	MappingInput relaxed = input(src, dst, Config{}.with(Check::Numa, false));
	assert_valid(relaxed, map_ok(relaxed), 2);
}

Test(mapping_links, numa_distinct_cpus_stay_distinct)
{
	Topology src = Machine()
		       .cpu(0)
		       .cpu(1)
		       .gpu_on(0, mi100_gpu(2, 11, 128))
		       .gpu_on(1, mi100_gpu(3, 12, 129))
		       .build();
	Topology dst = Machine()
		       .cpu(0)
		       .gpu_on(0, mi100_gpu(1, 11, 128))
		       .gpu_on(0, mi100_gpu(2, 12, 129))
		       .build();
	const std::string msg = map_fails(input(src, dst));
	cr_assert(has(msg, "KFD_NUMA_CHECK=0"), "%s", msg.c_str());
	MappingInput relaxed = input(src, dst, Config{}.with(Check::Numa, false));
	assert_valid(relaxed, map_ok(relaxed), 2);
}

Test(mapping_links, gpu_without_cpu_link_cannot_replace_one_with)
{
	Topology src = Machine().cpu(0).gpu_on(0, mi100_gpu(1, 11, 128)).build();
	TopologyNode lone = mi100_gpu(1, 11, 128);
	TopologyNode cpu;
	cpu.node_id = 0;
	cpu.cpu_cores_count = 4;
	Topology dst({cpu, lone});
	const std::string msg = map_fails(input(src, dst, Config{}.with(Check::Numa, false)));
	cr_assert(has(msg, "link to a CPU"), "%s", msg.c_str());
}

// ---- the search ----------------------------------------------------------------

Test(mapping_search, same_gpu_id_preferred_then_same_minor)
{
	// Local GPUs carry the checkpointed gpu_ids with the minors swapped:
	// the gpu_id wins.
	Topology src = Machine()
		       .cpu(0)
		       .gpu_on(0, mi100_gpu(1, 11, 128))
		       .gpu_on(0, mi100_gpu(2, 12, 129))
		       .build();
	Topology dst = Machine()
		       .cpu(0)
		       .gpu_on(0, mi100_gpu(1, 12, 128))
		       .gpu_on(0, mi100_gpu(2, 11, 129))
		       .build();
	GpuMap m = map_ok(input(src, dst));
	cr_assert_eq(local_gpu_id(m, 11), 11u);
	cr_assert_eq(local_gpu_id(m, 12), 12u);
	// Without gpu_id matches, the same render minor is preferred.
	Topology dst2 = Machine()
			.cpu(0)
			.gpu_on(0, mi100_gpu(1, 31, 129))
			.gpu_on(0, mi100_gpu(2, 32, 128))
			.build();
	GpuMap m2 = map_ok(input(src, dst2));
	cr_assert_eq(local_gpu_id(m2, 11), 32u);
	cr_assert_eq(local_gpu_id(m2, 12), 31u);
}

Test(mapping_search, backtracks_over_identity_choice_numa)
{
	// Checkpointed: 11 and 12 share CPU 0, 13 is alone on CPU 1.
	// Local: 11 is alone on CPU 5, 21 and 22 share CPU 6. Every GPU has
	// three candidates; the preferred first choice (11 -> 11, same gpu_id)
	// leaves 12 no GPU sharing 11's CPU: a dead end the search must undo.
	Topology src = Machine()
		       .cpu(0)
		       .cpu(1)
		       .gpu_on(0, mi100_gpu(2, 11, 128))
		       .gpu_on(0, mi100_gpu(3, 12, 129))
		       .gpu_on(1, mi100_gpu(4, 13, 130))
		       .build();
	Topology dst = Machine()
		       .cpu(5)
		       .cpu(6)
		       .gpu_on(5, mi100_gpu(7, 11, 128))
		       .gpu_on(6, mi100_gpu(8, 21, 129))
		       .gpu_on(6, mi100_gpu(9, 22, 130))
		       .build();
	MappingInput in = input(src, dst);
	GpuMap m = map_ok(in);
	assert_valid(in, m, 3);
	cr_assert_eq(local_gpu_id(m, 13), 11u);
	cr_assert_neq(local_gpu_id(m, 11), 11u, "the identity first choice is a dead end");
}

Test(mapping_search, backtracks_over_identity_choice_hive)
{
	// Checkpointed: hive {11,12} plus 13 alone. Local: 11 alone plus hive
	// {21,22}. Mapping 11 -> 11 first leaves 12 no XGMI peer.
	Topology src =
		Machine()
		.cpu(0)
		.gpu_on(0, mi100_gpu(1, 11, 128))
		.gpu_on(0, mi100_gpu(2, 12, 129))
		.gpu_on(0, mi100_gpu(3, 13, 130))
		.xgmi(1, 2)
		.build();
	Topology dst =
		Machine()
		.cpu(0)
		.gpu_on(0, mi100_gpu(1, 11, 128))
		.gpu_on(0, mi100_gpu(2, 21, 129))
		.gpu_on(0, mi100_gpu(3, 22, 130))
		.xgmi(2, 3)
		.build();
	MappingInput in = input(src, dst);
	GpuMap m = map_ok(in);
	assert_valid(in, m, 3);
	cr_assert_eq(local_gpu_id(m, 13), 11u);
}

Test(mapping_search, backtracks_over_cpu_choice)
{
	// Checkpointed GPU 11 links to CPUs 0 and 1, GPU 12 to CPU 1 only.
	// Locally 21 links to CPUs 5 and 6 (listed 5 first), 22 to CPU 5 only.
	// Placing 11 -> 21 with CPU 1 -> 5 is wrong unless CPU 0 -> 6.
	Machine s;
	s.cpu(0).cpu(1).gpu_on(0, mi100_gpu(2, 11, 128)).gpu_on(1, mi100_gpu(3, 12, 129));
	Topology src0 = s.build();
	std::vector<TopologyNode> sn = src0.nodes();
	for (auto &n : sn) {
		if (n.node_id == 2)
			n.io_links.push_back({kIoLinkTypePcie, 1});
		if (n.node_id == 1)
			n.io_links.push_back({kIoLinkTypePcie, 2});
	}
	Topology src(sn);
	Machine d;
	d.cpu(5).cpu(6).gpu_on(6, mi100_gpu(7, 21, 128)).gpu_on(5, mi100_gpu(8, 22, 129));
	Topology dst0 = d.build();
	std::vector<TopologyNode> dn = dst0.nodes();
	for (auto &n : dn) {
		if (n.node_id == 7)
			n.io_links.insert(n.io_links.begin(), IoLink{kIoLinkTypePcie, 5});
		if (n.node_id == 5)
			n.io_links.push_back({kIoLinkTypePcie, 7});
	}
	Topology dst(dn);
	MappingInput in = input(src, dst);
	GpuMap m = map_ok(in);
	assert_valid(in, m, 2);
	cr_assert_eq(local_gpu_id(m, 11), 21u);
	cr_assert_eq(local_gpu_id(m, 12), 22u);
}

Test(mapping_search, two_gpus_compete_for_one)
{
	// Both checkpointed GPUs need the large local GPU.
	Topology src = Machine()
		       .cpu(0)
		       .gpu_on(0, mi100_gpu(1, 11, 128))
		       .gpu_on(0, mi100_gpu(2, 12, 129))
		       .build();
	Topology dst = Machine()
			       .cpu(0)
			       .gpu_on(0, mi100_gpu(1, 21, 128))
			       .gpu_on(0, mi100_gpu(2, 22, 129), [](TopologyNode &g) { g.vram_size /= 2; })
			       .build();
	const std::string msg = map_fails(input(src, dst));
	cr_assert(has(msg, "already taken by checkpointed gpu 0x"), "%s", msg.c_str());
	cr_assert(has(msg, "KFD_VRAM_SIZE_CHECK=0"), "%s", msg.c_str());
}

Test(mapping_search, no_mapping_for_large_symmetric_case_is_reported)
{
	// 8 identical checkpointed GPUs in one hive; locally two hives of 4:
	// no mapping, and the search must say so (not loop).
	Machine s, d;
	s.cpu(0);
	d.cpu(0);
	for (uint32_t i = 1; i <= 8; i++) {
		s.gpu_on(0, mi100_gpu(i, 100 + i, 127 + i));
		d.gpu_on(0, mi100_gpu(i, 200 + i, 127 + i));
	}
	for (uint32_t a = 1; a <= 8; a++)
		for (uint32_t b = a + 1; b <= 8; b++) {
			s.xgmi(a, b);
			if ((a <= 4) == (b <= 4))
				d.xgmi(a, b);
		}
	Topology src = s.build(), dst = d.build();
	const std::string msg = map_fails(input(src, dst));
	cr_assert(has(msg, "reached 7 of the process's other GPUs by XGMI, the local GPU reaches only 3"), "%s",
		  msg.c_str());
}

// ---- held subset and container -------------------------------------------------

Test(mapping_subset, held_subset_of_checkpointed)
{
	Topology src = parse_ok("8xmi300x");
	Topology dst = parse_ok("8xmi300x-other");
	MappingInput in = input(src, dst);
	in.held_gpu_ids = {52639, 7617};
	GpuMap m = map_ok(in);
	assert_valid(in, m, 2);
	cr_assert_eq(m.entries()[0].checkpointed_gpu_id, 52639u);
	cr_assert_eq(m.entries()[1].checkpointed_gpu_id, 7617u);
}

Test(mapping_subset, container_sees_hidden_and_unusable_gpus)
{
	// The process held 2 GPUs of the hive, one per CPU. Locally the device
	// cgroup hides 4 of the 8 GPUs (EPERM), and of the rest the process
	// may not open gpu_id 1008.
	Topology src = parse_ok("8xmi300x");
	OverlayFs fs;
	for (unsigned node : {2u, 3u, 6u, 7u})
		fs.fail(node_path("8xmi300x-other", node, "gpu_id"), EPERM);
	Topology dst = parse_ok("8xmi300x-other", fs);
	cr_assert_eq(dst.accessible_gpus().size(), 4u);

	MappingInput in = input(src, dst);
	in.held_gpu_ids = {41442, 64018};
	in.usable = [](const TopologyNode &n) { return n.gpu_id != 1008; };
	GpuMap m = map_ok(in);
	assert_valid(in, m, 2);
	for (const auto &e : m.entries()) {
		cr_assert_neq(e.local_gpu_id, 1008u);
		cr_assert(dst.gpu(e.local_gpu_id)->accessible);
	}
}

Test(mapping_subset, not_enough_usable_gpus)
{
	Topology src = parse_ok("2xmi210");
	Topology dst = parse_ok("2xmi210-other");
	MappingInput in = input(src, dst);
	in.usable = [](const TopologyNode &n) { return n.gpu_id == 20002; };
	const std::string msg = map_fails(in);
	cr_assert(has(msg, "used 2 GPUs, this machine has 1 usable: gpu 0x4e22"), "%s", msg.c_str());
}

Test(mapping_subset, held_gpu_must_exist)
{
	Topology src = parse_ok("2xmi210");
	Topology dst = parse_ok("2xmi210-other");
	MappingInput in = input(src, dst);
	in.held_gpu_ids = {53474, 4242};
	const std::string msg = map_fails(in);
	cr_assert(has(msg, "checkpointed gpu 0x1092 is not in the checkpointed topology"), "%s", msg.c_str());
	in.held_gpu_ids = {53474, 53474};
	cr_assert(has(map_fails(in), "listed twice"));
}

// ---- refusal messages --------------------------------------------------------

namespace {

std::vector<std::string> reason_lines(const std::string &msg)
{
	std::vector<std::string> out;
	for (size_t at = msg.find("\n  "); at != std::string::npos; at = msg.find("\n  ", at + 1)) {
		const size_t end = msg.find('\n', at + 1);
		out.push_back(msg.substr(at + 3, end == std::string::npos ? std::string::npos : end - at - 3));
	}
	return out;
}

} // namespace

// An MI100 checkpoint onto the 8xMI300X node: every local GPU is refused
// for the same reasons, each said once with the eight GPUs it refuses, and
// a line suggests only the switch of its own property.
Test(mapping_messages, eight_equal_refusals_are_grouped)
{
	Topology src = parse_ok("mi100");
	Topology dst = parse_ok("8xmi300x");
	const std::string msg = map_fails(input(src, dst));
	cr_assert(has(msg, "the 8 usable local GPUs refused it:"), "%s", msg.c_str());
	std::string all_ids;
	for (const TopologyNode *g : dst.accessible_gpus())
		all_ids += strprintf("%s0x%04x", all_ids.empty() ? "" : ", ", g->gpu_id);
	const auto lines = reason_lines(msg);
	cr_assert_geq(lines.size(), 2u, "%s", msg.c_str());
	std::set<std::string> seen;
	for (const auto &l : lines) {
		cr_assert(seen.insert(l).second, "repeated line: %s", l.c_str());
		cr_assert(has(l, " on gpu " + all_ids), "not grouped over the 8 GPUs: %s", l.c_str());
		const std::string property = l.substr(0, l.find(':'));
		std::optional<Check> check;
		for (Check c : kAllChecks)
			if (has(l, std::string("relax with ") + check_env_name(c) + "=0"))
				check = c;
		if (property == "device_id" || property == "simd_count" || property == "vram_public")
			cr_assert(!check && has(l, "(cannot be relaxed)"), "%s", l.c_str());
		if (property == "capability")
			cr_assert(check == Check::Capability, "%s", l.c_str());
		if (property == "fw_version")
			cr_assert(check == Check::FwVersion, "%s", l.c_str());
	}
	cr_assert(has(msg, "\n  device_id: "), "%s", msg.c_str());
	// The message is one GPU's: the checkpointed MI100, in hex.
	cr_assert(has(msg, "cannot map checkpointed gpu 0xa6cc (node 1, renderD128) to a local GPU"), "%s",
		  msg.c_str());
}

Test(mapping_messages, one_gpu_is_singular)
{
	Topology src = parse_ok("2xmi210");
	Topology dst = parse_ok("2xmi210-other");
	MappingInput in = input(src, dst);
	in.usable = [](const TopologyNode &n) { return n.gpu_id == 20002; };
	const std::string msg = map_fails(in);
	cr_assert(has(msg, "the checkpointed process used 2 GPUs, this machine has 1 usable: gpu 0x4e22"), "%s",
		  msg.c_str());
	cr_assert(!has(msg, "1 local GPUs"), "%s", msg.c_str());
}
