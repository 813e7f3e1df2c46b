// SPDX-License-Identifier: GPL-2.0-only
//
// A process tree of three that shares one GEM BO through a dma-buf
// (tests/e2e/dmabuf_e2e.py, tests/realcriu):
//
//   dmabuf-tree --dir DIR --root exporter|importer|holder [--size BYTES]
//
// The root takes the role it is given and forks the other two:
//   exporter  creates a GTT BO on renderD128 (libdrm_amdgpu), fills it with
//             the pattern of seed 1 through its CPU mapping, maps it at a
//             GPU VA, exports it as a dma-buf, sends that over SCM_RIGHTS to
//             the two others and closes its own copy;
//   importer  imports the dma-buf into its own render node file (a handle
//             of the same BO), maps it for the CPU and at a GPU VA, and
//             closes the dma-buf;
//   holder    keeps the dma-buf fd as it is, unmapped.
// Each writes DIR/<role> ("fd F", "bo HANDLE CPU SIZE"; the holder "dmabuf
// F SIZE"), dups its render file (holder: its dma-buf) to fd 100, 101 or
// 102 (exporter, importer, holder: how a verifier in a restored task tells
// the roles apart), then creates DIR/ready.<role> and waits for DIR/go.
// Then (after a checkpoint and restore, or not) each checks the pattern of
// seed 1 (the holder through an mmap of its dma-buf; the importer and the
// holder then create DIR/seen1.<role>); the exporter waits for both, writes
// the pattern of seed 2 and creates DIR/phase2; the others wait for it and
// check seed 2 in their view: one BO, not three copies. DIR/result.<role>
// says OK or what failed; the exit status is 0 only when all three passed.
// With $KFDEMU_WORKLOAD_GEM_GAPS set, the exporter's and importer's handle
// of the BO is 2 (a BO made before it and freed).
#include <amdgpu.h>
#include <amdgpu_drm.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "gpu_workload.h"
#include "testcommon/marker.h"
#include "testcommon/pattern.h"

