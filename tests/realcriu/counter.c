// SPDX-License-Identifier: GPL-2.0-only
/*
 * The GPU-less target of the realcriu tests: appends "0\n", "1\n", ... to
 * the file argv[1], one line every 10 ms, forever. The count lives only in
 * this process's memory, so after a restore the file goes on from the last
 * number written before the dump; a restart would begin again at 0.
 * A signal (SIGTERM) ends it.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s OUTPUT_FILE\n", argv[0]);
		return 2;
	}
	int fd = open(argv[1], O_WRONLY | O_APPEND | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		perror(argv[1]);
		return 1;
	}
	const struct timespec tick = {.tv_sec = 0, .tv_nsec = 10 * 1000 * 1000};
	for (unsigned long n = 0;; n++) {
		char line[32];
		int len = snprintf(line, sizeof(line), "%lu\n", n);
		if (write(fd, line, (size_t)len) != len) {
			perror("write");
			return 1;
		}
		nanosleep(&tick, NULL);
	}
}
