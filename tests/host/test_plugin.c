/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * A CRIU 4.x plugin for testing the host: it records every call it gets and
 * does what its environment tells it. Copies of test_plugin.so under other
 * file names are separate plugins; each takes its name from its file name
 * (tp_a.so -> "tp_a") and reads its settings from variables prefixed with
 * that name in upper case (TP_A_...):
 *
 *   TESTPLUGIN_LOG        file every copy appends its records to, one line
 *                         per call: "<name> <pid> <HOOK>(<args>) = <ret>"
 *   <NAME>_INIT           init()'s return value (default 0)
 *   <NAME>_VERSION        descriptor version (default CRIU_PLUGIN_VERSION)
 *   <NAME>_MAX_HOOKS      descriptor max_hooks (default CR_PLUGIN_HOOK__MAX)
 *   <NAME>_UNREGISTER     comma-separated hooks left out of the descriptor
 *   <NAME>_SAY=LEVEL:TEXT init() also logs TEXT through print_on_level(LEVEL)
 *   <NAME>_INVENTORY=1    init(DUMP) calls add_inventory_plugin(name), and
 *                         init(RESTORE) check_and_remove_inventory_plugin()
 *   <NAME>_<HOOK>         what the hook does (HOOK as in the ABI, e.g.
 *                         DUMP_EXT_FILE); unset: return -ENOTSUP.
 *       N                 return N
 *       if:TEXT:N         return N when the fd's link (DUMP_EXT_FILE,
 *                         HANDLE_DEVICE_VMA) or the path (UPDATE_VMA_MAP)
 *                         contains TEXT, else -ENOTSUP
 *       open:PATH         RESTORE_EXT_FILE: return open(PATH);
 *                         UPDATE_VMA_MAP: *plugin_fd = open(PATH),
 *                         *new_pgoff = 0, return 1
 *       retry:PATH        RESTORE_EXT_FILE: the first call per id sets
 *                         *retry_needed and returns 0, the next open(PATH)
 *       pgoff:N           UPDATE_VMA_MAP: *new_pgoff = N, return 1
 *   <NAME>_MAP_NEAR=ADDR:SIZE  init(RESTORE) maps SIZE anonymous bytes with
 *                         ADDR as the hint (as a plugin's buffer may land
 *                         anywhere) and records where they went
 *
 * DUMP_EXT_FILE also writes "<name>-<id>.img" into criu_get_image_dir() when
 * it returns 0, and RESTORE_EXT_FILE records whether that file is there.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "amdgpu_plugin/criu_plugin_abi.h"

#define EXPORT __attribute__((visibility("default")))

EXPORT cr_plugin_desc_t CR_PLUGIN_DESC;

static char plugin_name[64] = "test_plugin";
static char env_prefix[64] = "TEST_PLUGIN";
static int retried_ids[256];
static int n_retried;

static const char *const hook_names[CR_PLUGIN_HOOK__MAX] = {
	"DUMP_UNIX_SK",	       "RESTORE_UNIX_SK",   "DUMP_EXT_FILE",	  "RESTORE_EXT_FILE",
	"DUMP_EXT_MOUNT",      "RESTORE_EXT_MOUNT", "DUMP_EXT_LINK",	  "HANDLE_DEVICE_VMA",
	"UPDATE_VMA_MAP",      "RESUME_DEVICES_LATE", "PAUSE_DEVICES",	  "CHECKPOINT_DEVICES",
	"POST_FORKING",	       "RESTORE_INIT",	    "DUMP_DEVICES_LATE",
};

static const char *setting(const char *what)
{
	char key[160];
	snprintf(key, sizeof(key), "%s_%s", env_prefix, what);
	return getenv(key);
}