namespace {

constexpr int kRoleFd[3] = {100, 101, 102};
const char *const kRoles[3] = {"exporter", "importer", "holder"};
constexpr uint64_t kVa[2] = {0x7e0000000000ull, 0x7e0100000000ull}; // exporter, importer

std::string g_dir;

bool exists(const std::string &p)
{
	struct stat st;
	return ::stat(p.c_str(), &st) == 0;
}

void touch(const std::string &p)
{
	testcommon::publish_file(p);
}

void wait_for(const std::string &p)
{
	while (!exists(p))
		::usleep(20000);
}

void write_text(const std::string &p, const std::string &s)
{
	testcommon::publish_file(p, s);
}

// Records the role's verdict; its exit status.
int finish(int role, const std::string &verdict)
{
	write_text(g_dir + "/result." + kRoles[role], verdict + "\n");
	return verdict == "OK" ? 0 : 1;
}

int send_fd(int sock, int fd)
{
	char byte = 0;
	iovec iov{&byte, 1};
	alignas(cmsghdr) char buf[CMSG_SPACE(sizeof(int))] = {};
	msghdr msg{};
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = buf;
	msg.msg_controllen = sizeof(buf);
	cmsghdr *c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
	return ::sendmsg(sock, &msg, 0) == 1 ? 0 : -1;
}

int recv_fd(int sock)
{
	char byte = 0;
	iovec iov{&byte, 1};
	alignas(cmsghdr) char buf[CMSG_SPACE(sizeof(int))] = {};
	msghdr msg{};
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = buf;
	msg.msg_controllen = sizeof(buf);
	if (::recvmsg(sock, &msg, 0) != 1)
		return -1;
	cmsghdr *c = CMSG_FIRSTHDR(&msg);
	if (!c || c->cmsg_type != SCM_RIGHTS)
		return -1;
	int fd = -1;
	std::memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}

struct Device {
	int fd = -1;
	amdgpu_device_handle dev = nullptr;
};

bool open_device(Device *d, std::string *why)
{
	d->fd = ::open("/dev/dri/renderD128", O_RDWR | O_CLOEXEC);
	uint32_t major = 0, minor = 0;
	if (d->fd < 0 || amdgpu_device_initialize(d->fd, &major, &minor, &d->dev) != 0) {
		*why = "cannot open renderD128 with libdrm_amdgpu";
		return false;
	}
	return true;
}

// Maps `bo` for the CPU and at GPU VA `va`; its CPU address in *cpu.
bool map_bo(amdgpu_bo_handle bo, uint64_t size, uint64_t va, void **cpu, std::string *why)
{
	if (amdgpu_bo_cpu_map(bo, cpu) != 0) {
		*why = "amdgpu_bo_cpu_map failed";
		return false;
	}
	if (amdgpu_bo_va_op(bo, 0, size, va, 0, AMDGPU_VA_OP_MAP) != 0) {
		*why = "amdgpu_bo_va_op MAP failed";
		return false;
	}
	return true;
}

std::string check(const char *what, const void *p, uint64_t size, uint64_t seed)
{
	const int64_t bad = testcommon::check_pattern(p, size, seed);
	if (bad < 0)
		return "";
	char msg[160];
	std::snprintf(msg, sizeof msg, "%s: seed %llu differs at byte %lld", what,
		      static_cast<unsigned long long>(seed), static_cast<long long>(bad));
	return msg;
}

// The exporter and importer: a BO of their own render file, CPU-mapped.
int run_bo_role(int role, int sock_a, int sock_b, uint64_t size)
{
	Device d;
	std::string why;
	if (!open_device(&d, &why))
		return finish(role, why);
	// $KFDEMU_WORKLOAD_GEM_GAPS: a BO made first and freed once the
	// shared one is there, whose handle is then 2, not the 1 that a new
	// file hands out first.
	amdgpu_bo_handle gap = nullptr;
	if (std::getenv("KFDEMU_WORKLOAD_GEM_GAPS")) {
		amdgpu_bo_alloc_request req{};
		req.alloc_size = 4096;
		req.phys_alignment = 4096;
		req.preferred_heap = AMDGPU_GEM_DOMAIN_GTT;
		if (amdgpu_bo_alloc(d.dev, &req, &gap) != 0)
			return finish(role, "amdgpu_bo_alloc of the gap BO failed");
	}
	amdgpu_bo_handle bo = nullptr;
	if (role == 0) {
		amdgpu_bo_alloc_request req{};
		req.alloc_size = size;
		req.phys_alignment = 4096;
		req.preferred_heap = AMDGPU_GEM_DOMAIN_GTT;
		if (amdgpu_bo_alloc(d.dev, &req, &bo) != 0)
			return finish(role, "amdgpu_bo_alloc failed");
	} else {
		const int dmabuf = recv_fd(sock_a);
		if (dmabuf < 0)
			return finish(role, "no dma-buf received");
		amdgpu_bo_import_result res{};
		if (amdgpu_bo_import(d.dev, amdgpu_bo_handle_type_dma_buf_fd, static_cast<uint32_t>(dmabuf), &res) !=
		    0)
			return finish(role, "amdgpu_bo_import failed");
		bo = res.buf_handle;
		::close(dmabuf);
	}
	if (gap)
		amdgpu_bo_free(gap);
	void *cpu = nullptr;
	if (!map_bo(bo, size, kVa[role], &cpu, &why))
		return finish(role, why);
	if (role == 0) {
		testcommon::fill_pattern(cpu, size, 1);
		uint32_t fd = 0;
		if (amdgpu_bo_export(bo, amdgpu_bo_handle_type_dma_buf_fd, &fd) != 0)
			return finish(role, "amdgpu_bo_export failed");
		if (send_fd(sock_a, static_cast<int>(fd)) || send_fd(sock_b, static_cast<int>(fd)))
			return finish(role, "cannot send the dma-buf");
		::close(static_cast<int>(fd));
	} else if (auto e = check("after the import", cpu, size, 1); !e.empty()) {
		return finish(role, e);
	}
	uint32_t handle = 0;
	amdgpu_bo_export(bo, amdgpu_bo_handle_type_kms, &handle);
	::dup2(amdgpu_device_get_fd(d.dev), kRoleFd[role]);
	char text[200];
	std::snprintf(text, sizeof text, "fd %d\nbo %u %llu %llu\n", amdgpu_device_get_fd(d.dev), handle,
		      static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(cpu)),
		      static_cast<unsigned long long>(size));
	write_text(g_dir + "/" + kRoles[role], text);
	touch(g_dir + "/ready." + kRoles[role]);
	wait_for(g_dir + "/go");

