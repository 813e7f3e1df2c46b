// SPDX-License-Identifier: GPL-2.0-only
//
// amdcr-ratestore: storage at a fixed rate, for the benchmark (not a test,
// not installed).
//
//     amdcr-ratestore --write-gbps W --read-gbps R --capacity SIZE MOUNTPOINT
//
// Mounts a FUSE file system at MOUNTPOINT (in the foreground, until
// SIGTERM/SIGINT or `umount`) whose files live in memory taken and touched
// once at start-up, and whose file data moves at no more than W GB/s
// (writes) and R GB/s (reads), shared by every file and process, like one
// device of that bandwidth. Why: on the build VM the page cache's speed
// depends on whether the hypervisor still backs the free memory it takes
// (memory freed for a few seconds is handed back and faulted in again at
// 0.4-0.8 GB/s; just freed memory goes at 4-5 GB/s), so a dump and a
// storage probe seconds apart meet different "storage". Here the memory is
// never freed, files bypass the page cache (direct I/O), and the rate is
// the one asked for. What is modelled is bandwidth only: requests are
// served one at a time at the rate, with an 8 MiB burst (Pacer); no
// latency per request, no queue depth.
//
// Enough of POSIX for CRIU's and the plugin's image files: directories,
// create/open/read/write/truncate, rename, unlink, SEEK_DATA/SEEK_HOLE
// (unwritten 1 MiB chunks are holes), fallocate (reserve: accepted, no
// memory is reserved; punch hole: frees whole chunks), symbolic links (the
// `parent` link of an incremental checkpoint). No hard links, no special
// files, no xattrs. A full store answers ENOSPC.
#define FUSE_USE_VERSION 35
#include <fuse.h>

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace {

constexpr uint64_t kChunk = 1 << 20;

/// Memory for file data, taken and touched once, handed out in chunks.
class Pool {
public:
	explicit Pool(uint64_t bytes) : bytes_(bytes / kChunk * kChunk)
	{
		void *p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
		if (p == MAP_FAILED)
			return;
		// MAP_POPULATE write-faults a private writable mapping: every page
		// has its own memory now (RssAnon counts it), none is the zero page.
		base_ = static_cast<uint8_t *>(p);
		for (uint64_t i = bytes_ / kChunk; i > 0; --i)
			free_.push_back(base_ + (i - 1) * kChunk);
	}
	~Pool()
	{
		if (base_)
			::munmap(base_, bytes_);
	}
	Pool(const Pool &) = delete;
	Pool &operator=(const Pool &) = delete;

	bool ok() const { return base_ != nullptr; }
	uint64_t total_chunks() const { return bytes_ / kChunk; }
	uint64_t free_chunks() const { return free_.size(); }
	uint8_t *take()
	{
		if (free_.empty())
			return nullptr;
		uint8_t *c = free_.back();
		free_.pop_back();
		return c;
	}
	void give(uint8_t *c)
	{
		if (c)
			free_.push_back(c);
	}

private:
	uint64_t bytes_;
	uint8_t *base_ = nullptr;
	std::vector<uint8_t *> free_;
};

/// Calls f(chunk index, offset in the chunk, bytes, offset from `off`) for
/// each piece of [off, end) that lies in one chunk, in order; stops early
/// when f returns false.
template <typename F> void each_chunk_span(uint64_t off, uint64_t end, F &&f)
{
	for (uint64_t pos = off; pos < end;) {
		const uint64_t in = pos % kChunk, step = std::min(kChunk - in, end - pos);
		if (!f(pos / kChunk, in, step, pos - off))
			return;
		pos += step;
	}
}

struct Node {
	bool dir = false;
	mode_t mode = 0;
	uint64_t size = 0;
	struct timespec mtime {};
	std::map<std::string, std::shared_ptr<Node>, std::less<>> children;
	std::vector<uint8_t *> chunks; // nullptr: a hole
	std::string target;	       // a symbolic link's (mode S_IFLNK)
};

/// Serves requests at a fixed byte rate, a token bucket of kBurst bytes:
/// each one ends at max(its arrival - kBurst / rate, the previous one's
/// end) + bytes / rate. The burst absorbs the time FUSE itself takes
/// between two requests of one writer (the daemon reads each request
/// before its handler runs), so a writer that keeps the store busy gets the
/// rate, and never more than kBurst bytes ahead of it.
class Pacer {
public:
	static constexpr uint64_t kBurst = 8 << 20;
	explicit Pacer(double gbps) : ns_per_byte_(gbps > 0 ? 1.0 / gbps : 0) {}
	static int64_t now_ns()
	{
		struct timespec ts {};
		::clock_gettime(CLOCK_MONOTONIC, &ts);
		return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
	}
	/// Waits until a request of `bytes` that arrived at `arrival` is done.
	void pace(uint64_t bytes, int64_t arrival)
	{
		if (ns_per_byte_ == 0)
			return;
		const auto ns = [this](uint64_t b) { return static_cast<int64_t>(static_cast<double>(b) * ns_per_byte_); };
		next_ = std::max(next_, arrival - ns(kBurst)) + ns(bytes);
		struct timespec ts {
			static_cast<time_t>(next_ / 1000000000), static_cast<long>(next_ % 1000000000)
		};
		while (::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
		}
	}

private:
	double ns_per_byte_;
	int64_t next_ = 0;
};

class Store {
public:
	Store(uint64_t capacity, double write_gbps, double read_gbps)
		: pool_(capacity), write_(write_gbps), read_(read_gbps)
	{
		root_->dir = true;
		root_->mode = S_IFDIR | 0755;
		::clock_gettime(CLOCK_REALTIME, &root_->mtime);
	}
	bool ok() const { return pool_.ok(); }

	std::shared_ptr<Node> find(std::string_view path) const
	{
		std::shared_ptr<Node> n = root_;
		for (std::string_view rest = path; n && !rest.empty();) {
			const size_t b = rest.find_first_not_of('/');
			if (b == std::string_view::npos)
				break;
			rest.remove_prefix(b);
			const size_t e = std::min(rest.find('/'), rest.size());
			if (!n->dir)
				return nullptr;
			auto it = n->children.find(rest.substr(0, e));
			n = it == n->children.end() ? nullptr : it->second;
			rest.remove_prefix(e);
		}
		return n;
	}
	/// The directory that holds `path` and the last component's name.
	std::shared_ptr<Node> parent(std::string_view path, std::string *name) const
	{
		const size_t slash = path.find_last_of('/');
		*name = std::string(path.substr(slash + 1));
		auto dir = find(path.substr(0, slash));
		return dir && dir->dir && !name->empty() ? dir : nullptr;
	}
	// `n` as a new entry at `path` (its mtime now): -ENOENT without the
	// parent directory, -EEXIST when the name is taken.
	int insert(const char *path, std::shared_ptr<Node> n)
	{
		std::string name;
		auto p = parent(path, &name);
		if (!p)
			return -ENOENT;
		if (p->children.count(name))
			return -EEXIST;
		::clock_gettime(CLOCK_REALTIME, &n->mtime);
		p->children.emplace(name, std::move(n));
		return 0;
	}
	int add(const char *path, mode_t mode, bool dir)
	{
		auto n = std::make_shared<Node>();
		n->dir = dir;
		n->mode = (dir ? S_IFDIR : S_IFREG) | (mode & 07777);
		return insert(path, std::move(n));
	}
	int add_symlink(const char *target, const char *path)
	{
		auto n = std::make_shared<Node>();
		n->mode = S_IFLNK | 0777;
		n->target = target;
		n->size = n->target.size();
		return insert(path, std::move(n));
	}
	void release_from(Node &n, uint64_t size)
	{
		const uint64_t keep = (size + kChunk - 1) / kChunk;
		for (uint64_t i = keep; i < n.chunks.size(); ++i)
			pool_.give(n.chunks[i]);
		if (n.chunks.size() > keep)
			n.chunks.resize(keep);
		if (size % kChunk && keep && n.chunks[keep - 1])
			std::memset(n.chunks[keep - 1] + size % kChunk, 0, kChunk - size % kChunk);
	}
	int truncate(Node &n, uint64_t size)
	{
		if (n.dir)
			return -EISDIR;
		if (size < n.size)
			release_from(n, size);
		n.size = size;
		::clock_gettime(CLOCK_REALTIME, &n.mtime);
		return 0;
	}
	void drop(Node &n)
	{
		for (auto *c : n.chunks)
			pool_.give(c);
		n.chunks.clear();
		for (auto &[name, child] : n.children)
			if (child.use_count() == 1)
				drop(*child);
	}
	int write(Node &n, const char *buf, size_t len, uint64_t off)
	{
		const int64_t arrival = Pacer::now_ns();
		const uint64_t end = off + len;
		if (n.chunks.size() < (end + kChunk - 1) / kChunk)
			n.chunks.resize((end + kChunk - 1) / kChunk, nullptr);
		uint64_t done = 0;
		each_chunk_span(off, end, [&](uint64_t idx, uint64_t in, uint64_t step, uint64_t at) {
			uint8_t *&c = n.chunks[idx];
			if (!c && (c = pool_.take()) != nullptr)
				std::memset(c, 0, kChunk);
			if (!c)
				return false;
			std::memcpy(c + in, buf + at, step);
			done = at + step;
			return true;
		});
		n.size = std::max(n.size, off + done); // a short write's bytes count too
		if (done < len)
			return done ? static_cast<int>(done) : -ENOSPC;
		::clock_gettime(CLOCK_REALTIME, &n.mtime);
		write_.pace(len, arrival);
		return static_cast<int>(len);
	}
	int read(const Node &n, char *buf, size_t len, uint64_t off)
	{
		const int64_t arrival = Pacer::now_ns();
		if (off >= n.size)
			return 0;
		const uint64_t end = std::min<uint64_t>(off + len, n.size);
		each_chunk_span(off, end, [&](uint64_t idx, uint64_t in, uint64_t step, uint64_t at) {
			const uint8_t *c = idx < n.chunks.size() ? n.chunks[idx] : nullptr;
			if (c)
				std::memcpy(buf + at, c + in, step);
			else
				std::memset(buf + at, 0, step);
			return true;
		});
		read_.pace(end - off, arrival);
		return static_cast<int>(end - off);
	}
	int punch(Node &n, uint64_t off, uint64_t len)
	{
		each_chunk_span(off, std::min(off + len, n.size), [&](uint64_t idx, uint64_t in, uint64_t step, uint64_t) {
			if (idx >= n.chunks.size() || !n.chunks[idx])
				return true;
			if (step == kChunk) {
				pool_.give(n.chunks[idx]);
				n.chunks[idx] = nullptr;
			} else {
				std::memset(n.chunks[idx] + in, 0, step);
			}
			return true;
		});
		return 0;
	}
	/// SEEK_DATA / SEEK_HOLE at chunk granularity (holes: unwritten chunks).
	off_t seek(const Node &n, off_t off, int whence) const
	{
		const uint64_t size = n.size;
		if (off < 0 || static_cast<uint64_t>(off) >= size)
			return -ENXIO;
		for (uint64_t pos = static_cast<uint64_t>(off); pos < size; pos = (pos / kChunk + 1) * kChunk) {
			const uint64_t idx = pos / kChunk;
			const bool data = idx < n.chunks.size() && n.chunks[idx];
			if (data == (whence == SEEK_DATA))
				return static_cast<off_t>(pos);
		}
		return whence == SEEK_DATA ? -ENXIO : static_cast<off_t>(size);
	}
	void statfs(struct statvfs *st) const
	{
		st->f_bsize = st->f_frsize = kChunk;
		st->f_blocks = pool_.total_chunks();
		st->f_bfree = st->f_bavail = pool_.free_chunks();
		st->f_namemax = 255;
	}

private:
	Pool pool_;
	Pacer write_, read_;
	std::shared_ptr<Node> root_ = std::make_shared<Node>();
};

Store &store()
{
	return *static_cast<Store *>(fuse_get_context()->private_data);
}

int op_getattr(const char *path, struct stat *st, struct fuse_file_info *)
{
	auto n = store().find(path);
	if (!n)
		return -ENOENT;
	*st = {};
	st->st_mode = n->mode;
	st->st_nlink = n->dir ? 2 : 1;
	st->st_size = static_cast<off_t>(n->size);
	uint64_t chunks = 0;
	for (auto *c : n->chunks)
		chunks += c != nullptr;
	st->st_blocks = static_cast<blkcnt_t>(chunks * (kChunk / 512));
	st->st_blksize = kChunk;
	st->st_mtim = st->st_ctim = st->st_atim = n->mtime;
	return 0;
}

int op_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t, struct fuse_file_info *,
	       enum fuse_readdir_flags)
{
	auto n = store().find(path);
	if (!n || !n->dir)
		return -ENOTDIR;
	fill(buf, ".", nullptr, 0, static_cast<fuse_fill_dir_flags>(0));
	fill(buf, "..", nullptr, 0, static_cast<fuse_fill_dir_flags>(0));
	for (auto &[name, child] : n->children)
		fill(buf, name.c_str(), nullptr, 0, static_cast<fuse_fill_dir_flags>(0));
	return 0;
}

