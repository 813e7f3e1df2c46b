// SPDX-License-Identifier: GPL-2.0-only
#include "devices.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "api.h"
#include "base/unique_fd.h"
#include "json.h"
#include "proc.h"

namespace host {
namespace {

const dev_t kDevZero = makedev(1, 5);

// $CRIU_HOST_KFDEMU, else the launcher of this build tree
// (build/tests/emulator/kfd-emu beside build/tests/host/criu-host), else
// kfd-emu from PATH.
std::string kfdemu_command()
{
	if (const char *c = std::getenv("CRIU_HOST_KFDEMU"); c && *c)
		return c;
	char self[4096];
	const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0) {
		std::string dir(self, static_cast<size_t>(n));
		dir.erase(dir.rfind('/'));
		const std::string sibling = dir + "/../emulator/kfd-emu";
		if (access(sibling.c_str(), X_OK) == 0)
			return sibling;
	}
	return "kfd-emu";
}

// The entries of a `kfd-emu ctl <what> <pid>` answer: a JSON array, or an
// object holding it under `what`.
amdcr::Result<std::vector<json::Value>> ctl_query(const char *what, pid_t pid)
{
	const std::string cmd = std::string("kfd-emu ctl ") + what;
	auto out = run_capture({kfdemu_command(), "ctl", what, std::to_string(pid)});
	if (!out)
		return std::move(out).error().context(cmd);
	auto doc = json::parse(*out);
	if (!doc)
		return std::move(doc).error().context(cmd);
	if (doc->type == json::Value::Type::Array)
		return std::move(doc->items);
	if (doc->type == json::Value::Type::Object) {
		if (const json::Value *list = doc->get(what);
		    list && list->type == json::Value::Type::Array)
			return list->items;
		if (const json::Value *err = doc->get("error"))
			return amdcr::make_error(EINVAL, "%s: %s", cmd.c_str(), err->text.c_str());
	}
	return amdcr::make_error(EINVAL, "%s: no list in the answer", cmd.c_str());
}

int parse_prot(const json::Value *v)
{
	if (!v)
		return PROT_READ | PROT_WRITE;
	if (auto n = v->as_u64())
		return static_cast<int>(*n);
	int prot = 0;
	for (char c : v->text) {
		if (c == 'r')
			prot |= PROT_READ;
		else if (c == 'w')
			prot |= PROT_WRITE;
		else if (c == 'x')
			prot |= PROT_EXEC;
	}
	return prot;
}

amdcr::Result<std::vector<DeviceVma>> emulated_vmas(pid_t pid)
{
	auto items = ctl_query("vmas", pid);
	if (!items)
		return std::move(items).error();
	auto kernel = read_maps(pid);
	std::vector<DeviceVma> out;
	for (const json::Value &item : *items) {
		const json::Value *start = item.get("start"), *end = item.get("end"),
				  *path = item.get("path");
		if (!start || !end || !path || !start->as_u64() || !end->as_u64() ||
		    path->type != json::Value::Type::String)
			return amdcr::make_error(EINVAL, "kfd-emu ctl vmas: entry without start/end/path");
		DeviceVma v;
		v.start = *start->as_u64();
		v.end = *end->as_u64();
		v.path = path->text;
		if (const json::Value *off = item.get("pgoff"); off && off->as_u64())
			v.pgoff = *off->as_u64();
		v.prot = parse_prot(item.get("prot"));
		v.flags = MAP_SHARED;
		bool flags_known = false;
		if (const json::Value *f = item.get("flags"); f && f->type == json::Value::Type::String) {
			v.flags = f->text == "private" ? MAP_PRIVATE : MAP_SHARED;
			flags_known = true;
		}
		if (!flags_known && kernel) {
			for (const MapEntry &m : *kernel)
				if (m.start == v.start)
					v.flags = m.flags;
		}
		out.push_back(std::move(v));
	}
	std::sort(out.begin(), out.end(),
		  [](const DeviceVma &a, const DeviceVma &b) { return a.start < b.start; });
	if (kernel) {
		// Walk the kernel's lines: a device mapping's identity is its
		// device path, any other line's its dev:ino.
		std::string prev;
		for (const MapEntry &m : *kernel) {
			std::string id = "file " + std::to_string(m.dev_major) + ":" +
					 std::to_string(m.dev_minor) + ":" + std::to_string(m.ino);
			for (DeviceVma &v : out) {
				if (v.start != m.start)
					continue;
				id = "device " + v.path;
				v.borrowed = id == prev;
			}
			prev = m.ino ? id : std::string();
		}
	}
	return out;
}

amdcr::Result<std::vector<DeviceVma>> kernel_vmas(pid_t pid)
{
	auto maps = read_maps(pid);
	if (!maps)
		return std::move(maps).error();
	std::vector<DeviceVma> out;
	const MapEntry *prev = nullptr;
	for (const MapEntry &m : *maps) {
		const bool same_as_prev = prev && prev->ino == m.ino && prev->dev_major == m.dev_major &&
					  prev->dev_minor == m.dev_minor;
		prev = &m;
		if (m.ino == 0 || m.path.empty() || m.path[0] == '[')
			continue;
		// stat() through map_files: the mapped inode itself, without
		// opening it (a device's open() has side effects).
		char name[64];
		std::snprintf(name, sizeof(name), "/proc/%d/map_files/%llx-%llx", pid,
			      static_cast<unsigned long long>(m.start),
			      static_cast<unsigned long long>(m.end));
		struct stat st;
		if (stat(name, &st) < 0) {
			// Without map_files access, trust the path.
			if (stat(m.path.c_str(), &st) < 0)
				continue;
		}
		if (!S_ISCHR(st.st_mode) || st.st_rdev == kDevZero)
			continue;
		out.push_back(DeviceVma{m.start, m.end, m.pgoff, m.prot, m.flags, m.path, same_as_prev});
	}
	return out;
}

} // namespace

bool emulated()
{
	const char *s = std::getenv("KFDEMU_SOCKET");
	return s && *s;
}

amdcr::Result<std::vector<DeviceVma>> device_vmas(pid_t pid)
{
	return emulated() ? emulated_vmas(pid) : kernel_vmas(pid);
}

amdcr::Result<std::string> run_capture(const std::vector<std::string> &argv)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return amdcr::errno_error(errno, "pipe");
	amdcr::UniqueFd rd(p[0]), wr(p[1]);
	const pid_t child = fork();
	if (child < 0)
		return amdcr::errno_error(errno, "fork");
	if (child == 0) {
		dup2(wr.get(), 1);
		std::vector<char *> args;
		for (const std::string &a : argv)
			args.push_back(const_cast<char *>(a.c_str()));
		args.push_back(nullptr);
		execvp(args[0], args.data());
		_exit(127);
	}
	wr.reset();
	std::string out;
	char buf[4096];
	for (;;) {
		const ssize_t n = read(rd.get(), buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		out.append(buf, static_cast<size_t>(n));
	}
	int status = 0;
	while (waitpid(child, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return amdcr::make_error(EIO, "%s exited with status %d", argv[0].c_str(),
					 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	return out;
}

} // namespace host
