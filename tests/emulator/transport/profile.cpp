// SPDX-License-Identifier: GPL-2.0-only
#include "profile.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace kfdemu {
namespace {

// Every numeric key of nodes/N/properties, in the kernel's emission order
// (reference §3.2). `gpu_only` keys are not printed for CPU nodes.
struct KeyInfo {
	const char *name;
	bool gpu_only;
};
constexpr KeyInfo kKeys[] = {
	{"cpu_cores_count", false}, {"simd_count", false},
	{"mem_banks_count", false}, {"caches_count", false},
	{"io_links_count", false}, {"p2p_links_count", false},
	{"cpu_core_id_base", false}, {"simd_id_base", false},
	{"max_waves_per_simd", false}, {"lds_size_in_kb", false},
	{"gds_size_in_kb", false}, {"num_gws", false},
	{"wave_front_size", false}, {"array_count", false},
	{"simd_arrays_per_engine", false}, {"cu_per_simd_array", false},
	{"simd_per_cu", false}, {"max_slots_scratch_cu", false},
	{"gfx_target_version", false}, {"vendor_id", false},
	{"device_id", false}, {"location_id", false}, {"domain", false},
	{"drm_render_minor", false}, {"hive_id", false},
	{"num_sdma_engines", false}, {"num_sdma_xgmi_engines", false},
	{"num_sdma_queues_per_engine", false}, {"num_cp_queues", false},
	{"cwsr_size", false}, {"ctl_stack_size", false},
	{"max_engine_clk_fcompute", true}, {"local_mem_size", true},
	{"fw_version", true}, {"capability", true}, {"debug_prop", true},
	{"sdma_fw_version", true}, {"unique_id", true}, {"num_xcc", true},
	{"max_engine_clk_ccompute", false},
};

const KeyInfo *find_key(std::string_view k)
{
	for (const auto &ki : kKeys)
		if (k == ki.name)
			return &ki;
	return nullptr;
}

using Props = std::map<std::string, uint64_t, std::less<>>;

// Built-in GPU templates: the values a `gpu <template>` block starts from.
struct GpuTemplate {
	const char *tmpl;
	const char *asic;	// nodes/N/name
	Props props;
	uint64_t vram;
	std::vector<std::pair<CacheDesc, uint32_t>> caches; // desc, count
	uint32_t mem_width, mem_clk;
	// PCI revision (amdgpu.ids keys the marketing name by device and
	// revision), and the offset amdgpu adds to the ASIC's rev_id for
	// external_rev_id (soc15_common_early_init: Arcturus 0x32, Aldebaran
	// 0x3c, GC 9.4.3 0x46). None of these chips has a GFX ring.
	uint32_t pci_revision, external_rev_offset;
	const char *vbios_version, *product_name;
	uint32_t power_cap_w; // the board's default power cap, as rocm-smi shows it
	// Firmware versions besides MEC and SDMA (NodeDesc::firmware) and the
	// RAS blocks enabled (NodeDesc::ras_features).
	std::map<std::string, uint32_t> firmware;
	uint32_t ras_features;
};

const std::vector<GpuTemplate> &templates()
{
	// MI100: the published fixture of a real node (reference §3.4).
	// MI210 and MI300X: illustrative values from public specifications.
	// Cache types are what the kernel gives GPU caches (kfd_crat.c): the
	// HSACU bit (8) with DATA (1) or INSTRUCTION (2), so 9 and 10; ROCr
	// finds a GPU's caches by that bit ("GPU cache info missing" without).
	static const std::vector<GpuTemplate> t = {
		{"MI100", "arcturus",
		 {{"simd_count", 480}, {"simd_id_base", 2147487744},
		  {"max_waves_per_simd", 10}, {"lds_size_in_kb", 64},
		  {"num_gws", 64}, {"wave_front_size", 64}, {"array_count", 8},
		  {"simd_arrays_per_engine", 1}, {"cu_per_simd_array", 16},
		  {"simd_per_cu", 4}, {"max_slots_scratch_cu", 32},
		  {"gfx_target_version", 90008}, {"vendor_id", 4098},
		  {"device_id", 29580}, {"num_sdma_engines", 2},
		  {"num_sdma_xgmi_engines", 6}, {"num_sdma_queues_per_engine", 8},
		  {"num_cp_queues", 24}, {"max_engine_clk_fcompute", 1502},
		  {"fw_version", 65}, {"capability", 749970048},
		  {"debug_prop", 1494}, {"sdma_fw_version", 18}, {"num_xcc", 1},
		  {"max_engine_clk_ccompute", 2000}},
		 34342961152ull,
		 {{{1, 16, 64, 9}, 120}, {{1, 16, 64, 9}, 64}, {{1, 64, 64, 10}, 32},
		  {{2, 8192, 128, 9}, 1}},
		 4096, 1200, 0x01, 0x32, "113-D3431401-100", "Instinct MI100", 290,
		 // What rocm-smi --showfwinfo shows of a real MI100 (ME, PFP, CE
		 // 0: no GFX ring; MEC2 is MEC's); RAS on UMC, SDMA, GFX, MMHUB,
		 // PCIE_BIF, HDP, XGMI_WAFL (the blocks rocm-smi 5.2 reads).
		 {{"rlc", 24}, {"smc", 0x00361d00}, {"sos", 0x0017004f}, {"ta_ras", 0x1b00013e},
		  {"ta_xgmi", 0x20000011}, {"vcn", 0x01101015}},
		 0xef},
		{"MI210", "aldebaran",
		 {{"simd_count", 416}, {"simd_id_base", 2147487744},
		  {"max_waves_per_simd", 8}, {"lds_size_in_kb", 64},
		  {"num_gws", 64}, {"wave_front_size", 64}, {"array_count", 8},
		  {"simd_arrays_per_engine", 1}, {"cu_per_simd_array", 16},
		  {"simd_per_cu", 4}, {"max_slots_scratch_cu", 32},
		  {"gfx_target_version", 90010}, {"vendor_id", 4098},
		  {"device_id", 29711}, {"num_sdma_engines", 2},
		  {"num_sdma_xgmi_engines", 3}, {"num_sdma_queues_per_engine", 8},
		  {"num_cp_queues", 24}, {"max_engine_clk_fcompute", 1700},
		  {"fw_version", 78}, {"capability", 746586240},
		  {"debug_prop", 1495}, {"sdma_fw_version", 8}, {"num_xcc", 1},
		  {"max_engine_clk_ccompute", 2000}},
		 68702699520ull,
		 {{{1, 16, 64, 9}, 104}, {{1, 16, 64, 9}, 52}, {{1, 64, 64, 10}, 26},
		  {{2, 8192, 128, 9}, 1}},
		 4096, 1600, 0x02, 0x3c, "113-D67301-063", "Instinct MI210", 300,
		 // What rocm-smi --showfwinfo shows of a real Aldebaran board.
		 {{"rlc", 17}, {"smc", 0x00443800}, {"sos", 0x0027007f}, {"ta_ras", 0x1b00013c},
		  {"ta_xgmi", 0x2000000d}, {"vcn", 0x0110101b}},
		 0xef},
		{"MI300X", "aqua_vanjaram",
		 {{"simd_count", 1216}, {"simd_id_base", 2147487744},
		  {"max_waves_per_simd", 8}, {"lds_size_in_kb", 64},
		  {"num_gws", 64}, {"wave_front_size", 64}, {"array_count", 32},
		  {"simd_arrays_per_engine", 1}, {"cu_per_simd_array", 10},
		  {"simd_per_cu", 4}, {"max_slots_scratch_cu", 32},
		  {"gfx_target_version", 90402}, {"vendor_id", 4098},
		  {"device_id", 29857}, {"num_sdma_engines", 2},
		  {"num_sdma_xgmi_engines", 14}, {"num_sdma_queues_per_engine", 8},
		  {"num_cp_queues", 24}, {"max_engine_clk_fcompute", 2100},
		  {"fw_version", 151}, {"capability", 1283457664},
		  {"debug_prop", 1495}, {"sdma_fw_version", 19}, {"num_xcc", 8},
		  {"max_engine_clk_ccompute", 2100}},
		 206158430208ull,
		 {{{1, 32, 128, 9}, 32}, {{2, 4096, 128, 9}, 8}, {{3, 262144, 64, 9}, 1}},
		 8192, 2525, 0x00, 0x46, "113-M3000100-102", "AMD Instinct MI300X", 750,
		 {}, 0xef},
	};
	return t;
}

// A node being built from a machine file.
struct Building {
	NodeDesc node;
	Props props;
	uint64_t mem = 0;		// CPU: system memory; GPU: VRAM
	uint32_t mem_width = 0, mem_clk = 0;
	int numa = 0;			// GPU: CPU node index
	int64_t hive = 0;		// GPU: XGMI hive number (0: none)
	bool caches_set = false;
	uint32_t location = 0;
	bool location_set = false;
	bool card_set = false;
	uint32_t external_rev_offset = 0;
	std::vector<IoLinkDesc> extra_links;	// `link` lines
	std::vector<IoLinkDesc> p2p_links;	// `p2p` lines
};

bool parse_u64(std::string_view s, uint64_t *out)
{
	int base = 10;
	if (s.starts_with("0x") || s.starts_with("0X")) {
		s.remove_prefix(2);
		base = 16;
	}
	if (s.empty())
		return false;
	auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out, base);
	return ec == std::errc() && p == s.data() + s.size();
}

