/* cb_notes: notes-template expansion. See include/cb_notes.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cb_notes.h"
#include "cb_util.h"

static const char *const var_names[] = { "cluster", "guestname", "node", "vmid", "type", NULL };

/* Index of the variable at "{{" (p), its length in *len; -1 if unknown. */
static int var_at(const char *p, size_t *len)
{
	const char *end = strstr(p + 2, "}}");

	if (!end)
		return -1;
	for (int i = 0; var_names[i]; i++) {
		size_t n = strlen(var_names[i]);
		if ((size_t)(end - p - 2) == n && !strncmp(p + 2, var_names[i], n)) {
			*len = n + 4;
			return i;
		}
	}
	return -1;
}

int cb_notes_check(const char *tmpl)
{
	size_t len;

	for (const char *p = strstr(tmpl, "{{"); p; p = strstr(p + len, "{{")) {
		if (var_at(p, &len) < 0) {
			const char *end = strstr(p, "}}");
			return cb_error("unknown variable '%.*s' (accepted: {{cluster}}, {{guestname}}, "
					"{{node}}, {{vmid}}, {{type}})",
					end ? (int)(end - p + 2) : (int)strlen(p), p);
		}
	}
	return 0;
}

static const char *var_value(const struct cb_notes_vars *v, int i)
{
	const char *const values[] = { v->cluster, v->guestname, v->node, v->vmid, v->type };
	return values[i] ? values[i] : "";
}

char *cb_notes_render(const char *tmpl, const struct cb_notes_vars *v)
{
	char *text = NULL;
	size_t size = 0, len;
	FILE *out = open_memstream(&text, &size);
	int i;

	if (!out)
		abort();   /* out of memory, as cb_xmalloc */
	for (const char *p = tmpl; *p; p++) {
		if (p[0] == '{' && p[1] == '{' && (i = var_at(p, &len)) >= 0) {
			fputs(var_value(v, i), out);
			p += len - 1;
		} else if (p[0] == '\\' && (p[1] == 'n' || p[1] == '\\')) {
			fputc(p[1] == 'n' ? '\n' : '\\', out);
			p++;
		} else {
			fputc(*p, out);
		}
	}
	fputc('\n', out);
	fclose(out);
	return text;
}
