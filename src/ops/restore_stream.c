/*
 * A whole restore from a stream (cb_restore_opts.stream): a store's night
 * whose units come through a pipe as they are fetched, unpacked as they
 * come; no copy of the archive is made. The catalog beside its name gives
 * the units the decoder checks and splits the work by, and the space
 * check; the stream's source checks each unit's digest and the whole.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "cb_index.h"
#include "cb_restore.h"
#include "cb_tarread.h"
#include "cb_util.h"
#include "restore_int.h"

char *restore_stream_name(const char *archive)
{
	char *cwd;
	char *abs;

	if (archive[0] == '/')
		return cb_xstrdup(archive);
	cwd = getcwd(NULL, 0);
	if (!cwd) {
		cb_error_errno("cannot resolve '%s'", archive);
		return NULL;
	}
	abs = cb_xasprintf("%s/%s", cwd, archive);
	free(cwd);
	return abs;
}

int restore_stream_open(struct restore_job *r, const struct cb_restore_opts *o)
{
	char *idx = cb_xasprintf("%s.idx", o->archive);
	struct cb_codec_units u = { 0 };
	struct cb_idx x;
	int fd, ret = -1;

	if (cb_idx_open(&x, idx, o->stream_size) < 0)
		goto out;
	cb_idx_units(&x, &u);
	u.total = x.tar_size;
	cb_idx_close(&x);
	/* the reader owns its fd: the stream keeps its own */
	fd = fcntl(o->stream_fd, F_DUPFD_CLOEXEC, 0);
	if (fd < 0) {
		cb_error_errno("cannot read '%s'", o->archive);
		goto out;
	}
	ret = cb_tarread_open_stream(&r->tr, fd, o->archive, o->stream_size, &u);
out:
	cb_codec_units_release(&u);
	free(idx);
	return ret;
}
