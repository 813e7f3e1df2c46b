// SPDX-License-Identifier: GPL-2.0-only
#include "sysfs.h"

#include "profile.h"

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <set>
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

} // namespace

std::string properties_text(const NodeDesc &n)
{
	std::string s;
	for (const auto &[k, v] : n.properties)
		s += k + " " + std::to_string(v) + "\n";
	return s;
}

std::string write_sysfs(const MachineDesc &m, const std::string &root)
{
	Writer w(root);
	const auto gpus = gpu_nodes(m);
	std::string redirects;

	// Always hidden behind the root: the host's own DRM and KFD nodes (a
	// machine without GPUs shows none).
	for (const char *p : {"/dev/kfd", "/dev/dri", "/sys/class/kfd", "/sys/devices/virtual/kfd",
			      "/sys/class/drm", "/sys/dev/char/226:", "/sys/module/amdgpu"})
		redirects += std::string(p) + "\n";
	redirects += "/sys/dev/char/" + std::to_string(kKfdMajor) + ":\n";
	w.dir(".kfdemu");
	w.dir("dev");

	if (!gpus.empty()) {
		const std::string kfd = "/sys/devices/virtual/kfd/kfd";
		w.file(kfd.substr(1) + "/dev", std::to_string(kKfdMajor) + ":0\n");
		w.file(kfd.substr(1) + "/uevent",
		       "MAJOR=" + std::to_string(kKfdMajor) + "\nMINOR=0\nDEVNAME=kfd\n");
		w.link("sys/class/kfd/kfd", rel_link("/sys/class/kfd", kfd));
		w.link("sys/dev/char/" + std::to_string(kKfdMajor) + ":0",
		       rel_link("/sys/dev/char", kfd));
		w.file("dev/kfd", "");

		const std::string topo = kfd.substr(1) + "/topology";
		w.file(topo + "/generation_id", "1\n");
		w.file(topo + "/system_properties",
		       "platform_oem 0\nplatform_id 0\nplatform_rev 0\n");
		for (size_t i = 0; i < m.nodes.size(); i++) {
			const NodeDesc &n = m.nodes[i];
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
			for (size_t l = 0; l < n.io_links.size(); l++) {
				const auto &ln = n.io_links[l];
				w.file(nd + "/io_links/" + std::to_string(l) + "/properties",
				       kv("type", ln.type) + kv("version_major", 0) + kv("version_minor", 0) +
					       kv("node_from", i) + kv("node_to", ln.node_to) +
					       kv("weight", ln.weight) + kv("min_latency", 0) +
					       kv("max_latency", 0) + kv("min_bandwidth", ln.min_bandwidth) +
					       kv("max_bandwidth", ln.max_bandwidth) +
					       kv("recommended_transfer_size", 0) + kv("flags", 1));
			}
		}
	}

	// NUMA nodes as the machine has them (libhsakmt walks node<N>/cpu* for
	// CPU cache information): each CPU node gets a share of the host's
	// CPUs, linked to the real /sys/devices/system/cpu/cpu<K>.
	std::vector<const NodeDesc *> cpus;
	for (const auto &n : m.nodes)
		if (!n.is_gpu)
			cpus.push_back(&n);
	if (!gpus.empty() && !cpus.empty()) {
		redirects += "/sys/devices/system/node\n";
		const long host = std::max(1L, ::sysconf(_SC_NPROCESSORS_CONF));
		const size_t nn = cpus.size();
		w.file("sys/devices/system/node/possible", "0-" + std::to_string(nn - 1) + "\n");
		w.file("sys/devices/system/node/online", "0-" + std::to_string(nn - 1) + "\n");
		w.file("sys/devices/system/node/has_cpu", "0-" + std::to_string(nn - 1) + "\n");
		w.file("sys/devices/system/node/has_normal_memory", "0-" + std::to_string(nn - 1) + "\n");
		for (size_t i = 0; i < nn; i++) {
			long first = long(i) * host / long(nn), last = long(i + 1) * host / long(nn) - 1;
			if (last < first)
				first = last = std::min<long>(long(i), host - 1);
			const std::string nd = "sys/devices/system/node/node" + std::to_string(i);
			w.file(nd + "/cpulist", std::to_string(first) + "-" + std::to_string(last) + "\n");
			const uint64_t kb = cpus[i]->mem_banks.empty() ? 0 : cpus[i]->mem_banks[0].size_in_bytes >> 10;
			const std::string pre = "Node " + std::to_string(i) + " ";
			w.file(nd + "/meminfo", pre + "MemTotal:       " + std::to_string(kb) + " kB\n" + pre +
							"MemFree:        " + std::to_string(kb / 2) + " kB\n" + pre +
							"MemUsed:        " + std::to_string(kb - kb / 2) + " kB\n");
			for (long c = first; c <= last; c++)
				w.link(nd + "/cpu" + std::to_string(c), "/sys/devices/system/cpu/cpu" + std::to_string(c));
		}
	}

	w.dir("dev/dri");
	w.dir("sys/bus/pci/devices");
	w.dir("sys/class/drm");
	for (const NodeDesc *g : gpus) {
		const std::string pci = "/sys/devices/pci0000:00/" + g->pci_slot;
		redirects += pci + "\n/sys/bus/pci/devices/" + g->pci_slot + "\n";
		const std::string card = "card" + std::to_string(g->card_index);
		const std::string rend = "renderD" + std::to_string(g->drm_render_minor);
		const uint32_t dev_id = g->pci_device_id;
		w.file(pci.substr(1) + "/vendor", hex(0x1002, 4));
		w.file(pci.substr(1) + "/device", hex(dev_id, 4));
		w.file(pci.substr(1) + "/subsystem_vendor", hex(0x1002, 4));
		w.file(pci.substr(1) + "/subsystem_device", hex(0x0c34, 4));
		w.file(pci.substr(1) + "/revision", hex(0x02, 2));
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
		cfg[8] = 0x02; cfg[10] = char(0x80); cfg[11] = 0x03;
		cfg[44] = 0x02; cfg[45] = 0x10; cfg[46] = 0x34; cfg[47] = 0x0c;
		w.file(pci.substr(1) + "/config", cfg);
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

void remove_tree(const std::string &root)
{
	if (root.size() < 6)
		return;
	::nftw(root.c_str(),
	       [](const char *p, const struct stat *, int, struct FTW *) { return ::remove(p); },
	       32, FTW_DEPTH | FTW_PHYS);
}

} // namespace kfdemu