int op_mkdir(const char *path, mode_t mode)
{
	return store().add(path, mode, true);
}

int op_symlink(const char *target, const char *path)
{
	return store().add_symlink(target, path);
}

int op_readlink(const char *path, char *buf, size_t size)
{
	auto n = store().find(path);
	if (!n)
		return -ENOENT;
	if (!S_ISLNK(n->mode))
		return -EINVAL;
	if (size == 0)
		return -EINVAL;
	// FUSE wants the target NUL-terminated, cut to the buffer.
	const size_t len = std::min(n->target.size(), size - 1);
	std::memcpy(buf, n->target.data(), len);
	buf[len] = '\0';
	return 0;
}

int remove_entry(const char *path, bool dir)
{
	std::string name;
	auto p = store().parent(path, &name);
	if (!p)
		return -ENOENT;
	auto it = p->children.find(name);
	if (it == p->children.end())
		return -ENOENT;
	if (dir != it->second->dir)
		return dir ? -ENOTDIR : -EISDIR;
	if (dir && !it->second->children.empty())
		return -ENOTEMPTY;
	auto n = it->second;
	p->children.erase(it);
	if (n.use_count() == 1) // no open file keeps it
		store().drop(*n);
	return 0;
}

int op_unlink(const char *path)
{
	return remove_entry(path, false);
}

