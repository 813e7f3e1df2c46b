// SPDX-License-Identifier: GPL-2.0-only
// Restoring onto other and bigger machines: the nine topology cases of
// upstream's plugins/amdgpu/tests/test_topology_remap.c, written as our own
// machines (machine_builder.h) with their expected verdicts; restore nodes
// that are more capable (more GPUs, XGMI peers, hives, VRAM, engines);
// peer-role swaps; and a refusal for each property and for lost peer links.
// Every accepted mapping is checked against the rules independently of the
// mapper (keeps_everything).
#include <criterion/criterion.h>

#include <map>
#include <optional>
#include <set>
#include <string>

#include "../common/assert_ok.h"
#include "machine_builder.h"
#include "topology/device_entries.h"
#include "topology/mapping.h"

using namespace amdcr;
using namespace amdcr::test;

namespace {

constexpr uint32_t kKindA = kDefaultKind;
constexpr uint32_t kKindB = 0x74b5;

bool has(const std::string &s, const std::string &part)
{
	return s.find(part) != std::string::npos;
}

MappingInput input(const Topology &src, const Topology &dst, Config config = {})
{
	MappingInput in;
	in.checkpointed = &src;
	in.local = &dst;
	in.config = config;
	return in;
}

uint32_t local_node(const GpuMap &m, const Topology &src, uint32_t src_node)
{
	const GpuMapEntry *e = m.find_checkpointed(src.node(src_node)->gpu_id);
	cr_assert_not_null(e, "node %u not mapped", src_node);
	return e->local_node_id;
}

// Checks every rule on a mapping, without the mapper's code: distinct
// GPUs, properties, every peer link kept (per direction, XGMI >= PCIe), a
// CPU link at least as good per CPU link, NUMA grouping. Returns the number
// of checkpointed peer links (ordered pairs) that were kept.
size_t keeps_everything(const MappingInput &in, const GpuMap &m, size_t expected)
{
	cr_assert_eq(m.entries().size(), expected);
	std::set<uint32_t> locals;
	for (const auto &e : m.entries()) {
		cr_assert(locals.insert(e.local_gpu_id).second, "local gpu_id %u used twice", e.local_gpu_id);
		const TopologyNode *s = in.checkpointed->gpu(e.checkpointed_gpu_id);
		const TopologyNode *l = in.local->gpu(e.local_gpu_id);
		cr_assert(s && l && l->accessible);
		cr_assert(compare_gpu_properties(*s, *l, in.config).empty(), "%u -> %u: properties",
			  e.checkpointed_gpu_id, e.local_gpu_id);
		for (uint32_t scpu : in.checkpointed->cpu_nodes_of_gpu(s->gpu_id)) {
			const bool back = in.checkpointed->find_link(scpu, s->node_id, kIoLinkTypePcie);
			bool found = false;
			for (uint32_t lcpu : in.local->cpu_nodes_of_gpu(l->gpu_id))
				found |= !back || in.local->find_link(lcpu, l->node_id, kIoLinkTypePcie) ||
					 in.local->find_link(lcpu, l->node_id, kIoLinkTypeXgmi);
			cr_assert(found, "%u -> %u: CPU link to CPU %u not kept", s->gpu_id, l->gpu_id, scpu);
		}
	}
	size_t kept = 0;
	for (const auto &a : m.entries())
		for (const auto &b : m.entries()) {
			if (a.checkpointed_gpu_id == b.checkpointed_gpu_id)
				continue;
			const int need = link_rank(in.checkpointed->peer_link(a.checkpointed_gpu_id, b.checkpointed_gpu_id));
			const int have = link_rank(in.local->peer_link(a.local_gpu_id, b.local_gpu_id));
			cr_assert_geq(have, need, "peer link %u -> %u lost", a.checkpointed_gpu_id, b.checkpointed_gpu_id);
			kept += need > 0;
			if (in.config.numa_check) {
				const bool src_shared = in.checkpointed->cpu_nodes_of_gpu(a.checkpointed_gpu_id) ==
							in.checkpointed->cpu_nodes_of_gpu(b.checkpointed_gpu_id);
				const bool dst_shared = in.local->cpu_nodes_of_gpu(a.local_gpu_id) ==
							in.local->cpu_nodes_of_gpu(b.local_gpu_id);
				cr_assert_eq(src_shared, dst_shared, "NUMA grouping of %u and %u", a.checkpointed_gpu_id,
					     b.checkpointed_gpu_id);
			}
		}
	return kept;
}

// The number of peer links (ordered GPU pairs with one) of a topology.
size_t peer_links(const Topology &t)
{
	size_t n = 0;
	for (const auto *a : t.gpus())
		for (const auto *b : t.gpus())
			n += a != b && t.peer_link(a->gpu_id, b->gpu_id) != 0;
	return n;
}

// ---- upstream's nine cases, as machines -------------------------------------
// 8-GPU cases: CPU nodes 0 and 1, GPU i is node 2 + i, on CPU i & 1.

// Case 0: two hives of 4, each of one kind, every GPU with PCIe peer links
// to every GPU of the other hive.
Machine two_hives_full_p2p(uint32_t id_base, uint32_t kind_lo, uint32_t kind_hi)
{
	Machine m;
	m.cpu(0).cpu(1);
	for (uint32_t i = 0; i < 8; i++)
		m.gpu(2 + i, id_base + i, i < 4 ? kind_lo : kind_hi).on_cpu(2 + i, i & 1);
	m.hive({2, 3, 4, 5}).hive({6, 7, 8, 9});
	for (uint32_t i = 0; i < 4; i++)
		m.p2p(2 + i, {6, 7, 8, 9}).p2p(6 + i, {2, 3, 4, 5});
	return m;
}

// Cases 1 and 2: the first hive reaches only nodes 6 and 7 over PCIe, the
// second reaches all of the first; GPUs 6 and 7 have no link back from
// their CPU.
Machine two_hives_partial_p2p(uint32_t id_base, uint32_t kind_lo, uint32_t kind_hi)
{
	Machine m;
	m.cpu(0).cpu(1);
	for (uint32_t i = 0; i < 8; i++)
		m.gpu(2 + i, id_base + i, i < 4 ? kind_lo : kind_hi).on_cpu(2 + i, i & 1, i < 6);
	m.hive({2, 3, 4, 5}).hive({6, 7, 8, 9});
	for (uint32_t i = 0; i < 4; i++)
		m.p2p(2 + i, {6, 7}).p2p(6 + i, {2, 3, 4, 5});
	return m;
}

// Cases 3 and 4: two hives of different kinds, links GPU -> CPU only, and
// each CPU links back to one GPU (`back0`, `back1`).
Machine two_hives_one_way_cpu(uint32_t id_base, uint32_t back0, uint32_t back1)
{
	Machine m;
	m.cpu(0).cpu(1);
	for (uint32_t i = 0; i < 8; i++)
		m.gpu(2 + i, id_base + i, i < 4 ? kKindA : kKindB).on_cpu(2 + i, i & 1, false);
	m.hive({2, 3, 4, 5}).hive({6, 7, 8, 9});
	m.find(0).io_links.push_back({kIoLinkTypePcie, back0});
	m.find(1).io_links.push_back({kIoLinkTypePcie, back1});
	return m;
}

// Case 5: one hive of 4 and 4 GPUs without a bridge; PCIe peer links
// between every two GPUs not in the same hive.
Machine one_hive_and_pcie_peers(uint32_t id_base)
{
	Machine m;
	m.cpu(0).cpu(1);
	for (uint32_t i = 0; i < 8; i++)
		m.gpu(2 + i, id_base + i, kKindA).on_cpu(2 + i, i & 1);
	m.hive({2, 3, 4, 5});
	for (uint32_t i = 0; i < 4; i++)
		m.p2p(2 + i, {6, 7, 8, 9}).p2p(6 + i, {2, 3, 4, 5});
	m.p2p(6, {7, 8, 9}).p2p(7, {6, 8, 9}).p2p(8, {6, 7, 9}).p2p(9, {6, 7, 8});
	return m;
}

// 5-GPU cases: CPU node 0, GPUs on nodes 1..5.
Machine five_gpus(uint32_t id_base, const uint32_t (&kinds)[5])
{
	Machine m;
	m.cpu(0);
	for (uint32_t i = 0; i < 5; i++)
		m.gpu(1 + i, id_base + i, kinds[i]).on_cpu(1 + i, 0);
	return m;
}

// Case 6: GPUs 1-4 in a PCIe peer mesh, GPU 5 reaches all four (nothing
// reaches it); the kinds sit at different places on the two machines.
Machine mesh_and_reacher(uint32_t id_base, const uint32_t (&kinds)[5], uint32_t reacher)
{
	Machine m = five_gpus(id_base, kinds);
	for (uint32_t a = 1; a <= 5; a++) {
		if (a == reacher)
			continue;
		for (uint32_t b = 1; b <= 5; b++)
			if (b != a && b != reacher)
				m.p2p(a, {b});
	}
	for (uint32_t b = 1; b <= 5; b++)
		if (b != reacher)
			m.p2p(reacher, {b});
	return m;
}

// Case 7: a hive of 4 on the CPUs (one-way links), 4 GPUs with no link at
// all; the restore node also bridges those 4 (`second_hive`).
Machine hive_and_loners(uint32_t id_base, bool second_hive)
{
	Machine m;
	m.cpu(0).cpu(1);
	for (uint32_t i = 0; i < 8; i++)
		m.gpu(2 + i, id_base + i, kKindA);
	for (uint32_t i = 0; i < 4; i++)
		m.on_cpu(2 + i, i & 1, false);
	m.hive({2, 3, 4, 5});
	if (second_hive)
		m.hive({6, 7, 8, 9});
	return m;
}

struct UpstreamCase {
	int number;
	Machine src, dst;
	bool maps;
};

std::vector<UpstreamCase> upstream_cases()
{
	const uint32_t a = kKindA, b = kKindB;
	std::vector<UpstreamCase> c;
	c.push_back({0, two_hives_full_p2p(100, a, b), two_hives_full_p2p(200, b, a), true});
	c.push_back({1, two_hives_partial_p2p(100, a, a), two_hives_partial_p2p(200, a, a), true});
	c.push_back({2, two_hives_partial_p2p(100, a, b), two_hives_partial_p2p(200, b, a), false});
	c.push_back({3, two_hives_one_way_cpu(100, 4, 9), two_hives_one_way_cpu(200, 2, 7), true});
	c.push_back({4, two_hives_one_way_cpu(100, 4, 9), two_hives_one_way_cpu(200, 2, 6), false});
	c.push_back({5, one_hive_and_pcie_peers(100), one_hive_and_pcie_peers(200), true});
	c.push_back({6, mesh_and_reacher(100, {a, a, b, a, b}, 5), mesh_and_reacher(200, {a, b, a, a, b}, 5), true});
	c.push_back({7, hive_and_loners(100, false), hive_and_loners(200, true), true});
	Machine s8 = five_gpus(100, {a, a, a, a, a});
	s8.p2p(1, {2, 3}).p2p(2, {1, 3}).p2p(3, {1, 2}).p2p(4, {1, 2, 3}).p2p(5, {1, 2, 3});
	Machine d8 = five_gpus(200, {a, a, a, a, a});
	d8.p2p(1, {2, 3, 4}).p2p(2, {1, 3, 4}).p2p(3, {1, 2, 4}).p2p(4, {1, 2, 3}).p2p(5, {1, 2, 3, 4});
	c.push_back({8, s8, d8, true});
	return c;
}

void run_upstream_case(const UpstreamCase &c, PeerLinks where)
{
	const Topology src = c.src.build(where), dst = c.dst.build(where);
	MappingInput in = input(src, dst);
	auto r = map_gpus(in);
	cr_assert_eq(r.ok(), c.maps, "upstream case %d (peer links in %s): %s", c.number,
		     where == PeerLinks::P2p ? "p2p_links" : "io_links",
		     r.ok() ? "mapped" : r.error().message().c_str());
	if (r.ok())
		cr_assert_eq(keeps_everything(in, *r, src.gpus().size()), peer_links(src), "case %d", c.number);
	else
		cr_assert(!has(r.error().message(), "gave up"), "case %d: %s", c.number, r.error().message().c_str());
}

} // namespace

