// SPDX-License-Identifier: GPL-2.0-only
//
// AMDKFD_IOC_CRIU_OP round trip at the ioctl level, no plugin:
//
// dump (under kfd-emu A): a child acquires VMs on every GPU, allocates VRAM,
//   GTT and userptr BOs, maps them, fills them and creates a queue. The
//   parent ptrace-seizes it, takes its /dev/kfd fd with pidfd_getfd and runs
//   PROCESS_INFO / CHECKPOINT / UNPAUSE, reading the BOs through the
//   dma-buf fds CHECKPOINT installed, and saves an image. While paused:
//   RESUME of it is -EINVAL and another thread of ours gets -EBADF for
//   UNPAUSE (only the tracer thread may), and both leave it paused.
// restore (under kfd-emu B: same machine, other gpu_ids and render minors):
//   a fresh process opens /dev/kfd and its own render nodes, RESTOREs from
//   the image, writes the contents through the returned dma-bufs; the master
//   RESUMEs it by pid; contents, VAs, gpu-id translation and queue states
//   are checked as the kernel would have them.
//
// Usage: test_criu_op dump MACHINE-ARGS -- RESTORE-MACHINE-ARGS
//        test_criu_op restore IMAGE RESTORE-MACHINE-ARGS (run by dump)
#include "check.h"

#include <fcntl.h>
#include <linux/kfd_ioctl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <thread>
#include <vector>

#include "testcommon/pattern.h"

#ifndef KFDEMU_LAUNCHER
#error "KFDEMU_LAUNCHER must name the built kfd-emu"
#endif

using namespace kfdemu;
using namespace kfdemu::test;

namespace {

constexpr uint64_t kVramSize = 2 << 20, kGttSize = 1 << 20, kUserSize = 64 << 10;

int kioctl(int fd, unsigned long req, void *arg)
{
	if (::ioctl(fd, req, arg) == 0)
		return 0;
	const int e = errno;
	std::fprintf(stderr, "  ioctl nr 0x%lx: %s\n", (req & 0xff), std::strerror(e));
	return -e;
}

uint64_t gpu_va(size_t gpu, int kind)
{
	return 0x100000000ull * (gpu + 1) + uint64_t(kind) * 0x10000000ull;
}

std::string queue_state(pid_t pid)
{
	std::string q = introspect("queues " + std::to_string(pid));
	size_t p = q.find("\"state\":\"");
	return p == std::string::npos ? q : q.substr(p + 9, q.find('"', p + 9) - p - 9);
}

// What the dumped child tells its parent.
struct ChildInfo {
	int kfd_fd;
	uint64_t userptr[8];
};

// The image: counts, buckets, priv data, then BO contents.
struct Image {
	uint32_t num_devices = 0, num_bos = 0, num_objects = 0;
	uint64_t priv_size = 0;
	std::vector<kfd_criu_device_bucket> devices;
	std::vector<kfd_criu_bo_bucket> bos;
	std::vector<char> priv;
	std::vector<std::vector<char>> contents;	// per BO (userptr: CPU memory)
	std::vector<uint64_t> userptr_addr;		// per BO, 0 if not userptr

