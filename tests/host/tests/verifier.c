/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * Verifiers for criu-host's restore tests: `int function(const char *arg)`,
 * run inside each restored task; 0 means pass.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

EXPORT int verify_pass(const char *arg);
EXPORT int verify_fail(const char *arg);
EXPORT int verify_fds(const char *arg);
EXPORT int verify_mapped(const char *arg);

int verify_pass(const char *arg)
{
	(void)arg;
	return 0;
}

int verify_fail(const char *arg)
{
	return arg && *arg ? atoi(arg) : 3;
}

/* "5=/dev/null,6=/dev/zero": each fd is open and links to that path
 * (a bare "5" only asks that fd 5 is open). */
int verify_fds(const char *arg)
{
	char buf[1024];
	char *save = NULL, *item;

	snprintf(buf, sizeof(buf), "%s", arg ? arg : "");
	for (item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(item, '=');
		int fd = atoi(item);
		char proc[64], link[512];
		ssize_t n;

		if (fcntl(fd, F_GETFD) < 0)
			return 10 + fd;
		if (!eq)
			continue;
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
		n = readlink(proc, link, sizeof(link) - 1);
		if (n < 0)
			return 2;
		link[n] = '\0';
		if (strcmp(link, eq + 1))
			return 3;
	}
	return 0;
}

/* "0x7f...": a mapping starts at that address in this process. */
int verify_mapped(const char *arg)
{
	unsigned long want = strtoul(arg ? arg : "0", NULL, 16);
	char line[512];
	FILE *f = fopen("/proc/self/maps", "r");
	int found = 0;

	if (!f)
		return 2;
	while (fgets(line, sizeof(line), f))
		if (strtoul(line, NULL, 16) == want)
			found = 1;
	fclose(f);
	return found ? 0 : 1;
}