bool parse_double(std::string_view s, double *out)
{
	std::string str(s);
	char *end = nullptr;
	errno = 0;
	*out = std::strtod(str.c_str(), &end);
	return errno == 0 && end && *end == '\0' && !str.empty();
}

std::vector<std::string_view> split_ws(std::string_view line)
{
	std::vector<std::string_view> out;
	size_t i = 0;
	while (i < line.size()) {
		while (i < line.size() && (line[i] == ' ' || line[i] == '\t'))
			i++;
		size_t j = i;
		while (j < line.size() && line[j] != ' ' && line[j] != '\t')
			j++;
		if (j > i)
			out.push_back(line.substr(i, j - i));
		i = j;
	}
	return out;
}

std::string fmt_slot(uint32_t domain, uint32_t location)
{
	char buf[32];
	std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.%x", domain & 0xffff,
		      (location >> 8) & 0xff, (location >> 3) & 0x1f, location & 7);
	return buf;
}

void set_prop(NodeDesc &n, std::string_view key, uint64_t v)
{
	for (auto &[k, val] : n.properties)
		if (k == key) {
			val = v;
			return;
		}
	// Unknown to the list: insert before the last key, as newer kernels'
	// extra keys would appear.
	auto pos = n.properties.empty() ? n.properties.end() : n.properties.end() - 1;
	n.properties.insert(pos, {std::string(key), v});
}

