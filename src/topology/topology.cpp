// SPDX-License-Identifier: GPL-2.0-only
#include "topology/topology.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <limits>
#include <map>
#include <numeric>
#include <set>

#include "base/file_io.h"

namespace amdcr {

// ---- Topology queries --------------------------------------------------------

Topology::Topology(std::vector<TopologyNode> nodes, SystemProperties system)
	: nodes_(std::move(nodes)), system_(system)
{
	std::stable_sort(nodes_.begin(), nodes_.end(),
			 [](const TopologyNode &a, const TopologyNode &b) { return a.node_id < b.node_id; });
}

const TopologyNode *Topology::node(uint32_t node_id) const
{
	for (const auto &n : nodes_)
		if (n.node_id == node_id)
			return &n;
	return nullptr;
}

const TopologyNode *Topology::gpu(uint32_t gpu_id) const
{
	if (gpu_id == 0)
		return nullptr;
	for (const auto &n : nodes_)
		if (n.is_gpu && n.gpu_id == gpu_id)
			return &n;
	return nullptr;
}

const TopologyNode *Topology::gpu_by_render_minor(uint32_t minor) const
{
	for (const auto &n : nodes_)
		if (n.is_gpu && n.accessible && n.drm_render_minor == minor)
			return &n;
	return nullptr;
}

std::vector<const TopologyNode *> Topology::gpus() const
{
	std::vector<const TopologyNode *> out;
	for (const auto &n : nodes_)
		if (n.is_gpu)
			out.push_back(&n);
	return out;
}

std::vector<const TopologyNode *> Topology::accessible_gpus() const
{
	std::vector<const TopologyNode *> out;
	for (const auto &n : nodes_)
		if (n.is_gpu && n.accessible)
			out.push_back(&n);
	return out;
}

std::vector<const TopologyNode *> Topology::cpus() const
{
	std::vector<const TopologyNode *> out;
	for (const auto &n : nodes_)
		if (n.is_cpu())
			out.push_back(&n);
	return out;
}

bool Topology::link_valid(const IoLink &link) const
{
	const TopologyNode *to = node(link.node_to);
	return to && to->accessible;
}

const IoLink *Topology::find_link(uint32_t from, uint32_t to, uint32_t type) const
{
	const TopologyNode *n = node(from);
	if (!n || !n->accessible)
		return nullptr;
	for (const auto &l : n->io_links)
		if (l.node_to == to && l.type == type && link_valid(l))
			return &l;
	return nullptr;
}

bool Topology::bidirectional(uint32_t node_a, uint32_t node_b, uint32_t type) const
{
	return find_link(node_a, node_b, type) && find_link(node_b, node_a, type);
}

bool Topology::xgmi_peers(uint32_t gpu_a, uint32_t gpu_b) const
{
	const TopologyNode *a = gpu(gpu_a);
	const TopologyNode *b = gpu(gpu_b);
	if (!a || !b || a == b)
		return false;
	return bidirectional(a->node_id, b->node_id, kIoLinkTypeXgmi);
}

uint32_t Topology::peer_link(uint32_t from_gpu, uint32_t to_gpu) const
{
	const TopologyNode *a = gpu(from_gpu);
	const TopologyNode *b = gpu(to_gpu);
	if (!a || !b || a == b || !a->accessible)
		return 0;
	uint32_t best = 0;
	for (const auto *list : {&a->io_links, &a->p2p_links})
		for (const auto &l : *list)
			if (l.node_to == b->node_id && link_valid(l) && link_rank(l.type) > link_rank(best))
				best = l.type;
	return best;
}

std::vector<std::vector<uint32_t>> Topology::hives() const
{
	const auto g = accessible_gpus();
	std::vector<size_t> parent(g.size());
	std::iota(parent.begin(), parent.end(), size_t{0});
	auto find = [&parent](size_t i) {
		while (parent[i] != i)
			i = parent[i] = parent[parent[i]];
		return i;
	};
	for (size_t i = 0; i < g.size(); i++)
		for (size_t j = i + 1; j < g.size(); j++)
			if (bidirectional(g[i]->node_id, g[j]->node_id, kIoLinkTypeXgmi))
				parent[find(j)] = find(i);

	std::vector<std::vector<uint32_t>> out;
	std::map<size_t, size_t> index; // root -> position in out
	for (size_t i = 0; i < g.size(); i++) {
		const size_t r = find(i);
		auto [it, inserted] = index.emplace(r, out.size());
		if (inserted)
			out.emplace_back();
		out[it->second].push_back(g[i]->gpu_id);
	}
	std::erase_if(out, [](const auto &h) { return h.size() < 2; });
	return out;
}

std::vector<uint32_t> Topology::cpu_nodes_of_gpu(uint32_t gpu_id) const
{
	std::vector<uint32_t> out;
	const TopologyNode *g = gpu(gpu_id);
	if (!g || !g->accessible)
		return out;
	for (const auto &l : g->io_links) {
		const TopologyNode *to = node(l.node_to);
		if (to && to->accessible && to->is_cpu() &&
		    std::find(out.begin(), out.end(), l.node_to) == out.end())
			out.push_back(l.node_to);
	}
	return out;
}

// ---- the file system ---------------------------------------------------------

namespace {

class DiskTopologyFs final : public TopologyFs {
public:
	Result<std::string> read_file(const std::string &path) const override
	{
		return read_text_file(AT_FDCWD, path);
	}

