/* cb_dynlib: a shared library opened when first needed. See include/cb_dynlib.h. */
#include <dlfcn.h>

#include "cb_dynlib.h"
#include "cb_util.h"

int cb_dynlib_open(const char *soname, const char *what, const struct cb_dynsym *syms, size_t n)
{
	void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);

	if (!h)
		return cb_error("%s needs %s: %s", what, soname, dlerror());
	for (size_t i = 0; i < n; i++) {
		*syms[i].fn = dlsym(h, syms[i].name);
		if (!*syms[i].fn)
			return cb_error("%s needs %s with %s: %s", what, soname, syms[i].name, dlerror());
	}
	return 0;
}