uint64_t get_prop(const NodeDesc &n, std::string_view key)
{
	for (const auto &[k, v] : n.properties)
		if (k == key)
			return v;
	return 0;
}

uint64_t unique_id_for(uint32_t gpu_id, size_t index)
{
	return 0x6c5e000000000000ull ^ (uint64_t(gpu_id) << 20) ^ (index * 0x9e3779b9ull);
}

// The p2p_links the kernel publishes between GPUs outside one hive
// (kfd_dev_create_p2p_links with CONFIG_HSA_AMD_P2P): GPU A lists B when
// B's VRAM is all CPU-visible (large BAR, amdgpu_device_is_peer_accessible),
// with A's first io link's type, the weights of A's and B's links to their
// CPUs summed (plus the CPU to CPU link's when they hang off different
// nodes), the lower bandwidths; in node order. A `p2p` line adds to these.
// libhsakmt reads a node's p2p_links instead of deriving GPU->CPU->GPU
// links itself once the kernel shows p2p_links_count, so without these
// ROCr sees no path between the GPUs and HIP no peer access.
void derive_p2p_links(MachineDesc &m, uint32_t ncpu, const std::vector<Building> &gpus)
{
	auto to_cpu = [&](const NodeDesc &n) { return n.io_links.front(); };
	for (size_t a = 0; a < gpus.size(); a++) {
		NodeDesc &from = m.nodes[ncpu + a];
		std::vector<IoLinkDesc> derived;
		for (size_t b = 0; b < gpus.size(); b++) {
			const NodeDesc &to = m.nodes[ncpu + b];
			if (b == a || !to.large_bar || (gpus[a].hive && gpus[a].hive == gpus[b].hive))
				continue;
			const IoLinkDesc l1 = to_cpu(from), l2 = to_cpu(to);
			IoLinkDesc l{l1.type, uint32_t(ncpu + b), l1.weight + l2.weight,
				     std::min(l1.min_bandwidth, l2.min_bandwidth),
				     std::min(l1.max_bandwidth, l2.max_bandwidth)};
			if (l1.node_to != l2.node_to)
				for (const auto &c : m.nodes[l1.node_to].io_links)
					if (c.node_to == l2.node_to) {
						l.weight += c.weight;
						l.min_bandwidth = std::min(l.min_bandwidth, c.min_bandwidth);
						l.max_bandwidth = std::min(l.max_bandwidth, c.max_bandwidth);
						break;
					}
			derived.push_back(l);
		}
		from.p2p_links.insert(from.p2p_links.begin(), derived.begin(), derived.end());
		sync_counts(from);
	}
}