	Result<std::vector<DirEntry>> list_dir(const std::string &path) const override
	{
		DIR *d = ::opendir(path.c_str());
		if (!d)
			return errno_error(errno, "opendir " + path);
		std::vector<DirEntry> out;
		int err = 0;
		for (;;) {
			errno = 0;
			const struct dirent *e = ::readdir(d);
			if (!e) {
				err = errno;
				break;
			}
			const std::string name = e->d_name;
			if (name == "." || name == "..")
				continue;
			struct stat st = {};
			const bool is_dir = ::stat((path + "/" + name).c_str(), &st) == 0 && S_ISDIR(st.st_mode);
			out.push_back({name, is_dir});
		}
		::closedir(d);
		if (err)
			return errno_error(err, "readdir " + path);
		return out;
	}
};

bool is_decimal(std::string_view s)
{
	return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool parse_u64(std::string_view s, uint64_t &out)
{
	if (!is_decimal(s))
		return false;
	auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
	return ec == std::errc() && p == s.data() + s.size();
}

bool is_denied(const Error &e)
{
	return e.code() == EPERM || e.code() == EACCES;
}

// Numeric subdirectories of `path`, sorted by number. A missing directory
// is an empty list when `optional`. `listed_at`, when given, receives each
// one's position among them as the directory lists them (readdir order).
Result<std::vector<std::pair<uint32_t, std::string>>> numeric_subdirs(const TopologyFs &fs,
								       const std::string &path, bool optional,
								       std::map<uint32_t, uint32_t> *listed_at = nullptr)
{
	std::vector<std::pair<uint32_t, std::string>> out;
	auto entries = fs.list_dir(path);
	if (!entries) {
		if (optional && entries.error().code() == ENOENT)
			return out;
		return std::move(entries).error();
	}
	for (const auto &e : *entries) {
		uint64_t n = 0;
		if (!e.is_dir || !parse_u64(e.name, n) || n > std::numeric_limits<uint32_t>::max())
			continue;
		if (listed_at)
			listed_at->emplace(static_cast<uint32_t>(n), static_cast<uint32_t>(out.size()));
		out.emplace_back(static_cast<uint32_t>(n), path + "/" + e.name);
	}
	std::sort(out.begin(), out.end());
	return out;
}

struct KeyValue {
	std::string key;
	uint64_t value = 0;
	std::string raw; // the value text (for non-numeric values we allow)
	size_t line = 0;
};

// Splits "<key> <value>" lines. Every non-empty line must have exactly two
// whitespace-separated fields; the value must be an unsigned decimal unless
// `allow_raw(key)` says otherwise. The only empty line allowed is after the
// last newline.
template <typename AllowRaw>
Result<std::vector<KeyValue>> parse_key_values(const std::string &path, const std::string &text,
					       AllowRaw allow_raw)
{
	std::vector<KeyValue> out;
	size_t pos = 0;
	size_t line_no = 0;
	while (pos < text.size()) {
		size_t end = text.find('\n', pos);
		if (end == std::string::npos)
			end = text.size();
		const std::string_view line(text.data() + pos, end - pos);
		line_no++;
		pos = end + 1;

		std::vector<std::string_view> fields;
		size_t i = 0;
		while (i < line.size()) {
			while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r'))
				i++;
			const size_t start = i;
			while (i < line.size() && line[i] != ' ' && line[i] != '\t' && line[i] != '\r')
				i++;
			if (i > start)
				fields.push_back(line.substr(start, i - start));
		}
		KeyValue kv;
		kv.line = line_no;
		bool ok = fields.size() == 2;
		if (ok) {
			kv.key = std::string(fields[0]);
			kv.raw = std::string(fields[1]);
			if (!parse_u64(fields[1], kv.value))
				ok = allow_raw(kv.key);
		}
		if (!ok)
			return make_error(EINVAL, "%s:%zu: malformed line \"%.*s\" (expected \"<name> <unsigned decimal>\")",
					  path.c_str(), line_no, static_cast<int>(line.size()), line.data());
		out.push_back(std::move(kv));
	}
	return out;
}

Result<std::vector<KeyValue>> parse_key_values(const std::string &path, const std::string &text)
{
	return parse_key_values(path, text, [](const std::string &) { return false; });
}

Result<uint32_t> to_u32(const std::string &path, const KeyValue &kv)
{
	if (kv.value > std::numeric_limits<uint32_t>::max())
		return make_error(EINVAL, "%s:%zu: value of %s (%llu) does not fit in 32 bits", path.c_str(),
				  kv.line, kv.key.c_str(), static_cast<unsigned long long>(kv.value));
	return static_cast<uint32_t>(kv.value);
}

// The uint32 properties of a node, by sysfs key.
constexpr struct {
	const char *key;
	uint32_t TopologyNode::*field;
} kU32Properties[] = {
#define AMDCR_ENTRY(name, rule, check) {#name, &TopologyNode::name},
	AMDCR_NODE_PROPERTIES(AMDCR_ENTRY)
#undef AMDCR_ENTRY
};

Status parse_properties(const std::string &path, const std::string &text, TopologyNode &node)
{
	auto kvs = parse_key_values(path, text);
	if (!kvs)
		return std::move(kvs).error();
	for (const auto &kv : *kvs) {
		if (kv.key == "hive_id") {
			node.hive_id = kv.value;
			continue;
		}
		for (const auto &p : kU32Properties) {
			if (kv.key != p.key)
				continue;
			auto v = to_u32(path, kv);
			if (!v)
				return std::move(v).error();
			node.*(p.field) = *v;
			break;
		}
		// Unknown keys are ignored: newer kernels add some.
	}
	return ok_status();
}

class NodeParser {
public:
	NodeParser(const TopologyFs &fs, std::string dir, TopologyNode &node) : fs_(fs), dir_(std::move(dir)), node_(node) {}

	// On success, denied() tells whether the device cgroup hides the node.
	Status parse()
	{
		if (auto s = read_gpu_id(); !s)
			return s;
		if (denied_)
			return ok_status();
		for (auto step : {&NodeParser::read_name, &NodeParser::read_properties, &NodeParser::read_mem_banks,
				  &NodeParser::read_caches, &NodeParser::read_links}) {
			if (auto s = (this->*step)(); !s)
				return s;
			if (denied_)
				return ok_status();
		}
		return ok_status();
	}

	bool denied() const { return denied_; }

private:
	// Reads a file of this node. A denial on a GPU node (or on the gpu_id
	// file, before we know the kind) sets denied_ and yields nullopt.
	Result<std::optional<std::string>> read(const std::string &path)
	{
		auto text = fs_.read_file(path);
		if (text)
			return std::optional<std::string>(std::move(*text));
		if (is_denied(text.error()) && (node_.is_gpu || !known_)) {
			denied_ = true;
			return std::optional<std::string>();
		}
		return std::move(text).error();
	}

	Result<std::optional<std::vector<std::pair<uint32_t, std::string>>>> subdirs(const std::string &path)
	{
		auto d = numeric_subdirs(fs_, path, true);
		if (d)
			return std::optional(std::move(*d));
		if (is_denied(d.error()) && node_.is_gpu) {
			denied_ = true;
			return std::optional<std::vector<std::pair<uint32_t, std::string>>>();
		}
		return std::move(d).error();
	}

	Status read_gpu_id()
	{
		const std::string path = dir_ + "/gpu_id";
		auto text = read(path);
		if (!text)
			return std::move(text).error();
		if (denied_) {
			node_.is_gpu = true; // CPU nodes are never hidden by the device cgroup
			node_.accessible = false;
			return ok_status();
		}
		std::string_view v = **text;
		if (!v.empty() && v.back() == '\n')
			v.remove_suffix(1);
		uint64_t id = 0;
		if (!parse_u64(v, id) || id > std::numeric_limits<uint32_t>::max())
			return make_error(EINVAL, "%s:1: malformed gpu_id \"%.*s\" (expected an unsigned decimal)",
					  path.c_str(), static_cast<int>(v.size()), v.data());
		node_.gpu_id = static_cast<uint32_t>(id);
		node_.is_gpu = id != 0;
		known_ = true;
		return ok_status();
	}

	Status read_name()
	{
		auto text = read(dir_ + "/name");
		if (!text) {
			if (text.error().code() == ENOENT)
				return ok_status(); // optional
			return std::move(text).error();
		}
		if (*text) {
			std::string name = std::move(**text);
			while (!name.empty() && (name.back() == '\n' || name.back() == ' '))
				name.pop_back();
			node_.name = std::move(name);
		}
		return ok_status();
	}

	Status read_properties()
	{
		const std::string path = dir_ + "/properties";
		auto text = read(path);
		if (!text)
			return std::move(text).error();
		if (!*text)
			return ok_status();
		return parse_properties(path, **text, node_);
	}

	// Reads the properties file of each numbered subdirectory of `dir`, in
	// order, and gives its key/values to `entry(path, kvs)`, which returns
	// true to go on. A denied directory or file ends the walk (denied_ is
	// set). Returns whether `entry` stopped the walk.
	template <typename AllowRaw, typename Entry>
	Result<bool> for_each_properties(const std::string &dir, AllowRaw allow_raw, Entry entry)
	{
		auto subs = subdirs(dir);
		if (!subs)
			return std::move(subs).error();
		if (!*subs)
			return false;
		for (const auto &[index, sub] : **subs) {
			const std::string path = sub + "/properties";
			auto text = read(path);
			if (!text)
				return std::move(text).error();
			if (!*text)
				return false;
			auto kvs = parse_key_values(path, **text, allow_raw);
			if (!kvs)
				return std::move(kvs).error();
			Result<bool> more = entry(path, *kvs);
			if (!more)
				return std::move(more).error();
			if (!*more)
				return true;
		}
		return false;
	}

	static bool no_raw_keys(const std::string &) { return false; }

	Status read_mem_banks()
	{
		if (!node_.is_gpu)
			return ok_status();
		auto found = for_each_properties(dir_ + "/mem_banks", no_raw_keys,
						 [&](const std::string &path, const std::vector<KeyValue> &kvs) -> Result<bool> {
			uint64_t heap_type = 0, size = 0;
			for (const auto &kv : kvs) {
				if (kv.key == "heap_type")
					heap_type = kv.value;
				else if (kv.key == "size_in_bytes")
					size = kv.value;
			}
			if (heap_type != kHeapTypeFrameBufferPublic && heap_type != kHeapTypeFrameBufferPrivate)
				return true;
			if (size == 0)
				return make_error(EINVAL, "%s: VRAM bank (heap_type %llu) has size 0", path.c_str(),
						  static_cast<unsigned long long>(heap_type));
			node_.vram_public = heap_type == kHeapTypeFrameBufferPublic;
			node_.vram_size = size;
			return false; // the first VRAM bank is the one
		});
		if (!found)
			return std::move(found).error();
		if (*found || denied_)
			return ok_status();
		return make_error(EINVAL, "%s/mem_banks: gpu 0x%04x has no VRAM bank (heap_type %u or %u)", dir_.c_str(),
				  node_.gpu_id, kHeapTypeFrameBufferPublic, kHeapTypeFrameBufferPrivate);
	}

	Status read_caches()
	{
		// sibling_map is a comma-separated list, not a number.
		auto sibling_map = [](const std::string &key) { return key == "sibling_map"; };
		auto walked = for_each_properties(dir_ + "/caches", sibling_map,
						  [&](const std::string &path, const std::vector<KeyValue> &kvs) -> Result<bool> {
			CacheInfo c;
			for (const auto &kv : kvs) {
				uint32_t CacheInfo::*field = nullptr;
				if (kv.key == "level")
					field = &CacheInfo::level;
				else if (kv.key == "size")
					field = &CacheInfo::size;
				else if (kv.key == "cache_line_size")
					field = &CacheInfo::cache_line_size;
				else if (kv.key == "type")
					field = &CacheInfo::type;
				if (!field)
					continue;
				auto v = to_u32(path, kv);
				if (!v)
					return std::move(v).error();
				c.*field = *v;
			}
			node_.caches.push_back(c);
			return true;
		});
		if (!walked)
			return std::move(walked).error();
		return ok_status();
	}

	Status read_link_dir(const std::string &which, std::vector<IoLink> &out)
	{
		auto walked = for_each_properties(dir_ + "/" + which, no_raw_keys,
						  [&](const std::string &path, const std::vector<KeyValue> &kvs) -> Result<bool> {
			IoLink link;
			for (const auto &kv : kvs) {
				if (kv.key != "type" && kv.key != "node_to")
					continue;
				auto v = to_u32(path, kv);
				if (!v)
					return std::move(v).error();
				(kv.key == "type" ? link.type : link.node_to) = *v;
			}
			if (link.type == kIoLinkTypePcie || link.type == kIoLinkTypeXgmi)
				out.push_back(link);
			return true;
		});
		if (!walked)
			return std::move(walked).error();
		return ok_status();
	}

	Status read_links()
	{
		if (auto s = read_link_dir("io_links", node_.io_links); !s || denied_)
			return s;
		return read_link_dir("p2p_links", node_.p2p_links);
	}

	const TopologyFs &fs_;
	std::string dir_;
	TopologyNode &node_;
	bool known_ = false; // the node kind (gpu_id) is known
	bool denied_ = false;
};

Result<SystemProperties> read_system_properties(const TopologyFs &fs, const std::string &dir)
{
	SystemProperties sys;
	const std::string path = dir + "/system_properties";
	auto text = fs.read_file(path);
	if (!text)
		return sys; // informational only
	auto kvs = parse_key_values(path, *text);
	if (!kvs)
		return std::move(kvs).error();
	for (const auto &kv : *kvs) {
		if (kv.key == "platform_oem")
			sys.platform_oem = kv.value;
		else if (kv.key == "platform_id")
			sys.platform_id = kv.value;
		else if (kv.key == "platform_rev")
			sys.platform_rev = kv.value;
	}
	return sys;
}

} // namespace

const TopologyFs &disk_topology_fs()
{
	static const DiskTopologyFs fs;
	return fs;
}

std::string topology_dir(const std::string &root)
{
	std::string r = root;
	while (!r.empty() && r.back() == '/')
		r.pop_back();
	return r + "/sys/class/kfd/kfd/topology";
}

Result<Topology> parse_topology(const std::string &root, const TopologyFs &fs)
{
	const std::string dir = topology_dir(root);
	auto sys = read_system_properties(fs, dir);
	if (!sys)
		return std::move(sys).error();

	std::map<uint32_t, uint32_t> listed_at;
	auto node_dirs = numeric_subdirs(fs, dir + "/nodes", false, &listed_at);
	if (!node_dirs)
		return std::move(node_dirs).error().context("KFD topology");

	std::vector<TopologyNode> nodes;
	std::set<uint32_t> gpu_ids;
	for (const auto &[id, node_dir] : *node_dirs) {
		TopologyNode node;
		node.node_id = id;
		node.listing_index = listed_at[id];
		NodeParser parser(fs, node_dir, node);
		if (auto s = parser.parse(); !s)
			return std::move(s).error();
		if (parser.denied()) {
			// Keep what identifies the node; nothing else is reliable.
			TopologyNode hidden;
			hidden.node_id = id;
			hidden.listing_index = node.listing_index;
			hidden.gpu_id = node.gpu_id;
			hidden.is_gpu = true;
			hidden.accessible = false;
			node = std::move(hidden);
		}
		if (node.gpu_id != 0 && !gpu_ids.insert(node.gpu_id).second)
			return make_error(EINVAL, "%s/gpu_id: gpu 0x%04x appears on two nodes", node_dir.c_str(),
					  node.gpu_id);
		nodes.push_back(std::move(node));
	}
	return Topology(std::move(nodes), *sys);
}

std::string describe_topology(const Topology &t)
{
	std::string out;
	for (const auto &n : t.nodes()) {
		if (!out.empty())
			out += "\n";
		if (n.is_cpu())
			out += strprintf("node %u: CPU, %u cores", n.node_id, n.cpu_cores_count);
		else if (!n.accessible)
			out += strprintf("node %u: gpu 0x%04x, not accessible (device cgroup)", n.node_id, n.gpu_id);
		else
			out += strprintf("node %u: gpu 0x%04x renderD%u %s device_id 0x%04x, VRAM %llu bytes (%s)",
					 n.node_id, n.gpu_id, n.drm_render_minor, n.name.empty() ? "-" : n.name.c_str(),
					 n.device_id, static_cast<unsigned long long>(n.vram_size),
					 n.vram_public ? "public" : "private");
		std::string links;
		for (const auto &l : n.io_links)
			if (t.link_valid(l))
				links += strprintf(" %s->%u", l.type == kIoLinkTypeXgmi ? "XGMI" : "PCIe", l.node_to);
		if (!links.empty())
			out += "; links" + links;
	}
	for (const auto &h : t.hives()) {
		out += "\nXGMI hive:";
		for (uint32_t id : h)
			out += strprintf(" 0x%04x", id);
	}
	return out;
}

} // namespace amdcr