int op_rmdir(const char *path)
{
	return remove_entry(path, true);
}

int op_rename(const char *from, const char *to, unsigned int flags)
{
	if (flags)
		return -EINVAL;
	std::string a, b;
	auto pa = store().parent(from, &a), pb = store().parent(to, &b);
	if (!pa || !pb || !pa->children.count(a))
		return -ENOENT;
	auto n = pa->children[a];
	if (auto old = pb->children.find(b); old != pb->children.end()) {
		if (old->second->dir != n->dir || (old->second->dir && !old->second->children.empty()))
			return old->second->dir ? -EISDIR : -ENOTDIR;
		auto gone = old->second;
		pb->children.erase(old);
		if (gone.use_count() == 1)
			store().drop(*gone);
	}
	pa->children.erase(a);
	pb->children[b] = n;
	return 0;
}

int open_node(const char *path, struct fuse_file_info *fi)
{
	auto n = store().find(path);
	if (!n)
		return -ENOENT;
	if (n->dir)
		return -EISDIR;
	if (fi->flags & O_TRUNC)
		store().truncate(*n, 0);
	// The open file keeps the node alive past an unlink: one reference
	// held in a leaked shared_ptr, dropped by release.
	fi->fh = reinterpret_cast<uintptr_t>(new std::shared_ptr<Node>(n));
	fi->direct_io = 1;
	return 0;
}

