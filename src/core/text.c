/* cb_text: names as bytes, made safe for text and JSON. See include/cb_text.h. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <wchar.h>
#include <wctype.h>

#include "cb_text.h"
#include "cb_util.h"

size_t cb_utf8_seq(const unsigned char *s)
{
	size_t n;
	uint32_t c, min;

	if (s[0] < 0x80)
		return s[0] ? 1 : 0;
	if ((s[0] & 0xe0) == 0xc0)
		n = 2, c = s[0] & 0x1f, min = 0x80;
	else if ((s[0] & 0xf0) == 0xe0)
		n = 3, c = s[0] & 0x0f, min = 0x800;
	else if ((s[0] & 0xf8) == 0xf0)
		n = 4, c = s[0] & 0x07, min = 0x10000;
	else
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;   /* also stops at the NUL */
		c = c << 6 | (s[i] & 0x3f);
	}
	if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	return n;
}

int cb_utf8_valid(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	while (*p) {
		size_t n = cb_utf8_seq(p);
		if (!n)
			return 0;
		p += n;
	}
	return 1;
}

/* A valid multibyte sequence is shown as is when the locale says it is
 * printable (gnulib's quotearg, which GNU tar uses, asks iswprint); C1
 * controls never are. Without a UTF-8 locale, none is. */
static int printable_seq(const unsigned char *p, size_t n)
{
	mbstate_t st;
	wchar_t wc;

	memset(&st, 0, sizeof(st));
	if (p[0] == 0xc2 && p[1] < 0xa0)
		return 0;
	return mbrtowc(&wc, (const char *)p, n, &st) == n && iswprint((wint_t)wc);
}

char *cb_quote(const char *s)
{
	static const char esc_from[] = "\a\b\f\n\r\t\v\\", esc_to[] = "abfnrtv\\";
	const unsigned char *p = (const unsigned char *)s;
	char *out = cb_xmalloc(strlen(s) * 4 + 1), *o = out;

	while (*p) {
		size_t n = cb_utf8_seq(p);
		const char *e = *p < 0x80 ? strchr(esc_from, *p) : NULL;

		if (e) {
			*o++ = '\\';
			*o++ = esc_to[e - esc_from];
		} else if (n == 1 && *p >= 0x20 && *p != 0x7f) {
			*o++ = (char)*p;
		} else if (n > 1 && printable_seq(p, n)) {
			memcpy(o, p, n);
			o += n;
			p += n;
			continue;
		} else {
			/* one byte; a non-printable sequence byte by byte */
			for (size_t i = 0; i < (n ? n : 1); i++)
				o += sprintf(o, "\\%03o", p[i]);
			p += n ? n : 1;
			continue;
		}
		p++;
	}
	*o = '\0';
	return out;
}

int cb_json_string(FILE *out, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	int lossy = 0;

	if (!s) {
		fputs("null", out);
		return 0;
	}
	fputc('"', out);
	while (*p) {
		size_t n = cb_utf8_seq(p);

		if (*p == '"' || *p == '\\')
			fprintf(out, "\\%c", *p);
		else if (*p == '\n')
			fputs("\\n", out);
		else if (*p == '\t')
			fputs("\\t", out);
		else if (n == 1 && (*p < 0x20 || *p == 0x7f))
			fprintf(out, "\\u%04x", *p);
		else if (n == 2 && p[0] == 0xc2 && p[1] < 0xa0)
			fprintf(out, "\\u%04x", p[1]);   /* C1 control */
		else if (n)
			fwrite(p, 1, n, out);
		else {
			fputs("\\ufffd", out);
			lossy = 1;
		}
		p += n ? n : 1;
	}
	fputc('"', out);
	return lossy;
}

void cb_json_base64(FILE *out, const char *s)
{
	static const char tab[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const unsigned char *p = (const unsigned char *)s;
	size_t len = strlen(s);

	fputc('"', out);
	for (size_t i = 0; i < len; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < len ? (uint32_t)p[i + 1] << 8 : 0) |
			     (i + 2 < len ? p[i + 2] : 0);
		fputc(tab[v >> 18 & 63], out);
		fputc(tab[v >> 12 & 63], out);
		fputc(i + 1 < len ? tab[v >> 6 & 63] : '=', out);
		fputc(i + 2 < len ? tab[v & 63] : '=', out);
	}
	fputc('"', out);
}

void cb_json_member(FILE *out, const char *pfx, const char *key, const char *s, const char *sep)
{
	const char *colon = *sep ? ": " : ":";   /* compact with sep "" */

	fprintf(out, "%s\"%s\"%s", pfx, key, colon);
	if (!cb_json_string(out, s))
		return;
	fprintf(out, ",%s%s\"%s_b64\"%s", sep, pfx, key, colon);
	cb_json_base64(out, s);
}

void cb_json_time(FILE *out, time_t t)
{
	char buf[64], zone[8];
	struct tm tm;

	localtime_r(&t, &tm);
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
	strftime(zone, sizeof(zone), "%z", &tm);   /* +0100 -> +01:00 (RFC 3339) */
	fprintf(out, "\"%s%.3s:%.2s\"", buf, zone, zone + 3);
}
