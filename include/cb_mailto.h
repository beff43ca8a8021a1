/*
 * cb_mailto: the syntax of the mailto key (the recipients of the mail
 * report, cb_notify.h), checked when the configuration is read.
 */
#ifndef CB_MAILTO_H
#define CB_MAILTO_H

/* what separates the addresses */
#define CB_MAILTO_SEPARATORS ",; \t"

/* mailto's syntax: addresses separated by commas, semicolons or blanks,
 * none with control characters or header syntax in it. 0 or -1. */
int cb_mailto_check(const char *mailto);

#endif
