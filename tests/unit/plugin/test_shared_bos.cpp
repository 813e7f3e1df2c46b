// SPDX-License-Identifier: GPL-2.0-only
//
// The restore's table of shared BOs (plugin/shared_bos.h) across processes
// forked after it was made, as CRIU forks the restored tasks: the first
// taker creates, the others get its fd; a creator that fails or dies ends
// its waiters at once; ids outside the table are refused.
//
// This program exports fdstore_add and fdstore_get (ENABLE_EXPORTS), found
// by the plugin's CRIU API lookup as CRIU's own would be: a datagram socket
// connected to itself, whose queued messages carry the stored fds, read back
// by peeking (SO_PEEK_OFF), and a shared counter; made before each test
// forks. A memfd stands for a BO's dma-buf.
#include <criterion/criterion.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstring>

#include "plugin/shared_bos.h"

using namespace amdcr;

namespace {

struct Store {
	int sk = -1;
	std::atomic<int> *next = nullptr; // shared with the forked children
};
Store g_store;

void store_setup()
{
	g_store.sk = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	cr_assert(g_store.sk >= 0);
	sockaddr_un a{};
	a.sun_family = AF_UNIX;
	const int n = std::snprintf(a.sun_path + 1, sizeof(a.sun_path) - 1, "amdcr-test-fdstore-%d", ::getpid());
	const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
	cr_assert(::bind(g_store.sk, reinterpret_cast<sockaddr *>(&a), len) == 0);
	cr_assert(::connect(g_store.sk, reinterpret_cast<sockaddr *>(&a), len) == 0);
	void *p = ::mmap(nullptr, sizeof(std::atomic<int>), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert(p != MAP_FAILED);
	g_store.next = new (p) std::atomic<int>(0);
}

void store_teardown()
{
	::close(g_store.sk);
	::munmap(g_store.next, sizeof(std::atomic<int>));
}

msghdr message(iovec *iov, char *ctl, size_t ctl_len)
{
	msghdr m{};
	m.msg_iov = iov;
	m.msg_iovlen = 1;
	m.msg_control = ctl;
	m.msg_controllen = ctl_len;
	return m;
}

ino_t inode(int fd)
{
	struct stat st {};
	cr_assert(::fstat(fd, &st) == 0);
	return st.st_ino;
}

// A memfd: the "dma-buf" a creator publishes.
int new_buffer()
{
	const int fd = ::memfd_create("shared-bo", MFD_CLOEXEC);
	cr_assert(fd >= 0);
	return fd;
}

void expect_error(const Result<SharedBoTable::Taken> &r, int code, const char *text)
{
	cr_assert_not(r.ok(), "expected an error with \"%s\"", text);
	cr_assert_eq(r.error().code(), code, "%s", r.error().message().c_str());
	cr_assert(r.error().message().find(text) != std::string::npos, "%s", r.error().message().c_str());
}

} // namespace

extern "C" __attribute__((visibility("default"))) int fdstore_add(int fd)
{
	char byte = 0;
	iovec iov{&byte, 1};
	alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))] = {};
	msghdr m = message(&iov, ctl, sizeof(ctl));
	cmsghdr *c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
	// One process sends at a time in these tests: no lock needed.
	if (::sendmsg(g_store.sk, &m, 0) != 1)
		return -1;
	return g_store.next->fetch_add(1);
}

extern "C" __attribute__((visibility("default"))) int fdstore_get(int id)
{
	char byte = 0;
	iovec iov{&byte, 1};
	alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))] = {};
	msghdr m = message(&iov, ctl, sizeof(ctl));
	if (::setsockopt(g_store.sk, SOL_SOCKET, SO_PEEK_OFF, &id, sizeof(id)) != 0 ||
	    ::recvmsg(g_store.sk, &m, MSG_PEEK | MSG_DONTWAIT | MSG_CMSG_CLOEXEC) != 1)
		return -1;
	int fd = -1;
	std::memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof(int));
	return fd;
}