	if (auto e = check("after go", cpu, size, 1); !e.empty())
		return finish(role, e);
	if (role == 0) {
		wait_for(g_dir + "/seen1.importer");
		wait_for(g_dir + "/seen1.holder");
		testcommon::fill_pattern(cpu, size, 2);
		touch(g_dir + "/phase2");
	} else {
		touch(g_dir + "/seen1.importer");
		wait_for(g_dir + "/phase2");
		if (auto e = check("the exporter's write", cpu, size, 2); !e.empty())
			return finish(role, e);
	}
	return finish(role, "OK");
}

// The holder: only the dma-buf fd.
int run_holder(int sock, uint64_t size)
{
	constexpr int role = 2;
	const int dmabuf = recv_fd(sock);
	if (dmabuf < 0)
		return finish(role, "no dma-buf received");
	::dup2(dmabuf, kRoleFd[role]);
	char text[100];
	std::snprintf(text, sizeof text, "dmabuf %d %llu\n", dmabuf, static_cast<unsigned long long>(size));
	write_text(g_dir + "/holder", text);
	touch(g_dir + "/ready.holder");
	wait_for(g_dir + "/go");

	void *p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, dmabuf, 0);
	if (p == MAP_FAILED)
		return finish(role, "mmap of the dma-buf failed");
	if (auto e = check("after go", p, size, 1); !e.empty())
		return finish(role, e);
	touch(g_dir + "/seen1.holder");
	wait_for(g_dir + "/phase2");
	if (auto e = check("the exporter's write", p, size, 2); !e.empty())
		return finish(role, e);
	return finish(role, "OK");
}

} // namespace

int main(int argc, char **argv)
{
	int root = -1;
	uint64_t size = 1 << 20;
	for (int i = 1; i + 1 < argc; i += 2) {
		const std::string a = argv[i];
		if (a == "--dir")
			g_dir = argv[i + 1];
		else if (a == "--size")
			size = std::strtoull(argv[i + 1], nullptr, 0);
		else if (a == "--root")
			for (int r = 0; r < 3; r++)
				if (argv[i + 1] == std::string(kRoles[r]))
					root = r;
	}
	if (g_dir.empty() || root < 0 || size == 0 || size % 4096) {
		std::fprintf(stderr, "usage: dmabuf-tree --dir DIR --root exporter|importer|holder [--size BYTES]\n");
		return 2;
	}
	// The exporter's sockets to the importer and to the holder.
	int imp[2], hold[2];
	if (::socketpair(AF_UNIX, SOCK_STREAM, 0, imp) || ::socketpair(AF_UNIX, SOCK_STREAM, 0, hold))
		return 1;
	auto run = [&](int r) {
		if (r == 0)
			return run_bo_role(0, imp[0], hold[0], size);
		if (r == 1)
			return run_bo_role(1, imp[1], -1, size);
		return run_holder(hold[1], size);
	};
	pid_t kids[2];
	int n = 0;
	for (int r = 0; r < 3; r++) {
		if (r == root)
			continue;
		const pid_t pid = ::fork();
		if (pid < 0)
			return 1;
		if (pid == 0)
			std::_Exit(run(r));
		kids[n++] = pid;
	}
	int failed = run(root);
	for (int i = 0; i < n; i++) {
		int status = 0;
		if (::waitpid(kids[i], &status, 0) != kids[i] || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
			failed = 1;
	}
	return failed;
}
