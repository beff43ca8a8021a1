/*
 * Bench driver for the staging engine (used by bench/stage.sh): times
 * cbackup's pass 1 and pass 2 without the rest of the program.
 *
 *   stage_bench SRC DST [CMD]
 *
 * prints one line per pass, "NAME SECONDS FILES TRANSFERRED BYTES":
 *   pass1      first copy into DST (which should not exist)
 *   pass2      final pass with nothing changed
 *   pass2mod   final pass after `sh -c CMD` changed the source (if CMD)
 */
#include <stdio.h>
#include <stdlib.h>

#include "cb_stage.h"

static int run(struct cb_stage *st, const char *name, int pass)
{
	struct cb_stage_stats s;
	int r = pass == 1 ? cb_stage_pass1(st, &s) : cb_stage_pass2(st, &s);

	if (r < 0) {
		fprintf(stderr, "stage_bench: %s: %s\n", name, cb_last_error());
		return -1;
	}
	printf("%s %.3f %llu %llu %llu\n", name, s.seconds, (unsigned long long)s.files,
	       (unsigned long long)s.files_transferred, (unsigned long long)s.transferred_size);
	fflush(stdout);
	return 0;
}

int main(int argc, char **argv)
{
	struct cb_log log;
	struct cb_stage *st;
	struct cb_stage_opts o = { 0 };
	int ret = 1;

	if (argc < 3) {
		fprintf(stderr, "usage: stage_bench SRC DST [CMD]\n");
		return 2;
	}
	cb_log_init(&log);
	log.quiet = 1;
	o.src = argv[1];
	o.dst = argv[2];
	if (cb_stage_new(&st, &o, &log) < 0)
		return 1;
	if (run(st, "pass1", 1) == 0 && run(st, "pass2", 2) == 0) {
		ret = 0;
		if (argc > 3 && system(argv[3]) != 0)
			fprintf(stderr, "stage_bench: '%s' failed\n", argv[3]);
		if (argc > 3)
			ret = run(st, "pass2mod", 2) < 0;
	}
	cb_stage_free(st);
	return ret;
}
