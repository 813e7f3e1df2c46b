// SPDX-License-Identifier: GPL-2.0-only
//
// The dump, in CRIU 4.x's order (see criu-plugin-abi.md, "Call order"):
// PAUSE_DEVICES and freeze task by task while the tree is walked;
// CHECKPOINT_DEVICES per task; per task HANDLE_DEVICE_VMA for device
// mappings and DUMP_EXT_FILE for each file CRIU cannot dump itself;
// DUMP_DEVICES_LATE(root); inventory; exit(DUMP, ret); resume or kill.
#include "dump.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cinttypes>
#include <cstring>

#include "api.h"
#include "base/unique_fd.h"
#include "devices.h"
#include "inventory.h"
#include "proc.h"

namespace host {
namespace {

constexpr long kAnonInodeFsMagic = 0x09041934;
constexpr long kPidFsMagic = 0x50494446;
constexpr int kKcmpFile = 0;

int pidfd_open(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }
int pidfd_getfd(int pidfd, int fd) { return static_cast<int>(syscall(SYS_pidfd_getfd, pidfd, fd, 0)); }

bool starts_with(const std::string &s, const char *prefix) { return s.rfind(prefix, 0) == 0; }

bool is_tty_major(unsigned maj)
{
	return maj == 4 || maj == 5 || (maj >= 128 && maj <= 143);
}

// How CRIU's dump_one_file() would treat the file: "ext" goes to
// DUMP_EXT_FILE (dump_unsupp_fd), the others CRIU dumps itself.
struct FileClass {
	std::string kind; // ext, reg, skip
	std::string more, info;
};

FileClass classify(const struct stat &st, long fs_type, const std::string &link)
{
	if (starts_with(link, "/dmabuf:"))
		return {"ext", "dmabuf", link};
	if (S_ISSOCK(st.st_mode))
		return {"skip", "sock", link};
	if (S_ISCHR(st.st_mode)) {
		const unsigned maj = major(st.st_rdev), min = minor(st.st_rdev);
		if (maj == 1)
			return {"reg", "mem", link};
		if (maj == 10 && min == 200)
			return {"skip", "tun", link};
		if (is_tty_major(maj))
			return {"skip", "tty", link};
		return {"ext", "chr", std::to_string(maj) + ":" + std::to_string(min)};
	}
	if (fs_type == kAnonInodeFsMagic) {
		static const char *const known[] = {"anon_inode:[eventfd]", "anon_inode:[eventpoll]",
						    "anon_inode:inotify",    "anon_inode:[fanotify]",
						    "anon_inode:[signalfd]", "anon_inode:[timerfd]",
						    "anon_inode:[pidfd]",    "anon_inode:bpf-map"};
		for (const char *k : known)
			if (link == k)
				return {"skip", "anon", link};
		return {"ext", "anon", link};
	}
	if (fs_type == kPidFsMagic)
		return {"skip", "pidfd", link};
	if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode) || S_ISLNK(st.st_mode)) {
		if (starts_with(link, "/memfd:"))
			return {"skip", "memfd", link};
		if (starts_with(link, "/")) {
			const bool deleted = link.size() > 10 &&
					     link.compare(link.size() - 10, 10, " (deleted)") == 0;
			return {deleted ? "skip" : "reg", "reg", link};
		}
		if (link.find(":[") != std::string::npos)
			return {"skip", "ns", link};
		return {"ext", "reg", link};
	}
	if (S_ISFIFO(st.st_mode))
		return {"skip", "pipe", link};
	return {"ext", "unknown", link};
}

class Dumper {
public:
	Dumper(PluginSet &plugins) : plugins_(plugins) {}

	int run(const DumpOptions &opts, int dirfd);
	Freezer &freezer() { return freezer_; }

private:
	int collect(pid_t pid, pid_t ppid);
	int dump_task(TaskRecord &t);
	int dump_vmas(TaskRecord &t);
	int dump_fds(TaskRecord &t, int pidfd);
	// CRIU's fd_id_generate(): one id per open file description.
	int file_id(pid_t pid, int fd, const struct stat &st, bool &is_new);
	void claimed_by(const HookResult &r);

	struct SeenFile {
		pid_t pid;
		int fd;
		dev_t dev;
		ino_t ino;
		int id;
	};

	PluginSet &plugins_;
	Freezer freezer_;
	Inventory inv_;
	std::vector<SeenFile> seen_;
	int next_id_ = 1;
};

void Dumper::claimed_by(const HookResult &r)
{
	if (r.plugin >= 0 && r.ret == 0)
		inventory_add_plugin(plugins_.name(r.plugin));
}

