// SPDX-License-Identifier: GPL-2.0-only
//
// Argument checks through the real ioctl path (shim -> daemon -> model):
// wrong sizes and numbers, bad pointers, handles and gpu ids, double free,
// calls from a process that does not own the context, CRIU_OP without the
// capability, bad mmap offsets. Every expectation is the kernel's errno
// (see ../../shared/reference/kfd-amdgpu-interfaces.md §2, §4). Then the
// emulator's own run-time fault rules (errno, and a stall that holds a call
// until its caller has been killed).
//
// Usage (under kfd-emu): test_errors --machine NAME
#include "check.h"

#include <amdgpu_drm.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/kfd_ioctl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xf86drm.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <vector>

using namespace kfdemu;
using namespace kfdemu::test;

namespace {

int xioctl(int fd, unsigned long req, void *arg)
{
	return ::ioctl(fd, req, arg) == 0 ? 0 : -errno;
}

int mmap_err(int fd, size_t len, uint64_t off)
{
	void *p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, off_t(off));
	if (p != MAP_FAILED) {
		::munmap(p, len);
		return 0;
	}
	return -errno;
}

// Runs `fn` in a child process; its return value is the child's verdict.
bool in_child(const std::function<bool()> &fn)
{
	std::fflush(stdout);
	pid_t c = ::fork();
	if (c == 0)
		::_exit(fn() ? 0 : 1);
	int status = 0;
	::waitpid(c, &status, 0);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

struct Setup {
	int kfd = -1, rfd = -1;
	uint32_t gpu = 0, minor = 0;
};

void test_kfd_dispatch(const Setup &s)
{
	kfd_ioctl_get_version_args v{};
	CHECK_EQ(xioctl(s.kfd, AMDKFD_IOC_GET_VERSION, &v), 0);
	CHECK_EQ(v.major_version, 1u);
	// Unknown numbers: ENOTTY (dispatch by nr only).
	char buf[64] = {};
	CHECK_EQ(xioctl(s.kfd, _IOWR('K', 0x60, char[8]), buf), -ENOTTY);
	CHECK_EQ(xioctl(s.kfd, _IOWR('K', 0x00, char[8]), buf), -ENOTTY);
	// A smaller struct: only the caller's size is copied out.
	unsigned char small[8];
	std::memset(small, 0xcc, sizeof small);
	CHECK_EQ(xioctl(s.kfd, _IOR('K', 0x01, uint32_t), small), 0);
	CHECK_EQ(small[4], 0xcc);
	CHECK_EQ(small[0], 1);
	// A bad pointer: EFAULT.
	CHECK_EQ(xioctl(s.kfd, AMDKFD_IOC_GET_VERSION, reinterpret_cast<void *>(8)), -EFAULT);
}

void test_acquire(const Setup &s)
{
	kfd_ioctl_acquire_vm_args a{};
	a.drm_fd = uint32_t(-1);
	a.gpu_id = s.gpu;
	CHECK_EQ(xioctl(s.kfd, AMDKFD_IOC_ACQUIRE_VM, &a), -EINVAL);
	int p[2];
	CHECK(::pipe(p) == 0);
	a.drm_fd = uint32_t(p[0]);	// not a render node
	CHECK_EQ(xioctl(s.kfd, AMDKFD_IOC_ACQUIRE_VM, &a), -EINVAL);
	::close(p[0]);
	::close(p[1]);
	a.drm_fd = uint32_t(s.rfd);
	a.gpu_id = 0xfffe;	// no such GPU
	CHECK_EQ(xioctl(s.kfd, AMDKFD_IOC_ACQUIRE_VM, &a), -EINVAL);
	a.gpu_id = s.gpu;
	CHECK_EQ(xioctl(s.kfd, AMDKFD_IOC_ACQUIRE_VM, &a), 0);
	CHECK_EQ(xioctl(s.kfd, AMDKFD_IOC_ACQUIRE_VM, &a), 0);	// same file: no-op
	int other = ::open(("/dev/dri/renderD" + std::to_string(s.minor)).c_str(), O_RDWR | O_CLOEXEC);
	a.drm_fd = uint32_t(other);
	CHECK_EQ(xioctl(s.kfd, AMDKFD_IOC_ACQUIRE_VM, &a), -EBUSY);
	::close(other);
}

void test_memory(const Setup &s)
{
	kfd_ioctl_alloc_memory_of_gpu_args a{};
	a.va_addr = 0x300000000ull;
	a.size = 0;
	a.gpu_id = s.gpu;
	a.flags = KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
	CHECK_EQ(xioctl(s.kfd, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &a), -EINVAL);
	a.size = 1 << 20;
	a.gpu_id = 0xfffe;
	CHECK_EQ(xioctl(s.kfd, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &a), -EINVAL);
	a.gpu_id = s.gpu;
	a.flags = KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL;
	a.size = 4096 * 3;	// not the doorbell slice
	CHECK_EQ(xioctl(s.kfd, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &a), -EINVAL);
	a.flags = KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP;
	a.size = 8192;		// MMIO remap is one page
	CHECK_EQ(xioctl(s.kfd, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &a), -EINVAL);
	a.flags = KFD_IOC_ALLOC_MEM_FLAGS_GTT | KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
	a.size = 1 << 20;
	if (!CHECK_EQ(xioctl(s.kfd, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &a), 0))
		return;
	CHECK_EQ(a.handle >> 32, s.gpu);

	uint32_t dev = s.gpu;
	kfd_ioctl_map_memory_to_gpu_args m{};
	m.handle = a.handle;
	m.device_ids_array_ptr = uint64_t(uintptr_t(&dev));
	m.n_devices = 0;
	CHECK_EQ(xioctl(s.kfd, AMDKFD_IOC_MAP_MEMORY_TO_GPU, &m), -EINVAL);
	m.n_devices = 1;
	m.n_success = 2;
	CHECK_EQ(xioctl(s.kfd, AMDKFD_IOC_MAP_MEMORY_TO_GPU, &m), -EINVAL);
	m.n_success = 0;
	m.device_ids_array_ptr = 8;
	CHECK_EQ(xioctl(s.kfd, AMDKFD_IOC_MAP_MEMORY_TO_GPU, &m), -EFAULT);
	m.device_ids_array_ptr = uint64_t(uintptr_t(&dev));
	m.handle = a.handle + 1000;
	CHECK_EQ(xioctl(s.kfd, AMDKFD_IOC_MAP_MEMORY_TO_GPU, &m), -ENOMEM);	// unknown handle
	m.handle = a.handle;
	uint32_t bad = 0xfffe;
	m.device_ids_array_ptr = uint64_t(uintptr_t(&bad));
	CHECK_EQ(xioctl(s.kfd, AMDKFD_IOC_MAP_MEMORY_TO_GPU, &m), -EINVAL);	// unknown peer
	m.device_ids_array_ptr = uint64_t(uintptr_t(&dev));
	CHECK_EQ(xioctl(s.kfd, AMDKFD_IOC_MAP_MEMORY_TO_GPU, &m), 0);
	CHECK_EQ(m.n_success, 1u);

	kfd_ioctl_free_memory_of_gpu_args f{};
	f.handle = a.handle;
	CHECK_EQ(xioctl(s.kfd, AMDKFD_IOC_FREE_MEMORY_OF_GPU, &f), -EBUSY);	// still mapped
	kfd_ioctl_unmap_memory_from_gpu_args u{};
	u.handle = a.handle;
	u.device_ids_array_ptr = uint64_t(uintptr_t(&dev));
	u.n_devices = 1;
	CHECK_EQ(xioctl(s.kfd, AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU, &u), 0);
	CHECK_EQ(xioctl(s.kfd, AMDKFD_IOC_FREE_MEMORY_OF_GPU, &f), 0);
	CHECK_EQ(xioctl(s.kfd, AMDKFD_IOC_FREE_MEMORY_OF_GPU, &f), -EINVAL);	// double free
}

void test_queues(const Setup &s)
{
	static uint64_t ptrs[512];
	kfd_ioctl_create_queue_args q{};
	q.ring_base_address = uint64_t(uintptr_t(ptrs + 64));
	q.ring_size = 1024;
	q.gpu_id = s.gpu;
	q.queue_type = 9;
	q.queue_percentage = 100;
	q.read_pointer_address = uint64_t(uintptr_t(ptrs));
	q.write_pointer_address = uint64_t(uintptr_t(ptrs + 1));
	CHECK_EQ(xioctl(s.kfd, AMDKFD_IOC_CREATE_QUEUE, &q), -524);	// ENOTSUPP
	q.queue_type = KFD_IOC_QUEUE_TYPE_COMPUTE_AQL;
	q.queue_percentage = 101;
	CHECK_EQ(xioctl(s.kfd, AMDKFD_IOC_CREATE_QUEUE, &q), -EINVAL);
	q.queue_percentage = 100;
	q.queue_priority = 16;
	CHECK_EQ(xioctl(s.kfd, AMDKFD_IOC_CREATE_QUEUE, &q), -EINVAL);
	q.queue_priority = 7;
	q.ring_size = 1000;
	CHECK_EQ(xioctl(s.kfd, AMDKFD_IOC_CREATE_QUEUE, &q), -EINVAL);
	q.ring_size = 1024;
	q.gpu_id = 0xfffe;
	CHECK_EQ(xioctl(s.kfd, AMDKFD_IOC_CREATE_QUEUE, &q), -EINVAL);
	q.gpu_id = s.gpu;
	CHECK_EQ(xioctl(s.kfd, AMDKFD_IOC_CREATE_QUEUE, &q), 0);
	kfd_ioctl_destroy_queue_args d{};
	d.queue_id = q.queue_id + 77;
	CHECK_EQ(xioctl(s.kfd, AMDKFD_IOC_DESTROY_QUEUE, &d), -EINVAL);
	d.queue_id = q.queue_id;
	CHECK_EQ(xioctl(s.kfd, AMDKFD_IOC_DESTROY_QUEUE, &d), 0);
	CHECK_EQ(xioctl(s.kfd, AMDKFD_IOC_DESTROY_QUEUE, &d), -EINVAL);
	kfd_ioctl_destroy_event_args e{};
	e.event_id = 4000;
	CHECK_EQ(xioctl(s.kfd, AMDKFD_IOC_DESTROY_EVENT, &e), -EINVAL);
}

void test_criu_rules(const Setup &s)
{
	kfd_ioctl_criu_args c{};
	c.op = 9;
	CHECK_EQ(xioctl(s.kfd, AMDKFD_IOC_CRIU_OP, &c), -EINVAL);
	c.op = KFD_CRIU_OP_UNPAUSE;
	CHECK_EQ(xioctl(s.kfd, AMDKFD_IOC_CRIU_OP, &c), -EINVAL);	// not paused
	char dummy[64];
	c.op = KFD_CRIU_OP_CHECKPOINT;
	c.devices = c.bos = c.priv_data = uint64_t(uintptr_t(dummy));
	CHECK_EQ(xioctl(s.kfd, AMDKFD_IOC_CRIU_OP, &c), -EINVAL);	// no PROCESS_INFO before
	c = {};
	c.op = KFD_CRIU_OP_RESTORE;	// devices NULL
	c.num_devices = 1;
	c.priv_data_size = 8;
	CHECK_EQ(xioctl(s.kfd, AMDKFD_IOC_CRIU_OP, &c), -EINVAL);

	// Without CAP_CHECKPOINT_RESTORE and CAP_SYS_ADMIN: EACCES.
	const int kfd = s.kfd;
	CHECK(in_child([kfd] {
		int own = ::open("/dev/kfd", O_RDWR | O_CLOEXEC);
		__user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
		__user_cap_data_struct d[2] = {};
		if (::syscall(SYS_capget, &h, d))
			return false;
		d[0].effective &= ~(1u << CAP_SYS_ADMIN);
		d[1].effective &= ~(1u << (CAP_CHECKPOINT_RESTORE - 32));
		if (::syscall(SYS_capset, &h, d))
			return false;
		kfd_ioctl_criu_args a{};
		a.op = KFD_CRIU_OP_PROCESS_INFO;
		bool ok = xioctl(own, AMDKFD_IOC_CRIU_OP, &a) == -EACCES;
		(void)kfd;
		return ok;
	}));
}

void test_non_owner(const Setup &s)
{
	// The context belongs to the opener: a forked child using the
	// inherited fd gets EBADF (it is neither the owner nor its tracer).
	const int kfd = s.kfd;
	const uint32_t gpu = s.gpu;
	CHECK(in_child([kfd, gpu] {
		kfd_ioctl_alloc_memory_of_gpu_args a{};
		a.va_addr = 0x400000000ull;
		a.size = 1 << 16;
		a.gpu_id = gpu;
		a.flags = KFD_IOC_ALLOC_MEM_FLAGS_GTT;
		kfd_ioctl_criu_args c{};
		c.op = KFD_CRIU_OP_PROCESS_INFO;
		return xioctl(kfd, AMDKFD_IOC_ALLOC_MEMORY_OF_GPU, &a) == -EBADF &&
		       xioctl(kfd, AMDKFD_IOC_CRIU_OP, &c) == -EBADF;
	}));
}

void test_kfd_mmap(const Setup &s)
{
	const uint64_t gpu_bits = uint64_t(s.gpu) << 46;
	CHECK_EQ(mmap_err(s.kfd, 8192, (3ull << 62) | (uint64_t(0xfffe) << 46)), -ENODEV);	// doorbell, no GPU
	CHECK_EQ(mmap_err(s.kfd, 4096 * 5, (3ull << 62) | gpu_bits), -EINVAL);	// wrong doorbell size
	CHECK_EQ(mmap_err(s.kfd, 8192, gpu_bits), -EINVAL);			// MMIO is one page
	CHECK_EQ(mmap_err(s.kfd, 4096, 1ull << 62), -ENODEV);			// reserved mem, no GPU 0
}

void test_render(const Setup &s)
{
	char buf[64] = {};
	CHECK_EQ(xioctl(s.rfd, DRM_IOWR(0x9f, char[8]), buf), -EINVAL);	// unknown driver ioctl
	CHECK_EQ(xioctl(s.rfd, DRM_IOWR(0x3e, char[8]), buf), -EINVAL);	// unknown core ioctl
	drm_client client{};
	CHECK_EQ(xioctl(s.rfd, DRM_IOCTL_GET_CLIENT, &client), -EACCES);	// not render-allowed
	drm_gem_close gc{};
	gc.handle = 4242;
	CHECK_EQ(xioctl(s.rfd, DRM_IOCTL_GEM_CLOSE, &gc), -EINVAL);

	drm_amdgpu_gem_create cr{};
	cr.in.bo_size = 4096;
	cr.in.domains = 0x10000;	// no such domain
	CHECK_EQ(xioctl(s.rfd, DRM_IOCTL_AMDGPU_GEM_CREATE, &cr), -EINVAL);
	cr = {};
	cr.in.bo_size = 8192;
	cr.in.domains = AMDGPU_GEM_DOMAIN_GTT;
	if (!CHECK_EQ(xioctl(s.rfd, DRM_IOCTL_AMDGPU_GEM_CREATE, &cr), 0))
		return;
	const uint32_t h = cr.out.handle;
	CHECK(h >= 1);

	drm_amdgpu_gem_mmap gm{};
	gm.in.handle = h + 100;
	CHECK_EQ(xioctl(s.rfd, DRM_IOCTL_AMDGPU_GEM_MMAP, &gm), -ENOENT);
	gm.in.handle = h;
	CHECK_EQ(xioctl(s.rfd, DRM_IOCTL_AMDGPU_GEM_MMAP, &gm), 0);
	CHECK_EQ(mmap_err(s.rfd, 8192, gm.out.addr_ptr), 0);
	CHECK_EQ(mmap_err(s.rfd, 3 * 4096, gm.out.addr_ptr), -EINVAL);		// longer than the BO
	CHECK_EQ(mmap_err(s.rfd, 4096, gm.out.addr_ptr + (64ull << 30)), -EINVAL);	// unknown offset
	int other = ::open(("/dev/dri/renderD" + std::to_string(s.minor)).c_str(), O_RDWR | O_CLOEXEC);
	CHECK_EQ(mmap_err(other, 8192, gm.out.addr_ptr), -EACCES);	// no handle in that file
	::close(other);

	drm_amdgpu_gem_va va{};
	va.handle = h;
	va.operation = AMDGPU_VA_OP_MAP;
	va.flags = AMDGPU_VM_PAGE_READABLE | AMDGPU_VM_PAGE_WRITEABLE;
	va.va_address = 0x500000000ull + 12;	// not page aligned
	va.map_size = 8192;
	CHECK_EQ(xioctl(s.rfd, DRM_IOCTL_AMDGPU_GEM_VA, &va), -EINVAL);
	va.va_address = 0x500000000ull;
	va.map_size = 3 * 4096;		// beyond the BO
	CHECK_EQ(xioctl(s.rfd, DRM_IOCTL_AMDGPU_GEM_VA, &va), -EINVAL);
	va.map_size = 8192;
	CHECK_EQ(xioctl(s.rfd, DRM_IOCTL_AMDGPU_GEM_VA, &va), 0);
	va.va_address = 0x500000000ull + 4096;	// overlaps the first mapping
	CHECK_EQ(xioctl(s.rfd, DRM_IOCTL_AMDGPU_GEM_VA, &va), -EINVAL);
	va.operation = 9;
	CHECK_EQ(xioctl(s.rfd, DRM_IOCTL_AMDGPU_GEM_VA, &va), -EINVAL);
	va.handle = h + 100;
	va.operation = AMDGPU_VA_OP_MAP;
	va.va_address = 0x600000000ull;
	CHECK_EQ(xioctl(s.rfd, DRM_IOCTL_AMDGPU_GEM_VA, &va), -ENOENT);

	drm_prime_handle ph{};
	ph.handle = h;
	ph.flags = 0x4000000;
	CHECK_EQ(xioctl(s.rfd, DRM_IOCTL_PRIME_HANDLE_TO_FD, &ph), -EINVAL);
	ph.flags = DRM_CLOEXEC;
	ph.handle = h + 100;
	CHECK_EQ(xioctl(s.rfd, DRM_IOCTL_PRIME_HANDLE_TO_FD, &ph), -ENOENT);

	union drm_amdgpu_ctx ctx{};
	ctx.in.op = AMDGPU_CTX_OP_FREE_CTX;
	ctx.in.ctx_id = 77;
	CHECK_EQ(xioctl(s.rfd, DRM_IOCTL_AMDGPU_CTX, &ctx), -EINVAL);
	ctx.in.op = 42;
	CHECK_EQ(xioctl(s.rfd, DRM_IOCTL_AMDGPU_CTX, &ctx), -EINVAL);

	static char user[3 * 4096] __attribute__((aligned(4096)));
	drm_amdgpu_gem_userptr up{};
	up.addr = uint64_t(uintptr_t(user)) + 8;	// not page aligned
	up.size = 4096;
	up.flags = AMDGPU_GEM_USERPTR_ANONONLY | AMDGPU_GEM_USERPTR_REGISTER;
	CHECK_EQ(xioctl(s.rfd, DRM_IOCTL_AMDGPU_GEM_USERPTR, &up), -EINVAL);
	up.addr = uint64_t(uintptr_t(user));
	up.flags = AMDGPU_GEM_USERPTR_ANONONLY;	// neither READONLY nor REGISTER
	CHECK_EQ(xioctl(s.rfd, DRM_IOCTL_AMDGPU_GEM_USERPTR, &up), -EACCES);

	drm_amdgpu_info info{};
	info.query = AMDGPU_INFO_ACCEL_WORKING;
	info.return_size = 0;
	CHECK_EQ(xioctl(s.rfd, DRM_IOCTL_AMDGPU_INFO, &info), -EINVAL);

	// A render fd opened read-only: shared writable mappings are refused.
	int ro = ::open(("/dev/dri/renderD" + std::to_string(s.minor)).c_str(), O_RDONLY | O_CLOEXEC);
	drm_amdgpu_gem_create rc{};
	rc.in.bo_size = 4096;
	rc.in.domains = AMDGPU_GEM_DOMAIN_GTT;
	drm_amdgpu_gem_mmap rm{};
	if (CHECK(ro >= 0) && CHECK_EQ(xioctl(ro, DRM_IOCTL_AMDGPU_GEM_CREATE, &rc), 0)) {
		rm.in.handle = rc.out.handle;
		CHECK_EQ(xioctl(ro, DRM_IOCTL_AMDGPU_GEM_MMAP, &rm), 0);
		CHECK_EQ(mmap_err(ro, 4096, rm.out.addr_ptr), -EACCES);
		void *p = ::mmap(nullptr, 4096, PROT_READ, MAP_SHARED, ro, off_t(rm.out.addr_ptr));
		CHECK(p != MAP_FAILED);
		if (p != MAP_FAILED)
			::munmap(p, 4096);
	}
	::close(ro);

	gc.handle = h;
	CHECK_EQ(xioctl(s.rfd, DRM_IOCTL_GEM_CLOSE, &gc), 0);
	CHECK_EQ(xioctl(s.rfd, DRM_IOCTL_GEM_CLOSE, &gc), -EINVAL);	// double close
}

void test_runtime_faults(const Setup &s)
{
	CHECK_EQ(set_faults("AMDKFD_IOC_GET_VERSION:nth=2:errno=EIO"), 0);
	kfd_ioctl_get_version_args v{};
	CHECK_EQ(xioctl(s.kfd, AMDKFD_IOC_GET_VERSION, &v), 0);
	CHECK_EQ(xioctl(s.kfd, AMDKFD_IOC_GET_VERSION, &v), -EIO);	// the 2nd call
	CHECK_EQ(xioctl(s.kfd, AMDKFD_IOC_GET_VERSION, &v), 0);
	CHECK(set_faults("AMDKFD_IOC_GET_VERSION:nth=x") < 0);	// rejected spec
	CHECK_EQ(set_faults(""), 0);					// clear
	CHECK_EQ(xioctl(s.kfd, AMDKFD_IOC_GET_VERSION, &v), 0);
}

// `ctl counters`' "stalls".
uint64_t stalls()
{
	const std::string c = introspect("counters");
	const size_t at = c.find("\"stalls\":");
	return at == std::string::npos ? ~0ull : std::strtoull(c.c_str() + at + 9, nullptr, 10);
}

// A `stall` rule holds the call until its caller has ended; the rule fires
// once, and the daemon answers everyone else meanwhile.
void test_stall_fault(const Setup &s)
{
	const uint64_t before = stalls();
	CHECK_EQ(set_faults("AMDKFD_IOC_GET_VERSION:stall"), 0);
	const pid_t child = ::fork();
	if (child == 0) {
		const int kfd = ::open("/dev/kfd", O_RDWR | O_CLOEXEC);
		kfd_ioctl_get_version_args v{};
		(void)::ioctl(kfd, AMDKFD_IOC_GET_VERSION, &v);
		_exit(3); // the stall never lets it get here
	}
	bool held = false;
	for (int i = 0; i < 500 && !held; i++) {
		held = stalls() == before + 1;
		if (!held)
			::usleep(10000);
	}
	CHECK(held);
	::usleep(100000);
	int status = 0;
	CHECK_EQ(::waitpid(child, &status, WNOHANG), 0); // still in the call
	kfd_ioctl_get_version_args v{};
	CHECK_EQ(xioctl(s.kfd, AMDKFD_IOC_GET_VERSION, &v), 0); // the rule fired once
	::kill(child, SIGKILL);
	CHECK_EQ(::waitpid(child, &status, 0), child);
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	CHECK_EQ(set_faults(""), 0);
	CHECK_EQ(xioctl(s.kfd, AMDKFD_IOC_GET_VERSION, &v), 0);
	CHECK_EQ(stalls(), before + 1);
}

// AMDKFD_IOC_SVM with its attributes in the cmd's size (as libhsakmt
// issues it), more of them than the emulator's argument buffer holds; and
// SMI_EVENTS' fd, installed in this process by the transport.
void test_svm_smi(const Setup &s)
{
	constexpr size_t kPages = 2, kAttrs = 300;
	void *mem = ::mmap(nullptr, kPages * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(mem != MAP_FAILED);
	if (mem == MAP_FAILED)
		return;
	std::vector<uint8_t> buf(sizeof(kfd_ioctl_svm_args) + kAttrs * sizeof(kfd_ioctl_svm_attribute));
	auto *a = reinterpret_cast<kfd_ioctl_svm_args *>(buf.data());
	auto svm = [&](uint32_t op, uint32_t nattr, size_t size) {
		a->start_addr = reinterpret_cast<uint64_t>(mem);
		a->size = kPages * 4096;
		a->op = op;
		a->nattr = nattr;
		const unsigned long cmd = _IOC(_IOC_READ | _IOC_WRITE, 'K', _IOC_NR(AMDKFD_IOC_SVM), size);
		const int r = ::ioctl(s.kfd, cmd, buf.data());
		return r < 0 ? -errno : r;
	};
	a->attrs[0] = {KFD_IOCTL_SVM_ATTR_ACCESS, s.gpu};
	CHECK_EQ(svm(KFD_IOCTL_SVM_OP_SET_ATTR, 1, sizeof(kfd_ioctl_svm_args)), -EINVAL); // cmd without the attribute
	CHECK_EQ(svm(KFD_IOCTL_SVM_OP_SET_ATTR, 1, sizeof(kfd_ioctl_svm_args) + 8), 0);
	CHECK_EQ(svm(9, 1, sizeof(kfd_ioctl_svm_args) + 8), EINVAL); // svm_ioctl's positive EINVAL
	for (size_t i = 0; i < kAttrs; i++)
		a->attrs[i] = {i % 2 ? KFD_IOCTL_SVM_ATTR_GRANULARITY : KFD_IOCTL_SVM_ATTR_ACCESS, s.gpu};
	CHECK_EQ(svm(KFD_IOCTL_SVM_OP_GET_ATTR, kAttrs, buf.size()), 0);
	size_t wrong = 0;
	for (size_t i = 0; i < kAttrs; i++)
		wrong += i % 2 ? a->attrs[i].value != 9 : a->attrs[i].type != KFD_IOCTL_SVM_ATTR_ACCESS;
	CHECK_EQ(wrong, size_t{0});
	::munmap(mem, kPages * 4096);

	kfd_ioctl_smi_events_args e{0xdead, 0};
	CHECK_EQ(xioctl(s.kfd, AMDKFD_IOC_SMI_EVENTS, &e), -EINVAL);
	e = {s.gpu, 0};
	CHECK_EQ(xioctl(s.kfd, AMDKFD_IOC_SMI_EVENTS, &e), 0);
	const int fd = static_cast<int>(e.anon_fd);
	CHECK(fd > 2);
	CHECK_EQ(::fcntl(fd, F_GETFD) & FD_CLOEXEC, 0); // anon_inode_getfd(O_RDWR): not close-on-exec
	char ev[64];
	CHECK_EQ(::read(fd, ev, sizeof ev), ssize_t{-1});
	CHECK_EQ(errno, EAGAIN);
	const uint64_t mask = 1;
	CHECK_EQ(::write(fd, &mask, sizeof mask), ssize_t{sizeof mask});
	CHECK_EQ(::close(fd), 0);
}

} // namespace

int main(int argc, char **argv)
{
	const MachineDesc m = machine_from_args(argc, argv);
	const auto gpus = gpu_nodes(m);
	if (gpus.empty())
		return 1;
	Setup s;
	s.gpu = gpus[0]->gpu_id;
	s.minor = gpus[0]->drm_render_minor;
	s.kfd = ::open("/dev/kfd", O_RDWR | O_CLOEXEC);
	s.rfd = ::open(("/dev/dri/renderD" + std::to_string(s.minor)).c_str(), O_RDWR | O_CLOEXEC);
	if (s.kfd < 0 || s.rfd < 0)
		return 1;
	run("KFD dispatch: unknown nr, short struct, bad pointer", [&] { test_kfd_dispatch(s); });
	run("ACQUIRE_VM: bad fd, foreign file, unknown gpu, rebind", [&] { test_acquire(s); });
	run("ALLOC/MAP/UNMAP/FREE: sizes, handles, peers, busy, double free", [&] { test_memory(s); });
	run("CREATE/DESTROY_QUEUE and events: types, limits, ids", [&] { test_queues(s); });
	run("CRIU_OP: bad op, state machine, capability", [&] { test_criu_rules(s); });
	run("calls from a process that does not own the context", [&] { test_non_owner(s); });
	run("/dev/kfd mmap offsets", [&] { test_kfd_mmap(s); });
	run("render node: unknown ioctls, handles, VA, PRIME, ctx, userptr, mmap", [&] { test_render(s); });
	run("SVM attributes beyond the argument buffer, SMI_EVENTS fd", [&] { test_svm_smi(s); });
	run("fault rules changed at run time", [&] { test_runtime_faults(s); });
	run("a stall holds the call until its caller ends", [&] { test_stall_fault(s); });
	return summary();
}
