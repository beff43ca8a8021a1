/*
 * cb_probe: `cbackup probe`, the throughput of each stage of a backup on
 * this host, so that an admin sees which one bounds the nightly run before
 * it runs: the tmpdir's write and read (staging), every codec on
 * compressible and on incompressible data, the SHA-256 behind the .sha256,
 * and the storage's write including fsync. It ends with the rate the archive
 * stage can reach with the configured compression and the stage that
 * limits it.
 *
 * Each I/O stage writes for about a second (at most 1 GiB) into a
 * .cbackup-probe-PID.tmp file that is removed afterwards, also on a signal.
 */
#ifndef CB_PROBE_H
#define CB_PROBE_H

#include "cb_log.h"
#include "cb_opts.h"

/* 0, or -1 with cb_last_error() naming the stage and the path. */
int cb_probe_run(const struct cb_opts *o, struct cb_log *log);

#endif