Test(upstream_cases, every_verdict_with_peer_links_in_p2p_links)
{
	for (const auto &c : upstream_cases())
		run_upstream_case(c, PeerLinks::P2p);
}

Test(upstream_cases, every_verdict_with_peer_links_in_io_links)
{
	for (const auto &c : upstream_cases())
		run_upstream_case(c, PeerLinks::Io);
}

Test(upstream_cases, case0_hives_swap_by_kind)
{
	const UpstreamCase c = upstream_cases()[0];
	const Topology src = c.src.build(), dst = c.dst.build();
	auto m = map_gpus(input(src, dst));
	cr_assert_ok(m);
	for (uint32_t n = 2; n <= 9; n++)
		cr_assert_eq(local_node(*m, src, n) >= 6, n < 6, "node %u on the wrong hive", n);
}

Test(upstream_cases, case3_the_cpu_return_links_pin_two_gpus)
{
	const UpstreamCase c = upstream_cases()[3];
	const Topology src = c.src.build(), dst = c.dst.build();
	auto m = map_gpus(input(src, dst));
	cr_assert_ok(m);
	cr_assert_eq(local_node(*m, src, 4), 2u);
	cr_assert_eq(local_node(*m, src, 9), 7u);
}

Test(upstream_cases, case6_kinds_swap_places)
{
	const UpstreamCase c = upstream_cases()[6];
	const Topology src = c.src.build(), dst = c.dst.build();
	auto m = map_gpus(input(src, dst));
	cr_assert_ok(m);
	cr_assert_eq(local_node(*m, src, 3), 2u);
	cr_assert_eq(local_node(*m, src, 2), 3u);
	cr_assert_eq(local_node(*m, src, 5), 5u);
}