TestSuite(shared_bos, .init = store_setup, .fini = store_teardown);

Test(shared_bos, first_taker_creates_then_every_taker_gets_its_buffer)
{
	auto table = SharedBoTable::create(4);
	cr_assert(table.ok());
	auto first = table->take(3);
	cr_assert(first.ok() && first->claim, "the first take must be the claim to create");
	const int buf = new_buffer();
	cr_assert(first->claim->publish(buf).ok());
	for (int i = 0; i < 2; i++) {
		auto again = table->take(3);
		cr_assert(again.ok(), "%s", again.ok() ? "" : again.error().message().c_str());
		cr_assert_not(again->claim);
		cr_assert_eq(inode(again->dmabuf.get()), inode(buf));
	}
	// Another id is independent.
	auto other = table->take(4);
	cr_assert(other.ok() && other->claim);
	::close(buf);
}

Test(shared_bos, a_taker_waits_for_the_creator_in_another_process)
{
	auto table = SharedBoTable::create(2);
	cr_assert(table.ok());
	int claimed[2], done[2];
	cr_assert(::pipe(claimed) == 0 && ::pipe(done) == 0);
	const pid_t child = ::fork();
	cr_assert(child >= 0);
	if (child == 0) {
		auto t = table->take(1);
		if (!t.ok() || !t->claim)
			std::_Exit(1);
		char c = 1;
		(void)!::write(claimed[1], &c, 1);
		::usleep(200 * 1000); // the parent is waiting by now
		const int buf = new_buffer();
		const ino_t ino = inode(buf);
		if (!t->claim->publish(buf).ok())
			std::_Exit(2);
		(void)!::write(done[1], &ino, sizeof(ino));
		std::_Exit(0);
	}
	char c = 0;
	cr_assert(::read(claimed[0], &c, 1) == 1);
	const auto t0 = std::chrono::steady_clock::now();
	auto t = table->take(1);
	const auto waited = std::chrono::steady_clock::now() - t0;
	cr_assert(t.ok(), "%s", t.ok() ? "" : t.error().message().c_str());
	cr_assert_not(t->claim, "the second taker must not create");
	ino_t ino = 0;
	cr_assert(::read(done[0], &ino, sizeof(ino)) == sizeof(ino));
	cr_assert_eq(inode(t->dmabuf.get()), ino, "not the creator's buffer");
	cr_assert(waited >= std::chrono::milliseconds(100), "did not wait for the creator");
	int status = 0;
	cr_assert(::waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

Test(shared_bos, a_creator_that_fails_ends_its_waiters)
{
	auto table = SharedBoTable::create(1);
	cr_assert(table.ok());
	const pid_t child = ::fork();
	cr_assert(child >= 0);
	if (child == 0) {
		bool claimed = false;
		{
			auto t = table->take(1);
			claimed = t.ok() && t->claim.has_value();
		} // the claim is dropped unpublished: the creation failed
		std::_Exit(claimed ? 0 : 1);
	}
	int status = 0;
	cr_assert(::waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	expect_error(table->take(1), EIO, "failed to create it");
}

Test(shared_bos, a_creator_that_dies_ends_its_waiters)
{
	auto table = SharedBoTable::create(1);
	cr_assert(table.ok());
	const pid_t child = ::fork();
	cr_assert(child >= 0);
	if (child == 0) {
		auto t = table->take(1);
		if (t.ok() && t->claim)
			::kill(::getpid(), SIGKILL); // no destructor runs
		std::_Exit(1);
	}
	int status = 0;
	cr_assert(::waitpid(child, &status, 0) == child && WIFSIGNALED(status));
	expect_error(table->take(1), ESRCH, "is gone");
}

Test(shared_bos, ids_outside_the_table_are_refused)
{
	auto table = SharedBoTable::create(2);
	cr_assert(table.ok());
	expect_error(table->take(0), EINVAL, "outside the checkpoint's 1..2");
	expect_error(table->take(3), EINVAL, "outside the checkpoint's 1..2");
}
