/* cb_list: the backups table. See include/cb_list.h. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cb_catalog.h"
#include "cb_list.h"
#include "cb_store.h"
#include "cb_text.h"
#include "cb_util.h"

/* The notes' first line, quoted as names are (cb_quote): a note is
 * written by a template, but the file could be anyone's. */
static void print_notes(FILE *out, const char *notes)
{
	char *line, *q;

	if (!notes)
		return;
	line = cb_xstrdup(notes);
	line[strcspn(line, "\n")] = '\0';
	q = cb_quote(line);
	fprintf(out, "  %s", q);
	free(q);
	free(line);
}

static void print_row(FILE *out, const struct cb_backup_file *f)
{
	char date[32], size[32];
	struct tm tm;

	localtime_r(&f->when, &tm);
	strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S", &tm);
	cb_fmt_vzsize(size, sizeof(size), f->size);
	fprintf(out, "%-8s %-4s %-19s %9s %-5s %-9s %-8s %-8s %s", f->id,
		cb_guest_type_name(f->type), date, size, cb_compress_name(f->compress),
		f->is_protected ? "yes" : "no", f->has_checksum ? "yes" : "no",
		f->verified ? "yes" : "no", f->name);
	print_notes(out, f->notes);
	fputc('\n', out);
}

static void print_table(FILE *out, const struct cb_catalog *cat)
{
	fprintf(out, "%-8s %-4s %-19s %9s %-5s %-9s %-8s %-8s %s\n", "ID", "TYPE", "DATE", "SIZE",
		"CODEC", "PROTECTED", "CHECKSUM", "VERIFIED", "ARCHIVE  NOTES");
	for (size_t i = 0; i < cat->n; i++) {
		if (i > 0 && strcmp(cat->files[i].id, cat->files[i - 1].id))
			fputc('\n', out);   /* a block per guest */
		print_row(out, &cat->files[i]);
	}
}

static void print_json_entry(FILE *out, const struct cb_backup_file *f, int last)
{
	fputs("  {\n", out);
	cb_json_member(out, "    ", "id", f->id, "\n");
	fprintf(out, ",\n    \"type\": \"%s\",\n    \"time\": ", cb_guest_type_name(f->type));
	cb_json_time(out, f->when);
	fprintf(out, ",\n    \"epoch\": %lld,\n    \"size\": %llu,\n    \"codec\": \"%s\",\n",
		(long long)f->when, (unsigned long long)f->size, cb_compress_name(f->compress));
	fprintf(out, "    \"protected\": %s,\n    \"checksum\": %s,\n    \"verified\": %s,\n",
		f->is_protected ? "true" : "false", f->has_checksum ? "true" : "false",
		f->verified ? "true" : "false");
	cb_json_member(out, "    ", "archive", f->path, "\n");
	fputs(",\n", out);
	cb_json_member(out, "    ", "notes", f->notes, "\n");
	fprintf(out, "\n  }%s\n", last ? "" : ",");
}

static void print_json(FILE *out, const struct cb_catalog *cat)
{
	fputs("[\n", out);
	for (size_t i = 0; i < cat->n; i++)
		print_json_entry(out, &cat->files[i], i + 1 == cat->n);
	fputs("]\n", out);
}

/* cat printed and released */
static void print_catalog(FILE *out, struct cb_catalog *cat, int json)
{
	if (json)
		print_json(out, cat);
	else
		print_table(out, cat);
	cb_catalog_release(cat);
}

int cb_list_run(const char *dumpdir, const char *id, int json, FILE *out)
{
	struct cb_catalog cat;

	if (cb_catalog_scan(&cat, dumpdir, id) < 0)
		return -1;
	print_catalog(out, &cat, json);
	return 0;
}

int cb_list_store(struct cb_objstore *s, const char *id, int json, FILE *out)
{
	struct cb_catalog cat;

	if (cb_store_catalog(s, id, 1, &cat) < 0)
		return -1;
	print_catalog(out, &cat, json);
	return 0;
}