int op_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	int rc = store().add(path, mode, false);
	if (rc && !(rc == -EEXIST && !(fi->flags & O_EXCL)))
		return rc;
	return open_node(path, fi);
}

int op_open(const char *path, struct fuse_file_info *fi)
{
	return open_node(path, fi);
}

std::shared_ptr<Node> &held(struct fuse_file_info *fi)
{
	return *reinterpret_cast<std::shared_ptr<Node> *>(static_cast<uintptr_t>(fi->fh));
}

int op_release(const char *, struct fuse_file_info *fi)
{
	auto *h = &held(fi);
	if (h->use_count() == 1)
		store().drop(**h);
	delete h;
	return 0;
}

int op_read(const char *, char *buf, size_t len, off_t off, struct fuse_file_info *fi)
{
	return store().read(*held(fi), buf, len, static_cast<uint64_t>(off));
}

int op_write(const char *, const char *buf, size_t len, off_t off, struct fuse_file_info *fi)
{
	return store().write(*held(fi), buf, len, static_cast<uint64_t>(off));
}

int op_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	auto n = fi ? held(fi) : store().find(path);
	return n ? store().truncate(*n, static_cast<uint64_t>(size)) : -ENOENT;
}

int op_fallocate(const char *, int mode, off_t off, off_t len, struct fuse_file_info *fi)
{
	Node &n = *held(fi);
	if (mode == (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE))
		return store().punch(n, static_cast<uint64_t>(off), static_cast<uint64_t>(len));
	if (mode == FALLOC_FL_KEEP_SIZE)
		return 0; // a reservation: the model keeps no per-file allocation
	if (mode == 0) {
		n.size = std::max(n.size, static_cast<uint64_t>(off + len));
		return 0;
	}
	return -EOPNOTSUPP;
}

