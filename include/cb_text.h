/*
 * cb_text: file names are bytes. A guest's names and link targets need not
 * be UTF-8 (a user can create `caf\xe9`); everything cbackup prints of them
 * is made safe here, one way for text and one for JSON.
 *
 * Text (ls, log lines): GNU tar's default "escape" quoting in a UTF-8
 * locale: \a \b \f \n \r \t \v and \\ for the backslash, \ooo for every
 * other byte that is not a printable character (controls, DEL, the C1
 * controls U+0080..U+009F, bytes that are not valid UTF-8); printable
 * UTF-8 as is. `cbackup ls` and `tar -tvf` print a name alike.
 *
 * JSON: strings are always valid UTF-8 JSON: ", \ and controls escaped
 * (\n, \t, \uXXXX, C1 and DEL too), each byte that is not part of valid
 * UTF-8 written as U+FFFD. Such a string also gets a member "KEY_b64":
 * the raw bytes in base64 (RFC 4648), so a name is carried losslessly.
 */
#ifndef CB_TEXT_H
#define CB_TEXT_H

#include <stddef.h>
#include <stdio.h>
#include <time.h>

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if there is none
 * (an invalid, overlong, surrogate or truncated sequence; s at NUL). */
size_t cb_utf8_seq(const unsigned char *s);
/* 1 if all of s is valid UTF-8. */
int cb_utf8_valid(const char *s);
/* GNU tar's escape quoting of s, newly allocated. */
char *cb_quote(const char *s);
/* "..." (null for NULL), as above. 1 if s was not valid UTF-8 (lossy). */
int cb_json_string(FILE *out, const char *s);
/* s in base64 as a JSON string. */
void cb_json_base64(FILE *out, const char *s);
/* PFX"KEY": "...", and when lossy, ",SEP"PFX"KEY_b64": "..." after it:
 * a member of an object; sep goes between the two after the comma ("\n";
 * "" writes them compact, without a blank after the colon). */
void cb_json_member(FILE *out, const char *pfx, const char *key, const char *s, const char *sep);
/* t as "2026-12-02T10:14:07+01:00" (RFC 3339, local time), quoted. */
void cb_json_time(FILE *out, time_t t);

#endif
