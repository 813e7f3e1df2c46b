/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * host_target: a small live process tree for criu-host's tests.
 *
 *   host_target [--open PATH]... [--memfd-map BYTES] [--child]
 *               [--split] [--threads N] [--zombie] [--heartbeat FILE] --ready FILE
 *
 * --split makes the memfd mapping two VMAs (second half read-only).
 * Closes every inherited fd above 2, so the paths get fds 3, 4, ... in order,
 * opens the paths (O_RDWR, else O_RDONLY), maps a shared memfd when asked,
 * forks one child when asked (it inherits the fds and sleeps), starts N
 * sleeping threads, leaves one exited child unreaped (--zombie), then writes
 * "pid=P child=C map=0xADDR size=N" to the ready file and loops, bumping a
 * counter in the heartbeat file every 20 ms, until killed.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

static void write_file(const char *path, const char *text)
{
	char tmp[4096];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f)
		exit(2);
	fputs(text, f);
	fclose(f);
	if (rename(tmp, path))
		exit(2);
}

static void nap(void)
{
	struct timespec ts = {0, 20 * 1000 * 1000};
	nanosleep(&ts, NULL);
}

static void *sleeper(void *arg)
{
	(void)arg;
	for (;;)
		nap();
	return NULL;
}

int main(int argc, char **argv)
{
	int threads = 0, zombie = 0, split = 0;
	const char *ready = NULL, *heartbeat = NULL;
	size_t map_size = 0;
	void *map = NULL;
	int want_child = 0;
	pid_t child = 0;
	char text[256];
	unsigned long beat = 0;

	for (int fd = 3; fd < 1024; fd++)
		close(fd);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--open") && i + 1 < argc) {
			const char *p = argv[++i];
			if (open(p, O_RDWR) < 0 && open(p, O_RDONLY) < 0) {
				perror(p);
				return 2;
			}
		} else if (!strcmp(argv[i], "--memfd-map") && i + 1 < argc) {
			map_size = strtoul(argv[++i], NULL, 0);
		} else if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
			threads = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--split")) {
			split = 1;
		} else if (!strcmp(argv[i], "--zombie")) {
			zombie = 1;
		} else if (!strcmp(argv[i], "--child")) {
			want_child = 1;
		} else if (!strcmp(argv[i], "--ready") && i + 1 < argc) {
			ready = argv[++i];
		} else if (!strcmp(argv[i], "--heartbeat") && i + 1 < argc) {
			heartbeat = argv[++i];
		} else {
			fprintf(stderr, "host_target: bad argument %s\n", argv[i]);
			return 2;
		}
	}
	if (map_size) {
		int fd = memfd_create("host-target", MFD_CLOEXEC);
		if (fd < 0 || ftruncate(fd, (off_t)map_size) < 0)
			return 2;
		map = mmap(NULL, map_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (map == MAP_FAILED)
			return 2;
		close(fd);
		memset(map, 0x5a, map_size);
		if (split && mprotect((char *)map + map_size / 2, map_size / 2, PROT_READ))
			return 2;
	}
	if (want_child) {
		child = fork();
		if (child < 0)
			return 2;
		if (child == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			for (;;)
				nap();
		}
	}
	if (zombie) {
		pid_t z = fork();
		if (z == 0)
			_exit(0);
		if (z < 0)
			return 2;
	}
	for (int t = 0; t < threads; t++) {
		pthread_t th;
		if (pthread_create(&th, NULL, sleeper, NULL))
			return 2;
	}
	snprintf(text, sizeof(text), "pid=%d child=%d map=%p size=%zu\n", (int)getpid(),
		 (int)child, map, map_size);
	if (ready)
		write_file(ready, text);
	/* The heartbeat file stays open and is rewritten in place: a dump
	 * that seizes the task between an open and a rename would otherwise
	 * catch an fd on a temporary file that is gone at restore. */
	int hb = -1;
	if (heartbeat) {
		hb = open(heartbeat, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		if (hb < 0)
			return 2;
	}
	for (;;) {
		nap();
		if (hb >= 0) {
			int n = snprintf(text, sizeof(text), "%lu\n", ++beat);
			if (pwrite(hb, text, (size_t)n, 0) != n)
				return 2;
		}
	}
}
