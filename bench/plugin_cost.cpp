// SPDX-License-Identifier: GPL-2.0-only
//
// The plugin's own time in a GPU-less CRIU dump, without CRIU around it:
// what bench.py's GPU-less row sets beside the end-to-end figure, which a
// busy VM's noise can hide. Each run is a fresh process (a plugin is
// loaded once per criu run) that does what CRIU 4.2.1 does with a plugin
// on a dump of a process without GPU: dlopen (RTLD_NOW, as CRIU), init(DUMP),
// exit(DUMP, 0) (4.2.1 has no per-task dump hook the plugin registers).
// The executable exports what the plugin looks up in CRIU (print_on_level,
// criu_get_image_dir, and the hook registry cr_plugin_ctl, whose size
// gives the plugin the hook count: 4.2.1's 13 here). It is linked to
// libprotobuf-c, as criu is, so the plugin's dlopen finds it loaded.
//
//   amdcr-plugin-cost PLUGIN.so RUNS
//
// prints one line per run: the microseconds from dlopen to the end of exit.
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include <protobuf-c/protobuf-c.h>

#include "amdgpu_plugin/criu_plugin_abi.h"

extern "C" {
// CRIU 4.2.1's registry: one list head, then one per hook of its 13
// (criu/include/plugin.h).
__attribute__((visibility("default"))) void *cr_plugin_ctl[2 * (1 + 13)];
__attribute__((visibility("default"))) void print_on_level(unsigned int, const char *, ...) {}
__attribute__((visibility("default"))) int criu_get_image_dir(void) { return -1; }
}

namespace {

using Clock = std::chrono::steady_clock;

// One run in a fresh child: the microseconds it took, or -1.
long one_run(const char *plugin)
{
	int p[2];
	if (pipe(p) < 0)
		return -1;
	const pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		const auto t0 = Clock::now();
		void *h = dlopen(plugin, RTLD_NOW | RTLD_LOCAL);
		auto *desc = h ? static_cast<cr_plugin_desc_t *>(dlsym(h, "CR_PLUGIN_DESC")) : nullptr;
		long us = -1;
		if (desc && desc->init(CR_PLUGIN_STAGE__DUMP) == 0) {
			desc->exit(CR_PLUGIN_STAGE__DUMP, 0);
			us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count();
		} else if (!h) {
			std::fprintf(stderr, "amdcr-plugin-cost: %s\n", dlerror());
		}
		if (write(p[1], &us, sizeof(us)) != sizeof(us))
			_exit(1);
		_exit(0);
	}
	close(p[1]);
	long us = -1;
	if (pid < 0 || read(p[0], &us, sizeof(us)) != sizeof(us))
		us = -1;
	close(p[0]);
	if (pid > 0)
		waitpid(pid, nullptr, 0);
	return us;
}

} // namespace

int main(int argc, char **argv)
{
	if (argc != 3 || std::atoi(argv[2]) < 1) {
		std::fprintf(stderr, "usage: amdcr-plugin-cost PLUGIN.so RUNS (RUNS >= 1)\n");
		return 2;
	}
	// Loaded from the start, as in criu (see the top).
	if (!protobuf_c_version())
		return 1;
	const int runs = std::atoi(argv[2]);
	for (int i = 0; i < runs; i++) {
		const long us = one_run(argv[1]);
		if (us < 0)
			return 1;
		std::printf("%ld\n", us);
	}
	return 0;
}
