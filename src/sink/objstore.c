/*
 * The store the options name (include/cb_objstore.h): which backend holds
 * a storage's objects, decided here once, so that no caller switches on
 * the kind.
 */
#include <stddef.h>
#include <stdlib.h>

#include "cb_enckey.h"
#include "cb_objstore.h"
#include "cb_opts.h"
#include "cb_util.h"

const char *cb_objstore_label_for(const struct cb_opts *o)
{
	if (o->storage_type == CB_STORAGE_S3)
		return o->storage;
	if (o->layout != CB_LAYOUT_STORE)
		return NULL;
	return o->storage ? o->storage : o->dumpdir;
}

const char *cb_objstore_dumpdir_for(const struct cb_opts *o)
{
	return o->storage_type == CB_STORAGE_S3 ? NULL : o->dumpdir;
}

int cb_objstore_open_for(const struct cb_opts *o, struct cb_objstore **out)
{
	int rc;

	*out = NULL;
	/* an S3 storage ([storage NAME] type = s3) is always a unit store */
	rc = cb_objstore_s3_from_opts(o, out);
	if (rc < 0 || *out)
		return rc;
	if (o->layout != CB_LAYOUT_STORE)
		return 0;
	if (!o->dumpdir || !*o->dumpdir)
		return cb_error("layout = store needs a storage path or --dumpdir");
	*out = cb_objstore_open_dir(cb_objstore_label_for(o), o->dumpdir);
	return *out ? 0 : -1;
}

void cb_objstore_close(struct cb_objstore *s)
{
	if (!s)
		return;
	if (s->key)
		cb_enckey_wipe(s->key);
	free(s->key);
	s->ops->close(s);
}