int Dumper::collect(pid_t pid, pid_t ppid)
{
	const HookResult r = plugins_.run<cr_plugin_pause_devices_t>(
		CR_PLUGIN_HOOK__PAUSE_DEVICES, "pid=" + std::to_string(pid),
		[&](cr_plugin_pause_devices_t *fn) { return fn(pid); });
	if (r.ret < 0 && r.ret != -ENOTSUP) {
		logf(kError, "PAUSE_DEVICES failed for %d: %d\n", pid, r.ret);
		return -1;
	}
	// CRIU asks the plugins before it finds out that a child is a zombie.
	if (auto ts = read_status(pid); ts && ts->state == 'Z') {
		logf(kInfo, "Task %d is a zombie: not dumped (CRIU would recreate it; the host does not)\n",
		     pid);
		return 0;
	}
	if (auto st = freezer_.freeze(pid); !st) {
		logf(kError, "Can't seize task %d: %s\n", pid, st.error().message().c_str());
		return -1;
	}
	inv_.tasks.push_back(TaskRecord{pid, ppid, {}, {}});
	for (pid_t child : list_children(pid))
		if (collect(child, pid))
			return -1;
	return 0;
}

int Dumper::file_id(pid_t pid, int fd, const struct stat &st, bool &is_new)
{
	for (const SeenFile &s : seen_) {
		if (s.dev != st.st_dev || s.ino != st.st_ino)
			continue;
		if (syscall(SYS_kcmp, s.pid, pid, kKcmpFile, s.fd, fd) == 0) {
			is_new = false;
			return s.id;
		}
	}
	is_new = true;
	const int id = next_id_++;
	seen_.push_back(SeenFile{pid, fd, st.st_dev, st.st_ino, id});
	return id;
}

int Dumper::dump_vmas(TaskRecord &t)
{
	auto vmas = device_vmas(t.pid);
	if (!vmas) {
		logf(kError, "Can't collect device mappings of %d: %s\n", t.pid,
		     vmas.error().message().c_str());
		return -1;
	}
	for (const DeviceVma &v : *vmas) {
		if (v.borrowed) {
			logf(kDebug, "vma %" PRIx64 " borrows vfi from previous\n", v.start);
			t.vmas.push_back(VmaRecord{v.start, v.end, v.prot, v.flags, v.pgoff, v.path});
			continue;
		}
		char mf[80];
		std::snprintf(mf, sizeof(mf), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, t.pid, v.start,
			      v.end);
		amdcr::UniqueFd fd(open(mf, O_RDONLY | O_CLOEXEC));
		if (!fd)
			fd.reset(open(v.path.c_str(), O_PATH | O_CLOEXEC));
		struct stat st = {};
		// Under the emulator the path (faked by the shim) is the device;
		// on a real kernel the mapped file itself.
		const int sr = (emulated() || !fd) ? stat(v.path.c_str(), &st) : fstat(fd.get(), &st);
		if (sr < 0) {
			log_perror("Failed stat on %d's map %" PRIx64 " (%s)", t.pid, v.start,
				   v.path.c_str());
			return -1;
		}
		char args[160];
		std::snprintf(args, sizeof(args), "fd=%d, st_rdev=%u:%u, map=%" PRIx64 "-%" PRIx64,
			      fd.get(), major(st.st_rdev), minor(st.st_rdev), v.start, v.end);
		const HookResult r = plugins_.run<cr_plugin_handle_device_vma_t>(
			CR_PLUGIN_HOOK__HANDLE_DEVICE_VMA, args,
			[&](cr_plugin_handle_device_vma_t *fn) { return fn(fd.get(), &st); });
		if (r.ret < 0) {
			logf(kError, "handle_device_vma plugin failed: %s\n", std::strerror(-r.ret));
			logf(kError, "Can't handle non-regular mapping on %d's map %" PRIx64 "\n", t.pid,
			     v.start);
			return -1;
		}
		claimed_by(r);
		t.vmas.push_back(VmaRecord{v.start, v.end, v.prot, v.flags, v.pgoff, v.path});
	}
	return 0;
}

