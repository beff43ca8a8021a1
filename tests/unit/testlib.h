/* Helpers shared by the unit tests (header-only: each test is one program). */
#ifndef CB_TESTLIB_H
#define CB_TESTLIB_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include "cb_util.h"

/* system() of a formatted command line; returns its raw status. */
static int run(const char *fmt, ...) CB_PRINTF(1, 2);
static int run(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	return system(cmd);
}

#endif
