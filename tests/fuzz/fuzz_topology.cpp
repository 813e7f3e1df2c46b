// SPDX-License-Identifier: GPL-2.0-only
//
// The KFD sysfs topology parser, on an in-memory tree. The input is a
// sequence of files, each "<path>\0<contents>\0" with paths relative to the
// topology directory (e.g. "nodes/1/properties"); directories are implied
// by the paths. parse_topology must not crash, and what it accepts must be
// describable and have consistent lookups.
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>

#include "fuzz_common.h"
#include "topology/topology.h"

namespace {

constexpr const char *kRoot = "/fuzz";

class MemoryFs final : public amdcr::TopologyFs {
public:
	explicit MemoryFs(std::string_view in)
	{
		const std::string base = amdcr::topology_dir(kRoot) + "/";
		size_t pos = 0;
		while (pos < in.size()) {
			const size_t a = in.find('\0', pos);
			if (a == std::string_view::npos)
				break;
			size_t b = in.find('\0', a + 1);
			if (b == std::string_view::npos)
				b = in.size();
			files_[base + std::string(in.substr(pos, a - pos))] = std::string(in.substr(a + 1, b - a - 1));
			pos = b + 1;
		}
	}

	amdcr::Result<std::string> read_file(const std::string &path) const override
	{
		auto it = files_.find(path);
		if (it == files_.end())
			return amdcr::make_error(ENOENT, "%s: no such file", path.c_str());
		return it->second;
	}

	amdcr::Result<std::vector<DirEntry>> list_dir(const std::string &path) const override
	{
		const std::string prefix = path + "/";
		std::set<std::string> dirs, files;
		for (auto it = files_.lower_bound(prefix); it != files_.end() && it->first.starts_with(prefix); ++it) {
			const std::string rest = it->first.substr(prefix.size());
			const size_t slash = rest.find('/');
			if (slash == std::string::npos)
				files.insert(rest);
			else
				dirs.insert(rest.substr(0, slash));
		}
		if (dirs.empty() && files.empty())
			return amdcr::make_error(ENOENT, "%s: no such directory", path.c_str());
		std::vector<DirEntry> out;
		for (const auto &d : dirs)
			out.push_back({d, true});
		for (const auto &f : files)
			if (!dirs.count(f))
				out.push_back({f, false});
		return out;
	}

private:
	std::map<std::string, std::string> files_;
};

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	using namespace amdcr;
	const MemoryFs fs(std::string_view(reinterpret_cast<const char *>(data), size));
	auto topo = parse_topology(kRoot, fs);
	if (!topo)
		return 0;
	(void)describe_topology(*topo);
	for (const TopologyNode *g : topo->gpus()) {
		fuzz::require(g->is_gpu, "gpus() holds GPU nodes");
		if (g->gpu_id != 0)
			fuzz::require(topo->gpu(g->gpu_id) != nullptr, "a GPU is found by its gpu_id");
		(void)topo->cpu_nodes_of_gpu(g->gpu_id);
	}
	for (const auto &hive : topo->hives())
		fuzz::require(hive.size() >= 2, "a hive has at least two GPUs");
	return 0;
}
