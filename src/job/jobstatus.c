/* cb_jobstatus: the job's results and its JSON document. See include/cb_jobstatus.h.
 * In src/job/ with the job (cb_job) and the guest's backup (cb_backup) that fill it. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cb_jobstatus.h"
#include "cb_private.h"
#include "cb_exit.h"
#include "cb_util.h"

void cb_jobstatus_init(struct cb_job_status *js, const char *cmdline)
{
	memset(js, 0, sizeof(*js));
	js->start = time(NULL);
	js->cmdline = cb_xstrdup(cmdline ? cmdline : "cbackup");
	cb_node_name(js->host, sizeof(js->host));
}

void cb_jobstatus_release(struct cb_job_status *js)
{
	for (size_t i = 0; i < js->n; i++) {
		struct cb_guest_result *g = &js->guests[i];
		free(g->id);
		free(g->name);
		free(g->error);
		free(g->archive);
		free(g->reused_from);
		free(g->log_path);
		for (size_t k = 0; k < g->n_audit_names; k++)
			free(g->audit_paths[k]);
		free(g->audit_paths);
		free(g->audit_whats);
	}
	for (size_t i = 0; i < js->n_config_errors; i++) {
		free(js->config_errors[i].file);
		free(js->config_errors[i].key);
		free(js->config_errors[i].message);
	}
	free(js->config_errors);
	free(js->guests);
	free(js->cmdline);
	free(js->error);
	memset(js, 0, sizeof(*js));
}

struct cb_guest_result *cb_jobstatus_add(struct cb_job_status *js, const char *id,
					 enum cb_guest_type type)
{
	struct cb_guest_result *g;

	js->guests = cb_xrealloc(js->guests, (js->n + 1) * sizeof(*g));
	g = &js->guests[js->n++];
	memset(g, 0, sizeof(*g));
	g->id = cb_xstrdup(id ? id : "");
	g->type = type;
	g->result = CB_RESULT_SKIPPED;
	g->first_sync = g->final_sync = g->archive_seconds = g->freeze = g->seconds = -1;
	return g;
}

void cb_jobstatus_set_error(struct cb_job_status *js, const char *msg)
{
	free(js->error);
	js->error = cb_xstrdup(msg);
}

/* text without the "FILE:LINE: " (or "FILE: ") it starts with */
static const char *past_place(const char *text, const char *file, int line)
{
	size_t n = file ? strlen(file) : 0;
	const char *p = text + n;

	if (!file || strncmp(text, file, n) || *p != ':')
		return text;
	if (line > 0 && isdigit((unsigned char)p[1]) && (unsigned)atoi(p + 1) == (unsigned)line)
		p += 1 + strspn(p + 1, "0123456789");
	return p[0] == ':' && p[1] == ' ' ? p + 2 : text;
}

void cb_jobstatus_add_config_error(struct cb_job_status *js, const char *file, int line,
				   const char *key, const char *text)
{
	struct cb_config_problem *c;

	js->config_errors = cb_xrealloc(js->config_errors,
					(js->n_config_errors + 1) * sizeof(*c));
	c = &js->config_errors[js->n_config_errors++];
	c->file = file ? cb_xstrdup(file) : NULL;
	c->line = line;
	c->key = key ? cb_xstrdup(key) : NULL;
	c->message = cb_xstrdup(past_place(text, file, line));
}

int cb_jobstatus_failed(const struct cb_job_status *js)
{
	if (js->error)
		return 1;
	for (size_t i = 0; i < js->n; i++)
		if (js->guests[i].result != CB_RESULT_OK)
			return 1;
	return 0;
}

const char *cb_result_name(enum cb_result r)
{
	static const char *const names[] = { "ok", "failed", "skipped", "warning" };
	return names[r];
}

int cb_result_archived(enum cb_result r)
{
	return r == CB_RESULT_OK || r == CB_RESULT_WARNING;
}

/* ---- JSON ---- */

