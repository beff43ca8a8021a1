/*
 * manopts man8|man5: the option lists of cbackup(8) and cbackup.conf(5) as
 * roff, from cb_opt_table (the one schema: config, CLI, docs). `make docs`
 * writes them between the "generated" marker comments of the man pages; `make
 * check-docs` (part of make check) fails when the committed pages differ.
 * Built by the Makefile against the library objects.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "cb_opts.h"

/* roff text: '-' and '\' escaped, nothing else is special mid-line */
static void roff(const char *s)
{
	for (; *s; s++) {
		if (*s == '-' || *s == '\\')
			putchar('\\');
		putchar(*s);
	}
}

/* A help text starts a sentence: capitalized, unless it starts with a
 * "word:" list (suspend: ..., retention: ...). */
static void sentence(const char *help)
{
	if (help[strcspn(help, " :")] != ':' && islower((unsigned char)help[0])) {
		putchar(toupper((unsigned char)help[0]));
		help++;
	}
	roff(help);
	puts(".");
}

static const char *type_name(const struct cb_opt_schema *s)
{
	switch (s->type) {
	case CB_OPT_STRING: return "text";
	case CB_OPT_INT:
	case CB_OPT_LONG: return "integer";
	case CB_OPT_DOUBLE: return "number (fractions allowed)";
	case CB_OPT_BOOL: return "boolean";
	case CB_OPT_ENUM: return "choice";
	case CB_OPT_LIST: return "list: the key may be repeated, each line adds one value, in file order";
	}
	return "text";
}

static void accepted(const struct cb_opt_schema *s)
{
	if (s->type == CB_OPT_ENUM) {
		fputs("Accepted: ", stdout);
		for (const struct cb_enum_name *n = s->names; n->name; n++) {
			printf("\\fB");
			roff(n->name);
			printf("\\fP%s", n[1].name ? ", " : ".\n");
		}
	} else if (s->type == CB_OPT_BOOL) {
		fputs("Accepted: 0, 1 (also no/yes, false/true, off/on)", stdout);
		for (const struct cb_enum_name *n = s->names; n && n->name; n++) {
			printf(", \\fB");
			roff(n->name);
			printf("\\fP");
		}
		puts(".");
	} else if ((s->type == CB_OPT_INT || s->type == CB_OPT_LONG) && strchr(s->accepted, '-') &&
		   isdigit((unsigned char)s->accepted[0])) {
		printf("Accepted: %ld to %ld.\n", s->min, s->max);
	} else if (s->type != CB_OPT_STRING && s->type != CB_OPT_LIST) {
		/* the unit: MINUTES reads "minutes", KiB/s stays as it is */
		int upper = 1;
		for (const char *p = s->accepted; *p; p++)
			upper &= !islower((unsigned char)*p);
		printf("Accepted: a %snumber (", s->type == CB_OPT_DOUBLE ? "" : "whole ");
		for (const char *p = s->accepted; *p; p++)
			putchar(upper ? tolower((unsigned char)*p) : *p);
		puts(").");
	}
}

static void where(const struct cb_opt_schema *s)
{
	static const struct { unsigned bit; const char *name; } w[] = {
		{ CB_WHERE_GLOBAL, "global" }, { CB_WHERE_STORAGE, "[storage]" },
		{ CB_WHERE_GUEST, "[ct], [vm]" },
	};
	const char *sep = "Where: ";

	for (size_t i = 0; i < sizeof(w) / sizeof(w[0]); i++)
		if (s->where & w[i].bit) {
			printf("%s%s", sep, w[i].name);
			sep = ", ";
		}
	if (s->where & CB_WHERE_CLI) {
		printf("%scommand line (\\fB\\-\\-", sep);
		roff(s->key);
		printf("\\fP)");
	}
	puts(".");
}

static void default_of(const struct cb_opt_schema *s)
{
	if (!s->def) {
		puts("Default: none.");
		return;
	}
	fputs("Default: \\fB", stdout);
	roff(s->def);
	puts("\\fP.");
}

/* cbackup.conf(5), KEYS: every key a config file takes */
static void man5(void)
{
	for (const struct cb_opt_schema *s = cb_opt_table; s->key; s++) {
		if (!(s->where & CB_WHERE_ANY & ~CB_WHERE_CLI))
			continue;
		fputs(".TP\n\\fB", stdout);
		roff(s->key);
		fputs("\\fP = \\fI", stdout);
		roff(s->accepted);
		puts("\\fP");
		sentence(s->help);
		if (s->doc)
			puts(s->doc);
		if (s->since_issue)
			puts("Not implemented in this version: accepted and ignored with a warning.");
		printf(".br\nType: %s.\n", type_name(s));
		accepted(s);
		puts(".br");
		default_of(s);
		puts(".br");
		where(s);
	}
	puts(".PP\nThese options exist only on the command line and are rejected in the\nfile:");
	for (const struct cb_opt_schema *s = cb_opt_table; s->key; s++) {
		if (s->where & CB_WHERE_ANY & ~CB_WHERE_CLI)
			continue;
		fputs(".TP\n\\fB\\-\\-", stdout);
		roff(s->key);
		puts("\\fP");
		sentence(s->help);
	}
}

/* cbackup(8), OPTIONS: every long option that is a schema key */
static void man8(void)
{
	for (const struct cb_opt_schema *s = cb_opt_table; s->key; s++) {
		if (!(s->where & CB_WHERE_CLI))
			continue;
		fputs(".TP\n.BI \\-\\-", stdout);
		roff(s->key);
		fputs(" \" ", stdout);
		roff(s->type == CB_OPT_BOOL && !s->names ? "[0|1]" : s->accepted);
		puts("\"");
		sentence(s->help);
		if (s->since_issue)
			puts("Not implemented in this version: accepted and ignored with a warning.");
		default_of(s);
		if (!(s->where & ~CB_WHERE_CLI))
			puts("Command line only.");
	}
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "man5"))
		man5();
	else if (argc == 2 && !strcmp(argv[1], "man8"))
		man8();
	else {
		fputs("usage: manopts man8|man5\n", stderr);
		return 2;
	}
	return 0;
}