// cwsr_size and ctl_stack_size as amdkfd derives them from the node's
// other properties (kfd_cwsr_sizes), unless the machine file sets them.
void derive_cwsr_sizes(Props &p)
{
	auto get = [&](const char *k) {
		auto it = p.find(k);
		return it == p.end() ? uint64_t{0} : it->second;
	};
	const KfdCwsrSizes s = kfd_cwsr_sizes(get("gfx_target_version"), get("simd_count"), get("simd_per_cu"),
					      get("num_xcc"), get("array_count"), get("simd_arrays_per_engine"),
					      get("lds_size_in_kb"));
	p.try_emplace("cwsr_size", s.cwsr);
	p.try_emplace("ctl_stack_size", s.ctl_stack);
}

// Turns the parsed blocks into the final node list: properties in kernel
// order, io links from NUMA attachment and hives, p2p links
// (derive_p2p_links, unless pcie_p2p is off), counts in sync.
std::optional<MachineDesc> finish(std::string name, uint32_t kfd_minor, bool pcie_p2p,
				  std::vector<Building> &cpus,
				  std::vector<Building> &gpus, std::string *error)
{
	MachineDesc m;
	m.name = std::move(name);
	m.kfd_minor_version = kfd_minor;
	if (!gpus.empty() && cpus.empty()) {
		*error = "a machine with GPUs needs at least one cpu node";
		return std::nullopt;
	}
	const uint32_t ncpu = uint32_t(cpus.size());
	std::set<uint32_t> ids, minors, cards;
	for (size_t i = 0; i < gpus.size(); i++) {
		auto &g = gpus[i];
		if (g.numa < 0 || uint32_t(g.numa) >= ncpu) {
			*error = "gpu " + std::to_string(i) + ": numa node out of range";
			return std::nullopt;
		}
		if (!g.node.gpu_id)
			g.node.gpu_id = uint32_t(0x1000 + 0x1111 * (i + 1)) & 0xffff;
		if (!g.node.drm_render_minor)
			g.node.drm_render_minor = uint32_t(128 + i);
		if (!g.card_set)
			g.node.card_index = g.node.drm_render_minor - 128;
		if (!ids.insert(g.node.gpu_id).second ||
		    !minors.insert(g.node.drm_render_minor).second ||
		    !cards.insert(g.node.card_index).second) {
			*error = "gpu " + std::to_string(i) + ": duplicate gpu_id, render minor or card";
			return std::nullopt;
		}
	}

	auto emit = [&](Building &b, bool gpu) {
		NodeDesc n = std::move(b.node);
		n.is_gpu = gpu;
		for (const auto &ki : kKeys) {
			if (ki.gpu_only && !gpu)
				continue;
			auto it = b.props.find(ki.name);
			n.properties.emplace_back(ki.name, it == b.props.end() ? 0 : it->second);
		}
		for (const auto &[k, v] : b.props)
			if (!find_key(k))
				set_prop(n, k, v);
		return n;
	};

	const size_t total = cpus.size() + gpus.size();
	for (auto *list : {&cpus, &gpus})
		for (const auto &b : *list)
			for (const auto *links : {&b.extra_links, &b.p2p_links})
			for (const auto &l : *links)
				if (l.node_to >= total) {
					*error = "link to node " + std::to_string(l.node_to) + ": no such node";
					return std::nullopt;
				}
	// A CPU node's cpu_core_id_base is the APIC id of its first core; the
	// emulated APIC ids number the nodes' cores one node after the other.
	uint64_t apic_base = 0;
	for (uint32_t c = 0; c < ncpu; c++) {
		auto &b = cpus[c];
		if (!b.props.count("cpu_core_id_base"))
			b.props["cpu_core_id_base"] = apic_base;
		apic_base += b.props["cpu_cores_count"];
		NodeDesc n = emit(b, false);
		MemBankDesc bank;
		bank.heap_type = 0;
		bank.size_in_bytes = b.mem ? b.mem : (64ull << 30);
		bank.width = b.mem_width ? b.mem_width : 72;
		bank.mem_clk_max = b.mem_clk ? b.mem_clk : 3200;
		n.mem_banks.push_back(bank);
		for (size_t i = 0; i < gpus.size(); i++)
			if (uint32_t(gpus[i].numa) == c)
				n.io_links.push_back({2, uint32_t(ncpu + i), 20, 0, 0});
		n.io_links.insert(n.io_links.end(), b.extra_links.begin(), b.extra_links.end());
		sync_counts(n);
		m.nodes.push_back(std::move(n));
	}
	for (size_t i = 0; i < gpus.size(); i++) {
		auto &b = gpus[i];
		if (!b.location_set)
			b.location = uint32_t((0x03 + 0x20 * i) << 8);
		b.props["location_id"] = b.location;
		b.props["drm_render_minor"] = b.node.drm_render_minor;
		if (b.hive)
			b.props["hive_id"] = 0x5a3c000000000000ull | uint64_t(b.hive);
		if (!b.props.count("unique_id"))
			b.props["unique_id"] = unique_id_for(b.node.gpu_id, i);
		derive_cwsr_sizes(b.props);
		NodeDesc n = emit(b, true);
		n.pci_device_id = uint32_t(get_prop(n, "device_id"));
		n.external_rev_id = n.rev_id + b.external_rev_offset;
		n.num_sdma_engines = uint32_t(get_prop(n, "num_sdma_engines"));
		if (n.pci_slot.empty())
			n.pci_slot = fmt_slot(uint32_t(get_prop(n, "domain")), b.location);
		MemBankDesc bank;
		bank.heap_type = n.large_bar ? 1 : 2;
		bank.size_in_bytes = b.mem;
		bank.width = b.mem_width;
		bank.mem_clk_max = b.mem_clk;
		n.mem_banks.push_back(bank);
		n.io_links.push_back({2, uint32_t(b.numa), 20, 0, 0});
		for (size_t j = 0; j < gpus.size(); j++)
			if (j != i && b.hive && gpus[j].hive == b.hive)
				n.io_links.push_back({11, uint32_t(ncpu + j), 15, 50000, 50000});
		n.io_links.insert(n.io_links.end(), b.extra_links.begin(), b.extra_links.end());
		n.p2p_links = b.p2p_links;
		sync_counts(n);
		m.nodes.push_back(std::move(n));
	}
	if (pcie_p2p)
		derive_p2p_links(m, ncpu, gpus);
	return m;
}

} // namespace

