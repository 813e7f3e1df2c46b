// SPDX-License-Identifier: GPL-2.0-only
//
// libkfdemu_shim.so: /proc/<pid>/{maps,smaps,map_files} of the process's
// device mappings, presented as the kernel shows a real GPU's. See shim.h.
#include "shim.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace kfdemu::shim {

// ---------------------------------------------------------------------------
// /proc/<pid>/{maps,smaps,map_files}: device mappings as the kernel shows them.
// ---------------------------------------------------------------------------
//
// The kernel sees a device mapping as a mapping of the model's memfd at the
// memfd's offset. A real GPU's shows the device path, the mmap offset the
// program passed and the device node's dev/inode; a dumper (CRIU) decides
// by that what the mapping is and which plugin gets it. So /proc/<pid>/maps
// and smaps are presented with the daemon's records (`vmas <pid>`) laid over
// the kernel's lines, and /proc/<pid>/map_files/<range> of a device mapping
// opens the root's device node (fstat reports the device, readlink its path).

namespace {

struct DevVma {
	uint64_t start = 0, end = 0, pgoff = 0;
	std::string path;
};

// The daemon's records of `pid`'s /dev/kfd and render-node mappings, by
// start address. dma-buf mappings are left as the kernel shows them.
std::vector<DevVma> device_vmas(pid_t pid)
{
	std::vector<DevVma> out;
	wire::Request rq{};
	rq.op = wire::Op::Introspect;
	Response r;
	if (call(rq, "vmas " + std::to_string(pid), &r) || r.rp.result < 0)
		return out;
	REAL(close, int (*)(int));
	for (int f : r.fds)
		real_close(f);
	// {"pid":N,"vmas":[{"start":S,"end":E,"pgoff":O,"prot":"rw-","path":"P"..},..]}
	const std::string &js = r.payload;
	for (size_t pos = js.find("{\"start\":"); pos != std::string::npos; pos = js.find("{\"start\":", pos + 1)) {
		unsigned long long st = 0, en = 0, off = 0;
		if (std::sscanf(js.c_str() + pos, "{\"start\":%llu,\"end\":%llu,\"pgoff\":%llu", &st, &en, &off) != 3)
			continue;
		const size_t p = js.find("\"path\":\"", pos);
		const size_t q = p == std::string::npos ? p : js.find('"', p + 8);
		if (q == std::string::npos)
			continue;
		DevVma v{st, en, off, js.substr(p + 8, q - p - 8)};
		const Dev kind = device_path(v.path).kind;
		if (kind == Dev::Kfd || kind == Dev::Render)
			out.push_back(std::move(v));
	}
	std::sort(out.begin(), out.end(), [](const DevVma &a, const DevVma &b) { return a.start < b.start; });
	return out;
}

// A device node of a process in a container (another mount namespace than
// the launcher's): the node in the container's own /dev, which the kernel
// would name for its device mappings (dev, inode, mount). nullopt: the
// process has the host view, or its /dev has no such character device.
std::optional<struct stat> container_node(pid_t pid, const std::string &path)
{
	const Config &c = config();
	if (c.host_mntns == 0)
		return std::nullopt;
	REAL(stat, int (*)(const char *, struct stat *));
	const std::string proc = "/proc/" + std::to_string(pid);
	struct stat st;
	if (real_stat((proc + "/ns/mnt").c_str(), &st) != 0 || st.st_ino == c.host_mntns)
		return std::nullopt;
	if (real_stat((proc + "/root" + path).c_str(), &st) != 0 || !S_ISCHR(st.st_mode))
		return std::nullopt;
	return st;
}

ino_t node_ino(const std::string &path)
{
	for (const auto &[ino, p] : config().nodes)
		if (p == path)
			return ino;
	return 0;
}

// One maps line in the kernel's format (show_map_vma: the path padded to
// column 73).
std::string maps_line(uint64_t start, uint64_t end, std::string_view perms, uint64_t off, unsigned maj,
		      unsigned min, uint64_t ino, std::string_view path)
{
	char head[160];
	int n = std::snprintf(head, sizeof head, "%08llx-%08llx %.*s %08llx %02x:%02x %llu ",
			      (unsigned long long)start, (unsigned long long)end, int(perms.size()), perms.data(),
			      (unsigned long long)off, maj, min, (unsigned long long)ino);
	std::string l(head, size_t(std::max(n, 0)));
	if (!path.empty()) {
		if (l.size() < 73)
			l.resize(73, ' ');
		l += path;
	}
	return l + "\n";
}

// The text of /proc/<pid>/maps or smaps with `vmas` laid over it: a kernel
// VMA is cut where device records begin and end (the kernel merges adjacent
// mappings of one memfd), each piece keeps the VMA's other lines (smaps).
std::string present_maps(const std::string &text, const std::vector<DevVma> &vmas, pid_t pid)
{
	std::string out;
	size_t i = 0;
	while (i < text.size()) {
		size_t eol = text.find('\n', i);
		if (eol == std::string::npos)
			eol = text.size();
		const std::string line = text.substr(i, eol - i);
		i = eol + 1;
		unsigned long long s = 0, e = 0, off = 0, ino = 0;
		unsigned maj = 0, min = 0;
		char perms[8] = {};
		int path_at = 0;
		if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %x:%x %llu %n", &s, &e, perms, &off, &maj, &min,
				&ino, &path_at) < 7) {
			out += line + "\n";
			continue;
		}
		// The VMA's other lines (smaps): up to the next header.
		std::string body;
		while (i < text.size()) {
			size_t nl = text.find('\n', i);
			if (nl == std::string::npos)
				nl = text.size();
			unsigned long long a = 0, b = 0;
			char c = 0;
			if (std::sscanf(text.c_str() + i, "%llx-%llx%c", &a, &b, &c) == 3 && c == ' ')
				break;
			body.append(text, i, nl - i).append("\n");
			i = nl + 1;
		}
		const std::string_view path = path_at > 0 ? std::string_view(line).substr(size_t(path_at)) : "";
		uint64_t cur = s;
		for (const DevVma &v : vmas) {
			if (v.end <= cur || v.start >= e)
				continue;
			if (v.start > cur) {
				out += maps_line(cur, v.start, perms, off + (cur - s), maj, min, ino, path) + body;
				cur = v.start;
			}
			const uint64_t pe = std::min<uint64_t>(e, v.end);
			// fake_chr's st_dev (0:5) and the root node's inode; in a
			// container, its own node's.
			if (auto cn = container_node(pid, v.path))
				out += maps_line(cur, pe, perms, v.pgoff + (cur - v.start), major(cn->st_dev),
						 minor(cn->st_dev), cn->st_ino, v.path) + body;
			else
				out += maps_line(cur, pe, perms, v.pgoff + (cur - v.start), 0, 5, node_ino(v.path),
						 v.path) + body;
			cur = pe;
		}
		if (cur < e)
			out += maps_line(cur, e, perms, off + (cur - s), maj, min, ino, path) + body;
	}
	return out;
}

} // namespace