static void record(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void record(const char *fmt, ...)
{
	const char *path = getenv("TESTPLUGIN_LOG");
	char line[1024];
	int n;
	va_list ap;

	if (!path)
		return;
	n = snprintf(line, sizeof(line), "%s %d ", plugin_name, (int)getpid());
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	if (write(fd, line, (size_t)n) < 0) {
		/* nothing to do: the test sees the record missing */
	}
	close(fd);
}

static void say(unsigned level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(unsigned level, const char *fmt, ...)
{
	criu_print_on_level_t *p = (criu_print_on_level_t *)dlsym(RTLD_DEFAULT, "print_on_level");
	char text[512];
	va_list ap;

	if (!p)
		return;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	p(level, "%s", text);
}

static void fd_link(int fd, char *buf, size_t len)
{
	char proc[64];
	ssize_t n;

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	n = readlink(proc, buf, len - 1);
	if (n < 0)
		n = 0;
	buf[n] = '\0';
}

/* The integer of spec "N" or "if:TEXT:N" (when subject contains TEXT). */
static int spec_value(const char *spec, const char *subject)
{
	if (!spec || !*spec)
		return -ENOTSUP;
	if (!strncmp(spec, "if:", 3)) {
		const char *text = spec + 3;
		const char *colon = strrchr(text, ':');
		char want[256];
		size_t len;

		if (!colon)
			return -EINVAL;
		len = (size_t)(colon - text);
		if (len >= sizeof(want))
			len = sizeof(want) - 1;
		memcpy(want, text, len);
		want[len] = '\0';
		if (!subject || !strstr(subject, want))
			return -ENOTSUP;
		return atoi(colon + 1);
	}
	return atoi(spec);
}

static int image_dir(void)
{
	criu_get_image_dir_t *fn = (criu_get_image_dir_t *)dlsym(RTLD_DEFAULT, "criu_get_image_dir");
	return fn ? fn() : -1;
}

/* <NAME>_MAP_NEAR: a mapping the plugin keeps, hinted at ADDR. */
static void map_near(void)
{
	const char *spec = setting("MAP_NEAR");
	unsigned long long addr, size;
	void *p;

	if (!spec || sscanf(spec, "%llx:%llu", &addr, &size) != 2)
		return;
	p = mmap((void *)(uintptr_t)addr, (size_t)size, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	record("MAP_NEAR(%#llx) = %p", addr, p);
}

static int tp_init(int stage)
{
	const char *v = setting("INIT");
	int ret = v ? atoi(v) : 0;
	int dir = image_dir();
	struct stat st;
	const char *dirstate = dir < 0 ? "none" : (fstat(dir, &st) == 0 && S_ISDIR(st.st_mode)) ? "ok" : "bad";
	const char *inv = "";

	if (setting("INVENTORY") && atoi(setting("INVENTORY"))) {
		if (stage == CR_PLUGIN_STAGE__DUMP) {
			int (*add)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "add_inventory_plugin");
			inv = add && add(plugin_name) == 0 ? ", inventory=added" : ", inventory=failed";
		} else if (stage == CR_PLUGIN_STAGE__RESTORE) {
			bool (*chk)(const char *, size_t) =
				(bool (*)(const char *, size_t))dlsym(RTLD_DEFAULT, "check_and_remove_inventory_plugin");
			inv = chk && chk(plugin_name, strlen(plugin_name) + 1) ? ", inventory=listed" : ", inventory=absent";
		}
	}
	say(CRIU_LOG_INFO, "%s: init stage %d\n", plugin_name, stage);
	if (setting("SAY")) {
		const char *text = strchr(setting("SAY"), ':');
		if (text)
			say((unsigned)atoi(setting("SAY")), "%s\n", text + 1);
	}
	record("INIT(stage=%d, imgdir=%s%s) = %d", stage, dirstate, inv, ret);
	if (stage == CR_PLUGIN_STAGE__RESTORE)
		map_near();
	return ret;
}

static void tp_exit(int stage, int ret)
{
	record("EXIT(stage=%d, ret=%d)", stage, ret);
}

static int dump_ext_file(int fd, int id)
{
	char link[256];
	int ret;

	fd_link(fd, link, sizeof(link));
	ret = spec_value(setting("DUMP_EXT_FILE"), link);
	if (ret == 0) {
		char name[128];
		int dir = image_dir();
		snprintf(name, sizeof(name), "%s-%d.img", plugin_name, id);
		if (dir >= 0) {
			int f = openat(dir, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
			if (f >= 0)
				close(f);
		}
	}
	record("DUMP_EXT_FILE(fd=%d, id=%d, path=%s) = %d", fd, id, link, ret);
	return ret;
}

static int restore_ext_file(int id, bool *retry_needed)
{
	const char *spec = setting("RESTORE_EXT_FILE");
	char name[128];
	int dir = image_dir();
	int ret;
	const char *img;

	snprintf(name, sizeof(name), "%s-%d.img", plugin_name, id);
	img = dir >= 0 && faccessat(dir, name, F_OK, 0) == 0 ? "present" : "absent";
	if (spec && !strncmp(spec, "retry:", 6)) {
		int i, seen = 0;
		for (i = 0; i < n_retried; i++)
			seen |= retried_ids[i] == id;
		if (!seen && n_retried < 256) {
			retried_ids[n_retried++] = id;
			*retry_needed = true;
			record("RESTORE_EXT_FILE(id=%d, img=%s) = 0 retry", id, img);
			return 0;
		}
		ret = open(spec + 6, O_RDWR | O_CLOEXEC);
		if (ret < 0)
			ret = -errno;
	} else if (spec && !strncmp(spec, "open:", 5)) {
		ret = open(spec + 5, O_RDWR | O_CLOEXEC);
		if (ret < 0)
			ret = -errno;
	} else {
		ret = spec_value(spec, NULL);
	}
	record("RESTORE_EXT_FILE(id=%d, img=%s) = %d", id, img, ret);
	return ret;
}

static int handle_device_vma(int fd, const struct stat *st)
{
	char link[256];
	int ret;

	fd_link(fd, link, sizeof(link));
	ret = spec_value(setting("HANDLE_DEVICE_VMA"), link);
	record("HANDLE_DEVICE_VMA(fd=%d, rdev=%u:%u, chr=%d, path=%s) = %d", fd, major(st->st_rdev),
	       minor(st->st_rdev), S_ISCHR(st->st_mode) ? 1 : 0, link, ret);
	return ret;
}

static int update_vma_map(const char *path, const uint64_t addr, const uint64_t old_pgoff,
			  uint64_t *new_pgoff, int *plugin_fd)
{
	const char *spec = setting("UPDATE_VMA_MAP");
	int ret;

	if (spec && !strncmp(spec, "open:", 5)) {
		*plugin_fd = open(spec + 5, O_RDWR | O_CLOEXEC);
		*new_pgoff = 0;
		ret = *plugin_fd >= 0 ? 1 : -errno;
	} else if (spec && !strncmp(spec, "pgoff:", 6)) {
		*new_pgoff = strtoull(spec + 6, NULL, 0);
		ret = 1;
	} else {
		ret = spec_value(spec, path);
	}
	record("UPDATE_VMA_MAP(path=%s, addr=%#llx, old_pgoff=%#llx) = %d", path,
	       (unsigned long long)addr, (unsigned long long)old_pgoff, ret);
	return ret;
}

/* Whether the task's threads are traced (frozen by the host) right now:
 * 1 all, 0 none, 2 some, -1 no such task. */
static int traced(int pid)
{
	char path[384], line[256];
	int all = 1, none = 1, seen = 0;
	struct dirent *de;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	d = opendir(path);
	if (!d)
		return -1;
	while ((de = readdir(d))) {
		FILE *f;
		int tracer = 0;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/status", pid, de->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f))
			if (!strncmp(line, "TracerPid:", 10))
				tracer = atoi(line + 10);
		fclose(f);
		seen = 1;
		if (tracer > 0)
			none = 0;
		else
			all = 0;
	}
	closedir(d);
	if (!seen)
		return -1;
	return all ? 1 : none ? 0 : 2;
}

/* How many of this process's fds link to $TESTPLUGIN_WATCH_PATH. */
static int watched_fds(void)
{
	const char *want = getenv("TESTPLUGIN_WATCH_PATH");
	int fd, n = 0;

	if (!want)
		return -1;
	for (fd = 0; fd < 4096; fd++) {
		char link[256];
		if (fcntl(fd, F_GETFD) < 0)
			continue;
		fd_link(fd, link, sizeof(link));
		n += !strcmp(link, want);
	}
	return n;
}

#define PID_HOOK(fn, HOOK, FMT, ...)                                           \
	static int fn(int pid)                                                 \
	{                                                                      \
		int ret = spec_value(setting(#HOOK), NULL);                    \
		record(#HOOK "(pid=%d" FMT ") = %d", pid, __VA_ARGS__, ret);   \
		return ret;                                                    \
	}
PID_HOOK(pause_devices, PAUSE_DEVICES, ", traced=%d", traced(pid))
PID_HOOK(checkpoint_devices, CHECKPOINT_DEVICES, ", traced=%d", traced(pid))
PID_HOOK(resume_devices_late, RESUME_DEVICES_LATE, ", alive=%d", traced(pid) >= 0)
PID_HOOK(dump_devices_late, DUMP_DEVICES_LATE, ", traced=%d, watched_fds=%d", traced(pid),
	 watched_fds())

static int post_forking(void)
{
	int ret = spec_value(setting("POST_FORKING"), NULL);
	record("POST_FORKING() = %d", ret);
	return ret;
}

static int restore_init(void)
{
	int ret = spec_value(setting("RESTORE_INIT"), NULL);
	record("RESTORE_INIT() = %d", ret);
	return ret;
}

static void set_hook(int hook, void *fn)
{
	const char *skip = setting("UNREGISTER");
	if (skip) {
		const char *p = strstr(skip, hook_names[hook]);
		size_t len = strlen(hook_names[hook]);
		if (p && (p[len] == '\0' || p[len] == ','))
			return;
	}
	CR_PLUGIN_DESC.hooks[hook] = fn;
}

__attribute__((constructor)) static void tp_setup(void)
{
	Dl_info info;
	const char *v;
	size_t i;

	if (dladdr((void *)&CR_PLUGIN_DESC, &info) && info.dli_fname) {
		const char *base = strrchr(info.dli_fname, '/');
		base = base ? base + 1 : info.dli_fname;
		snprintf(plugin_name, sizeof(plugin_name), "%s", base);
		char *dot = strstr(plugin_name, ".so");
		if (dot)
			*dot = '\0';
	}
	for (i = 0; plugin_name[i] && i < sizeof(env_prefix) - 1; i++)
		env_prefix[i] = isalnum((unsigned char)plugin_name[i]) ? (char)toupper((unsigned char)plugin_name[i]) : '_';
	env_prefix[i] = '\0';

	CR_PLUGIN_DESC.name = plugin_name;
	CR_PLUGIN_DESC.init = tp_init;
	CR_PLUGIN_DESC.exit = tp_exit;
	v = setting("VERSION");
	CR_PLUGIN_DESC.version = v ? (unsigned)strtoul(v, NULL, 0) : CRIU_PLUGIN_VERSION;
	v = setting("MAX_HOOKS");
	CR_PLUGIN_DESC.max_hooks = v ? (unsigned)strtoul(v, NULL, 0) : CR_PLUGIN_HOOK__MAX;

	set_hook(CR_PLUGIN_HOOK__DUMP_EXT_FILE, (void *)dump_ext_file);
	set_hook(CR_PLUGIN_HOOK__RESTORE_EXT_FILE, (void *)restore_ext_file);
	set_hook(CR_PLUGIN_HOOK__HANDLE_DEVICE_VMA, (void *)handle_device_vma);
	set_hook(CR_PLUGIN_HOOK__UPDATE_VMA_MAP, (void *)update_vma_map);
	set_hook(CR_PLUGIN_HOOK__RESUME_DEVICES_LATE, (void *)resume_devices_late);
	set_hook(CR_PLUGIN_HOOK__PAUSE_DEVICES, (void *)pause_devices);
	set_hook(CR_PLUGIN_HOOK__CHECKPOINT_DEVICES, (void *)checkpoint_devices);
	set_hook(CR_PLUGIN_HOOK__POST_FORKING, (void *)post_forking);
	set_hook(CR_PLUGIN_HOOK__RESTORE_INIT, (void *)restore_init);
	set_hook(CR_PLUGIN_HOOK__DUMP_DEVICES_LATE, (void *)dump_devices_late);
}