void sync_counts(NodeDesc &n)
{
	set_prop(n, "mem_banks_count", n.mem_banks.size());
	set_prop(n, "caches_count", n.caches.size());
	set_prop(n, "io_links_count", n.io_links.size());
	set_prop(n, "p2p_links_count", n.p2p_links.size());
}

std::vector<const NodeDesc *> gpu_nodes(const MachineDesc &m)
{
	std::vector<const NodeDesc *> out;
	for (const auto &n : m.nodes)
		if (n.is_gpu)
			out.push_back(&n);
	return out;
}

bool parse_size(std::string_view s, uint64_t *out)
{
	if (s.empty())
		return false;
	uint64_t mult = 1;
	switch (s.back()) {
	case 'K': case 'k': mult = 1ull << 10; break;
	case 'M': case 'm': mult = 1ull << 20; break;
	case 'G': case 'g': mult = 1ull << 30; break;
	case 'T': case 't': mult = 1ull << 40; break;
	default: break;
	}
	if (mult != 1)
		s.remove_suffix(1);
	uint64_t v;
	if (!parse_u64(s, &v))
		return false;
	*out = v * mult;
	return true;
}

bool parse_u32_list(std::string_view s, std::vector<uint32_t> *out)
{
	out->clear();
	while (!s.empty()) {
		size_t comma = s.find(',');
		uint64_t v;
		if (!parse_u64(s.substr(0, comma), &v) || v > 0xffffffffull)
			return false;
		out->push_back(uint32_t(v));
		if (comma == std::string_view::npos)
			break;
		s.remove_prefix(comma + 1);
	}
	return !out->empty();
}

bool parse_size_list(std::string_view s, std::vector<uint64_t> *out)
{
	out->clear();
	while (!s.empty()) {
		size_t comma = s.find(',');
		uint64_t v;
		if (!parse_size(s.substr(0, comma), &v))
			return false;
		out->push_back(v);
		if (comma == std::string_view::npos)
			break;
		s.remove_prefix(comma + 1);
	}
	return !out->empty();
}

namespace {

// A machine file being read: the blocks so far and the one being filled.
// Each step returns "" or what is wrong with the line.
struct MachineParser {
	std::string name = "custom";
	uint32_t kfd_minor = 14;
	bool pcie_p2p = true;	// amdgpu's pcie_p2p: derived p2p links between GPUs
	bool queue_size_checks = false;	// MachineDesc::queue_size_checks
	std::vector<Building> cpus, gpus;
	Building *cur = nullptr;
	bool cur_gpu = false;

