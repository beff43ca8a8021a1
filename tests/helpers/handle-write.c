/*
 * handle-write: what a user-space NFS server does (issue 24, situation 5).
 *   handle-write save FILE HANDLE      keep FILE's file handle in HANDLE
 *   handle-write write MNT HANDLE TEXT append TEXT to the file by its
 *                                      handle, opened through the mount MNT
 * After the file system is mounted again, the handle opens a disconnected
 * dentry: the write's events name no directory the tracker can place.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct { struct file_handle h; unsigned char b[MAX_HANDLE_SZ]; } fh; /* h first */
	int mnt_id, fd, mfd;
	FILE *f;

	if (argc == 4 && !strcmp(argv[1], "save")) {
		fh.h.handle_bytes = MAX_HANDLE_SZ;
		if (name_to_handle_at(AT_FDCWD, argv[2], &fh.h, &mnt_id, 0) < 0 ||
		    !(f = fopen(argv[3], "we")) ||
		    fwrite(&fh, sizeof(fh.h) + fh.h.handle_bytes, 1, f) != 1 || fclose(f))
			return perror(argv[2]), 1;
		return 0;
	}
	if (argc != 5 || strcmp(argv[1], "write"))
		return fprintf(stderr, "usage: see the source\n"), 2;
	if (!(f = fopen(argv[3], "re")) || fread(&fh, 1, sizeof(fh), f) < sizeof(fh.h))
		return perror(argv[3]), 1;
	fclose(f);
	if ((mfd = open(argv[2], O_RDONLY | O_DIRECTORY)) < 0 ||
	    (fd = open_by_handle_at(mfd, &fh.h, O_WRONLY | O_APPEND)) < 0 ||
	    write(fd, argv[4], strlen(argv[4])) != (ssize_t)strlen(argv[4]) || close(fd))
		return perror("open_by_handle_at"), 1;
	return 0;
}