Test(upstream_cases, case7_with_real_io_links_counts)
{
	// The builder counts io_links as sysfs does: the restore node's second
	// hive gives its GPUs 3 links where the checkpointed ones had 0.
	const UpstreamCase c = upstream_cases()[7];
	const Topology src = c.src.build(), dst = c.dst.build();
	cr_assert_eq(src.node(6)->io_links_count, 0u);
	cr_assert_eq(dst.node(6)->io_links_count, 3u);
	MappingInput in = input(src, dst);
	auto m = map_gpus(in);
	cr_assert_ok(m);
	keeps_everything(in, *m, 8);
}

// ---- peer links decide the placement ---------------------------------------

namespace {

// Case 2 with one kind and every CPU link both ways: only the peer links
// differ. Checkpointed: hive {2-5} reaches nodes 6, 7; hive {6-9} reaches
// all of {2-5}. Restore node: the other way round, {2-5} reaches all of
// {6-9} and {6-9} reaches nodes 2, 3 (or nothing when `dst_second_reaches`
// is false).
std::pair<Machine, Machine> peers_only_differ(bool dst_second_reaches)
{
	Machine s, d;
	for (Machine *m : {&s, &d}) {
		m->cpu(0).cpu(1);
		for (uint32_t i = 0; i < 8; i++)
			m->gpu(2 + i, (m == &s ? 100 : 200) + i, kKindA).on_cpu(2 + i, i & 1);
		m->hive({2, 3, 4, 5}).hive({6, 7, 8, 9});
	}
	for (uint32_t i = 0; i < 4; i++) {
		s.p2p(2 + i, {6, 7}).p2p(6 + i, {2, 3, 4, 5});
		d.p2p(2 + i, {6, 7, 8, 9});
		if (dst_second_reaches)
			d.p2p(6 + i, {2, 3});
	}
	return {s, d};
}

} // namespace