	std::string line(const std::vector<std::string_view> &w);
	std::string start_gpu(const std::vector<std::string_view> &w);
	// The keys with their own syntax inside a block; nullopt: not one.
	std::optional<std::string> block_key(const std::vector<std::string_view> &w);
	std::string value_key(std::string_view key, std::string_view value);
	std::string number_key(std::string_view key, uint64_t v);
};

std::string MachineParser::line(const std::vector<std::string_view> &w)
{
	const std::string_view key = w[0];
	uint64_t v = 0;
	if (key == "machine") {
		if (w.size() != 2)
			return "usage: machine <name>";
		name = std::string(w[1]);
		return "";
	}
	if (key == "kfd_minor_version") {
		if (w.size() != 2 || !parse_u64(w[1], &v))
			return "usage: kfd_minor_version <n>";
		kfd_minor = uint32_t(v);
		return "";
	}
	if (key == "pcie_p2p") {
		if (w.size() != 2 || !parse_u64(w[1], &v) || v > 1)
			return "usage: pcie_p2p 0|1";
		pcie_p2p = v != 0;
		return "";
	}
	if (key == "queue_size_checks") {
		if (w.size() != 2 || (w[1] != "on" && w[1] != "off"))
			return "usage: queue_size_checks on|off";
		queue_size_checks = w[1] == "on";
		return "";
	}
	if (key == "cpu") {
		cpus.emplace_back();
		cur = &cpus.back();
		cur_gpu = false;
		cur->props["cpu_cores_count"] = 16;
		cur->props["max_engine_clk_ccompute"] = 3000;
		return "";
	}
	if (key == "gpu")
		return start_gpu(w);
	if (!cur)
		return "'" + std::string(key) + "' outside a cpu/gpu block";
	if (auto r = block_key(w))
		return *r;
	if (w.size() != 2)
		return "usage: " + std::string(key) + " <value>";
	return value_key(key, w[1]);
}

std::string MachineParser::start_gpu(const std::vector<std::string_view> &w)
{
	if (w.size() != 2)
		return "usage: gpu <template: MI100|MI210|MI300X>";
	const GpuTemplate *t = nullptr;
	for (const auto &x : templates())
		if (w[1] == x.tmpl)
			t = &x;
	if (!t)
		return "unknown gpu template '" + std::string(w[1]) + "'";
	gpus.emplace_back();
	cur = &gpus.back();
	cur_gpu = true;
	cur->props = t->props;
	cur->node.name = t->asic;
	cur->mem = t->vram;
	cur->mem_width = t->mem_width;
	cur->mem_clk = t->mem_clk;
	cur->node.pci_revision = t->pci_revision;
	cur->external_rev_offset = t->external_rev_offset;
	cur->node.gfx_ring = false;
	cur->node.vbios_version = t->vbios_version;
	cur->node.product_name = t->product_name;
	cur->node.power_cap_w = t->power_cap_w;
	cur->node.firmware = t->firmware;
	cur->node.ras_features = t->ras_features;
	for (const auto &[c, count] : t->caches)
		for (uint32_t i = 0; i < count; i++)
			cur->node.caches.push_back(c);
	return "";
}

std::optional<std::string> MachineParser::block_key(const std::vector<std::string_view> &w)
{
	const std::string_view key = w[0];
	uint64_t v = 0;
	auto need = [&](size_t n) { return w.size() == n; };
	if (key == "cache") {
		// cache <level> <size_kb> <line_size> <type> [count]
		uint64_t lv, sz, ln, ty, cnt = 1;
		if ((w.size() != 5 && w.size() != 6) || !parse_u64(w[1], &lv) || !parse_u64(w[2], &sz) ||
		    !parse_u64(w[3], &ln) || !parse_u64(w[4], &ty) || (w.size() == 6 && !parse_u64(w[5], &cnt)))
			return "usage: cache <level> <size_kb> <line_size> <type> [count]";
		if (!cur->caches_set) {
			cur->node.caches.clear();
			cur->caches_set = true;
		}
		for (uint64_t i = 0; i < cnt; i++)
			cur->node.caches.push_back({uint32_t(lv), uint32_t(sz), uint32_t(ln), uint32_t(ty)});
		return "";
	}
	if (key == "link") {
		// link <type> <node_to> [weight [min_bw max_bw]]
		uint64_t ty, to, wt = 20, mn = 0, mx = 0;
		if ((w.size() != 3 && w.size() != 4 && w.size() != 6) || !parse_u64(w[1], &ty) ||
		    !parse_u64(w[2], &to) || (w.size() >= 4 && !parse_u64(w[3], &wt)) ||
		    (w.size() == 6 && (!parse_u64(w[4], &mn) || !parse_u64(w[5], &mx))))
			return "usage: link <type> <node_to> [weight [min_bw max_bw]]";
		cur->extra_links.push_back({uint32_t(ty), uint32_t(to), uint32_t(wt), uint32_t(mn), uint32_t(mx)});
		return "";
	}
	if (key == "p2p") {
		// p2p <type> <node_to> [weight]: a nodes/N/p2p_links entry
		uint64_t ty, to, wt = 40;
		if ((w.size() != 3 && w.size() != 4) || !cur_gpu || !parse_u64(w[1], &ty) || !parse_u64(w[2], &to) ||
		    (w.size() == 4 && !parse_u64(w[3], &wt)))
			return "usage (gpu): p2p <type> <node_to> [weight]";
		cur->p2p_links.push_back({uint32_t(ty), uint32_t(to), uint32_t(wt), 0, 0});
		return "";
	}
	if (key == "no_caches") {
		cur->node.caches.clear();
		cur->caches_set = true;
		return "";
	}
	if (key == "pci_slot") {
		if (!need(2) || !cur_gpu)
			return "usage (gpu): pci_slot dddd:bb:dd.f";
		unsigned dom, bus, dev, fn;
		std::string s(w[1]);
		if (std::sscanf(s.c_str(), "%x:%x:%x.%x", &dom, &bus, &dev, &fn) != 4)
			return "bad pci slot";
		cur->node.pci_slot = s;
		cur->location = (bus << 8) | (dev << 3) | fn;
		cur->location_set = true;
		cur->props["domain"] = dom;
		return "";
	}
	if (key == "prop") {
		if (!need(3) || !parse_u64(w[2], &v))
			return "usage: prop <key> <number>";
		cur->props[std::string(w[1])] = v;
		return "";
	}
	if (key == "sdma_gbps") {
		double d;
		if (!need(2) || !parse_double(w[1], &d) || d < 0)
			return "usage: sdma_gbps <GB/s>";
		cur->node.sdma_gbps = d;
		return "";
	}
	if (key == "firmware") {
		if (!need(3) || !cur_gpu || !parse_u64(w[2], &v) || v > 0xffffffffu)
			return "usage: firmware <block> <version> (a gpu key; block as fw_version/<block>_fw_version)";
		cur->node.firmware[std::string(w[1])] = uint32_t(v);
		return "";
	}
	if (key == "ras_features") {
		if (!need(2) || !cur_gpu || !parse_u64(w[1], &v) || v > 0xffffffffu)
			return "usage: ras_features <mask> (a gpu key)";
		cur->node.ras_features = uint32_t(v);
		return "";
	}
	if (key == "vram_resident") {
		if (!need(2) || !parse_u64(w[1], &v) || v > 1)
			return "usage: vram_resident 0|1";
		cur->node.vram_resident = v == 1;
		return "";
	}
	return std::nullopt;
}

std::string MachineParser::value_key(std::string_view key, std::string_view value)
{
	uint64_t v = 0;
	if (key == "memory" || key == "vram") {
		if (!parse_size(value, &v))
			return "bad size";
		cur->mem = v;
		return "";
	}
	if (key == "numa" || key == "hive") {
		if (!parse_u64(value, &v) || !cur_gpu)
			return std::string(key) + " is a gpu key taking a number";
		if (key == "numa")
			cur->numa = int(v);
		else
			cur->hive = int64_t(v);
		return "";
	}
	if (!parse_u64(value, &v))
		return "'" + std::string(value) + "' is not a number";
	return number_key(key, v);
}

std::string MachineParser::number_key(std::string_view key, uint64_t v)
{
	if (key == "cores")
		cur->props["cpu_cores_count"] = v;
	else if (key == "gpu_id" && cur_gpu)
		cur->node.gpu_id = uint32_t(v);
	else if ((key == "render_minor" || key == "drm_render_minor") && cur_gpu)
		cur->node.drm_render_minor = uint32_t(v);
	else if (key == "card" && cur_gpu) {
		cur->node.card_index = uint32_t(v);
		cur->card_set = true;
	} else if (key == "family" && cur_gpu)
		cur->node.family = uint32_t(v);
	else if (key == "pci_revision" && cur_gpu && v <= 0xff)
		cur->node.pci_revision = uint32_t(v);
	else if (key == "rev_id" && cur_gpu)
		cur->node.rev_id = uint32_t(v);
	else if (key == "large_bar" && cur_gpu)
		cur->node.large_bar = v != 0;
	else if (key == "mem_width")
		cur->mem_width = uint32_t(v);
	else if (key == "mem_clk_max")
		cur->mem_clk = uint32_t(v);
	else if (key == "location_id" && cur_gpu) {
		cur->location = uint32_t(v);
		cur->location_set = true;
	} else if (key == "num_sdma_engines") {
		cur->props["num_sdma_engines"] = v;
		cur->node.num_sdma_engines = uint32_t(v);
	} else if (find_key(key) && key != "mem_banks_count" && key != "caches_count" && key != "io_links_count" &&
		   key != "p2p_links_count" && key != "drm_render_minor")
		cur->props[std::string(key)] = v;
	else
		return "unknown key '" + std::string(key) + "'";
	return "";
}

} // namespace

