// SPDX-License-Identifier: GPL-2.0-only
//
// libkfdemu_test_fstat_hook.so: preloaded after the shim (test_transport
// --fstat-hook re-executes itself so), it is the "real" fstat the shim
// finds (dlsym RTLD_NEXT). kfdemu_test_after_fstat(fd, cb) arms it for the
// calling thread: the next fstat of `fd` on that thread runs cb(fd) after
// the real fstat and before returning its (now stale) result. So a test
// can change what an fd is between the shim's fd_key and its request to
// the daemon, as a CRIU dump and restore of a thread frozen there does.
#include <dlfcn.h>
#include <sys/stat.h>

namespace {
thread_local int t_fd = -1;
thread_local void (*t_cb)(int) = nullptr;
} // namespace

extern "C" {

__attribute__((visibility("default"))) void kfdemu_test_after_fstat(int fd, void (*cb)(int))
{
	t_fd = fd;
	t_cb = cb;
}

__attribute__((visibility("default"))) int fstat(int fd, struct stat *st)
{
	using Fn = int (*)(int, struct stat *);
	static Fn next = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "fstat"));
	const int r = next(fd, st);
	if (t_cb && fd == t_fd) {
		void (*cb)(int) = t_cb;
		t_cb = nullptr;
		t_fd = -1;
		cb(fd);
	}
	return r;
}

} // extern "C"
