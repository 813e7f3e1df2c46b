// SPDX-License-Identifier: GPL-2.0-only
/*
 * The witness plugin: records every call CRIU makes to it, one line per call
 * ("<pid>\t<EVENT> <args>"), appended to the file named by the environment
 * variable REALCRIU_WITNESS_LOG. Every hook returns -ENOTSUP, so it changes
 * nothing and CRIU offers each call to the next plugin. Loaded after
 * amdgpu_plugin, it sees exactly the calls that amdgpu_plugin passed on.
 *
 * WITNESS_MAX_HOOKS (13 or 15, set by the build) must not exceed the hook
 * count of the CRIU that loads it: 4.0-4.2.1 refuse more than 13.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "criu_abi_facts.h"

#ifndef WITNESS_MAX_HOOKS
#error "WITNESS_MAX_HOOKS must be defined (13 or 15)"
#endif

static void record(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void record(const char *fmt, ...)
{
	const char *path = getenv("REALCRIU_WITNESS_LOG");
	char line[512];
	int n = snprintf(line, sizeof(line), "%d\t", (int)getpid());
	va_list ap;

	if (!path || n < 0)
		return;
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	/* One write per line with O_APPEND: lines from CRIU's forked
	 * restore children do not interleave. */
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	if (write(fd, line, (size_t)n) != n)
		fprintf(stderr, "realcriu_witness: short write to %s\n", path);
	close(fd);
}

static int witness_init(int stage)
{
	if (!getenv("REALCRIU_WITNESS_LOG")) {
		fprintf(stderr, "realcriu_witness: REALCRIU_WITNESS_LOG is not set\n");
		return -1;
	}
	record("init stage=%d", stage);
	return 0;
}

static void witness_exit(int stage, int ret)
{
	record("exit stage=%d ret=%d", stage, ret);
}

static int dump_unix_sk(int fd, int id)
{
	record("DUMP_UNIX_SK fd=%d id=%d", fd, id);
	return -ENOTSUP;
}

static int restore_unix_sk(int id)
{
	record("RESTORE_UNIX_SK id=%d", id);
	return -ENOTSUP;
}

static int dump_ext_file(int fd, int id)
{
	record("DUMP_EXT_FILE fd=%d id=%d", fd, id);
	return -ENOTSUP;
}

static int restore_ext_file(int id, bool *retry_needed)
{
	(void)retry_needed;
	record("RESTORE_EXT_FILE id=%d", id);
	return -ENOTSUP;
}

static int dump_ext_mount(char *mountpoint, int id)
{
	record("DUMP_EXT_MOUNT mountpoint=%s id=%d", mountpoint ? mountpoint : "(null)", id);
	return -ENOTSUP;
}

static int restore_ext_mount(int id, char *mountpoint, char *old_root, int *is_file)
{
	(void)old_root;
	(void)is_file;
	record("RESTORE_EXT_MOUNT id=%d mountpoint=%s", id, mountpoint ? mountpoint : "(null)");
	return -ENOTSUP;
}

static int dump_ext_link(int index, int type, char *kind)
{
	record("DUMP_EXT_LINK index=%d type=%d kind=%s", index, type, kind ? kind : "(null)");
	return -ENOTSUP;
}

static int handle_device_vma(int fd, const struct stat *st)
{
	record("HANDLE_DEVICE_VMA fd=%d rdev=0x%llx", fd,
	       st ? (unsigned long long)st->st_rdev : 0ull);
	return -ENOTSUP;
}

static int update_vma_map(const char *path, uint64_t addr, uint64_t old_pgoff, uint64_t *new_pgoff,
			  int *plugin_fd)
{
	(void)old_pgoff;
	(void)new_pgoff;
	(void)plugin_fd;
	record("UPDATE_VMA_MAP path=%s addr=0x%llx", path ? path : "(null)", (unsigned long long)addr);
	return -ENOTSUP;
}

static int resume_devices_late(int pid)
{
	record("RESUME_DEVICES_LATE pid=%d", pid);
	return -ENOTSUP;
}

static int pause_devices(int pid)
{
	record("PAUSE_DEVICES pid=%d", pid);
	return -ENOTSUP;
}

static int checkpoint_devices(int pid)
{
	record("CHECKPOINT_DEVICES pid=%d", pid);
	return -ENOTSUP;
}

static int post_forking(void)
{
	record("POST_FORKING");
	return -ENOTSUP;
}

static int restore_init(void)
{
	record("RESTORE_INIT");
	return -ENOTSUP;
}

static int dump_devices_late(int id)
{
	record("DUMP_DEVICES_LATE id=%d", id);
	return -ENOTSUP;
}

__attribute__((visibility("default"))) struct realcriu_plugin_desc CR_PLUGIN_DESC = {
	.name = "realcriu_witness",
	.init = witness_init,
	.exit = witness_exit,
	.version = REALCRIU_PLUGIN_VERSION,
	.max_hooks = WITNESS_MAX_HOOKS,
	.hooks = {
		[0] = (void *)dump_unix_sk,
		[1] = (void *)restore_unix_sk,
		[2] = (void *)dump_ext_file,
		[3] = (void *)restore_ext_file,
		[4] = (void *)dump_ext_mount,
		[5] = (void *)restore_ext_mount,
		[6] = (void *)dump_ext_link,
		[7] = (void *)handle_device_vma,
		[8] = (void *)update_vma_map,
		[9] = (void *)resume_devices_late,
		[10] = (void *)pause_devices,
		[11] = (void *)checkpoint_devices,
		[12] = (void *)post_forking,
		[13] = (void *)restore_init,
		[14] = (void *)dump_devices_late,
	},
};
