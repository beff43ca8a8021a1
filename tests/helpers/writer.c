/*
 * e2e helper: a "guest" that appends numbered lines to FILE about every
 * millisecond (one write() per line, O_APPEND) and records its counter in
 * SIDEFILE (outside the backed-up tree) after each line.
 * Usage: writer FILE SIDEFILE
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	char line[128], side[32];
	unsigned long n = 0;
	int fd, sfd;

	if (argc != 3) {
		fprintf(stderr, "usage: writer FILE SIDEFILE\n");
		return 2;
	}
	fd = open(argv[1], O_WRONLY | O_CREAT | O_APPEND, 0644);
	sfd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || sfd < 0) {
		perror("writer: open");
		return 1;
	}
	for (;;) {
		int len, slen;

		n++;
		len = snprintf(line, sizeof(line), "%lu writer line payload %040lu\n", n, n);
		slen = snprintf(side, sizeof(side), "%020lu\n", n);

		if (write(fd, line, len) != len || pwrite(sfd, side, slen, 0) != slen) {
			perror("writer: write");
			return 1;
		}
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
	}
}
