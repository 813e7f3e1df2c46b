// SPDX-License-Identifier: GPL-2.0-only
//
// The CPUs an emulated program sees: /sys/devices/system/cpu,
// /sys/devices/system/node and /proc/cpuinfo come from the emulator's root,
// are derived from the machine profile (each CPU node has its `cores` CPUs)
// and agree with each other the way libhsakmt and libnuma rely on.
//
// Usage (under kfd-emu): test_cpus --machine NAME
#include "check.h"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>

#include <algorithm>
#include <set>
#include <vector>

using namespace kfdemu;
using namespace kfdemu::test;

namespace {

const std::string kCpu = "/sys/devices/system/cpu/";
const std::string kNode = "/sys/devices/system/node/";


bool exists(const std::string &path)
{
	struct stat st;
	return ::stat(path.c_str(), &st) == 0;
}

// "0-3,8,10-11\n" -> {0,1,2,3,8,10,11}; a malformed list gives {~0u}.
std::set<unsigned> parse_list(const std::string &s)
{
	std::set<unsigned> out;
	size_t i = 0;
	while (i < s.size() && s[i] != '\n') {
		int used = 0;
		unsigned a = 0, b = 0;
		if (std::sscanf(s.c_str() + i, "%u%n", &a, &used) != 1)
			return {~0u};
		i += size_t(used);
		b = a;
		if (s[i] == '-') {
			if (std::sscanf(s.c_str() + i + 1, "%u%n", &b, &used) != 1 || b < a)
				return {~0u};
			i += 1 + size_t(used);
		}
		for (unsigned k = a; k <= b; k++)
			out.insert(k);
		if (s[i] == ',')
			i++;
	}
	return out;
}

// "00000000,00000102\n" (most significant group first) -> {1,8,32}.
std::set<unsigned> parse_mask(const std::string &s)
{
	std::vector<uint32_t> groups;
	size_t i = 0;
	while (i < s.size() && s[i] != '\n') {
		size_t j = s.find_first_of(",\n", i);
		groups.push_back(uint32_t(std::stoul(s.substr(i, j - i), nullptr, 16)));
		i = j == std::string::npos ? s.size() : j + (s[j] == ',');
	}
	std::set<unsigned> out;
	for (size_t g = 0; g < groups.size(); g++)
		for (unsigned b = 0; b < 32; b++)
			if (groups[groups.size() - 1 - g] >> b & 1)
				out.insert(unsigned(g * 32 + b));
	return out;
}

std::set<unsigned> range(unsigned n)
{
	std::set<unsigned> out;
	for (unsigned k = 0; k < n; k++)
		out.insert(k);
	return out;
}

struct Expect {
	std::vector<const NodeDesc *> nodes;
	unsigned total = 0, online = 0;
};

Expect expect(const MachineDesc &m)
{
	Expect e;
	for (const auto &n : m.nodes)
		if (!n.is_gpu) {
			e.nodes.push_back(&n);
			e.total += unsigned(std::max<uint64_t>(1, prop(n, "cpu_cores_count")));
		}
	// Online: as many as get_nprocs() tells this program, one per node at
	// least, never more than the machine has.
	e.online = std::min(e.total, std::max(unsigned(e.nodes.size()), unsigned(::get_nprocs())));
	return e;
}

// The CPU node of CPU k, from its node<N> link; -1 if none or several.
int node_of(unsigned k, size_t nodes)
{
	int found = -1;
	for (size_t i = 0; i < nodes; i++)
		if (exists(kCpu + "cpu" + std::to_string(k) + "/node" + std::to_string(i)))
			found = found < 0 ? int(i) : -2;
	return found < 0 ? -1 : found;
}

void test_counts(const Expect &e)
{
	CHECK(parse_list(slurp(kCpu + "possible")) == range(e.total));
	CHECK(parse_list(slurp(kCpu + "present")) == range(e.total));
	CHECK(parse_list(slurp(kCpu + "online")) == range(e.online));
	std::set<unsigned> dirs;
	for (const auto &name : list_dir(kCpu))
		if (name.size() > 3 && name.starts_with("cpu") && std::isdigit(static_cast<unsigned char>(name[3])))
			dirs.insert(unsigned(std::stoul(name.substr(3))));
	CHECK(dirs == range(e.total));
	CHECK(parse_list(slurp(kNode + "online")) == range(unsigned(e.nodes.size())));
	CHECK(parse_list(slurp(kNode + "has_cpu")) == range(unsigned(e.nodes.size())));
}

void test_nodes(const Expect &e)
{
	std::set<unsigned> seen;
	for (size_t i = 0; i < e.nodes.size(); i++) {
		const std::string nd = kNode + "node" + std::to_string(i) + "/";
		std::set<unsigned> mine, online;
		for (const auto &name : list_dir(nd)) {
			if (!name.starts_with("cpu") || name.size() < 4 || !std::isdigit(static_cast<unsigned char>(name[3])))
				continue;
			const unsigned k = unsigned(std::stoul(name.substr(3)));
			mine.insert(k);
			CHECK(seen.insert(k).second);	// in one node only
			// A sysfs-style relative link inside the emulated tree.
			char buf[256];
			ssize_t n = ::readlink((nd + name).c_str(), buf, sizeof buf);
			CHECK_EQ(n > 0 ? std::string(buf, size_t(n)) : std::string(), "../../cpu/" + name);
			CHECK_EQ(node_of(k, e.nodes.size()), int(i));
			if (k < e.online)
				online.insert(k);
		}
		CHECK_EQ(mine.size(), std::max<uint64_t>(1, prop(*e.nodes[i], "cpu_cores_count")));
		CHECK(!online.empty());	// libhsakmt needs one CPU with caches per node
		CHECK(parse_list(slurp(nd + "cpulist")) == online);
		CHECK(parse_mask(slurp(nd + "cpumap")) == online);
		CHECK(slurp(nd + "meminfo").starts_with("Node " + std::to_string(i) + " MemTotal:"));
	}
	CHECK(seen == range(e.total));
}

void test_caches(const Expect &e)
{
	for (unsigned k = 0; k < e.total; k++) {
		const std::string c = kCpu + "cpu" + std::to_string(k) + "/";
		if (k >= e.online) {
			// Offline, as the kernel shows it.
			CHECK(!exists(c + "cache"));
			CHECK(!exists(c + "topology"));
			CHECK_EQ(slurp(c + "online"), std::string("0\n"));
			continue;
		}
		CHECK(k == 0 ? !exists(c + "online") : slurp(c + "online") == "1\n");
		const int node = node_of(k, e.nodes.size());
		CHECK(node >= 0);
		const std::string pkg = slurp(c + "topology/physical_package_id");
		CHECK_EQ(pkg, std::to_string(node) + "\n");
		CHECK(parse_list(slurp(c + "topology/thread_siblings_list")) == std::set<unsigned>{k});
		CHECK(parse_list(slurp(c + "topology/package_cpus_list")) ==
		      parse_list(slurp(kNode + "node" + std::to_string(node) + "/cpulist")));
		const auto idx = list_dir(c + "cache");
		CHECK(idx.size() >= 3);
		std::set<unsigned> levels;
		for (size_t i = 0; i < idx.size(); i++) {
			const std::string d = c + "cache/index" + std::to_string(i) + "/";
			CHECK(idx.count("index" + std::to_string(i)));
			unsigned level = 0, line = 0, ways = 0, sets = 0, part = 0, size = 0;
			char unit = 0;
			CHECK(std::sscanf(slurp(d + "level").c_str(), "%u", &level) == 1);
			CHECK(std::sscanf(slurp(d + "coherency_line_size").c_str(), "%u", &line) == 1);
			CHECK(std::sscanf(slurp(d + "ways_of_associativity").c_str(), "%u", &ways) == 1);
			CHECK(std::sscanf(slurp(d + "number_of_sets").c_str(), "%u", &sets) == 1);
			CHECK(std::sscanf(slurp(d + "physical_line_partition").c_str(), "%u", &part) == 1);
			CHECK(std::sscanf(slurp(d + "size").c_str(), "%u%c", &size, &unit) == 2 && unit == 'K');
			CHECK_EQ(uint64_t(line) * ways * sets * part, uint64_t(size) * 1024);
			const std::string type = slurp(d + "type");
			CHECK(type == "Data\n" || type == "Instruction\n" || type == "Unified\n");
			levels.insert(level);
			const auto shared = parse_list(slurp(d + "shared_cpu_list"));
			CHECK(shared.count(k));
			CHECK(parse_mask(slurp(d + "shared_cpu_map")) == shared);
			for (unsigned o : shared)
				CHECK(o < e.online && node_of(o, e.nodes.size()) == node);
		}
		CHECK(levels.count(1) && levels.count(2));
	}
}

void test_cpuinfo(const Expect &e)
{
	const std::string text = slurp("/proc/cpuinfo");
	std::set<unsigned> procs;
	std::vector<std::pair<unsigned, unsigned>> apic;	// processor, apicid
	unsigned cur = ~0u;
	size_t i = 0;
	while (i < text.size()) {
		size_t j = text.find('\n', i);
		const std::string line = text.substr(i, j == std::string::npos ? std::string::npos : j - i);
		i = j == std::string::npos ? text.size() : j + 1;
		unsigned v;
		if (std::sscanf(line.c_str(), "processor : %u", &v) == 1) {
			cur = v;
			procs.insert(v);
		} else if (std::sscanf(line.c_str(), "apicid : %u", &v) == 1)
			apic.emplace_back(cur, v);
	}
	CHECK(procs == range(e.online));
	CHECK_EQ(apic.size(), size_t(e.online));
	// libhsakmt names a CPU node after the processor whose APIC id is the
	// node's cpu_core_id_base: its first CPU.
	for (size_t n = 0; n < e.nodes.size(); n++) {
		const auto cpus = parse_list(slurp(kNode + "node" + std::to_string(n) + "/cpulist"));
		if (!CHECK(!cpus.empty()))
			continue;
		bool found = false;
		for (const auto &[p, a] : apic)
			if (p == *cpus.begin())
				found = a == prop(*e.nodes[n], "cpu_core_id_base");
		CHECK(found);
	}
}

} // namespace

int main(int argc, char **argv)
{
	const MachineDesc m = machine_from_args(argc, argv);
	const Expect e = expect(m);
	if (gpu_nodes(m).empty() || e.nodes.empty()) {
		// A machine without GPUs publishes nothing: the host's CPUs show.
		std::printf("NOT RUN: machine %s has no GPU, so no emulated CPUs\n", m.name.c_str());
		return 77;
	}
	run("CPU counts: possible, present, online", [&] { test_counts(e); });
	run("NUMA nodes: each node's cores, links into the emulated cpu dirs", [&] { test_nodes(e); });
	run("online CPUs: topology and caches, offline CPUs: none", [&] { test_caches(e); });
	run("/proc/cpuinfo lists the online CPUs", [&] { test_cpuinfo(e); });
	return summary();
}
