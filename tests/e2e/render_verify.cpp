// SPDX-License-Identifier: GPL-2.0-only
//
// The verifier criu-host runs inside a task restored from a render-node
// process (kfdemu_criu_workload --render; tests/e2e/render_e2e.py):
//
//   criu-host restore ... --verifier librender_verify.so:verify_render
//                         --verifier-arg DIR/render
//
// DIR/render, written by the workload before its dump: "fd N" (its render
// node fd) and per GPU mapping "gem HANDLE CPU SIZE SEED VA". In the
// restored task, through the raw uapi (not the plugin's code): fd N is a
// render node whose handle list has each HANDLE with SIZE; each HANDLE's
// GET_MAPPING_INFO has VA (SIZE bytes from offset 0); where CPU is not 0,
// the pattern of SEED is readable at CPU (the mapping the restore moved to
// the new BO's mmap offset). Several "fd N" lines (--second-file): each
// starts the BOs of another open file of the node; each file's handle
// list then holds exactly its own BOs, and the fds are distinct open files
// (kcmp), not one file under two numbers. Optional lines "emu KFD_EMU" and "sum HANDLE
// CHECKSUM" (tests/e2e/integrity.py adds them: the emulator's checksum of
// each BO's contents before the dump) check the contents of every BO,
// those the CPU cannot map too, against the emulator's checksum of this
// task's BO (`KFD_EMU ctl files <pid>`). Returns 0 when everything holds;
// prints what does not.
#include <linux/kcmp.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "drm_uapi.h"
#include "testcommon/pattern.h"

namespace {

using namespace e2e_drm;

struct Gem {
	uint32_t handle;
	uint64_t cpu, size, seed, va;
};

int failures = 0;

// The emulator's checksum ("0x...") of GEM handle `handle` of a render file
// this process opened, from `emu ctl files <pid>`; "" when not found.
std::string emulated_checksum(const std::string &emu, uint32_t handle)
{
	const std::string cmd = emu + " ctl files " + std::to_string(::getpid());
	FILE *p = ::popen(cmd.c_str(), "r");
	if (!p)
		return "";
	std::string out;
	char buf[4096];
	for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;)
		out.append(buf, n);
	::pclose(p);
	const size_t at = out.find("{\"handle\":" + std::to_string(handle) + ",");
	const size_t sum = at == std::string::npos ? at : out.find("\"checksum\":\"", at);
	if (sum == std::string::npos)
		return "";
	const size_t start = sum + 12, end = out.find('"', start);
	return end == std::string::npos ? "" : out.substr(start, end - start);
}

void fail(const std::string &what)
{
	std::fprintf(stderr, "render verify: %s\n", what.c_str());
	failures++;
}

// The handles, VAs and contents of one file's BOs (see the header).
void check_file(int fd, const std::vector<Gem> &gems);

} // namespace

extern "C" __attribute__((visibility("default"))) int verify_render(const char *arg)
{
	std::ifstream in(arg);
	if (!in) {
		fail(std::string("cannot read ") + arg);
		return 1;
	}
	// One per "fd" line: the fd and the BO mappings listed after it.
	std::vector<std::pair<int, std::vector<Gem>>> files;
	std::string emu;
	std::vector<std::pair<uint32_t, std::string>> sums;
	std::string line;
	while (std::getline(in, line)) {
		std::istringstream l(line);
		std::string kind;
		l >> kind;
		if (kind == "fd") {
			files.emplace_back(-1, std::vector<Gem>{});
			l >> files.back().first;
		} else if (kind == "gem" && !files.empty()) {
			Gem g{};
			l >> g.handle >> g.cpu >> g.size >> g.seed >> g.va;
			files.back().second.push_back(g);
		} else if (kind == "emu") {
			l >> emu;
		} else if (kind == "sum") {
			std::pair<uint32_t, std::string> s;
			l >> s.first >> s.second;
			sums.push_back(s);
		}
	}
	if (files.empty()) {
		fail(std::string("no fd or BOs in ") + arg);
		return 1;
	}
	for (size_t i = 1; i < files.size(); i++)
		if (::syscall(SYS_kcmp, getpid(), getpid(), KCMP_FILE, files[0].first, files[i].first) == 0)
			fail("fds " + std::to_string(files[0].first) + " and " + std::to_string(files[i].first) +
			     " are one open file: the restore merged two files of the render node");
	size_t checked = 0;
	for (const auto &[fd, gems] : files) {
		check_file(fd, gems);
		checked += gems.size();
	}
	for (const auto &[handle, want] : sums) {
		const std::string got = emulated_checksum(emu, handle);
		if (got != want)
			fail("BO handle " + std::to_string(handle) + ": contents checksum " +
			     (got.empty() ? std::string("not found") : got) + ", before the dump " + want);
	}
	std::fprintf(stderr, "render verify: %zu file(s), %zu BO mappings and %zu BO checksums checked, %d failure(s)\n",
		     files.size(), checked, sums.size(), failures);
	return failures ? 1 : 0;
}

namespace {

void check_file(int fd, const std::vector<Gem> &gems)
{
	if (fd < 0 || gems.empty()) {
		fail("an fd line without BOs");
		return;
	}
	std::vector<ListEntry> list(64);
	ListHandles lh{reinterpret_cast<uintptr_t>(list.data()), uint32_t(list.size()), 0};
	if (::ioctl(fd, kListHandles, &lh) != 0 || lh.num_entries > list.size()) {
		fail("GEM_LIST_HANDLES on fd " + std::to_string(fd) + ": " + std::strerror(errno));
		return;
	}
	list.resize(lh.num_entries);
	std::vector<uint32_t> handles;
	for (const Gem &g : gems)
		if (std::find(handles.begin(), handles.end(), g.handle) == handles.end())
			handles.push_back(g.handle);
	if (list.size() != handles.size())
		fail("fd " + std::to_string(fd) + " holds " + std::to_string(list.size()) + " BOs, its own are " +
		     std::to_string(handles.size()));
	for (const Gem &g : gems) {
		const std::string bo = "BO handle " + std::to_string(g.handle);
		bool listed = false;
		for (const auto &e : list)
			listed |= e.gem_handle == g.handle && e.size == g.size;
		if (!listed) {
			fail(bo + ": not in the handle list with " + std::to_string(g.size) + " bytes");
			continue;
		}
		std::vector<VmEntry> vms(16);
		GemOp op{g.handle, kGetMappingInfo, reinterpret_cast<uintptr_t>(vms.data()), uint32_t(vms.size()), 0};
		if (::ioctl(fd, kGemOp, &op) != 0 || op.num_entries > vms.size()) {
			fail(bo + ": GET_MAPPING_INFO: " + std::strerror(errno));
			continue;
		}
		bool mapped = false;
		for (uint32_t i = 0; i < op.num_entries; i++)
			mapped |= vms[i].addr == g.va && vms[i].size == g.size && vms[i].offset == 0;
		if (!mapped) {
			char m[96];
			std::snprintf(m, sizeof m, ": not mapped at GPU VA 0x%" PRIx64, g.va);
			fail(bo + m);
		}
		if (g.cpu) {
			const int64_t at = testcommon::check_pattern(reinterpret_cast<const void *>(uintptr_t(g.cpu)),
								     g.size & ~uint64_t(7), g.seed);
			if (at >= 0)
				fail(bo + ": word " + std::to_string(at / 8) + " through its CPU mapping differs");
		}
	}
}

} // namespace