Test(peer_links, decide_which_hive_goes_where)
{
	auto [s, d] = peers_only_differ(true);
	const Topology src = s.build(), dst = d.build();
	MappingInput in = input(src, dst);
	auto m = map_gpus(in);
	cr_assert_ok(m);
	cr_assert_eq(keeps_everything(in, *m, 8), 24u + 24u); // XGMI in the hives + PCIe
	for (uint32_t n = 2; n <= 9; n++)
		cr_assert_eq(local_node(*m, src, n) >= 6, n < 6, "node %u on the wrong hive", n);
	// The two GPUs the first hive reached are the two the restore node's
	// second hive reaches.
	std::set<uint32_t> reached{local_node(*m, src, 6), local_node(*m, src, 7)};
	cr_assert(reached == (std::set<uint32_t>{2, 3}));
}

Test(peer_links, lost_pcie_peers_are_refused)
{
	auto [s, d] = peers_only_differ(false);
	const Topology src = s.build(), dst = d.build();
	auto r = map_gpus(input(src, dst));
	cr_assert(!r.ok());
	const std::string msg = r.error().message();
	cr_assert(has(msg, "by PCIe or XGMI"), "%s", msg.c_str());
	cr_assert(has(msg, "cannot be relaxed"), "%s", msg.c_str());
}

Test(peer_links, mesh_role_swap_backtracks_over_the_same_gpu_id)
{
	// Case 6 where the restore node has the same gpu_ids, but its GPU that
	// reaches all others is node 2 (kind B), and node 5 (kind B) is in the
	// mesh: the same gpu_id (node 5 -> node 5) loses 7 links, so the search
	// must take the other kind-B GPU.
	const uint32_t a = kKindA, b = kKindB;
	const Topology src = mesh_and_reacher(100, {a, a, b, a, b}, 5).build();
	const Topology dst = mesh_and_reacher(100, {a, b, a, a, b}, 2).build();
	MappingInput in = input(src, dst);
	auto m = map_gpus(in);
	cr_assert_ok(m);
	cr_assert_eq(keeps_everything(in, *m, 5), 16u);
	cr_assert_eq(local_node(*m, src, 5), 2u);
	cr_assert_eq(local_node(*m, src, 3), 5u);
}