std::optional<MachineDesc> parse_machine(std::string_view text, std::string *error)
{
	MachineParser mp;
	for (int lineno = 1; !text.empty(); lineno++) {
		size_t nl = text.find('\n');
		std::string_view line = text.substr(0, nl);
		text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
		if (auto hash = line.find('#'); hash != std::string_view::npos)
			line = line.substr(0, hash);
		auto w = split_ws(line);
		if (w.empty())
			continue;
		if (std::string e = mp.line(w); !e.empty()) {
			*error = "line " + std::to_string(lineno) + ": " + e;
			return std::nullopt;
		}
	}
	auto m = finish(std::move(mp.name), mp.kfd_minor, mp.pcie_p2p, mp.cpus, mp.gpus, error);
	if (m)
		m->queue_size_checks = mp.queue_size_checks;
	return m;
}

std::optional<MachineDesc> load_machine(std::string_view name_or_path,
					std::string_view profile_dir, std::string *error)
{
	std::string path(name_or_path);
	if (path.find('/') == std::string::npos && !path.ends_with(".machine"))
		path = std::string(profile_dir) + "/" + path + ".machine";
	std::ifstream in(path);
	if (!in) {
		*error = "cannot read machine file " + path;
		return std::nullopt;
	}
	std::stringstream ss;
	ss << in.rdbuf();
	std::string err;
	auto m = parse_machine(ss.str(), &err);
	if (!m)
		*error = path + ": " + err;
	return m;
}