// open() of /proc/<pid>/{maps,smaps,map_files/..}: an fd, -1 (errno), or
// nullopt when the kernel's file is the answer (no device mapping involved).
// nullopt and not a reserved number: the fd opened may be any, 0 or 1 too.
std::optional<int> open_proc(const ProcPath &pp, int flags)
{
	if (pp.kind == ProcPath::None || ((flags & O_ACCMODE) != O_RDONLY && !(flags & O_PATH)))
		return std::nullopt;
	const std::vector<DevVma> vmas = device_vmas(pp.pid);
	if (vmas.empty())
		return std::nullopt;
	REAL(open, OpenFn);
	REAL(read, ssize_t (*)(int, void *, size_t));
	REAL(close, int (*)(int));
	if (pp.kind == ProcPath::MapFile) {
		for (const DevVma &v : vmas) {
			if (v.start > pp.start || pp.end > v.end)
				continue;
			// In a container: its own node, as a path only (no
			// driver behind the emulated numbers), on its /dev mount.
			if (container_node(pp.pid, v.path))
				return real_open(("/proc/" + std::to_string(pp.pid) + "/root" + v.path).c_str(),
						 O_PATH | (flags & (O_CLOEXEC | O_NOFOLLOW)));
			return real_open((config().root + v.path).c_str(),
					 flags & (O_ACCMODE | O_PATH | O_CLOEXEC | O_NOFOLLOW));
		}
		return std::nullopt;
	}
	const std::string src = "/proc/" + std::to_string(pp.pid) + (pp.kind == ProcPath::Maps ? "/maps" : "/smaps");
	int fd = real_open(src.c_str(), O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	std::string text;
	char buf[8192];
	ssize_t n;
	while ((n = real_read(fd, buf, sizeof buf)) > 0)
		text.append(buf, size_t(n));
	real_close(fd);
	if (n < 0)
		return -1;
	const std::string shown = present_maps(text, vmas, pp.pid);
	int m = ::memfd_create("kfdemu-maps", (flags & O_CLOEXEC) ? MFD_CLOEXEC : 0);
	if (m < 0)
		return -1;
	for (size_t done = 0; done < shown.size();) {
		ssize_t w = ::write(m, shown.data() + done, shown.size() - done);
		if (w <= 0) {
			const int e = errno;
			real_close(m);
			return fail(w < 0 ? e : EIO);
		}
		done += size_t(w);
	}
	::lseek(m, 0, SEEK_SET);
	return m;
}

// readlink() of /proc/<pid>/map_files/<range> of a device mapping.
std::optional<std::string> map_file_link(const std::string &p)
{
	const ProcPath pp = proc_path(p);
	if (pp.kind != ProcPath::MapFile)
		return std::nullopt;
	for (const DevVma &v : device_vmas(pp.pid))
		if (v.start <= pp.start && pp.end <= v.end)
			return v.path;
	return std::nullopt;
}

} // namespace kfdemu::shim