Test(peer_links, direction_counts)
{
	// Checkpointed: node 1 reaches node 2, not the reverse. Locally only 2
	// reaches 1: the same gpu_ids would keep the pair but not the direction,
	// and the GPU kinds pin the placement, so there is no mapping.
	Machine s = five_gpus(100, {kKindA, kKindB, kKindA, kKindA, kKindA});
	s.p2p(1, {2});
	Machine d = five_gpus(100, {kKindA, kKindB, kKindA, kKindA, kKindA});
	d.p2p(2, {1});
	const Topology src = s.build(), dst = d.build();
	MappingInput in = input(src, dst);
	in.held_gpu_ids = {100, 101};
	auto r = map_gpus(in);
	cr_assert(!r.ok());
	cr_assert(has(r.error().message(), "PCIe or XGMI"), "%s", r.error().message().c_str());
	// A local GPU of kind A that reaches 2 is found when there is one.
	d.p2p(3, {2});
	const Topology dst2 = d.build();
	MappingInput in2 = input(src, dst2);
	in2.held_gpu_ids = {100, 101};
	auto m = map_gpus(in2);
	cr_assert_ok(m);
	cr_assert_eq(keeps_everything(in2, *m, 2), 1u);
	cr_assert_eq(local_node(*m, src, 1), 3u);
}

Test(peer_links, lost_link_names_both_gpus)
{
	// a (kind A) reaches b (kind B). Locally the only kind-A GPU, x, reaches
	// a third GPU z but not y, the only kind-B GPU (z reaches y): each GPU
	// still has enough peers, so the refusal is the lost pair itself.
	const uint32_t kKindC = 0x74c0;
	Machine s;
	s.cpu(0).gpu(1, 11, kKindA).gpu(2, 12, kKindB).on_cpu(1, 0).on_cpu(2, 0).p2p(1, {2});
	Machine d;
	d.cpu(0).gpu(1, 21, kKindA).gpu(2, 22, kKindB).gpu(3, 23, kKindC);
	d.on_cpu(1, 0).on_cpu(2, 0).on_cpu(3, 0).p2p(1, {3}).p2p(3, {2});
	const Topology src = s.build(), dst = d.build();
	auto r = map_gpus(input(src, dst));
	cr_assert(!r.ok());
	const std::string msg = r.error().message();
	cr_assert(has(msg, "no PCIe or XGMI link from local gpu 0x0015, which holds checkpointed gpu 0x000b "
			   "(linked from it by PCIe) (cannot be relaxed)") ||
			  has(msg, "no PCIe or XGMI link to local gpu 0x0016, which holds checkpointed gpu 0x000c "
				   "(linked to it by PCIe) (cannot be relaxed)"),
		  "%s", msg.c_str());
}

Test(peer_links, xgmi_needs_xgmi_and_too_few_peers_is_said_up_front)
{
	// A pair joined by XGMI cannot land on two GPUs joined by PCIe only.
	Machine s;
	s.cpu(0).gpu(1, 11).gpu(2, 12).on_cpu(1, 0).on_cpu(2, 0).hive({1, 2});
	Machine d;
	d.cpu(0).gpu(1, 21).gpu(2, 22).on_cpu(1, 0).on_cpu(2, 0).p2p(1, {2}).p2p(2, {1});
	const Topology src = s.build(), dst = d.build();
	auto r = map_gpus(input(src, dst));
	cr_assert(!r.ok());
	const std::string msg = r.error().message();
	cr_assert(has(msg, "reached 1 of the process's other GPUs by XGMI, the local GPU reaches only 0 usable "
			   "GPUs that way (cannot be relaxed)"),
		  "%s", msg.c_str());
}

// ---- more capable restore nodes ----------------------------------------------

namespace {

// 2 CPUs, 8 GPUs in one XGMI hive, 4 per CPU (like the emulated 8xMI300X).
Machine eight_gpu_hive(uint32_t id_base, uint32_t kind = kKindA)
{
	Machine m;
	m.cpu(0).cpu(1);
	for (uint32_t i = 0; i < 8; i++)
		m.gpu(2 + i, id_base + i, kind).on_cpu(2 + i, i / 4);
	m.hive({2, 3, 4, 5, 6, 7, 8, 9});
	return m;
}

} // namespace

Test(bigger_node, two_pcie_peers_onto_an_eight_gpu_hive)
{
	// A 2-GPU node whose GPUs reach each other over PCIe (large BAR): the
	// hive's GPUs have 8 io links where these had 1, and XGMI for PCIe.
	Machine s;
	s.cpu(0).gpu(1, 11).gpu(2, 12).on_cpu(1, 0).on_cpu(2, 0).p2p(1, {2}).p2p(2, {1});
	const Topology src = s.build(), dst = eight_gpu_hive(200).build();
	cr_assert_eq(src.node(1)->io_links_count, 1u);
	cr_assert_eq(dst.node(2)->io_links_count, 8u);
	MappingInput in = input(src, dst);
	auto m = map_gpus(in);
	cr_assert_ok(m);
	cr_assert_eq(keeps_everything(in, *m, 2), 2u);
}