std::string apply_overrides(MachineDesc &m, const Overrides &o)
{
	std::vector<NodeDesc *> gpus;
	for (auto &n : m.nodes)
		if (n.is_gpu)
			gpus.push_back(&n);
	if (o.gpu_ids.size() > gpus.size())
		return "--gpu-ids lists more ids than the machine has GPUs";
	if (o.minors.size() > gpus.size())
		return "--minors lists more minors than the machine has GPUs";
	if (o.vram.size() > 1 && o.vram.size() != gpus.size())
		return "--vram takes one size or one per GPU";
	for (size_t i = 0; i < o.gpu_ids.size(); i++) {
		if (o.gpu_ids[i] == 0 || o.gpu_ids[i] > 0xffff)
			return "gpu ids are non-zero 16-bit values";
		gpus[i]->gpu_id = o.gpu_ids[i];
		set_prop(*gpus[i], "unique_id", unique_id_for(o.gpu_ids[i], i));
	}
	for (size_t i = 0; i < o.minors.size(); i++) {
		if (o.minors[i] < 128 || o.minors[i] > 191)
			return "render minors are 128..191";
		gpus[i]->drm_render_minor = o.minors[i];
		gpus[i]->card_index = o.minors[i] - 128;
		set_prop(*gpus[i], "drm_render_minor", o.minors[i]);
	}
	for (size_t i = 0; i < gpus.size() && !o.vram.empty(); i++)
		gpus[i]->mem_banks.at(0).size_in_bytes = o.vram.size() == 1 ? o.vram[0] : o.vram[i];
	for (auto *g : gpus) {
		if (o.fw_version)
			set_prop(*g, "fw_version", *o.fw_version);
		if (o.sdma_fw_version)
			set_prop(*g, "sdma_fw_version", *o.sdma_fw_version);
		if (o.sdma_gbps)
			g->sdma_gbps = *o.sdma_gbps;
		if (o.vram_resident)
			g->vram_resident = true;
	}
	std::set<uint32_t> ids, minors;
	for (auto *g : gpus)
		if (!ids.insert(g->gpu_id).second || !minors.insert(g->drm_render_minor).second)
			return "gpu ids and render minors must be distinct";
	for (uint32_t minor : o.cgroup_minors)
		if (!minors.count(minor))
			return "--device-cgroup: no GPU has render minor " + std::to_string(minor);
	m.cgroup_minors = o.cgroup_minors;
	return {};
}

std::vector<std::string> cgroup_denied_paths(const MachineDesc &m)
{
	std::vector<std::string> out;
	const auto &allowed = m.cgroup_minors;
	for (size_t i = 0; i < m.nodes.size() && !allowed.empty(); i++)
		if (m.nodes[i].is_gpu &&
		    std::find(allowed.begin(), allowed.end(), m.nodes[i].drm_render_minor) == allowed.end())
			out.push_back("/sys/class/kfd/kfd/topology/nodes/" + std::to_string(i));
	return out;
}

} // namespace kfdemu