static void json_seconds(FILE *out, const char *key, double s, const char *sep)
{
	if (s < 0)
		fprintf(out, "      \"%s\": null%s\n", key, sep);
	else
		fprintf(out, "      \"%s\": %.3f%s\n", key, s, sep);
}

static void json_field(FILE *out, const char *key, const char *value)
{
	cb_json_member(out, "      ", key, value, "\n");
	fputs(",\n", out);
}

/* "tracking_audit": null when it did not run */
static void json_audit(FILE *out, const struct cb_guest_result *g)
{
	if (!g->audited) {
		fputs("      \"tracking_audit\": null,\n", out);
		return;
	}
	fprintf(out, "      \"tracking_audit\": {\n        \"checked\": %llu,\n"
		"        \"missed\": %llu,\n        \"seconds\": %.3f,\n        \"missed_entries\": [",
		(unsigned long long)g->audit_checked, (unsigned long long)g->audit_missed,
		g->audit_seconds);
	/* a path that is not UTF-8 gets path_b64 too (cb_text.h) */
	for (size_t i = 0; i < g->n_audit_names; i++) {
		fputs(i ? ",\n          { " : "\n          { ", out);
		cb_json_member(out, "", "path", g->audit_paths[i], "");
		fputs(", ", out);
		cb_json_member(out, "", "change", g->audit_whats[i], "");
		fputs(" }", out);
	}
	if (g->n_audit_names)
		fputs("\n        ", out);
	fputs("]\n      },\n", out);
}

static void json_guest(FILE *out, const struct cb_guest_result *g, int last)
{
	int has_archive = g->archive && cb_result_archived(g->result);

	fputs("    {\n", out);
	json_field(out, "id", g->id);
	json_field(out, "type", cb_guest_type_name(g->type));
	json_field(out, "name", g->name);
	json_field(out, "status", cb_result_name(g->result));
	json_field(out, "error", g->error);
	json_field(out, "archive", has_archive ? g->archive : NULL);
	if (has_archive)
		fprintf(out, "      \"size\": %llu,\n", (unsigned long long)g->size);
	else
		fputs("      \"size\": null,\n", out);
	json_field(out, "sha256", has_archive && g->sha256[0] ? g->sha256 : NULL);
	json_field(out, "log", g->log_path);
	json_seconds(out, "seconds", g->seconds, ",");
	json_seconds(out, "first_sync_seconds", g->first_sync, ",");
	json_seconds(out, "final_sync_seconds", g->final_sync, ",");
	json_seconds(out, "freeze_seconds", g->freeze, ",");
	json_seconds(out, "archive_seconds", g->archive_seconds, ",");
	json_audit(out, g);
	if (has_archive)
		fprintf(out, "      \"stored_raw_bytes\": %llu,\n", (unsigned long long)g->stored_raw);
	else
		fputs("      \"stored_raw_bytes\": null,\n", out);
	json_field(out, "reused_from", has_archive ? g->reused_from : NULL);
	if (has_archive)
		fprintf(out, "      \"reused_units\": %llu,\n      \"reused_bytes\": %llu,\n"
			"      \"compressed_units\": %llu,\n      \"compressed_bytes\": %llu,\n"
			"      \"trusted_units\": %llu,\n      \"trusted_unread_bytes\": %llu\n",
			(unsigned long long)g->reused_units, (unsigned long long)g->reused_bytes,
			(unsigned long long)g->compressed_units, (unsigned long long)g->compressed_bytes,
			(unsigned long long)g->trusted_units,
			(unsigned long long)g->trusted_unread_bytes);
	else
		fputs("      \"reused_units\": null,\n      \"reused_bytes\": null,\n"
		      "      \"compressed_units\": null,\n      \"compressed_bytes\": null,\n"
		      "      \"trusted_units\": null,\n      \"trusted_unread_bytes\": null\n", out);
	fprintf(out, "    }%s\n", last ? "" : ",");
}

/* "ok", "warning" (every guest archived, one with a warning), "failed",
 * "error" (the configuration file has errors: nothing ran) */