Test(bigger_node, one_gpu_onto_an_eight_gpu_hive)
{
	Machine s;
	s.cpu(0).gpu(1, 11).on_cpu(1, 0);
	const Topology src = s.build(), dst = eight_gpu_hive(200).build();
	MappingInput in = input(src, dst);
	auto m = map_gpus(in);
	cr_assert_ok(m);
	keeps_everything(in, *m, 1);
}

Test(bigger_node, a_hive_of_two_onto_a_hive_of_eight)
{
	Machine s;
	s.cpu(0).gpu(1, 11).gpu(2, 12).on_cpu(1, 0).on_cpu(2, 0).hive({1, 2});
	const Topology src = s.build(), dst = eight_gpu_hive(200).build();
	MappingInput in = input(src, dst);
	auto m = map_gpus(in);
	cr_assert_ok(m);
	cr_assert_eq(keeps_everything(in, *m, 2), 2u);
}

Test(bigger_node, a_hive_lands_on_the_second_hive_of_its_kind)
{
	// Checkpointed: one hive of 4 kind-A GPUs. Restore node: a kind-B hive
	// on nodes 2-5, a kind-A hive on nodes 6-9, more GPUs than needed.
	Machine s;
	s.cpu(0);
	for (uint32_t i = 0; i < 4; i++)
		s.gpu(1 + i, 11 + i, kKindA).on_cpu(1 + i, 0);
	s.hive({1, 2, 3, 4});
	Machine d;
	d.cpu(0);
	for (uint32_t i = 0; i < 8; i++)
		d.gpu(2 + i, 11 + i, i < 4 ? kKindB : kKindA).on_cpu(2 + i, 0);
	d.hive({2, 3, 4, 5}).hive({6, 7, 8, 9});
	const Topology src = s.build(), dst = d.build();
	MappingInput in = input(src, dst);
	auto m = map_gpus(in);
	cr_assert_ok(m);
	cr_assert_eq(keeps_everything(in, *m, 4), 12u);
	for (uint32_t n = 1; n <= 4; n++)
		cr_assert_geq(local_node(*m, src, n), 6u);
}

Test(bigger_node, two_hives_onto_one_bigger_hive)
{
	// Two separate hives of 2 may share one hive of 8: extra links are fine.
	Machine s;
	s.cpu(0).cpu(1);
	for (uint32_t i = 0; i < 4; i++)
		s.gpu(2 + i, 11 + i).on_cpu(2 + i, i / 2);
	s.hive({2, 3}).hive({4, 5});
	const Topology src = s.build(), dst = eight_gpu_hive(200).build();
	MappingInput in = input(src, dst);
	auto m = map_gpus(in);
	cr_assert_ok(m);
	cr_assert_eq(keeps_everything(in, *m, 4), 4u);
}

Test(bigger_node, every_at_least_property_larger)
{
	Machine s;
	s.cpu(0).gpu(1, 11).on_cpu(1, 0);
	Machine d;
	d.cpu(0).gpu(1, 21, kKindA, [](TopologyNode &g) {
		g.vram_size *= 2;
		g.mem_banks_count += 1;
		g.caches_count += 10;
		g.num_gws += 1;
		g.num_sdma_engines += 2;
		g.num_sdma_xgmi_engines += 2;
		g.num_sdma_queues_per_engine += 2;
		g.num_cp_queues += 8;
		g.fw_version += 1;
		g.sdma_fw_version += 1;
	});
	d.on_cpu(1, 0);
	const Topology src = s.build(), dst = d.build();
	MappingInput in = input(src, dst);
	auto m = map_gpus(in);
	cr_assert_ok(m);
	keeps_everything(in, *m, 1);
}

Test(bigger_node, sixteen_gpus_two_kinds_complete_search)
{
	// 16 GPUs: two hives of 8 of different kinds, PCIe peers from the
	// first hive to half of the second. The restore node lists the kinds
	// the other way round, with other ids, and the CPUs swapped.
	auto build = [](uint32_t id_base, bool swapped) {
		Machine m;
		m.cpu(0).cpu(1);
		for (uint32_t i = 0; i < 16; i++) {
			const bool first = i < 8;
			m.gpu(2 + i, id_base + i, first != swapped ? kKindA : kKindB)
				.on_cpu(2 + i, (i % 8 < 4) != swapped ? 0 : 1);
		}
		m.hive({2, 3, 4, 5, 6, 7, 8, 9}).hive({10, 11, 12, 13, 14, 15, 16, 17});
		const uint32_t a0 = swapped ? 10 : 2, b0 = swapped ? 2 : 10;
		for (uint32_t i = 0; i < 8; i++)
			m.p2p(a0 + i, {b0, b0 + 1, b0 + 2, b0 + 3});
		return m;
	};
	const Topology src = build(100, false).build(), dst = build(300, true).build();
	MappingInput in = input(src, dst);
	auto m = map_gpus(in);
	cr_assert_ok(m);
	cr_assert_eq(keeps_everything(in, *m, 16), 56u * 2 + 32u);
}