int Dumper::dump_fds(TaskRecord &t, int pidfd)
{
	auto fds = list_fds(t.pid);
	if (!fds) {
		logf(kError, "Can't list fds of %d: %s\n", t.pid, fds.error().message().c_str());
		return -1;
	}
	logf(kInfo, "Dumping opened files (pid: %d)\n", t.pid);
	for (int fd : *fds) {
		auto params = read_fd_params(t.pid, fd);
		if (!params) {
			logf(kError, "Can't get params of fd %d of %d: %s\n", fd, t.pid,
			     params.error().message().c_str());
			return -1;
		}
		// The host's own copy of the target's fd, as CRIU's parasite
		// hands it over; closed at the end of this iteration.
		amdcr::UniqueFd lfd(pidfd_getfd(pidfd, fd));
		if (!lfd) {
			log_perror("Can't get fd %d of %d", fd, t.pid);
			return -1;
		}
		struct stat st;
		struct statfs sfs = {};
		if (fstat(lfd.get(), &st) < 0 || fstatfs(lfd.get(), &sfs) < 0) {
			log_perror("Can't stat fd %d of %d", fd, t.pid);
			return -1;
		}
		const FileClass fc = classify(st, static_cast<long>(sfs.f_type), params->path);
		bool is_new = false;
		const int id = file_id(t.pid, fd, st, is_new);
		logf(kInfo, "%d fdinfo %d: pos: %#" PRIx64 " flags: %o id %d (%s %s)\n", t.pid, fd,
		     params->pos, params->flags, id, fc.more.c_str(), fc.info.c_str());

		if (fc.kind == "ext" && is_new) {
			char args[96];
			std::snprintf(args, sizeof(args), "fd=%d, id=%d", lfd.get(), id);
			const HookResult r = plugins_.run<cr_plugin_dump_file_t>(
				CR_PLUGIN_HOOK__DUMP_EXT_FILE, args,
				[&](cr_plugin_dump_file_t *fn) { return fn(lfd.get(), id); });
			if (r.ret == -ENOTSUP) {
				logf(kError, "Can't dump file %d of that type [%o] (%s %s)\n", fd,
				     st.st_mode, fc.more.c_str(), fc.info.c_str());
				return -1;
			}
			if (r.ret < 0) {
				logf(kError, "Failed to dump file %d of %d: plugin %s returned %d\n", fd,
				     t.pid, plugins_.name(r.plugin).c_str(), r.ret);
				return -1;
			}
			claimed_by(r);
		}
		FdRecord rec;
		rec.fd = fd;
		rec.id = id;
		rec.kind = fc.kind;
		rec.flags = params->flags;
		rec.cloexec = params->cloexec;
		rec.pos = params->pos;
		rec.path = params->path;
		t.fds.push_back(std::move(rec));
	}
	return 0;
}

int Dumper::dump_task(TaskRecord &t)
{
	logf(kInfo, "Dumping task (pid: %d)\n", t.pid);
	amdcr::UniqueFd pidfd(pidfd_open(t.pid));
	if (!pidfd) {
		log_perror("Can't open a pidfd of %d", t.pid);
		return -1;
	}
	if (dump_vmas(t))
		return -1;
	return dump_fds(t, pidfd.get());
}

int Dumper::run(const DumpOptions &opts, int dirfd)
{
	inv_.root = opts.pid;
	if (collect(opts.pid, 0))
		return -1;
	// A pre-dump (memory only, in CRIU) shows the plugins each task's device
	// mappings (HANDLE_DEVICE_VMA from its smaps walk, pre_dump_one_task in
	// criu/cr-dump.c) and nothing else: no file, no CHECKPOINT_DEVICES.
	if (opts.pre_dump) {
		for (TaskRecord &t : inv_.tasks)
			if (dump_vmas(t))
				return -1;
		return 0;
	}

	for (const TaskRecord &t : inv_.tasks) {
		const pid_t pid = t.pid;
		const HookResult r = plugins_.run<cr_plugin_checkpoint_devices_t>(
			CR_PLUGIN_HOOK__CHECKPOINT_DEVICES, "pid=" + std::to_string(pid),
			[&](cr_plugin_checkpoint_devices_t *fn) { return fn(pid); });
		if (r.ret < 0 && r.ret != -ENOTSUP) {
			logf(kError, "CHECKPOINT_DEVICES failed for %d: %d\n", pid, r.ret);
			return -1;
		}
	}

	for (TaskRecord &t : inv_.tasks)
		if (dump_task(t))
			return -1;

	const pid_t root = opts.pid;
	const HookResult r = plugins_.run<cr_plugin_dump_devices_late_t>(
		CR_PLUGIN_HOOK__DUMP_DEVICES_LATE, "id=" + std::to_string(root),
		[&](cr_plugin_dump_devices_late_t *fn) { return fn(root); });
	if (r.ret != 0 && r.ret != -ENOTSUP) {
		logf(kError, "DUMP_DEVICES_LATE failed: %d\n", r.ret);
		return -1;
	}

	inv_.plugins = inventory_plugins();
	if (auto st = write_inventory(dirfd, inv_); !st) {
		logf(kError, "Can't write the inventory: %s\n", st.error().message().c_str());
		return -1;
	}
	return 0;
}

} // namespace

int run_dump(const DumpOptions &opts, PluginSet &plugins, int dirfd)
{
	Dumper d(plugins);
	const int ret = d.run(opts, dirfd);
	// CRIU's pre-dump never calls the plugins' exit (cr_pre_dump_finish
	// has no cr_plugin_fini): their pre-dump ends with CRIU's process.
	if (!opts.pre_dump)
		plugins.fini(CR_PLUGIN_STAGE__DUMP, ret);
	if (ret == 0 && opts.kill && !opts.pre_dump) {
		d.freezer().kill_all();
		logf(kInfo, "Tasks killed\n");
	} else {
		// On failure CRIU resumes the tasks, --kill or not.
		d.freezer().resume_all();
	}
	if (ret)
		logf(kError, "%s FAILED.\n", opts.pre_dump ? "Pre-dumping" : "Dumping");
	else
		logf(kInfo, "%s finished successfully\n", opts.pre_dump ? "Pre-dumping" : "Dumping");
	return ret;
}

} // namespace host
