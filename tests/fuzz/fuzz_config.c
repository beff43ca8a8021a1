/*
 * libFuzzer target: the configuration loader (cb_config_load) on arbitrary
 * bytes, then option resolution of the global view and of every guest
 * section it found. Built and run by `make fuzz` (see tests/fuzz/README).
 */
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cb_config.h"
#include "cb_util.h"

/* The loader takes a path: give it the bytes as a memfd. */
static int bytes_as_file(const uint8_t *data, size_t size, char *path, size_t len)
{
	int fd = memfd_create("fuzz-config", MFD_CLOEXEC);

	if (fd < 0)
		return -1;
	if (size && write(fd, data, size) != (ssize_t)size) {
		close(fd);
		return -1;
	}
	snprintf(path, len, "/proc/self/fd/%d", fd);
	return fd;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cb_config cfg;
	struct cb_strvec ids = CB_STRVEC_INIT, none = CB_STRVEC_INIT;
	struct cb_opts o;
	char path[64];
	int fd = bytes_as_file(data, size, path, sizeof(path));

	if (fd < 0)
		return 0;
	if (cb_config_load(&cfg, path) == 0) {
		if (cb_config_resolve(&cfg, NULL, &none, &o) == 0)
			cb_opts_release(&o);
		cb_config_guest_ids(&cfg, &ids);
		for (size_t i = 0; i < ids.n; i++)
			if (cb_config_resolve(&cfg, ids.v[i], &none, &o) == 0)
				cb_opts_release(&o);
		cb_strvec_clear(&ids);
		cb_config_release(&cfg);
	}
	close(fd);
	return 0;
}
