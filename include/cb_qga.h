/*
 * cb_qga: the few QEMU guest agent commands a VM backup uses:
 * guest-fsfreeze-freeze before the snapshot, guest-fsfreeze-thaw after it,
 * as vzdump does.
 *
 * The agent speaks JSON over the host side of a virtio-serial channel (a
 * unix socket). It has no greeting and the channel may hold a stale reply
 * of an earlier client, so each connection first syncs with
 * guest-sync-delimited: its reply comes after a 0xFF byte, and everything
 * before that byte is thrown away. Every command has a deadline: a guest
 * with no agent running never answers.
 */
#ifndef CB_QGA_H
#define CB_QGA_H

struct cb_qga {
	int fd;                     /* -1 when closed */
};

/* Connect and sync within timeout_ms. -1 with cb_error set. */
int cb_qga_open(struct cb_qga *q, const char *socket_path, int timeout_ms);
void cb_qga_close(struct cb_qga *q);
/* Run CMD (no arguments); *ret (may be NULL) gets an integer result
 * (the number of file systems frozen or thawed), else 0. */
int cb_qga_exec(struct cb_qga *q, const char *cmd, int timeout_ms, long long *ret);

#endif
