// SPDX-License-Identifier: GPL-2.0-only
//
// The restored task's verifier, run by `criu-host restore --verifier
// libgpu_verify.so:verify_gpu_state --verifier-arg MANIFEST[,KFD_EMU]`.
//
// MANIFEST is the workload's manifest path; in a process tree each process
// wrote MANIFEST or MANIFEST.<k>, and the verifier picks the one whose BOs
// this task holds. It checks, in the restored task itself:
//  - every BO holds its pattern at its old CPU address, which the restore
//    mapped again through the plugin's new offsets;
//  - with KFD_EMU (the emulator's launcher): the emulator reports this
//    process's queues running (RESUME happened) and a KFD BO at every old
//    GPU VA (a GEM BO's VA is not its CPU address: only its contents are
//    checked here).
#include <glob.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gpu_workload.h"
#include "testcommon/pattern.h"

namespace {

struct Range {
	uint64_t start, end;
};

std::vector<Range> self_maps()
{
	std::vector<Range> out;
	FILE *f = std::fopen("/proc/self/maps", "r");
	if (!f)
		return out;
	unsigned long long s, e;
	char line[512];
	while (std::fgets(line, sizeof(line), f))
		if (std::sscanf(line, "%llx-%llx", &s, &e) == 2)
			out.push_back({s, e});
	std::fclose(f);
	return out;
}

bool mapped(const std::vector<Range> &maps, uint64_t addr, uint64_t size)
{
	uint64_t at = addr;
	const uint64_t end = addr + size;
	bool progress = true;
	while (at < end && progress) {
		progress = false;
		for (const auto &r : maps)
			if (r.start <= at && at < r.end) {
				at = r.end;
				progress = true;
			}
	}
	return at >= end;
}

std::string run(const std::string &cmd)
{
	std::string out;
	FILE *p = ::popen(cmd.c_str(), "r");
	if (!p)
		return out;
	char buf[4096];
	size_t n;
	while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0)
		out.append(buf, n);
	::pclose(p);
	return out;
}

} // namespace

extern "C" __attribute__((visibility("default"))) int verify_gpu_state(const char *arg)
{
	std::string a = arg ? arg : "";
	std::string ctl;
	if (auto comma = a.find(','); comma != std::string::npos) {
		ctl = a.substr(comma + 1);
		a.resize(comma);
	}
	std::vector<std::string> candidates{a};
	glob_t g{};
	if (::glob((a + ".*").c_str(), 0, nullptr, &g) == 0)
		for (size_t i = 0; i < g.gl_pathc; i++)
			candidates.emplace_back(g.gl_pathv[i]);
	::globfree(&g);

	const auto maps = self_maps();
	const e2e::Manifest *mine = nullptr;
	std::vector<e2e::Manifest> manifests(candidates.size());
	for (size_t i = 0; i < candidates.size(); i++) {
		if (!e2e::read_manifest(candidates[i], &manifests[i]) || manifests[i].bos.empty())
			continue;
		bool all = true;
		for (const auto &b : manifests[i].bos)
			all = all && mapped(maps, b.addr, b.fill);
		bool pattern = all && testcommon::check_pattern(reinterpret_cast<const void *>(manifests[i].bos[0].addr),
							 manifests[i].bos[0].fill, manifests[i].bos[0].seed) < 0;
		if (pattern) {
			mine = &manifests[i];
			break;
		}
	}
	if (!mine) {
		std::fprintf(stderr, "verify[%d]: no manifest of %s matches this task's mapped memory\n", getpid(),
			     a.c_str());
		std::fflush(stderr);
		return 1;
	}
	int bad = 0;
	for (const auto &b : mine->bos) {
		const int64_t at = testcommon::check_pattern(reinterpret_cast<const void *>(b.addr), b.fill, b.seed);
		if (at >= 0) {
			std::fprintf(stderr, "verify[%d]: BO at %#llx (%llu bytes, %s): first bad byte at offset %lld\n",
				     getpid(), static_cast<unsigned long long>(b.addr),
				     static_cast<unsigned long long>(b.size), b.vram ? "vram" : "gtt",
				     static_cast<long long>(at));
			bad++;
		}
	}
	std::printf("verify[%d]: %zu BOs checked through their restored CPU mappings, %d bad\n", getpid(),
		    mine->bos.size(), bad);
	if (!ctl.empty()) {
		const std::string pid = std::to_string(getpid());
		const std::string queues = run(ctl + " ctl queues " + pid);
		if (queues.find("\"state\":\"active\"") == std::string::npos) {
			std::fprintf(stderr, "verify[%d]: queues not running after resume: %s\n", getpid(),
				     queues.c_str());
			bad++;
		}
		const std::string bos = run(ctl + " ctl bos " + pid);
		int missing = 0;
		for (const auto &b : mine->bos)
			if (!b.gem && bos.find("\"va\":" + std::to_string(b.addr) + ",") == std::string::npos)
				missing++;
		if (missing) {
			std::fprintf(stderr, "verify[%d]: %d BOs are not at their old GPU VA: %s\n", getpid(), missing,
				     bos.substr(0, 2000).c_str());
			bad++;
		} else {
			std::printf("verify[%d]: emulator: queues running, every KFD BO at its old GPU VA\n", getpid());
		}
	}
	std::fflush(stdout);
	std::fflush(stderr);
	return bad ? 1 : 0;
}