Test(bigger_node, sixteen_gpus_without_a_mapping_say_why)
{
	// One hive of 16 onto two hives of 8: refused with the reason, not by
	// running out of search steps.
	Machine s, d;
	s.cpu(0);
	d.cpu(0);
	for (uint32_t i = 0; i < 16; i++) {
		s.gpu(1 + i, 100 + i).on_cpu(1 + i, 0);
		d.gpu(1 + i, 200 + i).on_cpu(1 + i, 0);
	}
	s.hive({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16});
	d.hive({1, 2, 3, 4, 5, 6, 7, 8}).hive({9, 10, 11, 12, 13, 14, 15, 16});
	const Topology src = s.build(), dst = d.build();
	auto r = map_gpus(input(src, dst));
	cr_assert(!r.ok());
	cr_assert(has(r.error().message(), "reached 15 of the process's other GPUs by XGMI"), "%s",
		  r.error().message().c_str());
}

// ---- a refusal per property -------------------------------------------------

namespace {

enum class Expect { Equal, AtLeast, NotCompared };

// What each stored property must satisfy: this test's own statement of
// the rules (docs/topology.md), not read from node_properties.h.
const std::map<std::string, std::pair<Expect, std::optional<Check>>> &expected_rules()
{
	static const std::map<std::string, std::pair<Expect, std::optional<Check>>> rules = {
		{"cpu_cores_count", {Expect::NotCompared, {}}},
		{"simd_count", {Expect::Equal, {}}},
		{"mem_banks_count", {Expect::AtLeast, {}}},
		{"caches_count", {Expect::AtLeast, Check::CachesCount}},
		{"io_links_count", {Expect::NotCompared, {}}},
		{"max_waves_per_simd", {Expect::Equal, {}}},
		{"lds_size_in_kb", {Expect::Equal, {}}},
		{"gds_size_in_kb", {Expect::NotCompared, {}}},
		{"num_gws", {Expect::AtLeast, Check::NumGws}},
		{"wave_front_size", {Expect::Equal, {}}},
		{"array_count", {Expect::Equal, {}}},
		{"simd_arrays_per_engine", {Expect::Equal, {}}},
		{"cu_per_simd_array", {Expect::Equal, {}}},
		{"simd_per_cu", {Expect::Equal, {}}},
		{"max_slots_scratch_cu", {Expect::Equal, {}}},
		{"vendor_id", {Expect::Equal, {}}},
		{"device_id", {Expect::Equal, {}}},
		{"domain", {Expect::NotCompared, {}}},
		{"drm_render_minor", {Expect::NotCompared, {}}},
		{"num_sdma_engines", {Expect::AtLeast, {}}},
		{"num_sdma_xgmi_engines", {Expect::AtLeast, {}}},
		{"num_sdma_queues_per_engine", {Expect::AtLeast, {}}},
		{"num_cp_queues", {Expect::AtLeast, {}}},
		{"fw_version", {Expect::AtLeast, Check::FwVersion}},
		{"capability", {Expect::Equal, Check::Capability}},
		{"sdma_fw_version", {Expect::AtLeast, Check::SdmaFwVersion}},
	};
	return rules;
}

struct Property {
	const char *name;
	uint32_t TopologyNode::*field;
};

constexpr Property kProperties[] = {
#define AMDCR_TEST_PROPERTY(name, rule, check) {#name, &TopologyNode::name},
	AMDCR_NODE_PROPERTIES(AMDCR_TEST_PROPERTY)
#undef AMDCR_TEST_PROPERTY
};

// Maps a checkpointed GPU onto one local GPU whose `field` is `delta` off.
Result<GpuMap> map_with_delta(const Property &p, int delta, Config config = {})
{
	Machine s;
	s.cpu(0).gpu(1, 11).on_cpu(1, 0);
	Machine d;
	d.cpu(0).gpu(1, 21).on_cpu(1, 0);
	const Topology src = s.build();
	// Changed after build(), which sets io_links_count; the links are the
	// same on both sides.
	std::vector<TopologyNode> nodes = d.build().nodes();
	nodes.at(1).*(p.field) += static_cast<uint32_t>(delta);
	const Topology dst(std::move(nodes));
	return map_gpus(input(src, dst, config));
}

} // namespace

