/*
 * A standalone main for the fuzz targets: feeds each file named on the
 * command line to LLVMFuzzerTestOneInput once, as libFuzzer's -runs=1 would.
 * Linked with a target and the library objects by gcc + ASan/UBSan
 * (`make fuzz-replay`), so that CI replays the kept crash inputs and the
 * seed corpora without clang or libFuzzer installed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The whole file in a buffer of its exact size (so ASan sees any overread). */
static uint8_t *slurp(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) < 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) < 0)
		goto out;
	buf = malloc(n ? (size_t)n : 1);
	if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	*size = (size_t)n;
out:
	fclose(f);
	return buf;
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		size_t size = 0;
		uint8_t *data = slurp(argv[i], &size);

		if (!data) {
			perror(argv[i]);
			return 2;
		}
		fprintf(stderr, "replay: %s (%zu bytes)\n", argv[i], size);
		LLVMFuzzerTestOneInput(data, size);
		free(data);
	}
	fprintf(stderr, "replay: %d input(s), no error\n", argc - 1);
	return 0;
}