static const char *job_status_name(const struct cb_job_status *js)
{
	int warned = 0;

	if (js->n_config_errors)
		return "error";
	for (size_t i = 0; i < js->n; i++) {
		if (js->guests[i].result != CB_RESULT_OK && js->guests[i].result != CB_RESULT_WARNING)
			return "failed";
		warned |= js->guests[i].result == CB_RESULT_WARNING;
	}
	if (js->exit_status != CB_EXIT_OK && (!warned || js->error))
		return "failed";
	return warned ? "warning" : "ok";
}

/* ,"config_errors": [ { file, line, key, message }... ] */
static void json_config_errors(FILE *out, const struct cb_job_status *js)
{
	fputs(",\n  \"config_errors\": [", out);
	for (size_t i = 0; i < js->n_config_errors; i++) {
		const struct cb_config_problem *c = &js->config_errors[i];

		fputs(i ? ",\n    { " : "\n    { ", out);
		cb_json_member(out, "", "file", c->file, "");
		if (c->line > 0)
			fprintf(out, ", \"line\": %d, ", c->line);
		else
			fputs(", \"line\": null, ", out);
		cb_json_member(out, "", "key", c->key, "");
		fputs(", ", out);
		cb_json_member(out, "", "message", c->message, "");
		fputs(" }", out);
	}
	fputs(js->n_config_errors ? "\n  ]" : "]", out);
}

void cb_jobstatus_json(const struct cb_job_status *js, FILE *out)
{
	fprintf(out, "{\n  \"cbackup\": \"%s\",\n", CB_VERSION);
	cb_json_member(out, "  ", "host", js->host, "\n");
	fputs(",\n", out);
	cb_json_member(out, "  ", "command", js->cmdline, "\n");
	fputs(",\n  \"start\": ", out);
	cb_json_time(out, js->start);
	fprintf(out, ",\n  \"start_epoch\": %lld,\n  \"end\": ", (long long)js->start);
	cb_json_time(out, js->end);
	fprintf(out, ",\n  \"end_epoch\": %lld,\n  \"exit_status\": %d,\n", (long long)js->end,
		js->exit_status);
	fprintf(out, "  \"status\": \"%s\",\n", job_status_name(js));
	cb_json_member(out, "  ", "error", js->error, "\n");
	json_config_errors(out, js);
	fputs(",\n  \"guests\": [\n", out);
	for (size_t i = 0; i < js->n; i++)
		json_guest(out, &js->guests[i], i + 1 == js->n);
	fputs("  ]\n}\n", out);
}

/* ---- json-status = DIR ---- */

static int write_document(const struct cb_job_status *js, int dfd, const char *name)
{
	char *text = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&text, &len);
	int ret;

	if (!mem)
		return cb_error_errno("cannot write '%s'", name);
	cb_jobstatus_json(js, mem);
	fclose(mem);
	ret = cb_create_file_at(dfd, name, text, len);
	free(text);
	return ret;
}

int cb_jobstatus_write(const struct cb_job_status *js, const char *dir)
{
	char stamp[32], *name, *tmp;
	struct tm tm;
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), ret = -1;

	if (dfd < 0)
		return cb_error_errno("json-status directory '%s'", dir);
	localtime_r(&js->start, &tm);
	strftime(stamp, sizeof(stamp), "%Y_%m_%d-%H_%M_%S", &tm);
	name = cb_xasprintf("cbackup-job-%s.json", stamp);
	tmp = cb_xasprintf("%s.tmp", name);
	unlinkat(dfd, tmp, 0);   /* a killed run's leftover; a symlink is removed, not followed */
	if (write_document(js, dfd, tmp) == 0) {
		ret = renameat(dfd, tmp, dfd, name);
		if (ret < 0) {
			cb_error_errno("cannot rename '%s/%s'", dir, tmp);
			unlinkat(dfd, tmp, 0);
		}
	} else {
		cb_error_prefix("json-status directory '%s'", dir);
	}
	free(name);
	free(tmp);
	close(dfd);
	return ret;
}
