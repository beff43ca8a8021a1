/*
 * cb_dynlib: a shared library opened when a run first needs it. libcurl
 * (S3 storages) and libnbd (VM disks) bring some thirty libraries with
 * them (TLS, Kerberos, LDAP, IDN, ...) whose loading alone, constructors
 * run and relocations written, costs every run about 4 MiB of resident
 * memory; a container's backup to a directory needs none of them.
 */
#ifndef CB_DYNLIB_H
#define CB_DYNLIB_H

#include <stddef.h>

/* A function of the library: its name, and where its address goes (a
 * function pointer's address, as void **: dlsym's convention). */
struct cb_dynsym {
	const char *name;
	void **fn;
};

/* Open soname (it stays open: its functions are used until exit) and
 * look up every one of syms: 0, or -1 with an error naming what needs
 * the library ("S3 storage"), the library and why it is not there. */
int cb_dynlib_open(const char *soname, const char *what, const struct cb_dynsym *syms, size_t n);

#endif
