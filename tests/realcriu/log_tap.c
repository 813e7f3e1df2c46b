// SPDX-License-Identifier: GPL-2.0-only
/*
 * The level tap, preloaded into criu (LD_PRELOAD) by the realcriu tests.
 *
 * CRIU's log lines carry no level for messages a plugin prints through
 * print_on_level(): at -v4, "(00.001234) amdgpu_plugin: ..." may be an
 * error or a debug line. Plugins find print_on_level with
 * dlsym(RTLD_DEFAULT, ...); this library defines dlsym, which the global
 * scope offers before libc's, and answers that one lookup with a wrapper.
 * The wrapper appends "<pid>\t<library>\t<level>\t<message>" to the file
 * named by REALCRIU_LOG_TAP (the library is the caller's file name, found
 * with dladdr) and then forwards the message unchanged to CRIU's
 * print_on_level. Every other lookup is forwarded to libc's dlsym as is
 * (RTLD_NEXT, relative to the caller, cannot be forwarded and is refused).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef void *dlsym_fn(void *handle, const char *name);
typedef void print_on_level_fn(unsigned int level, const char *fmt, ...);

static dlsym_fn *libc_dlsym(void)
{
	static dlsym_fn *fn;

	if (!fn)
		fn = (dlsym_fn *)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
	if (!fn)
		fn = (dlsym_fn *)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
	if (!fn) {
		fprintf(stderr, "realcriu log_tap: libc's dlsym not found\n");
		abort();
	}
	return fn;
}

static print_on_level_fn *criu_print;

static const char *caller_name(const void *addr)
{
	Dl_info info;

	if (!dladdr(addr, &info) || !info.dli_fname)
		return "?";
	const char *slash = strrchr(info.dli_fname, '/');
	return slash ? slash + 1 : info.dli_fname;
}

static void record(const char *who, unsigned int level, const char *msg)
{
	const char *path = getenv("REALCRIU_LOG_TAP");
	char line[8192 + 256];
	size_t n;

	if (!path)
		return;
	int len = snprintf(line, sizeof(line), "%d\t%s\t%u\t", (int)getpid(), who, level);
	if (len < 0)
		return;
	n = (size_t)len;
	/* One line per message: newlines inside it are escaped, the final one dropped. */
	for (const char *c = msg; *c && n < sizeof(line) - 3; c++) {
		if (*c == '\n' && c[1] == '\0')
			break;
		if (*c == '\n') {
			line[n++] = '\\';
			line[n++] = 'n';
		} else {
			line[n++] = *c;
		}
	}
	line[n++] = '\n';
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	if (write(fd, line, n) != (ssize_t)n)
		fprintf(stderr, "realcriu log_tap: short write to %s\n", path);
	close(fd);
}

__attribute__((format(printf, 2, 3))) static void tap_print_on_level(unsigned int level,
								      const char *fmt, ...)
{
	char msg[8192];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	record(caller_name(__builtin_return_address(0)), level, msg);
	criu_print(level, "%s", msg);
}

__attribute__((visibility("default"))) void *dlsym(void *restrict handle,
						    const char *restrict name)
{
	if (handle == RTLD_NEXT) {
		fprintf(stderr, "realcriu log_tap: dlsym(RTLD_NEXT, \"%s\") cannot be forwarded\n",
			name);
		return NULL;
	}
	void *sym = libc_dlsym()(handle, name);
	if (sym && strcmp(name, "print_on_level") == 0) {
		criu_print = (print_on_level_fn *)sym;
		return (void *)tap_print_on_level;
	}
	return sym;
}
