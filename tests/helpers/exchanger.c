/*
 * e2e helper: the hostile owner of a directory. For each NAME it plants a
 * symlink DIR/.x-NAME -> TARGET and then, round after round, exchanges
 * DIR/NAME with it (renameat2 RENAME_EXCHANGE): NAME is a directory one
 * moment and a symlink out of DIR the next. Names not there (yet) are
 * skipped. Runs until STOPFILE exists; prints the number of exchanges
 * that took place.
 *
 * Usage: exchanger DIR TARGET STOPFILE NAME...
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	char link[4096];
	unsigned long done = 0;
	int dfd;

	if (argc < 5) {
		fprintf(stderr, "usage: exchanger DIR TARGET STOPFILE NAME...\n");
		return 2;
	}
	dfd = open(argv[1], O_RDONLY | O_DIRECTORY);
	if (dfd < 0) {
		perror(argv[1]);
		return 1;
	}
	for (int i = 4; i < argc; i++) {
		snprintf(link, sizeof(link), ".x-%s", argv[i]);
		if (symlinkat(argv[2], dfd, link) < 0 && errno != EEXIST) {
			perror(link);
			return 1;
		}
	}
	for (unsigned long round = 0; ; round++) {
		if ((round & 255) == 0 && access(argv[3], F_OK) == 0)
			break;
		for (int i = 4; i < argc; i++) {
			snprintf(link, sizeof(link), ".x-%s", argv[i]);
			if (renameat2(dfd, argv[i], dfd, link, RENAME_EXCHANGE) == 0)
				done++;
		}
	}
	printf("%lu\n", done);
	return 0;
}
