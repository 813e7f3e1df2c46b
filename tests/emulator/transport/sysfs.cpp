// SPDX-License-Identifier: GPL-2.0-only
#include "sysfs.h"

#include "profile.h"

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <ctime>
#include <cstring>
#include <algorithm>
#include <array>
#include <iterator>
#include <set>
#include <span>
#include <vector>

namespace kfdemu {
namespace {

class Writer {
public:
	explicit Writer(std::string root) : root_(std::move(root)) {}

	void dir(const std::string &rel)
	{
		std::string p = root_;
		size_t i = 0;
		while (i <= rel.size()) {
			size_t j = rel.find('/', i);
			if (j == std::string::npos)
				j = rel.size();
			p += "/" + rel.substr(i, j - i);
			if (::mkdir(p.c_str(), 0755) && errno != EEXIST)
				fail("mkdir " + p);
			i = j + 1;
		}
	}
	void file(const std::string &rel, const std::string &content, mode_t mode = 0444)
	{
		parent(rel);
		std::string p = root_ + "/" + rel;
		int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
		if (fd < 0)
			return fail("create " + p);
		size_t off = 0;
		while (off < content.size()) {
			ssize_t n = ::write(fd, content.data() + off, content.size() - off);
			if (n <= 0) {
				::close(fd);
				return fail("write " + p);
			}
			off += size_t(n);
		}
		::close(fd);
	}
	void link(const std::string &rel, const std::string &target)
	{
		parent(rel);
		std::string p = root_ + "/" + rel;
		if (::symlink(target.c_str(), p.c_str()) && errno != EEXIST)
			fail("symlink " + p);
	}
	const std::string &error() const { return err_; }

private:
	void parent(const std::string &rel)
	{
		if (auto s = rel.rfind('/'); s != std::string::npos)
			dir(rel.substr(0, s));
	}
	void fail(const std::string &what)
	{
		if (err_.empty())
			err_ = what + ": " + std::strerror(errno);
	}
	std::string root_, err_;
};

std::string kv(const char *k, uint64_t v)
{
	return std::string(k) + " " + std::to_string(v) + "\n";
}

std::string hex(uint32_t v, int width)
{
	char buf[32];
	std::snprintf(buf, sizeof buf, "0x%0*x\n", width, v);
	return buf;
}

// Relative path from directory `from_dir` to `to` (both absolute, as seen
// inside the root), the way sysfs links are written ("../../bus/pci").
std::string rel_link(const std::string &from_dir, const std::string &to)
{
	auto parts = [](const std::string &p) {
		std::vector<std::string> v;
		size_t i = 1;
		while (i <= p.size()) {
			size_t j = p.find('/', i);
			if (j == std::string::npos)
				j = p.size();
			if (j > i)
				v.push_back(p.substr(i, j - i));
			i = j + 1;
		}
		return v;
	};
	const auto a = parts(from_dir), b = parts(to);
	size_t common = 0;
	while (common < a.size() && common < b.size() && a[common] == b[common])
		common++;
	std::string out;
	for (size_t i = common; i < a.size(); i++)
		out += "../";
	for (size_t i = common; i < b.size(); i++)
		out += b[i] + (i + 1 < b.size() ? "/" : "");
	return out.empty() ? "." : out;
}

uint64_t prop(const NodeDesc &n, std::string_view key)
{
	for (const auto &[k, v] : n.properties)
		if (k == key)
			return v;
	return 0;
}

// ---------------------------------------------------------------------------
// CPUs. Every CPU node has cpu_cores_count CPUs (the profile's `cores`), no
// SMT. CPU numbers go round-robin over the nodes (cpu0 node 0, cpu1 node 1,
// ...; a node whose cores are used up drops out), so that the lowest numbers
// cover every node. The first get_nprocs() of them are online, the rest are
// shown as the kernel shows offline CPUs (present, no topology/ or cache/):
// libhsakmt 5.2.3 sizes its table of /proc/cpuinfo entries by get_nprocs()
// and indexes it by the CPU numbers it finds under node<N>/, so no number it
// can see may reach past the count glibc gives the program.
// ---------------------------------------------------------------------------

struct Cpu {
	size_t node;		// CPU node (NUMA node) index
	uint32_t core;		// index within the node (= core_id)
	uint32_t apicid;	// cpu_core_id_base of the node + core
	bool online;
};

// One level of the default hierarchy, per CPU node (Zen-4-like).
struct CpuCache {
	uint32_t level;
	const char *type;	// "Data", "Instruction", "Unified"
	uint32_t size_kb, ways;
	uint32_t shared_cores;	// consecutive cores of one node sharing it
};
constexpr uint32_t kCpuLineSize = 64;
constexpr CpuCache kCpuCaches[] = {
	{1, "Data", 32, 8, 1},
	{1, "Instruction", 32, 8, 1},
	{2, "Unified", 1024, 8, 1},
	{3, "Unified", 32768, 16, 8},
};

std::vector<Cpu> cpu_layout(const std::vector<const NodeDesc *> &nodes, size_t online)
{
	std::vector<uint32_t> left, next(nodes.size(), 0);
	size_t total = 0;
	for (const NodeDesc *n : nodes) {
		left.push_back(uint32_t(std::max<uint64_t>(1, prop(*n, "cpu_cores_count"))));
		total += left.back();
	}
	std::vector<Cpu> cpus;
	while (cpus.size() < total)
		for (size_t i = 0; i < nodes.size(); i++)
			if (left[i]) {
				left[i]--;
				const uint32_t core = next[i]++;
				cpus.push_back({i, core, uint32_t(prop(*nodes[i], "cpu_core_id_base")) + core,
						cpus.size() < online});
			}
	return cpus;
}

// A cpumask as the kernel prints it ("%*pb"): 32-bit hex groups, most
// significant first, comma separated, `nbits` wide.
std::string cpu_mask(const std::vector<bool> &bits)
{
	const size_t n = bits.size();
	std::string out;
	for (size_t g = (n + 31) / 32; g-- > 0;) {
		uint32_t word = 0;
		for (size_t b = 0; b < 32 && g * 32 + b < n; b++)
			if (bits[g * 32 + b])
				word |= 1u << b;
		const size_t width = g * 32 + 32 <= n ? 8 : (n - g * 32 + 3) / 4;
		char buf[16];
		std::snprintf(buf, sizeof buf, "%0*x", int(width), word);
		out += std::string(out.empty() ? "" : ",") + buf;
	}
	return out + "\n";
}

// A cpu list as the kernel prints it ("%*pbl"): "0-3,8,10-11".
std::string cpu_list(const std::vector<bool> &bits)
{
	std::string out;
	for (size_t i = 0; i < bits.size(); i++) {
		if (!bits[i])
			continue;
		size_t j = i;
		while (j + 1 < bits.size() && bits[j + 1])
			j++;
		out += (out.empty() ? "" : ",") + std::to_string(i) + (j > i ? "-" + std::to_string(j) : "");
		i = j;
	}
	return out + "\n";
}

// Online CPUs matching `pred`, as a bitmap over every possible CPU.
template <typename Pred>
std::vector<bool> cpus_where(const std::vector<Cpu> &cpus, Pred pred)
{
	std::vector<bool> bits(cpus.size());
	for (size_t k = 0; k < cpus.size(); k++)
		bits[k] = cpus[k].online && pred(cpus[k]);
	return bits;
}

void write_cpus(Writer &w, const MachineDesc &m, std::string *redirects)
{
	std::vector<const NodeDesc *> nodes;
	for (const auto &n : m.nodes)
		if (!n.is_gpu)
			nodes.push_back(&n);
	if (nodes.empty())
		return;
	*redirects += "/sys/devices/system/node\n/sys/devices/system/cpu\n/proc/cpuinfo\n";
	const size_t nn = nodes.size();
	// Every node needs one online CPU (the kernel's KFD lists no CPU node
	// without); on a host with fewer CPUs than nodes that exceeds get_nprocs().
	const auto cpus = cpu_layout(nodes, std::max<size_t>(nn, size_t(std::max(1, ::get_nprocs()))));
	const size_t total = cpus.size();
	const auto all = [](const Cpu &) { return true; };
	const std::string last = std::to_string(total - 1);
	const std::string sys = "sys/devices/system/cpu";

	std::vector<bool> possible(total, true);
	w.file(sys + "/possible", cpu_list(possible));
	w.file(sys + "/present", cpu_list(possible));
	w.file(sys + "/online", cpu_list(cpus_where(cpus, all)));
	std::vector<bool> offline(total);
	for (size_t k = 0; k < total; k++)
		offline[k] = !cpus[k].online;
	w.file(sys + "/offline", cpu_list(offline));
	w.file(sys + "/kernel_max", "8191\n");	// Debian's CONFIG_NR_CPUS - 1

	std::string cpuinfo;
	for (size_t k = 0; k < total; k++) {
		const Cpu &c = cpus[k];
		const std::string dir = sys + "/cpu" + std::to_string(k);
		if (k)	// cpu0 cannot be taken offline: no `online` file
			w.file(dir + "/online", c.online ? "1\n" : "0\n", 0644);
		const std::string node = "node" + std::to_string(c.node);
		w.link(dir + "/" + node, rel_link("/" + dir, "/sys/devices/system/node/" + node));
		if (!c.online) {
			w.dir(dir);
			continue;
		}
		const auto self = cpus_where(cpus, [&](const Cpu &o) { return &o == &c; });
		const auto package = cpus_where(cpus, [&](const Cpu &o) { return o.node == c.node; });
		const std::string t = dir + "/topology/";
		w.file(t + "physical_package_id", std::to_string(c.node) + "\n");
		w.file(t + "die_id", std::to_string(c.node) + "\n");
		w.file(t + "cluster_id", std::to_string(c.core / kCpuCaches[3].shared_cores) + "\n");
		w.file(t + "core_id", std::to_string(c.core) + "\n");
		for (const auto &[name, bits] : {std::pair{"core_cpus", &self}, std::pair{"thread_siblings", &self},
						  std::pair{"core_siblings", &package},
						  std::pair{"package_cpus", &package},
						  std::pair{"die_cpus", &package}}) {
			w.file(t + name, cpu_mask(*bits));
			w.file(t + name + "_list", cpu_list(*bits));
		}
		for (size_t i = 0; i < std::size(kCpuCaches); i++) {
			const CpuCache &cc = kCpuCaches[i];
			const uint32_t group = c.core / cc.shared_cores;
			const auto shared = cpus_where(cpus, [&](const Cpu &o) {
				return o.node == c.node && o.core / cc.shared_cores == group;
			});
			// Cache ids count the instances of a level machine-wide.
			uint32_t id = group;
			for (size_t n = 0; n < c.node; n++) {
				const uint32_t cores = uint32_t(std::max<uint64_t>(1, prop(*nodes[n], "cpu_cores_count")));
				id += (cores + cc.shared_cores - 1) / cc.shared_cores;
			}
			const std::string d = dir + "/cache/index" + std::to_string(i) + "/";
			w.file(d + "id", std::to_string(id) + "\n");
			w.file(d + "level", std::to_string(cc.level) + "\n");
			w.file(d + "type", std::string(cc.type) + "\n");
			w.file(d + "size", std::to_string(cc.size_kb) + "K\n");
			w.file(d + "coherency_line_size", std::to_string(kCpuLineSize) + "\n");
			w.file(d + "ways_of_associativity", std::to_string(cc.ways) + "\n");
			w.file(d + "number_of_sets",
			       std::to_string(cc.size_kb * 1024 / (kCpuLineSize * cc.ways)) + "\n");
			w.file(d + "physical_line_partition", "1\n");
			w.file(d + "shared_cpu_map", cpu_mask(shared));
			w.file(d + "shared_cpu_list", cpu_list(shared));
		}
		const uint64_t cores = std::max<uint64_t>(1, prop(*nodes[c.node], "cpu_cores_count"));
		cpuinfo += "processor\t: " + std::to_string(k) +
			   "\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n"
			   "model name\t: AMD EPYC " + std::to_string(cores) + "-Core Processor (emulated)\n"
			   "stepping\t: 1\ncache size\t: 1024 KB\nphysical id\t: " + std::to_string(c.node) +
			   "\nsiblings\t: " + std::to_string(std::count(package.begin(), package.end(), true)) +
			   "\ncore id\t\t: " + std::to_string(c.core) +
			   "\ncpu cores\t: " + std::to_string(std::count(package.begin(), package.end(), true)) +
			   "\napicid\t\t: " + std::to_string(c.apicid) +
			   "\ninitial apicid\t: " + std::to_string(c.apicid) +
			   "\nfpu\t\t: yes\nflags\t\t: fpu tsc cx8 cmov mmx fxsr sse sse2 syscall nx lm\n"
			   "clflush size\t: 64\ncache_alignment\t: 64\n"
			   "address sizes\t: 48 bits physical, 48 bits virtual\n\n";
	}
	w.file("proc/cpuinfo", cpuinfo);

	const std::string nodes_dir = "sys/devices/system/node";
	const std::string range = nn > 1 ? "0-" + std::to_string(nn - 1) + "\n" : "0\n";
	for (const char *f : {"possible", "online", "has_cpu", "has_normal_memory"})
		w.file(nodes_dir + "/" + f, range);
	for (size_t i = 0; i < nn; i++) {
		const std::string nd = nodes_dir + "/node" + std::to_string(i);
		const auto mine = cpus_where(cpus, [&](const Cpu &o) { return o.node == i; });
		w.file(nd + "/cpulist", cpu_list(mine));
		w.file(nd + "/cpumap", cpu_mask(mine));
		for (size_t k = 0; k < total; k++)
			if (cpus[k].node == i)
				w.link(nd + "/cpu" + std::to_string(k),
				       rel_link("/" + nd, "/" + sys + "/cpu" + std::to_string(k)));
		const uint64_t kb = nodes[i]->mem_banks.empty() ? 0 : nodes[i]->mem_banks[0].size_in_bytes >> 10;
		const std::string pre = "Node " + std::to_string(i) + " ";
		w.file(nd + "/meminfo", pre + "MemTotal:       " + std::to_string(kb) + " kB\n" + pre +
						"MemFree:        " + std::to_string(kb / 2) + " kB\n" + pre +
						"MemUsed:        " + std::to_string(kb - kb / 2) + " kB\n");
	}
}

// What amdgpu's sysfs shows of a GPU besides its PCI identity, the files
// rocm-smi (librocm_smi64 5.2) reads: vbios_version (without it the card is
// not an AMD GPU to it), product_name, the DPM clock tables ("N: <f>Mhz",
// the current level marked "*"), the performance level, memory totals (the
// *_used files are kept current by the model as BOs come and go), busy
// percentages, PCIe link, unique_id, and one hwmon directory ("amdgpu":
// edge/junction/memory temperatures in millidegrees, average power and cap
// in microwatts, vddgfx in mV, sclk/mclk in Hz), and the SMU driver's
// gpu_metrics and power profiles where the ASIC's has them (kSmuFiles). The
// values are an idle GPU's (kIdle): the model executes no shaders and has
// no power model.
std::string dpm_levels(std::span<const uint64_t> mhz, size_t current)
{
	std::string s;
	size_t i = 0;
	for (uint64_t f : mhz) {
		s += std::to_string(i) + ": " + std::to_string(f) + "Mhz " + (i == current ? "*" : "") + "\n";
		++i;
	}
	return s;
}

// fw_version/: every block's file amdgpu_ucode.c creates (its fw_attrs),
// each "0x%08x": MEC and MEC2 the topology's fw_version, SDMA and SDMA2 its
// sdma_fw_version, the others the GPU's NodeDesc::firmware or 0 (a block
// the ASIC loads no firmware for).
void write_firmware(Writer &w, const NodeDesc &g, const std::string &dir)
{
	static constexpr const char *kBlocks[] = {"vce", "uvd", "mc", "me", "pfp", "ce", "rlc", "rlc_srlc",
						  "rlc_srlg", "rlc_srls", "mec", "mec2", "imu", "sos", "asd",
						  "ta_ras", "ta_xgmi", "smc", "sdma", "sdma2", "vcn", "dmcu",
						  "mes", "mes_kiq"};
	for (const char *b : kBlocks) {
		const std::string block = b;
		uint64_t v = 0;
		if (block == "mec" || block == "mec2")
			v = prop(g, "fw_version");
		else if (block == "sdma" || block == "sdma2")
			v = prop(g, "sdma_fw_version");
		else if (auto it = g.firmware.find(block); it != g.firmware.end())
			v = it->second;
		char s[16];
		std::snprintf(s, sizeof s, "0x%08x\n", static_cast<unsigned>(v));
		w.file(dir + block + "_fw_version", s);
	}
}

// ras/: amdgpu_ras's directory of a GPU with RAS blocks: `features`
// ("feature mask: 0x%x"), and per enabled block its error counts
// ("ue: 0\nce: 0": no error is ever injected), and the bad page list
// (empty). No directory without RAS.
void write_ras(Writer &w, const NodeDesc &g, const std::string &dir)
{
	if (!g.ras_features)
		return;
	// enum amdgpu_ras_block, bit by bit.
	static constexpr const char *kRasBlocks[] = {"umc", "sdma", "gfx", "mmhub", "athub", "pcie_bif", "hdp",
						     "xgmi_wafl", "df", "smn", "sem", "mp0", "mp1", "fuse",
						     "mca", "vcn", "jpeg"};
	char s[48];
	std::snprintf(s, sizeof s, "feature mask: 0x%x\n", g.ras_features);
	w.file(dir + "features", s);
	for (size_t i = 0; i < std::size(kRasBlocks); i++)
		if (g.ras_features >> i & 1)
			w.file(dir + kRasBlocks[i] + "_err_count", "ue: 0\nce: 0\n");
	w.file(dir + "gpu_vram_bad_pages", "");
}

// The idle GPU every sysfs view shows (hwmon, DPM tables, gpu_metrics).
struct IdleGpu {
	uint64_t sclk_mhz, socclk_mhz;
	uint32_t edge_c, junction_c, mem_c, power_w, vddgfx_mv;
};
constexpr IdleGpu kIdle{500, 667, 35, 40, 38, 42, 806};

// What the swsmu driver of each ASIC adds (arcturus_ppt.c, aldebaran_ppt.c):
// gpu_metrics (get_gpu_metrics: both give gpu_metrics_v1_3),
// pp_power_profile_mode (get_power_profile_mode: arcturus only; amdgpu
// hides the file where the driver has none) and pp_od_clk_voltage, which
// amdgpu creates where the SMU's od_enabled is set: smu_set_funcs sets it
// for aldebaran and clears it for arcturus whatever amdgpu.ppfeaturemask
// says (its PP_OVERDRIVE_MASK changes neither). pp_sclk_od and pp_mclk_od
// are hidden on both (no swsmu driver has get_sclk_od/get_mclk_od, Linux
// 6.8's default_attr_update). Other ASICs: none of these.
//
// uclk_mhz: the memory clock's DPM levels below the top one (the bank's
// mem_clk_max), where the ASIC's are known: aldebaran's four levels 400,
// 700, 1200 and 1600 MHz, the example rocm_smi_lib 5.2's rocm_smi.cc gives
// of the "GFXCLK:"/"MCLK:" pp_od_clk_voltage only aldebaran prints (and
// whose parser reads the fourth MCLK line). Elsewhere two levels, half
// the top one and the top one.
struct SmuFiles {
	const char *asic;
	bool gpu_metrics_v1_3, power_profiles, od_clk_voltage;
	std::array<uint64_t, 3> uclk_mhz;
};
constexpr SmuFiles kSmuFiles[] = {{"arcturus", true, true, false, {}},
				  {"aldebaran", true, false, true, {400, 700, 1200}}};

// pp_dpm_mclk: the levels of kSmuFiles' uclk_mhz (or half the top one)
// and the top one `mclk`, the current one (the idle GPU's clock of
// gpu_metrics and hwmon).
std::string mclk_levels(const NodeDesc &g, uint64_t mclk)
{
	std::vector<uint64_t> mhz;
	for (const SmuFiles &f : kSmuFiles)
		if (g.name == f.asic)
			for (uint64_t l : f.uclk_mhz)
				if (l)
					mhz.push_back(l);
	if (mhz.empty())
		mhz.push_back(mclk / 2);
	mhz.push_back(mclk);
	return dpm_levels(mhz, mhz.size() - 1);
}

// kgd_pp_interface.h's gpu_metrics_v1_3 (natural alignment, 120 bytes).
struct GpuMetricsV13 {
	uint16_t structure_size;
	uint8_t format_revision, content_revision;
	uint16_t temperature_edge, temperature_hotspot, temperature_mem, temperature_vrgfx, temperature_vrsoc,
		temperature_vrmem;
	uint16_t average_gfx_activity, average_umc_activity, average_mm_activity;
	uint16_t average_socket_power;
	uint64_t energy_accumulator;
	uint64_t system_clock_counter;
	uint16_t average_gfxclk_frequency, average_socclk_frequency, average_uclk_frequency,
		average_vclk0_frequency, average_dclk0_frequency, average_vclk1_frequency, average_dclk1_frequency;
	uint16_t current_gfxclk, current_socclk, current_uclk, current_vclk0, current_dclk0, current_vclk1,
		current_dclk1;
	uint32_t throttle_status;
	uint16_t current_fan_speed;
	uint16_t pcie_link_width, pcie_link_speed;
	uint16_t padding;
	uint32_t gfx_activity_acc, mem_activity_acc;
	uint16_t temperature_hbm[4];
	uint64_t firmware_timestamp;
	uint16_t voltage_soc, voltage_gfx, voltage_mem;
	uint16_t padding1;
	uint64_t indep_throttle_status;
};
static_assert(sizeof(GpuMetricsV13) == 120 && offsetof(GpuMetricsV13, energy_accumulator) == 24 &&
	      offsetof(GpuMetricsV13, throttle_status) == 68 && offsetof(GpuMetricsV13, firmware_timestamp) == 96);

// The idle GPU of write_smi_files as the SMU's metrics table says it (degrees
// C, W, MHz, mV; PCIe speed in 0.1 GT/s), sampled once when the machine
// starts: no energy accumulated yet, the timestamps of that moment.
std::string gpu_metrics_v1_3(uint64_t mclk)
{
	GpuMetricsV13 m{};
	m.structure_size = sizeof m;
	m.format_revision = 1;
	m.content_revision = 3;
	m.temperature_edge = uint16_t(kIdle.edge_c);
	m.temperature_hotspot = uint16_t(kIdle.junction_c);
	m.temperature_mem = uint16_t(kIdle.mem_c);
	for (uint16_t &t : m.temperature_hbm)
		t = uint16_t(kIdle.mem_c);
	m.average_socket_power = uint16_t(kIdle.power_w);
	timespec ts{};
	::clock_gettime(CLOCK_BOOTTIME, &ts);
	m.system_clock_counter = uint64_t(ts.tv_sec) * 1000000000 + uint64_t(ts.tv_nsec);
	m.firmware_timestamp = m.system_clock_counter / 10;
	m.average_gfxclk_frequency = m.current_gfxclk = uint16_t(kIdle.sclk_mhz);
	m.average_socclk_frequency = m.current_socclk = uint16_t(kIdle.socclk_mhz);
	m.average_uclk_frequency = m.current_uclk = uint16_t(mclk);
	m.pcie_link_width = 16;
	m.pcie_link_speed = 160;
	m.voltage_gfx = uint16_t(kIdle.vddgfx_mv);
	return std::string(reinterpret_cast<const char *>(&m), sizeof m);
}

// arcturus_get_power_profile_mode with SMU firmware >= 54.13: the title
// line, then per profile the driver maps (3D_FULL_SCREEN and VR it does not)
// "%2d %14s%s" with "*" on the current one (BOOTUP_DEFAULT: no KFD queue
// has asked for COMPUTE) and its activity monitor coefficients for GFXCLK
// and UCLK, which come from the SMU firmware: the model has none and shows
// 0.
std::string power_profiles()
{
	std::string s;
	char b[256];
	std::snprintf(b, sizeof b, "%16s %s %s %s %s %s %s %s %s %s %s\n", "PROFILE_INDEX(NAME)", "CLOCK_TYPE(NAME)",
		      "FPS", "UseRlcBusy", "MinActiveFreqType", "MinActiveFreq", "BoosterFreqType", "BoosterFreq",
		      "PD_Data_limit_c", "PD_Data_error_coeff", "PD_Data_error_rate_coeff");
	s += b;
	static constexpr std::pair<int, const char *> kProfiles[] = {
		{0, "BOOTUP_DEFAULT"}, {2, "POWER_SAVING"}, {3, "VIDEO"}, {5, "COMPUTE"}, {6, "CUSTOM"}};
	for (const auto &[i, name] : kProfiles) {
		std::snprintf(b, sizeof b, "%2d %14s%s\n", i, name, i == 0 ? "*" : " ");
		s += b;
		for (const auto &[clk, clk_name] : {std::pair{0, "GFXCLK"}, std::pair{1, "UCLK"}}) {
			std::snprintf(b, sizeof b, "%19s %d(%13s) %7d %7d %7d %7d %7d %7d %7d %7d %7d\n", " ", clk,
				      clk_name, 0, 0, 0, 0, 0, 0, 0, 0, 0);
			s += b;
		}
	}
	return s;
}

// The DPM clock tables of write_smi_files: pp_dpm_sclk and pp_dpm_mclk, and
// pp_od_clk_voltage's sections, which print the same levels.
struct ClockTables {
	std::string sclk, mclk;
};

// pp_od_clk_voltage as aldebaran_print_clk_levels gives it: OD_SCLK is
// "GFXCLK:" and the gfx clock's levels, OD_MCLK "MCLK:" and the memory
// clock's, each as pp_dpm_sclk/pp_dpm_mclk print them; OD_VDDC_CURVE,
// OD_RANGE and the others print nothing. The kernel's file takes "s", "r"
// and "c" commands in the manual performance level; the emulator does not
// run them, so the file is read-only here (a write: EACCES).
void write_smu_files(Writer &w, const NodeDesc &g, const std::string &d, uint64_t mclk, const ClockTables &clk)
{
	for (const SmuFiles &f : kSmuFiles) {
		if (g.name != f.asic)
			continue;
		if (f.gpu_metrics_v1_3)
			w.file(d + "gpu_metrics", gpu_metrics_v1_3(mclk));
		if (f.power_profiles)
			w.file(d + "pp_power_profile_mode", power_profiles(), 0644);
		if (f.od_clk_voltage)
			w.file(d + "pp_od_clk_voltage", "GFXCLK:\n" + clk.sclk + "MCLK:\n" + clk.mclk, 0444);
	}
}

void write_smi_files(Writer &w, const NodeDesc &g, size_t index, const std::string &pci, uint64_t gtt_size)
{
	const std::string d = pci.substr(1) + "/";
	const uint64_t sclk = prop(g, "max_engine_clk_fcompute");
	const uint64_t mclk = g.mem_banks.empty() ? 0 : g.mem_banks.front().mem_clk_max;
	const uint64_t vram = g.mem_banks.empty() ? 0 : g.mem_banks.front().size_in_bytes;
	w.file(d + "vbios_version", g.vbios_version + "\n");
	write_firmware(w, g, d + "fw_version/");
	write_ras(w, g, d + "ras/");
	w.file(d + "product_name", g.product_name + "\n");
	w.file(d + "product_number", "\n");
	w.file(d + "serial_number", "\n");
	char uid[32];
	std::snprintf(uid, sizeof uid, "%016llx\n", static_cast<unsigned long long>(prop(g, "unique_id")));
	w.file(d + "unique_id", uid);
	const uint64_t sclk_mhz[] = {kIdle.sclk_mhz, sclk};
	const ClockTables clk{dpm_levels(sclk_mhz, 0), mclk_levels(g, mclk)};
	w.file(d + "pp_dpm_sclk", clk.sclk);
	w.file(d + "pp_dpm_mclk", clk.mclk);
	const uint64_t fclk_mhz[] = {1200}, socclk_mhz[] = {kIdle.socclk_mhz, 1000};
	w.file(d + "pp_dpm_fclk", dpm_levels(fclk_mhz, 0));
	w.file(d + "pp_dpm_socclk", dpm_levels(socclk_mhz, 0));
	w.file(d + "pp_dpm_pcie", "0: 2.5GT/s, x16 \n1: 16.0GT/s, x16 *\n");
	w.file(d + "power_dpm_force_performance_level", "auto\n", 0644);
	w.file(d + "power_dpm_state", "performance\n", 0644);
	write_smu_files(w, g, d, mclk, clk);
	w.file(d + "mem_info_vram_total", std::to_string(vram) + "\n");
	w.file(d + "mem_info_vram_used", "0\n");
	w.file(d + "mem_info_vis_vram_total", std::to_string(g.large_bar ? vram : 256ull << 20) + "\n");
	w.file(d + "mem_info_vis_vram_used", "0\n");
	w.file(d + "mem_info_gtt_total", std::to_string(gtt_size) + "\n");
	w.file(d + "mem_info_gtt_used", "0\n");
	w.file(d + "mem_info_vram_vendor", "samsung\n");
	w.file(d + "gpu_busy_percent", "0\n");
	w.file(d + "mem_busy_percent", "0\n");
	w.file(d + "pcie_replay_count", "0\n");
	w.file(d + "current_link_speed", "16.0 GT/s PCIe\n");
	w.file(d + "current_link_width", "16\n");
	w.file(d + "max_link_speed", "16.0 GT/s PCIe\n");
	w.file(d + "max_link_width", "16\n");
	// The NUMA node of the PCI device: the CPU node its first link reaches.
	w.file(d + "numa_node", (g.io_links.empty() ? std::string("-1") : std::to_string(g.io_links.front().node_to)) + "\n");
	const std::string h = d + "hwmon/hwmon" + std::to_string(index) + "/";
	w.file(h + "name", "amdgpu\n");
	w.link(h + "device", "../../../" + g.pci_slot);
	int t = 1;
	for (const auto &[label, c] : {std::pair{"edge", kIdle.edge_c}, std::pair{"junction", kIdle.junction_c},
				       std::pair{"mem", kIdle.mem_c}}) {
		const std::string n = "temp" + std::to_string(t++);
		w.file(h + n + "_input", std::to_string(c * 1000) + "\n");
		w.file(h + n + "_label", std::string(label) + "\n");
		w.file(h + n + "_crit", "100000\n");
		w.file(h + n + "_emergency", "105000\n");
	}
	const std::string cap = std::to_string(uint64_t{g.power_cap_w} * 1000000) + "\n"; // microwatts
	w.file(h + "power1_average", std::to_string(uint64_t{kIdle.power_w} * 1000000) + "\n");
	w.file(h + "power1_cap", cap, 0644);
	w.file(h + "power1_cap_max", cap);
	w.file(h + "power1_cap_min", "0\n");
	// A fan at rest (pwm 0 of 255): the concise table's "0%".
	w.file(h + "pwm1", "0\n");
	w.file(h + "pwm1_min", "0\n");
	w.file(h + "pwm1_max", "255\n");
	w.file(h + "power1_cap_default", cap);
	w.file(h + "in0_input", std::to_string(kIdle.vddgfx_mv) + "\n");
	w.file(h + "in0_label", "vddgfx\n");
	w.file(h + "freq1_input", std::to_string(kIdle.sclk_mhz * 1000000) + "\n");
	w.file(h + "freq1_label", "sclk\n");
	w.file(h + "freq2_input", std::to_string(mclk * 1000000) + "\n");
	w.file(h + "freq2_label", "mclk\n");
}

// The amdgpu module as the kernel shows a loaded one: /sys/module/amdgpu
// (initstate "live", refcnt, coresize, taint, version, parameters/,
// holders/) and its /proc/modules line ("name size refcount deps state
// address"; addresses read as 0 without CAP_SYSLOG). rocminfo runs
// `lsmod | grep amdgpu` (libkmod reads /proc/modules and these files);
// rocm-smi reads initstate and version. The host has neither for us: this
// kernel has no /proc/modules at all.
constexpr const char *kAmdgpuModuleVersion = "5.16.9.22.20";	// ROCm 5.2's amdgpu-dkms
constexpr uint64_t kAmdgpuCoreSize = 9535488;

void write_module(Writer &w, bool loaded, std::string *redirects)
{
	*redirects += "/proc/modules\n";
	if (!loaded) {
		w.file("proc/modules", "");
		return;
	}
	const std::string d = "sys/module/amdgpu/";
	w.file(d + "initstate", "live\n");
	w.file(d + "refcnt", "0\n");
	w.file(d + "coresize", std::to_string(kAmdgpuCoreSize) + "\n");
	w.file(d + "initsize", "0\n");
	w.file(d + "taint", "\n");
	w.file(d + "version", std::string(kAmdgpuModuleVersion) + "\n");
	w.file(d + "srcversion", "6E1A1F2B3C4D5E6F708192A\n");
	w.dir(d + "holders");
	w.dir(d + "drivers");
	w.link(d + "drivers/pci:amdgpu", rel_link("/" + d + "drivers", "/sys/bus/pci/drivers/amdgpu"));
	// A few parameters with the defaults a module loaded without options
	// prints (int parameters as %d).
	for (const auto &[name, value] : {std::pair{"cwsr_enable", "1"}, std::pair{"noretry", "-1"},
					  std::pair{"sched_policy", "0"}, std::pair{"hws_max_conc_proc", "-1"},
					  std::pair{"vm_size", "-1"}, std::pair{"vm_fragment_size", "-1"},
					  std::pair{"mes", "0"}, std::pair{"debug_largebar", "0"}})
		w.file(d + "parameters/" + name, std::string(value) + "\n");
	w.file("proc/modules", "amdgpu " + std::to_string(kAmdgpuCoreSize) + " 0 - Live 0x0000000000000000\n");
}

} // namespace

std::string properties_text(const NodeDesc &n)
{
	std::string s;
	for (const auto &[k, v] : n.properties)
		s += k + " " + std::to_string(v) + "\n";
	return s;
}

namespace {

// /sys/devices/virtual/kfd/kfd/topology/nodes/<i>: node `n`'s properties,
// memory banks, caches and links.
void write_topology_node(Writer &w, const std::string &topo, size_t i, const NodeDesc &n)
{
	const std::string nd = topo + "/nodes/" + std::to_string(i);
	w.file(nd + "/gpu_id", std::to_string(n.gpu_id) + "\n");
	w.file(nd + "/name", n.name + "\n");
	w.file(nd + "/properties", properties_text(n));
	w.dir(nd + "/mem_banks");
	w.dir(nd + "/caches");
	w.dir(nd + "/io_links");
	w.dir(nd + "/p2p_links");
	for (size_t b = 0; b < n.mem_banks.size(); b++) {
		const auto &mb = n.mem_banks[b];
		w.file(nd + "/mem_banks/" + std::to_string(b) + "/properties",
		       kv("heap_type", mb.heap_type) + kv("size_in_bytes", mb.size_in_bytes) +
			       kv("flags", 0) + kv("width", mb.width) +
			       kv("mem_clk_max", mb.mem_clk_max));
	}
	const uint64_t simd_base = prop(n, "simd_id_base");
	for (size_t c = 0; c < n.caches.size(); c++) {
		const auto &cd = n.caches[c];
		// One sibling bit per compute unit sharing the cache;
		// printed as the kernel does, a comma list.
		std::string sib;
		for (int b = 0; b < 16; b++)
			sib += std::string(b ? "," : "") + (b == 0 ? "1" : "0");
		w.file(nd + "/caches/" + std::to_string(c) + "/properties",
		       kv("processor_id_low", n.is_gpu ? simd_base + c : 0) +
			       kv("level", cd.level) + kv("size", cd.size_kb) +
			       kv("cache_line_size", cd.cache_line_size) +
			       kv("cache_lines_per_tag", 1) + kv("association", 16) +
			       kv("latency", 1) + kv("type", cd.type) +
			       "sibling_map " + sib + "\n");
	}
	// io_links/<l> and p2p_links/<l> share the kernel's key list.
	for (const auto &[dir, links] : {std::pair{"/io_links/", &n.io_links},
					 std::pair{"/p2p_links/", &n.p2p_links}})
		for (size_t l = 0; l < links->size(); l++) {
			const auto &ln = (*links)[l];
			w.file(nd + dir + std::to_string(l) + "/properties",
			       kv("type", ln.type) + kv("version_major", 0) +
				       kv("version_minor", 0) + kv("node_from", i) +
				       kv("node_to", ln.node_to) + kv("weight", ln.weight) +
				       kv("min_latency", 0) + kv("max_latency", 0) +
				       kv("min_bandwidth", ln.min_bandwidth) +
				       kv("max_bandwidth", ln.max_bandwidth) +
				       kv("recommended_transfer_size", 0) + kv("flags", 1));
		}
}

// /dev/kfd, its sysfs device and the KFD topology.
void write_kfd(Writer &w, const MachineDesc &m)
{
	const std::string kfd = "/sys/devices/virtual/kfd/kfd";
	w.file(kfd.substr(1) + "/dev", std::to_string(kKfdMajor) + ":0\n");
	w.file(kfd.substr(1) + "/uevent",
	       "MAJOR=" + std::to_string(kKfdMajor) + "\nMINOR=0\nDEVNAME=kfd\n");
	w.link("sys/class/kfd/kfd", rel_link("/sys/class/kfd", kfd));
	w.link("sys/dev/char/" + std::to_string(kKfdMajor) + ":0",
	       rel_link("/sys/dev/char", kfd));
	w.file("dev/kfd", "");
	// One directory per process with a KFD context, kept by the model.
	w.dir(kfd.substr(1) + "/proc");

	const std::string topo = kfd.substr(1) + "/topology";
	w.file(topo + "/generation_id", "1\n");
	w.file(topo + "/system_properties",
	       "platform_oem 0\nplatform_id 0\nplatform_rev 0\n");
	for (size_t i = 0; i < m.nodes.size(); i++)
		write_topology_node(w, topo, i, m.nodes[i]);
}

// GPU number `index`'s PCI device directory, its DRM minors and their
// device nodes.
void write_gpu_device(Writer &w, const NodeDesc *g, size_t index, uint64_t gtt_size)
{
	const std::string pci = "/sys/devices/pci0000:00/" + g->pci_slot;
	const std::string card = "card" + std::to_string(g->card_index);
	const std::string rend = "renderD" + std::to_string(g->drm_render_minor);
	const uint32_t dev_id = g->pci_device_id;
	w.file(pci.substr(1) + "/vendor", hex(0x1002, 4));
	w.file(pci.substr(1) + "/device", hex(dev_id, 4));
	w.file(pci.substr(1) + "/subsystem_vendor", hex(0x1002, 4));
	w.file(pci.substr(1) + "/subsystem_device", hex(0x0c34, 4));
	w.file(pci.substr(1) + "/revision", hex(g->pci_revision, 2));
	w.file(pci.substr(1) + "/class", hex(0x038000, 6));
	char ue[512];
	std::snprintf(ue, sizeof ue,
		      "DRIVER=amdgpu\nPCI_CLASS=38000\nPCI_ID=1002:%04X\n"
		      "PCI_SUBSYS_ID=1002:0C34\nPCI_SLOT_NAME=%s\n"
		      "MODALIAS=pci:v00001002d0000%04Xsv00001002sd00000C34bc03sc80i00\n",
		      dev_id, g->pci_slot.c_str(), dev_id);
	w.file(pci.substr(1) + "/uevent", ue);
	// 64 bytes of PCI configuration space header.
	std::string cfg(64, '\0');
	cfg[0] = 0x02; cfg[1] = 0x10;
	cfg[2] = char(dev_id & 0xff); cfg[3] = char(dev_id >> 8);
	cfg[8] = char(g->pci_revision); cfg[10] = char(0x80); cfg[11] = 0x03;
	cfg[44] = 0x02; cfg[45] = 0x10; cfg[46] = 0x34; cfg[47] = 0x0c;
	w.file(pci.substr(1) + "/config", cfg);
	for (const char *f : {"remove", "rescan", "reset"}) // hot-plug and reset: not emulated
		w.file(pci.substr(1) + "/" + f, "", 0200);
	write_smi_files(w, *g, index, pci, gtt_size);
	w.link(pci.substr(1) + "/subsystem", rel_link(pci, "/sys/bus/pci"));
	w.link(pci.substr(1) + "/driver", rel_link(pci, "/sys/bus/pci/drivers/amdgpu"));
	w.dir("sys/bus/pci/drivers/amdgpu");
	w.link("sys/bus/pci/devices/" + g->pci_slot,
	       rel_link("/sys/bus/pci/devices", pci));
	for (const auto &[node, minor] :
	     {std::pair{card, g->card_index}, std::pair{rend, g->drm_render_minor}}) {
		const std::string nd = pci + "/drm/" + node;
		w.file(nd.substr(1) + "/dev", std::to_string(kDrmMajor) + ":" + std::to_string(minor) + "\n");
		w.file(nd.substr(1) + "/uevent",
		       "MAJOR=" + std::to_string(kDrmMajor) + "\nMINOR=" + std::to_string(minor) +
			       "\nDEVNAME=dri/" + node + "\nDEVTYPE=drm_minor\n");
		w.link(nd.substr(1) + "/device", "../..");
		w.link(nd.substr(1) + "/subsystem", rel_link(nd, "/sys/class/drm"));
		w.link("sys/dev/char/" + std::to_string(kDrmMajor) + ":" + std::to_string(minor),
		       rel_link("/sys/dev/char", nd));
		w.link("sys/class/drm/" + node, rel_link("/sys/class/drm", nd));
		w.file("dev/dri/" + node, "");
	}
}

} // namespace

std::string write_sysfs(const MachineDesc &m, const std::string &root)
{
	Writer w(root);
	const auto gpus = gpu_nodes(m);
	std::string redirects;

	// Always hidden behind the root: the host's own DRM and KFD nodes (a
	// machine without GPUs shows none) and its PCI buses: the emulated
	// machine's PCI world is its GPUs, under pci0000:00, so nothing a
	// program does to a PCI device, bus or driver (remove, rescan, bind)
	// reaches the host's (README.md, "Hermeticity").
	for (const char *p : {"/dev/kfd", "/dev/dri", "/sys/class/kfd", "/sys/devices/virtual/kfd",
			      "/sys/class/drm", "/sys/dev/char/226:", "/sys/module/amdgpu", "/sys/bus/pci",
			      "/sys/devices/pci0000:", "/sys/class/pci_bus"})
		redirects += std::string(p) + "\n";
	redirects += "/sys/dev/char/" + std::to_string(kKfdMajor) + ":\n";
	w.dir(".kfdemu");
	w.dir("dev");

	if (!gpus.empty())
		write_kfd(w, m);

	// The CPUs, NUMA nodes and /proc/cpuinfo (libhsakmt walks node<N>/cpu*
	// for CPU caches, libnuma counts the nodes), all generated.
	if (!gpus.empty())
		write_cpus(w, m, &redirects);
	write_module(w, !gpus.empty(), &redirects);

	w.dir("dev/dri");
	w.dir("sys/bus/pci/devices");
	w.dir("sys/class/drm");
	// The PCI bus's and the driver's controls, write-only as the kernel's:
	// actions the emulator does not perform (the shim refuses to open a
	// write-only sysfs file for writing).
	for (const char *f : {"sys/bus/pci/rescan", "sys/bus/pci/drivers_probe", "sys/bus/pci/uevent"})
		w.file(f, "", 0200);
	w.file("sys/bus/pci/drivers_autoprobe", "1\n", 0644);
	if (!gpus.empty())
		for (const char *f : {"bind", "unbind", "new_id", "remove_id", "uevent"})
			w.file(std::string("sys/bus/pci/drivers/amdgpu/") + f, "", 0200);
	for (size_t i = 0; i < gpus.size(); i++)
		write_gpu_device(w, gpus[i], i, memory_limits(m).gtt_size);
	w.file(kRedirectsFile, redirects);
	return w.error();
}

std::string write_unreadable(const std::string &root, const std::vector<std::string> &paths)
{
	Writer w(root);
	std::string s;
	for (const auto &p : paths)
		s += p + "\n";
	w.file(kUnreadableFile, s);
	return w.error();
}

std::string write_host_mntns(const std::string &root)
{
	struct stat st;
	if (::stat("/proc/self/ns/mnt", &st) != 0)
		return std::string("stat /proc/self/ns/mnt: ") + std::strerror(errno);
	Writer w(root);
	w.file(kHostMntnsFile, std::to_string(st.st_ino) + "\n");
	return w.error();
}

void remove_tree(const std::string &root)
{
	if (root.size() < 6)
		return;
	::nftw(root.c_str(),
	       [](const char *p, const struct stat *, int, struct FTW *) { return ::remove(p); },
	       32, FTW_DEPTH | FTW_PHYS);
}

} // namespace kfdemu
