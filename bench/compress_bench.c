/*
 * Bench driver for the compression stage (used by bench/compress.sh): runs
 * cbackup's archive stage (cb_archive_write through a cb_codec_writer into
 * a file sink, SHA-256 included, as in a backup) on a directory.
 *
 *   compress_bench CODEC POLICY THREADS DIR OUT [durable][,nosum]
 *
 * CODEC zstd|lzo|gzip|none, POLICY auto|always, THREADS as cb_codec_params
 * (gzip: 0 = classic single stream). The SHA-256 a backup to storage computes
 * for its .sha256 is included unless "nosum" (as with --stdout, which has no
 * .sha256). "durable": the storage sink a backup uses (OUT.tmp, streaming
 * writeback, fsync, rename), timed until the archive is on disk; otherwise
 * a plain fd sink whose bytes may still be in the page cache at the end, as
 * for a peer without sync. Prints one line:
 *   SECONDS TAR_BYTES OUT_BYTES STORED_BYTES FILES_STORED
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cb_archive.h"
#include "cb_codec.h"
#include "cb_sink.h"
#include "cb_util.h"

static int parse_codec(const char *s, enum cb_compress *c)
{
	static const char *names[] = { "none", "lzo", "gzip", "zstd" };
	static const enum cb_compress types[] = { CB_COMPRESS_NONE, CB_COMPRESS_LZO, CB_COMPRESS_GZIP,
						  CB_COMPRESS_ZSTD };

	for (int i = 0; i < 4; i++)
		if (strcmp(s, names[i]) == 0) {
			*c = types[i];
			return 0;
		}
	return -1;
}

int main(int argc, char **argv)
{
	struct cb_codec_params p = { 0 };
	struct cb_archive_stats as;
	struct cb_codec_stats cs;
	struct cb_codec_writer *w = NULL;
	struct cb_sink *sink = NULL;
	struct cb_log log;
	char summary[256];
	double t0;
	const char *flags = argc == 7 ? argv[6] : "";
	int durable = strstr(flags, "durable") != NULL;
	int fd = -1;

	if (argc < 6 || argc > 7 || parse_codec(argv[1], &p.type) < 0) {
		fprintf(stderr, "usage: compress_bench zstd|lzo|gzip|none auto|always THREADS DIR OUT "
			"[durable][,nosum]\n");
		return 2;
	}
	p.policy = strcmp(argv[2], "always") == 0 ? CB_POLICY_ALWAYS : CB_POLICY_AUTO;
	p.threads = atoi(argv[3]);
	cb_log_init(&log);
	log.quiet = 1;
	t0 = cb_now();
	if (durable)
		cb_sink_open_file(&sink, argv[5]);
	else if ((fd = open(argv[5], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) >= 0)
		cb_sink_open_fd(&sink, fd, argv[5]);
	if (sink)
		cb_sink_set_checksum(sink, strstr(flags, "nosum") == NULL);
	if (!sink || cb_codec_writer_new(&w, &p, sink) < 0 ||
	    cb_archive_write(argv[4], NULL, 0, w, &log, &as) < 0 || cb_codec_finish(w) < 0 ||
	    cb_sink_commit(sink) < 0) {
		fprintf(stderr, "compress_bench: %s\n", !sink && fd < 0 ? "cannot open output" : cb_last_error());
		return 1;
	}
	cb_codec_writer_stats(w, &cs);
	printf("%.3f %llu %llu %llu %llu\n", cb_now() - t0, (unsigned long long)as.tar_bytes,
	       (unsigned long long)cs.bytes_out, (unsigned long long)cs.bytes_stored,
	       (unsigned long long)cs.files_stored);
	cb_codec_stats_summary(&cs, summary, sizeof(summary));
	fprintf(stderr, "stored raw (incompressible): %s\n", summary);
	cb_codec_writer_free(w);
	cb_sink_free(sink);
	if (fd >= 0)
		close(fd);
	return 0;
}