Test(property_rules, every_stored_property_has_an_expected_rule)
{
	std::set<std::string> listed;
	for (const auto &p : kProperties) {
		cr_assert(expected_rules().contains(p.name), "no expected rule for %s", p.name);
		listed.insert(p.name);
	}
	cr_assert_eq(listed.size(), expected_rules().size());
}

Test(property_rules, each_property_refused_or_accepted_as_stated)
{
	for (const auto &p : kProperties) {
		const auto &[expect, check] = expected_rules().at(p.name);
		const std::string prop = std::string(p.name) + ": checkpointed";
		auto larger = map_with_delta(p, +1);
		auto smaller = map_with_delta(p, -1);
		if (expect == Expect::NotCompared) {
			const std::string why = !larger.ok()	? larger.error().message()
						: !smaller.ok() ? smaller.error().message()
								: std::string();
			cr_assert(why.empty(), "%s must not be compared: %s", p.name, why.c_str());
			continue;
		}
		cr_assert(!smaller.ok(), "%s: a smaller local value must be refused", p.name);
		const std::string msg = smaller.error().message();
		cr_assert(has(msg, "cannot map checkpointed gpu 0x000b"), "%s", msg.c_str());
		cr_assert(has(msg, " on gpu 0x0015"), "%s", msg.c_str());
		cr_assert(has(msg, prop), "%s", msg.c_str());
		cr_assert(has(msg, expect == Expect::Equal ? " != local " : " > local "), "%s: %s", p.name, msg.c_str());
		if (check)
			cr_assert(has(msg, std::string("(relax with ") + check_env_name(*check) + "=0)"), "%s",
				  msg.c_str());
		else
			cr_assert(has(msg, "(cannot be relaxed)"), "%s", msg.c_str());
		if (expect == Expect::Equal)
			cr_assert(!larger.ok() && has(larger.error().message(), prop), "%s: larger must be refused",
				  p.name);
		else
			cr_assert(larger.ok(), "%s: larger must be accepted", p.name);
		if (check) {
			cr_assert(map_with_delta(p, -1, Config{}.with(*check, false)).ok(), "%s relaxed", p.name);
			cr_assert(map_with_delta(p, +1, Config{}.with(*check, false)).ok(), "%s relaxed", p.name);
		}
	}
}

// ---- through the image ---------------------------------------------------------

Test(image_links, p2p_links_survive_the_image_and_decide_the_mapping)
{
	// The role-swap case, with the checkpointed side read back from a
	// packed KFD image: without field 120 the mapping could not see the
	// links it must keep.
	const uint32_t a = kKindA, b = kKindB;
	const Topology parsed = mesh_and_reacher(100, {a, a, b, a, b}, 5).build();
	KfdImage img;
	for (const auto &n : parsed.nodes())
		img.devices.push_back(device_from_node(parsed, n, n.gpu_id));
	img.priv_data = {1};
	auto packed = pack_kfd_image(img);
	cr_assert_ok(packed);
	auto back = unpack_kfd_image(*packed, "test");
	cr_assert_ok(back);
	cr_assert(back->devices == img.devices);
	cr_assert_eq(back->find_gpu(104)->p2p_links.size(), 4u);
	auto src = topology_from_devices(back->devices);
	cr_assert_ok(src);
	cr_assert_eq(peer_links(*src), 16u);

	const Topology dst = mesh_and_reacher(100, {a, b, a, a, b}, 2).build();
	MappingInput in = input(*src, dst);
	auto m = map_gpus(in);
	cr_assert_ok(m);
	cr_assert_eq(keeps_everything(in, *m, 5), 16u);
	cr_assert_eq(m->find_checkpointed(104)->local_node_id, 2u);
}

Test(image_links, an_image_without_p2p_links_restores_as_before)
{
	// Upstream's plugin writes no field 120: its images carry no PCIe peer
	// links, so none are required.
	const Topology parsed = mesh_and_reacher(100, {kKindA, kKindA, kKindA, kKindA, kKindA}, 5).build();
	std::vector<KfdDevice> devices;
	for (const auto &n : parsed.nodes()) {
		devices.push_back(device_from_node(parsed, n, n.gpu_id));
		devices.back().p2p_links.clear();
	}
	auto src = topology_from_devices(devices);
	cr_assert_ok(src);
	cr_assert_eq(peer_links(*src), 0u);
	const Topology dst = five_gpus(200, {kKindA, kKindA, kKindA, kKindA, kKindA}).build();
	MappingInput in = input(*src, dst);
	auto m = map_gpus(in);
	cr_assert_ok(m);
	keeps_everything(in, *m, 5);
}