off_t op_lseek(const char *, off_t off, int whence, struct fuse_file_info *fi)
{
	if (whence != SEEK_DATA && whence != SEEK_HOLE)
		return -EINVAL; // the kernel handles SEEK_SET/CUR/END itself
	return store().seek(*held(fi), off, whence);
}

int op_statfs(const char *, struct statvfs *st)
{
	store().statfs(st);
	return 0;
}

int op_chmod(const char *path, mode_t mode, struct fuse_file_info *)
{
	auto n = store().find(path);
	if (!n)
		return -ENOENT;
	n->mode = (n->mode & S_IFMT) | (mode & 07777);
	return 0;
}

int op_ok_path(const char *path)
{
	return store().find(path) ? 0 : -ENOENT;
}

int op_chown(const char *path, uid_t, gid_t, struct fuse_file_info *)
{
	return op_ok_path(path);
}

int op_utimens(const char *path, const struct timespec tv[2], struct fuse_file_info *)
{
	auto n = store().find(path);
	if (!n)
		return -ENOENT;
	if (tv[1].tv_nsec != UTIME_OMIT)
		::clock_gettime(CLOCK_REALTIME, &n->mtime);
	return 0;
}

int op_fsync(const char *, int, struct fuse_file_info *)
{
	return 0; // nothing is volatile beyond what the model keeps
}

void *op_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	conn->max_write = 1 << 20;
	cfg->direct_io = 1;
	// An unlinked open file is gone from its directory at once (its Node
	// lives on in the open file), not renamed to .fuse_hidden*.
	cfg->hard_remove = 1;
	cfg->use_ino = 0;
	cfg->attr_timeout = 0;
	cfg->entry_timeout = 0;
	cfg->negative_timeout = 0;
	return fuse_get_context()->private_data;
}

uint64_t parse_size(const char *s)
{
	char *end = nullptr;
	double v = std::strtod(s, &end);
	switch (end && *end ? *end : ' ') {
	case 'G': v *= 1 << 30; break;
	case 'M': v *= 1 << 20; break;
	case 'K': v *= 1 << 10; break;
	default: break;
	}
	return static_cast<uint64_t>(v);
}

int usage()
{
	std::fprintf(stderr, "usage: amdcr-ratestore --write-gbps W --read-gbps R --capacity SIZE[K|M|G] MOUNTPOINT\n");
	return 2;
}

} // namespace

int main(int argc, char **argv)
{
	double wg = 0, rg = 0;
	uint64_t capacity = 0;
	const char *mountpoint = nullptr;
	for (int i = 1; i < argc; ++i) {
		const std::string_view a = argv[i];
		if (i + 1 < argc && a == "--write-gbps")
			wg = std::strtod(argv[++i], nullptr);
		else if (i + 1 < argc && a == "--read-gbps")
			rg = std::strtod(argv[++i], nullptr);
		else if (i + 1 < argc && a == "--capacity")
			capacity = parse_size(argv[++i]);
		else if (!mountpoint && a[0] != '-')
			mountpoint = argv[i];
		else
			return usage();
	}
	if (!mountpoint || capacity < kChunk || wg <= 0 || rg <= 0)
		return usage();
	auto st = std::make_unique<Store>(capacity, wg, rg);
	if (!st->ok()) {
		std::fprintf(stderr, "amdcr-ratestore: cannot take %llu bytes of memory: %s\n",
			     static_cast<unsigned long long>(capacity), std::strerror(errno));
		return 1;
	}
	struct fuse_operations ops {};
	ops.getattr = op_getattr;
	ops.readdir = op_readdir;
	ops.mkdir = op_mkdir;
	ops.unlink = op_unlink;
	ops.rmdir = op_rmdir;
	ops.rename = op_rename;
	ops.symlink = op_symlink;
	ops.readlink = op_readlink;
	ops.create = op_create;
	ops.open = op_open;
	ops.release = op_release;
	ops.read = op_read;
	ops.write = op_write;
	ops.truncate = op_truncate;
	ops.fallocate = op_fallocate;
	ops.lseek = op_lseek;
	ops.statfs = op_statfs;
	ops.chmod = op_chmod;
	ops.chown = op_chown;
	ops.utimens = op_utimens;
	ops.fsync = op_fsync;
	ops.init = op_init;
	std::string mp = mountpoint;
	char prog[] = "amdcr-ratestore", fg[] = "-f", single[] = "-s", o[] = "-o";
	char opts[] = "fsname=amdcr-ratestore,subtype=ratestore";
	char *fargv[] = {prog, fg, single, o, opts, mp.data(), nullptr};
	return fuse_main(6, fargv, &ops, st.get());
}
