// SPDX-License-Identifier: GPL-2.0-only
//
// The profile loader on its own (no emulator): named profiles, the machine
// file format, overrides, fault specifications, and their error messages.
#include "check.h"

#include "../transport/faults.h"
#include "../transport/sysfs.h"

using namespace kfdemu;
using namespace kfdemu::test;

namespace {

std::optional<MachineDesc> parse(const char *text, std::string *err)
{
	err->clear();
	return parse_machine(text, err);
}

bool rejects(const char *text, const char *what)
{
	std::string err;
	auto m = parse(text, &err);
	if (m || err.find(what) == std::string::npos) {
		std::printf("    expected error containing '%s', got '%s'\n", what, err.c_str());
		return false;
	}
	return true;
}

void check_consistent(const MachineDesc &m)
{
	for (const auto &n : m.nodes) {
		CHECK_EQ(prop(n, "mem_banks_count"), n.mem_banks.size());
		CHECK_EQ(prop(n, "caches_count"), n.caches.size());
		CHECK_EQ(prop(n, "io_links_count"), n.io_links.size());
		CHECK_EQ(prop(n, "p2p_links_count"), n.p2p_links.size());
		CHECK_EQ(n.properties.back().first, std::string("max_engine_clk_ccompute"));
		CHECK_EQ(n.properties.front().first, std::string("cpu_cores_count"));
		for (const auto &l : n.io_links)
			CHECK(l.node_to < m.nodes.size());
		if (n.is_gpu) {
			CHECK_EQ(prop(n, "drm_render_minor"), n.drm_render_minor);
			CHECK_EQ(prop(n, "device_id"), n.pci_device_id);
			CHECK(n.gpu_id != 0 && n.gpu_id <= 0xffff);
			CHECK(!n.mem_banks.empty() && n.mem_banks[0].size_in_bytes > 0 &&
			      (n.mem_banks[0].heap_type == 1 || n.mem_banks[0].heap_type == 2));
			CHECK(prop(n, "fw_version") != ~0ull && prop(n, "sdma_fw_version") != ~0ull);
		} else {
			CHECK(prop(n, "fw_version") == ~0ull);	// GPU-only key absent
		}
	}
}

void test_named()
{
	std::string err;
	for (const char *name : {"MI100", "2xMI210", "2xMI300X", "8xMI300X", "none"}) {
		auto m = load_machine(name, KFDEMU_PROFILE_DIR, &err);
		if (!CHECK(m.has_value()))
			continue;
		check_consistent(*m);
	}
	auto mi100 = load_machine("MI100", KFDEMU_PROFILE_DIR, &err);
	if (mi100) {
		const NodeDesc &g = mi100->nodes.at(1);
		CHECK_EQ(g.gpu_id, 42700u);
		CHECK_EQ(g.name, std::string("arcturus"));
		CHECK_EQ(prop(g, "simd_count"), 480u);
		CHECK_EQ(prop(g, "caches_count"), 217u);
		CHECK_EQ(prop(g, "capability"), 749970048u);
		CHECK_EQ(prop(g, "gfx_target_version"), 90008u);
		CHECK_EQ(g.drm_render_minor, 128u);
	}
	auto big = load_machine("8xMI300X", KFDEMU_PROFILE_DIR, &err);
	if (big) {
		CHECK_EQ(gpu_nodes(*big).size(), 8u);
		size_t cpus = big->nodes.size() - 8;
		CHECK_EQ(cpus, 2u);
		for (size_t i = cpus; i < big->nodes.size(); i++) {
			const auto &n = big->nodes[i];
			CHECK_EQ(n.io_links.size(), 8u);	// its CPU + 7 XGMI peers
			CHECK_EQ(n.io_links[0].type, 2u);
			CHECK_EQ(n.io_links[0].node_to, uint32_t((i - cpus) / 4));
			for (size_t l = 1; l < n.io_links.size(); l++)
				CHECK_EQ(n.io_links[l].type, 11u);
			CHECK(prop(n, "hive_id") != 0 && prop(n, "hive_id") == prop(big->nodes[cpus], "hive_id"));
		}
	}
	// 2xMI300X and 2xMI210: no hive, large BAR, so each GPU reaches the
	// other over PCIe through the CPU: one derived p2p_links entry, type 2,
	// weight 20 + 20 (kfd_add_peer_prop); the 8xMI300X hive has none.
	for (const char *name : {"2xMI300X", "2xMI210"}) {
		auto two = load_machine(name, KFDEMU_PROFILE_DIR, &err);
		if (!CHECK(two.has_value()) || !CHECK_EQ(two->nodes.size(), 3u))
			continue;
		for (size_t i = 1; i < 3; i++) {
			const auto &n = two->nodes[i];
			CHECK_EQ(n.io_links.size(), 1u);
			CHECK_EQ(prop(n, "hive_id"), 0u);
			CHECK_EQ(prop(n, "p2p_links_count"), 1u);
			if (CHECK_EQ(n.p2p_links.size(), 1u)) {
				CHECK_EQ(n.p2p_links[0].type, 2u);
				CHECK_EQ(n.p2p_links[0].node_to, uint32_t(3 - i));
				CHECK_EQ(n.p2p_links[0].weight, 40u);
			}
		}
		if (big && std::string(name) == "2xMI300X")
			CHECK_EQ(prop(two->nodes[1], "device_id"), prop(big->nodes[2], "device_id"));
	}
	if (big)
		for (size_t i = 2; i < big->nodes.size(); i++)
			CHECK(big->nodes[i].p2p_links.empty());
	auto none = load_machine("none", KFDEMU_PROFILE_DIR, &err);
	CHECK(none && gpu_nodes(*none).empty());
	CHECK(!load_machine("NoSuchMachine", KFDEMU_PROFILE_DIR, &err));
	CHECK(err.find("NoSuchMachine") != std::string::npos);
}

void test_custom_file()
{
	std::string err;
	auto m = load_machine(KFDEMU_TESTS_DIR "/custom.machine", KFDEMU_PROFILE_DIR, &err);
	if (!CHECK(m.has_value())) {
		std::printf("    %s\n", err.c_str());
		return;
	}
	check_consistent(*m);
	CHECK_EQ(m->name, std::string("custom-test"));
	CHECK_EQ(m->kfd_minor_version, 13u);
	const auto g = gpu_nodes(*m);
	if (!CHECK_EQ(g.size(), 3u))
		return;
	CHECK_EQ(g[0]->gpu_id, 0x4321u);
	CHECK_EQ(g[0]->drm_render_minor, 150u);
	CHECK_EQ(g[0]->card_index, 22u);
	CHECK_EQ(g[0]->caches.size(), 5u);
	CHECK_EQ(prop(*g[0], "fw_version"), 99u);
	CHECK_EQ(prop(*g[0], "sdma_fw_version"), 21u);
	CHECK_EQ(prop(*g[0], "capability"), 12345u);
	CHECK_EQ(g[0]->mem_banks[0].size_in_bytes, 4ull << 30);
	CHECK_EQ(g[0]->io_links.size(), 1u);
	CHECK_EQ(g[0]->io_links[0].node_to, 1u);
	CHECK_EQ(g[1]->card_index, 7u);
	CHECK_EQ(g[1]->pci_slot, std::string("0001:c4:00.0"));
	CHECK_EQ(prop(*g[1], "domain"), 1u);
	CHECK_EQ(prop(*g[1], "location_id"), 0xc400u);
	CHECK_EQ(g[1]->caches.size(), 0u);
	CHECK_EQ(g[1]->io_links.size(), 2u);	// CPU + one XGMI peer
	CHECK_EQ(g[1]->io_links[1].type, 11u);
	CHECK_EQ(g[2]->mem_banks[0].heap_type, 2u);	// small BAR
	CHECK(!g[2]->large_bar);
	// Derived p2p links: to every large-BAR GPU outside the own hive (so
	// none to GPU 2, and none between the hive's GPUs 1 and 2); GPU 0 (CPU
	// node 1) to GPU 1 (CPU node 0) adds the CPU1 -> CPU0 link's weight 32.
	if (CHECK_EQ(g[0]->p2p_links.size(), 1u)) {
		CHECK_EQ(g[0]->p2p_links[0].node_to, 3u);
		CHECK_EQ(g[0]->p2p_links[0].weight, 20u + 20u + 32u);
	}
	for (size_t i = 1; i < 3; i++)
		if (CHECK_EQ(g[i]->p2p_links.size(), 1u)) {
			CHECK_EQ(g[i]->p2p_links[0].node_to, 2u);
			CHECK_EQ(g[i]->p2p_links[0].type, 2u);
		}
	CHECK_EQ(prop(*g[0], "hive_id"), 0u);
	CHECK(prop(*g[1], "hive_id") != 0);
	const NodeDesc &cpu1 = m->nodes[1];
	CHECK_EQ(cpu1.io_links.size(), 2u);	// GPU 0 + the explicit link
	CHECK_EQ(cpu1.io_links.back().node_to, 0u);
	CHECK_EQ(cpu1.io_links.back().weight, 32u);
}

void test_errors()
{
	CHECK(rejects("cpu\n  bogus_key 1\n", "unknown key 'bogus_key'"));
	CHECK(rejects("gpu MI999\n", "unknown gpu template"));
	CHECK(rejects("gpu MI100\n", "needs at least one cpu node"));
	CHECK(rejects("cpu\ngpu MI100\n  numa 3\n", "numa node out of range"));
	CHECK(rejects("cpu\ngpu MI100\n  gpu_id 7\ngpu MI100\n  gpu_id 7\n", "duplicate"));
	CHECK(rejects("cpu\n  cores twelve\n", "line 2: 'twelve' is not a number"));
	CHECK(rejects("  cores 4\n", "outside a cpu/gpu block"));
	CHECK(rejects("cpu\ngpu MI100\n  cache 1 16\n", "usage: cache"));
	CHECK(rejects("cpu\n  link 2 9\n", "no such node"));
	CHECK(rejects("cpu\ngpu MI100\n  p2p 2 9\n", "no such node"));
	CHECK(rejects("pcie_p2p 2\ncpu\n", "usage: pcie_p2p 0|1"));
	// pcie_p2p 0 (amdgpu.pcie_p2p=0): no derived peer links, `p2p` lines stay.
	std::string off_err;
	auto off = parse_machine("pcie_p2p 0\ncpu\ngpu MI210\ngpu MI210\n  p2p 2 1\n", &off_err);
	if (CHECK(off.has_value()) && CHECK_EQ(off->nodes.size(), 3u)) {
		CHECK(off->nodes[1].p2p_links.empty());
		CHECK_EQ(off->nodes[2].p2p_links.size(), 1u);
		CHECK_EQ(prop(off->nodes[1], "p2p_links_count"), 0u);
	}
	CHECK(rejects("cpu\n  p2p 2 0\n", "usage (gpu): p2p"));
	CHECK(rejects("cpu\ngpu MI100\n  io_links_count 4\n", "unknown key"));	// derived, not settable
	std::string err;
	auto m = parse("cpu\ngpu MI100\n  prop brand_new_key 5\n", &err);
	CHECK(m.has_value());
	if (m) {
		const auto &p = m->nodes[1].properties;
		CHECK_EQ(p[p.size() - 2].first, std::string("brand_new_key"));
		CHECK_EQ(properties_text(m->nodes[1]).find("brand_new_key 5\nmax_engine_clk_ccompute"),
			 properties_text(m->nodes[1]).rfind("brand_new_key 5\n"));
	}
}

void test_overrides()
{
	std::string err;
	auto m = load_machine("2xMI210", KFDEMU_PROFILE_DIR, &err);
	if (!CHECK(m.has_value()))
		return;
	Overrides o;
	CHECK(parse_u32_list("0x1a2b,15", &o.gpu_ids));
	CHECK(parse_u32_list("130,131", &o.minors));
	CHECK(parse_size_list("1G", &o.vram));
	o.fw_version = 200;
	o.sdma_gbps = 12.5;
	o.vram_resident = true;
	CHECK(!gpu_nodes(*m)[0]->vram_resident);
	CHECK_EQ(apply_overrides(*m, o), std::string());
	const auto g = gpu_nodes(*m);
	CHECK_EQ(g[0]->gpu_id, 0x1a2bu);
	CHECK_EQ(g[1]->gpu_id, 15u);
	CHECK_EQ(g[1]->drm_render_minor, 131u);
	CHECK_EQ(prop(*g[1], "drm_render_minor"), 131u);
	CHECK_EQ(g[1]->card_index, 3u);
	CHECK_EQ(g[0]->mem_banks[0].size_in_bytes, 1ull << 30);
	CHECK_EQ(prop(*g[1], "fw_version"), 200u);
	CHECK(g[0]->sdma_gbps == 12.5);
	CHECK(g[0]->vram_resident && g[1]->vram_resident);

	Overrides bad;
	bad.gpu_ids = {1, 2, 3};
	CHECK(!apply_overrides(*m, bad).empty());
	bad = {};
	bad.gpu_ids = {0x10000};
	CHECK(!apply_overrides(*m, bad).empty());
	bad = {};
	bad.minors = {200};
	CHECK(!apply_overrides(*m, bad).empty());
	bad = {};
	bad.gpu_ids = {9, 9};
	CHECK(!apply_overrides(*m, bad).empty());
	// --device-cgroup: the denied GPUs' topology nodes, an unknown minor refused.
	auto big = load_machine("8xMI300X", KFDEMU_PROFILE_DIR, &err);
	if (CHECK(big.has_value())) {
		CHECK(cgroup_denied_paths(*big).empty());
		Overrides cg;
		cg.cgroup_minors = {132, 133};
		CHECK_EQ(apply_overrides(*big, cg), std::string());
		const auto denied = cgroup_denied_paths(*big);
		CHECK_EQ(denied.size(), 6u);
		CHECK(!denied.empty() && denied.front() == "/sys/class/kfd/kfd/topology/nodes/2");
		cg.cgroup_minors = {127};
		CHECK(apply_overrides(*big, cg).find("no GPU has render minor 127") != std::string::npos);
	}
	std::vector<uint32_t> v;
	CHECK(!parse_u32_list("12,x", &v));
	std::vector<uint64_t> sz;
	CHECK(parse_size_list("64K,2M", &sz) && sz[0] == 65536 && sz[1] == (2u << 20));
}

// cwsr_size and ctl_stack_size as amdkfd derives them for each template
// (kfd_queue_ctx_save_restore_size: per XCC), after num_cp_queues as
// node_show prints them, 0 on CPU nodes; a machine file may set them and
// turns on Linux 6.12's CREATE_QUEUE size checks with queue_size_checks.
void test_cwsr_sizes()
{
	std::string err;
	const struct {
		const char *machine;
		uint64_t cwsr, stack;
	} want[] = {{"MI100", 73273344, 0x9000}, {"2xMI210", 63508480, 0x9000}, {"8xMI300X", 23203840, 0x3000}};
	for (const auto &w : want) {
		auto m = load_machine(w.machine, KFDEMU_PROFILE_DIR, &err);
		CHECK(m.has_value());
		if (!m)
			continue;
		CHECK(!m->queue_size_checks);
		for (const auto &n : m->nodes) {
			CHECK_EQ(prop(n, "cwsr_size"), n.is_gpu ? w.cwsr : 0);
			CHECK_EQ(prop(n, "ctl_stack_size"), n.is_gpu ? w.stack : 0);
			size_t at = 0;
			while (at < n.properties.size() && n.properties[at].first != "num_cp_queues")
				at++;
			CHECK(at + 2 < n.properties.size() && n.properties[at + 1].first == "cwsr_size" &&
			      n.properties[at + 2].first == "ctl_stack_size");
		}
	}
	auto m = parse("queue_size_checks on\ncpu\ngpu MI100\n  ctl_stack_size 0x18000\n", &err);
	CHECK(m && m->queue_size_checks && prop(m->nodes[1], "ctl_stack_size") == 0x18000 &&
	      prop(m->nodes[1], "cwsr_size") == 73273344);
	CHECK(rejects("queue_size_checks yes\n", "usage: queue_size_checks on|off"));
}

void test_fault_specs()
{
	std::string err;
	auto r = parse_faults("AMDKFD_IOC_CRIU_OP:nth=1:errno=EIO", &err);
	CHECK(r && r->size() == 1 && (*r)[0].target == "AMDKFD_IOC_CRIU_OP" && (*r)[0].nth == 1 &&
	      (*r)[0].err == EIO);
	r = parse_faults("sdma:nth=2:hang;CRIU_OP:CHECKPOINT:errno=ENOMEM,open:/dev/kfd:errno=13", &err);
	CHECK(r && r->size() == 3);
	if (r && r->size() == 3) {
		CHECK((*r)[0].action == FaultRule::Action::Hang && (*r)[0].nth == 2);
		CHECK_EQ((*r)[1].target, std::string("CRIU_OP:CHECKPOINT"));
		CHECK_EQ((*r)[1].err, ENOMEM);
		CHECK_EQ((*r)[2].target, std::string("open:/dev/kfd"));
		CHECK_EQ((*r)[2].err, 13);
	}
	r = parse_faults("CRIU_OP:UNPAUSE:stall", &err);
	CHECK(r && r->size() == 1 && (*r)[0].target == "CRIU_OP:UNPAUSE" &&
	      (*r)[0].action == FaultRule::Action::Stall && (*r)[0].nth == 1);
	r = parse_faults("DRM_IOCTL_GEM_CHANGE_HANDLE:every:errno=EINVAL", &err);
	CHECK(r && r->size() == 1 && (*r)[0].target == "DRM_IOCTL_GEM_CHANGE_HANDLE" && (*r)[0].every &&
	      (*r)[0].nth == 1 && (*r)[0].err == EINVAL);
	r = parse_faults("sdma:nth=2", &err);
	CHECK(r && r->size() == 1 && !(*r)[0].every);
	CHECK(!parse_faults("sdma:nth=0", &err));
	CHECK(!parse_faults("x:errno=EWHAT", &err));
	CHECK(!parse_faults("nth=3", &err));
	r = parse_faults("", &err);
	CHECK(r && r->empty());
}

} // namespace

int main()
{
	run("named profiles are consistent", test_named);
	run("custom machine file", test_custom_file);
	run("machine file errors", test_errors);
	run("launcher overrides", test_overrides);
	run("fault specifications", test_fault_specs);
	run("CWSR sizes in the topology, queue_size_checks", test_cwsr_sizes);
	return summary();
}
