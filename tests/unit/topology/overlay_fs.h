// SPDX-License-Identifier: GPL-2.0-only
// Test helper: the real file system with per-path overrides (replacement
// contents or an errno), to produce what a fixture tree on disk cannot
// (EPERM from a device cgroup, values out of range, ...).
#pragma once

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "topology/topology.h"

namespace amdcr::test {

inline std::string fixture_root(const std::string &name)
{
	return std::string(AMDCR_SOURCE_DIR) + "/tests/fixtures/topology/" + name;
}

inline std::string node_path(const std::string &fixture, unsigned node, const std::string &rest)
{
	return topology_dir(fixture_root(fixture)) + "/nodes/" + std::to_string(node) + "/" + rest;
}

class OverlayFs final : public TopologyFs {
public:
	// Every read or listing of `path_prefix` (a file or a whole directory)
	// fails with `err`.
	void fail(const std::string &path_prefix, int err) { errors_[path_prefix] = err; }
	// Reading `path` returns `text`.
	void replace(const std::string &path, std::string text) { contents_[path] = std::move(text); }
	// Listing the directory `path` gives its entries in the reverse of
	// the disk's order (readdir order differs between file systems).
	void reverse_listing(const std::string &path) { reversed_.insert(path); }

	Result<std::string> read_file(const std::string &path) const override
	{
		if (int err = error_for(path))
			return errno_error(err, "read " + path);
		if (auto it = contents_.find(path); it != contents_.end())
			return it->second;
		return disk_topology_fs().read_file(path);
	}

	Result<std::vector<DirEntry>> list_dir(const std::string &path) const override
	{
		if (int err = error_for(path))
			return errno_error(err, "opendir " + path);
		auto entries = disk_topology_fs().list_dir(path);
		if (entries && reversed_.contains(path))
			std::reverse(entries->begin(), entries->end());
		return entries;
	}

private:
	int error_for(const std::string &path) const
	{
		for (const auto &[prefix, err] : errors_)
			if (path == prefix || (path.size() > prefix.size() && path.compare(0, prefix.size(), prefix) == 0 &&
					       path[prefix.size()] == '/'))
				return err;
		return 0;
	}

	std::map<std::string, int> errors_;
	std::map<std::string, std::string> contents_;
	std::set<std::string> reversed_;
};

} // namespace amdcr::test