	bool save(const std::string &path) const
	{
		std::ofstream o(path, std::ios::binary);
		auto put = [&](const void *p, size_t n) { o.write(static_cast<const char *>(p), std::streamsize(n)); };
		put(&num_devices, 4);
		put(&num_bos, 4);
		put(&num_objects, 4);
		put(&priv_size, 8);
		put(devices.data(), devices.size() * sizeof devices[0]);
		put(bos.data(), bos.size() * sizeof bos[0]);
		put(priv.data(), priv.size());
		for (size_t i = 0; i < bos.size(); i++) {
			uint64_t n = contents[i].size();
			put(&userptr_addr[i], 8);
			put(&n, 8);
			put(contents[i].data(), n);
		}
		return bool(o);
	}
	bool load(const std::string &path)
	{
		std::ifstream in(path, std::ios::binary);
		auto get = [&](void *p, size_t n) { in.read(static_cast<char *>(p), std::streamsize(n)); };
		get(&num_devices, 4);
		get(&num_bos, 4);
		get(&num_objects, 4);
		get(&priv_size, 8);
		if (!in || num_devices > 64 || num_bos > 4096 || priv_size > (64 << 20))
			return false;
		devices.resize(num_devices);
		bos.resize(num_bos);
		priv.resize(priv_size);
		get(devices.data(), devices.size() * sizeof devices[0]);
		get(bos.data(), bos.size() * sizeof bos[0]);
		get(priv.data(), priv.size());
		contents.resize(num_bos);
		userptr_addr.resize(num_bos);
		for (size_t i = 0; i < num_bos; i++) {
			uint64_t n = 0;
			get(&userptr_addr[i], 8);
			get(&n, 8);
			if (n > (1ull << 30))
				return false;
			contents[i].resize(n);
			get(contents[i].data(), n);
		}
		return bool(in);
	}
};

// --- the dumped process ---------------------------------------------------------

[[noreturn]] void child_main(const MachineDesc &m, int out)
{
	const auto gpus = gpu_nodes(m);
	ChildInfo info{};
	info.kfd_fd = ::open("/dev/kfd", O_RDWR | O_CLOEXEC);
	bool ok = info.kfd_fd >= 0;
	for (size_t g = 0; ok && g < gpus.size(); g++) {
		const uint32_t id = gpus[g]->gpu_id;
		int rfd = ::open(("/dev/dri/renderD" + std::to_string(gpus[g]->drm_render_minor)).c_str(),
				 O_RDWR | O_CLOEXEC);
		kfd_ioctl_acquire_vm_args vm{};
		vm.drm_fd = uint32_t(rfd);
		vm.gpu_id = id;
		ok = ok && rfd >= 0 && kioctl(info.kfd_fd, AMDKFD_IOC_ACQUIRE_VM, &vm) == 0;
		// At an address a fresh process (even a sanitized one) has free, so
		// the restore side can put the "CRIU-restored" pages back there.
		void *want = reinterpret_cast<void *>(0x40000000ull + g * 0x1000000ull);	// app memory for ASan and TSan alike
		void *user = ::mmap(want, kUserSize, PROT_READ | PROT_WRITE,
				    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
		ok = ok && user == want;
		if (!ok)
			break;
		info.userptr[g] = uint64_t(uintptr_t(user));
		testcommon::fill_pattern(user, kUserSize, gpu_va(g, 2));
		const struct {
			uint64_t size;
			uint32_t flags;
		} kinds[3] = {
			{kVramSize, uint32_t(KFD_IOC_ALLOC_MEM_FLAGS_VRAM | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE |
					     KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC)},
			{kGttSize, uint32_t(KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE)},
			{kUserSize, uint32_t(KFD_IOC_ALLOC_MEM_FLAGS_USERPTR | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE)},
		};
		for (int k = 0; ok && k < 3; k++) {
			kfd_ioctl_alloc_memory_of_gpu_args a{};
			a.va_addr = gpu_va(g, k);
			a.size = kinds[k].size;
			a.gpu_id = id;
			a.flags = kinds[k].flags;
			if (k == 2)
				a.mmap_offset = info.userptr[g];
			ok = kioctl(info.kfd_fd, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &a) == 0;
			uint32_t dev = id;
			kfd_ioctl_map_memory_to_gpu_args mp{};
			mp.handle = a.handle;
			mp.device_ids_array_ptr = uint64_t(uintptr_t(&dev));
			mp.n_devices = 1;
			ok = ok && kioctl(info.kfd_fd, AMDKFD_IOC_MAP_MEMORY_TO_GPU, &mp) == 0 && mp.n_success == 1;
			if (ok && k < 2) {
				void *p = ::mmap(nullptr, a.size, PROT_READ | PROT_WRITE, MAP_SHARED, rfd,
						 off_t(a.mmap_offset));
				ok = p != MAP_FAILED;
				if (ok) {
					testcommon::fill_pattern(p, a.size, a.va_addr);
					::munmap(p, a.size);
				}
			}
		}
		if (ok && g == 0) {
			kfd_ioctl_create_queue_args q{};
			q.ring_base_address = info.userptr[0] + 4096;	// readable, as the model requires
			q.ring_size = 4096;
			q.gpu_id = id;
			q.queue_type = KFD_IOC_QUEUE_TYPE_COMPUTE_AQL;
			q.queue_percentage = 100;
			q.queue_priority = 7;
			q.write_pointer_address = info.userptr[0];
			q.read_pointer_address = info.userptr[0] + 8;
			ok = kioctl(info.kfd_fd, AMDKFD_IOC_CREATE_QUEUE, &q) == 0;
		}
	}
	if (!ok)
		info.kfd_fd = -1;
	if (::write(out, &info, sizeof info) != sizeof info)
		::_exit(3);
	for (;;)
		::pause();
}

// --- dump -----------------------------------------------------------------------

// KFD's rules for ending a dump's pause of `child`, paused through its
// file `kfd` by this (tracer) thread: neither changes its state.
void check_pause_rules(int kfd, pid_t child)
{
	// KFD's rules for ending that pause. RESUME (by pid, from any process's
	// own /dev/kfd) is for restored processes only: -EINVAL, still paused.
	{
		int own = ::open("/dev/kfd", O_RDWR | O_CLOEXEC);
		kfd_ioctl_criu_args r{};
		r.op = KFD_CRIU_OP_RESUME;
		r.pid = uint32_t(child);
		CHECK_EQ(kioctl(own, AMDKFD_IOC_CRIU_OP, &r), -EINVAL);
		::close(own);
		CHECK_EQ(queue_state(child), std::string("paused"));
	}
	// UNPAUSE through the target's file from another thread of the tracer's
	// process: only the tracer thread itself may (ptrace_parent == current).
	{
		int r = 0;
		std::thread other([&] {
			kfd_ioctl_criu_args u{};
			u.op = KFD_CRIU_OP_UNPAUSE;
			r = kioctl(kfd, AMDKFD_IOC_CRIU_OP, &u);
		});
		other.join();
		CHECK_EQ(r, -EBADF);
		CHECK_EQ(queue_state(child), std::string("paused"));
	}
}

// The checkpointed BOs' contents: each dma-buf (closed, its bucket's fd
// cleared) or, for a userptr BO, the process memory CRIU would dump.
void read_bo_contents(const std::vector<const NodeDesc *> &gpus, const ChildInfo &info, pid_t child, Image *img)
{
	img->contents.resize(img->bos.size());
	img->userptr_addr.resize(img->bos.size());
	for (size_t i = 0; i < img->bos.size(); i++) {
		auto &b = img->bos[i];
		size_t g = 0;
		while (g < gpus.size() && gpus[g]->gpu_id != b.gpu_id)
			g++;
		const int kind = b.alloc_flags & KFD_IOC_ALLOC_MEM_FLAGS_VRAM ? 0
				 : b.alloc_flags & KFD_IOC_ALLOC_MEM_FLAGS_GTT ? 1 : 2;
		CHECK(g < gpus.size());
		CHECK_EQ(b.addr, gpu_va(g, kind));
		if (kind == 2) {
			CHECK_EQ(b.dmabuf_fd, KFD_INVALID_FD);
			img->userptr_addr[i] = info.userptr[g];
			img->contents[i].resize(b.size);
			// CRIU would dump this as process memory.
			iovec local{img->contents[i].data(), b.size}, remote{reinterpret_cast<void *>(info.userptr[g]), b.size};
			CHECK_EQ(::process_vm_readv(child, &local, 1, &remote, 1, 0), ssize_t(b.size));
			CHECK(testcommon::check_pattern(img->contents[i].data(), b.size, b.addr) < 0);
			continue;
		}
		if (!CHECK(b.dmabuf_fd != KFD_INVALID_FD))
			continue;
		const int fd = int(b.dmabuf_fd);
		char link[64] = {};
		CHECK(::readlink(("/proc/self/fd/" + std::to_string(fd)).c_str(), link, sizeof link - 1) > 0 &&
		      std::string(link).starts_with("/dmabuf:"));
		CHECK(!(::fcntl(fd, F_GETFD) & FD_CLOEXEC));
		void *p = ::mmap(nullptr, b.size, PROT_READ, MAP_SHARED, fd, 0);
		if (CHECK(p != MAP_FAILED)) {
			CHECK(testcommon::check_pattern(p, b.size, b.addr) < 0);
			img->contents[i].assign(static_cast<char *>(p), static_cast<char *>(p) + b.size);
			::munmap(p, b.size);
		}
		::close(fd);
		b.dmabuf_fd = 0;
	}
}

bool dump(const MachineDesc &m, const std::string &image_path, Image *img, pid_t *child_out)
{
	const auto gpus = gpu_nodes(m);
	int pfd[2];
	if (!CHECK(::pipe2(pfd, O_CLOEXEC) == 0))
		return false;
	pid_t child = ::fork();
	if (child == 0)
		child_main(m, pfd[1]);
	*child_out = child;
	::close(pfd[1]);
	ChildInfo info{};
	if (!CHECK(::read(pfd[0], &info, sizeof info) == sizeof info) || !CHECK(info.kfd_fd >= 0))
		return false;
	::close(pfd[0]);

	int pidfd = int(::syscall(SYS_pidfd_open, child, 0));
	int kfd = int(::syscall(SYS_pidfd_getfd, pidfd, info.kfd_fd, 0));
	::close(pidfd);
	if (!CHECK(kfd >= 0))
		return false;

	kfd_ioctl_criu_args args{};
	args.op = KFD_CRIU_OP_PROCESS_INFO;
	// Not its tracer yet: the fd's owner is another process.
	CHECK_EQ(kioctl(kfd, AMDKFD_IOC_CRIU_OP, &args), -EBADF);

	CHECK_EQ(::ptrace(PTRACE_SEIZE, child, nullptr, nullptr), 0L);
	CHECK_EQ(::ptrace(PTRACE_INTERRUPT, child, nullptr, nullptr), 0L);
	int status = 0;
	CHECK_EQ(::waitpid(child, &status, __WALL), child);

	CHECK_EQ(queue_state(child), std::string("active"));
	args = {};
	args.op = KFD_CRIU_OP_PROCESS_INFO;
	if (!CHECK_EQ(kioctl(kfd, AMDKFD_IOC_CRIU_OP, &args), 0))
		return false;
	CHECK_EQ(pid_t(args.pid), child);
	CHECK_EQ(args.num_devices, gpus.size());
	CHECK_EQ(args.num_bos, 3 * gpus.size());
	CHECK_EQ(args.num_objects, 1u);
	CHECK(args.priv_data_size > 0);
	CHECK_EQ(queue_state(child), std::string("paused"));

	check_pause_rules(kfd, child);

	img->num_devices = args.num_devices;
	img->num_bos = args.num_bos;
	img->num_objects = args.num_objects;
	img->priv_size = args.priv_data_size;
	img->devices.resize(args.num_devices);
	img->bos.resize(args.num_bos);
	img->priv.resize(args.priv_data_size);
	args.devices = uint64_t(uintptr_t(img->devices.data()));
	args.bos = uint64_t(uintptr_t(img->bos.data()));
	args.priv_data = uint64_t(uintptr_t(img->priv.data()));
	args.op = KFD_CRIU_OP_CHECKPOINT;
	if (!CHECK_EQ(kioctl(kfd, AMDKFD_IOC_CRIU_OP, &args), 0))
		return false;
	for (size_t g = 0; g < img->devices.size() && g < gpus.size(); g++) {
		CHECK_EQ(img->devices[g].user_gpu_id, gpus[g]->gpu_id);
		CHECK_EQ(img->devices[g].actual_gpu_id, gpus[g]->gpu_id);
	}
	read_bo_contents(gpus, info, child, img);

	args = {};
	args.op = KFD_CRIU_OP_UNPAUSE;
	CHECK_EQ(kioctl(kfd, AMDKFD_IOC_CRIU_OP, &args), 0);
	CHECK_EQ(queue_state(child), std::string("active"));
	CHECK_EQ(kioctl(kfd, AMDKFD_IOC_CRIU_OP, &args), -EINVAL);	// not paused any more
	::close(kfd);
	CHECK(img->save(image_path));
	return true;
}

// --- restore --------------------------------------------------------------------

struct RestoreResult {
	int failed_checks;
};

[[noreturn]] void restored_main(const MachineDesc &m, const Image &img, int to_master, int from_master)
{
	const auto gpus = gpu_nodes(m);
	auto report = [&](bool ok) {
		char c = ok ? 'R' : 'F';
		(void)!::write(to_master, &c, 1);
	};
	// CRIU restores the CPU memory first, userptr pages included.
	for (size_t i = 0; i < img.bos.size(); i++)
		if (img.userptr_addr[i]) {
			void *p = ::mmap(reinterpret_cast<void *>(img.userptr_addr[i]), img.bos[i].size,
					 PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
			if (!CHECK(p == reinterpret_cast<void *>(img.userptr_addr[i])))
				continue;
			std::memcpy(p, img.contents[i].data(), img.bos[i].size);
		}
	int kfd = ::open("/dev/kfd", O_RDWR | O_CLOEXEC);
	kfd_ioctl_get_version_args ver{};
	CHECK(kfd >= 0 && kioctl(kfd, AMDKFD_IOC_GET_VERSION, &ver) == 0 && ver.major_version == 1);
	std::vector<int> rfds;
	std::vector<kfd_criu_device_bucket> devices = img.devices;
	for (size_t g = 0; g < devices.size() && g < gpus.size(); g++) {
		rfds.push_back(::open(("/dev/dri/renderD" + std::to_string(gpus[g]->drm_render_minor)).c_str(),
				      O_RDWR | O_CLOEXEC));
		devices[g].actual_gpu_id = gpus[g]->gpu_id;
		devices[g].drm_fd = uint32_t(rfds.back());
		CHECK(devices[g].user_gpu_id != devices[g].actual_gpu_id);	// really remapped
	}
	std::vector<kfd_criu_bo_bucket> bos = img.bos;
	std::vector<char> priv = img.priv;
	kfd_ioctl_criu_args args{};
	args.devices = uint64_t(uintptr_t(devices.data()));
	args.bos = uint64_t(uintptr_t(bos.data()));
	args.priv_data = uint64_t(uintptr_t(priv.data()));
	args.priv_data_size = img.priv_size;
	args.num_devices = img.num_devices;
	args.num_bos = img.num_bos;
	args.num_objects = img.num_objects;
	args.op = KFD_CRIU_OP_RESTORE;
	if (!CHECK_EQ(kioctl(kfd, AMDKFD_IOC_CRIU_OP, &args), 0)) {
		report(false);
		std::fflush(stdout);
		::_exit(1);
	}
	// Contents through the new dma-bufs (the plugin uses SDMA here).
	for (size_t i = 0; i < bos.size(); i++) {
		if (img.userptr_addr[i]) {
			CHECK_EQ(bos[i].dmabuf_fd, KFD_INVALID_FD);
			continue;
		}
		if (!CHECK(bos[i].dmabuf_fd != KFD_INVALID_FD))
			continue;
		void *p = ::mmap(nullptr, bos[i].size, PROT_WRITE, MAP_SHARED, int(bos[i].dmabuf_fd), 0);
		if (CHECK(p != MAP_FAILED)) {
			std::memcpy(p, img.contents[i].data(), bos[i].size);
			::munmap(p, bos[i].size);
		}
		::close(int(bos[i].dmabuf_fd));
	}
	report(true);
	char go = 0;
	CHECK(::read(from_master, &go, 1) == 1 && go == 'G');

	// After RESUME: contents through this process's own render mappings at
	// the restored offsets, VAs as saved, the old gpu ids still in use.
	for (size_t i = 0; i < bos.size(); i++) {
		size_t g = 0;
		while (g < img.devices.size() && img.devices[g].user_gpu_id != bos[i].gpu_id)
			g++;
		if (!CHECK(g < rfds.size()) || img.userptr_addr[i])
			continue;
		CHECK(bos[i].restored_offset != 0);
		void *p = ::mmap(nullptr, bos[i].size, PROT_READ, MAP_SHARED, rfds[g], off_t(bos[i].restored_offset));
		if (CHECK(p != MAP_FAILED)) {
			CHECK(testcommon::check_pattern(p, bos[i].size, bos[i].addr) < 0);
			::munmap(p, bos[i].size);
		}
	}
	const std::string listing = introspect("bos " + std::to_string(::getpid()));
	for (size_t i = 0; i < bos.size(); i++)
		CHECK(listing.find("\"va\":" + std::to_string(bos[i].addr) + ",") != std::string::npos);
	for (size_t g = 0; g < devices.size(); g++) {
		// Handles and ids keep the user (old) gpu id.
		CHECK(listing.find("\"gpu_id\":" + std::to_string(devices[g].user_gpu_id) +
				   ",\"actual_gpu_id\":" + std::to_string(devices[g].actual_gpu_id)) !=
		      std::string::npos);
		kfd_ioctl_get_available_memory_args av{};
		av.gpu_id = devices[g].user_gpu_id;
		CHECK_EQ(kioctl(kfd, AMDKFD_IOC_AVAILABLE_MEMORY, &av), 0);
	}
	// The queue came back, running.
	CHECK_EQ(queue_state(::getpid()), std::string("active"));
	std::fflush(stdout);
	::_exit(tally().checks_failed ? 1 : 0);
}

int restore(const std::string &image_path, const MachineDesc &m)
{
	Image img;
	run("load image", [&] { CHECK(img.load(image_path)); });
	if (tally().failed)
		return summary();
	int up[2], down[2];
	CHECK(::pipe2(up, O_CLOEXEC) == 0 && ::pipe2(down, O_CLOEXEC) == 0);
	pid_t r = ::fork();
	if (r == 0)
		restored_main(m, img, up[1], down[0]);
	run("RESTORE in a fresh process with other gpu ids and minors", [&] {
		char c = 0;
		CHECK(::read(up[0], &c, 1) == 1 && c == 'R');
		// Evicted from RESTORE until RESUME.
		CHECK_EQ(queue_state(r), std::string("evicted"));
	});
	run("RESUME by pid from the master's own /dev/kfd", [&] {
		int kfd = ::open("/dev/kfd", O_RDWR | O_CLOEXEC);
		kfd_ioctl_criu_args args{};
		args.op = KFD_CRIU_OP_RESUME;
		args.pid = 0x3ffffe;	// no such process
		CHECK_EQ(kioctl(kfd, AMDKFD_IOC_CRIU_OP, &args), -ESRCH);
		args.pid = uint32_t(r);
		CHECK_EQ(kioctl(kfd, AMDKFD_IOC_CRIU_OP, &args), 0);
		CHECK_EQ(kioctl(kfd, AMDKFD_IOC_CRIU_OP, &args), -EINVAL); // resumed already
		::close(kfd);
		char go = 'G';
		CHECK(::write(down[1], &go, 1) == 1);
	});
	run("restored process: contents, VAs, gpu id translation, queue", [&] {
		int status = 0;
		CHECK_EQ(::waitpid(r, &status, 0), r);
		if (!CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0))
			std::printf("    restored process status 0x%x\n", status);
	});
	return summary();
}

} // namespace

int main(int argc, char **argv)
{
	if (argc >= 3 && std::string_view(argv[1]) == "restore")
		return restore(argv[2], machine_from_args(argc - 2, argv + 2));
	// dump MACHINE-ARGS -- RESTORE-MACHINE-ARGS
	int sep = argc;
	for (int i = 1; i < argc; i++)
		if (std::string_view(argv[i]) == "--")
			sep = i;
	const MachineDesc m = machine_from_args(sep, argv);
	std::vector<std::string> restore_args(argv + std::min(sep + 1, argc), argv + argc);

	char tmpl[] = "/tmp/kfdemu-criu-image.XXXXXX";
	int tfd = ::mkstemp(tmpl);
	if (tfd >= 0)
		::close(tfd);
	const std::string image = tmpl;
	Image img;
	pid_t child = -1;
	bool dumped = false;
	run("dump: PROCESS_INFO, CHECKPOINT, UNPAUSE of a ptrace-seized child",
	    [&] { dumped = dump(m, image, &img, &child); });
	if (child > 0) {
		::kill(child, SIGKILL);
		::waitpid(child, nullptr, __WALL);
	}
	if (dumped) {
		run("restore under a second kfd-emu", [&] {
			// The nested launcher strips our shim from its own environment.
			std::vector<std::string> a = {KFDEMU_LAUNCHER};
			a.insert(a.end(), restore_args.begin(), restore_args.end());
			a.push_back("--");
			char self[4096] = {};
			CHECK(::readlink("/proc/self/exe", self, sizeof self - 1) > 0);
			a.push_back(self);
			a.push_back("restore");
			a.push_back(image);
			a.insert(a.end(), restore_args.begin(), restore_args.end());
			std::vector<char *> av;
			for (auto &s : a)
				av.push_back(s.data());
			av.push_back(nullptr);
			std::fflush(stdout);
			pid_t p = ::fork();
			if (p == 0) {
				::execv(av[0], av.data());
				::_exit(127);
			}
			int status = 0;
			CHECK_EQ(::waitpid(p, &status, 0), p);
			CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		});
	}
	::unlink(image.c_str());
	return summary();
}
