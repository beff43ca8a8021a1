/* cb_list: the backups table. See include/cb_list.h. */
#include <string.h>
#include <time.h>

#include "cb_catalog.h"
#include "cb_list.h"
#include "cb_util.h"

static void print_row(FILE *out, const struct cb_backup_file *f)
{
	char date[32], size[32];
	struct tm tm;

	localtime_r(&f->when, &tm);
	strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S", &tm);
	cb_fmt_vzsize(size, sizeof(size), f->size);
	fprintf(out, "%-8s %-4s %-19s %9s %-5s %-9s %-8s %-8s %s\n", f->id,
		cb_guest_type_name(f->type), date, size, cb_compress_name(f->compress),
		f->is_protected ? "yes" : "no", f->has_checksum ? "yes" : "no",
		f->verified ? "yes" : "no", f->name);
}

int cb_list_run(const char *dumpdir, const char *id, FILE *out)
{
	struct cb_catalog cat;

	if (cb_catalog_scan(&cat, dumpdir, id) < 0)
		return -1;
	fprintf(out, "%-8s %-4s %-19s %9s %-5s %-9s %-8s %-8s %s\n", "ID", "TYPE", "DATE", "SIZE",
		"CODEC", "PROTECTED", "CHECKSUM", "VERIFIED", "ARCHIVE");
	for (size_t i = 0; i < cat.n; i++) {
		if (i > 0 && strcmp(cat.files[i].id, cat.files[i - 1].id))
			fputc('\n', out);   /* a block per guest */
		print_row(out, &cat.files[i]);
	}
	cb_catalog_release(&cat);
	return 0;
}
