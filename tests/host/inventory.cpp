// SPDX-License-Identifier: GPL-2.0-only
#include "inventory.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdlib>
#include <map>
#include <sstream>

#include "base/file_io.h"

namespace host {
namespace {

using Fields = std::map<std::string, std::string>;

// "type k=v k=v ... path=rest of line"
Fields split(const std::string &line, std::string &type)
{
	Fields f;
	size_t pos = line.find(' ');
	type = line.substr(0, pos);
	while (pos != std::string::npos) {
		const size_t start = pos + 1;
		const size_t eq = line.find('=', start);
		if (eq == std::string::npos)
			break;
		const std::string key = line.substr(start, eq - start);
		if (key == "path") {
			f[key] = line.substr(eq + 1);
			break;
		}
		pos = line.find(' ', eq);
		f[key] = line.substr(eq + 1, pos == std::string::npos ? std::string::npos : pos - eq - 1);
	}
	return f;
}

uint64_t num(const Fields &f, const char *key)
{
	auto it = f.find(key);
	return it == f.end() ? 0 : std::strtoull(it->second.c_str(), nullptr, 0);
}

int64_t snum(const Fields &f, const char *key)
{
	auto it = f.find(key);
	return it == f.end() ? 0 : std::strtoll(it->second.c_str(), nullptr, 0);
}

std::string str(const Fields &f, const char *key)
{
	auto it = f.find(key);
	return it == f.end() ? std::string() : it->second;
}

} // namespace

TaskRecord *Inventory::task(pid_t pid)
{
	for (TaskRecord &t : tasks)
		if (t.pid == pid)
			return &t;
	return nullptr;
}

amdcr::Status write_inventory(int dirfd, const Inventory &inv)
{
	std::ostringstream o;
	o << "criu-host-inventory 1\n";
	o << "root pid=" << inv.root << "\n";
	for (const std::string &p : inv.plugins)
		o << "plugin name=" << p << "\n";
	char buf[256];
	for (const TaskRecord &t : inv.tasks) {
		o << "task pid=" << t.pid << " ppid=" << t.ppid << "\n";
		for (const FdRecord &f : t.fds) {
			std::snprintf(buf, sizeof(buf),
				      "fd task=%d fd=%d id=%d kind=%s flags=0%o cloexec=%d pos=%" PRId64
				      " path=",
				      t.pid, f.fd, f.id, f.kind.c_str(), f.flags, f.cloexec ? 1 : 0,
				      f.pos);
			o << buf << f.path << "\n";
		}
		for (const VmaRecord &v : t.vmas) {
			std::snprintf(buf, sizeof(buf),
				      "vma task=%d start=0x%" PRIx64 " end=0x%" PRIx64
				      " prot=%d flags=0x%x pgoff=0x%" PRIx64 " path=",
				      t.pid, v.start, v.end, v.prot, v.flags, v.pgoff);
			o << buf << v.path << "\n";
		}
	}
	const std::string text = o.str();
	const std::string tmp = std::string(kInventoryName) + ".tmp";
	auto fd = amdcr::open_at(dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (!fd)
		return std::move(fd).error();
	if (auto st = amdcr::write_full(fd->get(), text.data(), text.size()); !st)
		return st;
	if (fsync(fd->get()) < 0)
		return amdcr::errno_error(errno, "fsync inventory");
	if (renameat(dirfd, tmp.c_str(), dirfd, kInventoryName) < 0)
		return amdcr::errno_error(errno, "rename inventory");
	return amdcr::ok_status();
}

amdcr::Result<Inventory> read_inventory(int dirfd)
{
	auto text = amdcr::read_text_file(dirfd, kInventoryName, 64 << 20);
	if (!text)
		return std::move(text).error();
	Inventory inv;
	std::istringstream in(*text);
	std::string line;
	bool header = false;
	while (std::getline(in, line)) {
		if (line.empty())
			continue;
		if (!header) {
			if (line != "criu-host-inventory 1")
				return amdcr::make_error(EINVAL, "not a criu-host inventory (v1)");
			header = true;
			continue;
		}
		std::string type;
		const Fields f = split(line, type);
		if (type == "root") {
			inv.root = static_cast<pid_t>(num(f, "pid"));
		} else if (type == "plugin") {
			inv.plugins.push_back(str(f, "name"));
		} else if (type == "task") {
			TaskRecord t;
			t.pid = static_cast<pid_t>(num(f, "pid"));
			t.ppid = static_cast<pid_t>(num(f, "ppid"));
			inv.tasks.push_back(std::move(t));
		} else if (type == "fd" || type == "vma") {
			TaskRecord *t = inv.task(static_cast<pid_t>(num(f, "task")));
			if (!t)
				return amdcr::make_error(EINVAL, "inventory: %s of unknown task", type.c_str());
			if (type == "fd") {
				FdRecord r;
				r.fd = static_cast<int>(num(f, "fd"));
				r.id = static_cast<int>(num(f, "id"));
				r.kind = str(f, "kind");
				r.flags = static_cast<unsigned>(num(f, "flags"));
				r.cloexec = num(f, "cloexec") != 0;
				r.pos = snum(f, "pos");
				r.path = str(f, "path");
				t->fds.push_back(std::move(r));
			} else {
				VmaRecord r;
				r.start = num(f, "start");
				r.end = num(f, "end");
				r.prot = static_cast<int>(num(f, "prot"));
				r.flags = static_cast<int>(num(f, "flags"));
				r.pgoff = num(f, "pgoff");
				r.path = str(f, "path");
				t->vmas.push_back(std::move(r));
			}
		} else {
			return amdcr::make_error(EINVAL, "inventory: unknown record '%s'", type.c_str());
		}
	}
	if (!header || inv.tasks.empty())
		return amdcr::make_error(EINVAL, "inventory has no tasks");
	return inv;
}

} // namespace host
