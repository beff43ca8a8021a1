/* cb_mailto: the syntax of a mailto value. See include/cb_mailto.h. */
#include <stdlib.h>
#include <string.h>

#include "cb_mailto.h"
#include "cb_util.h"

static int bad_address_char(unsigned char c)
{
	return c <= 0x20 || c >= 0x7f || strchr("\"(),:;<>[\\]", c);
}

int cb_mailto_check(const char *mailto)
{
	char *copy = cb_xstrdup(mailto), *save = NULL;
	int n = 0, ret = 0;

	for (char *t = strtok_r(copy, CB_MAILTO_SEPARATORS, &save); t && ret == 0;
	     t = strtok_r(NULL, CB_MAILTO_SEPARATORS, &save), n++)
		for (const char *p = t; *p && ret == 0; p++)
			if (bad_address_char((unsigned char)*p))
				ret = cb_error("invalid mail address '%s'", t);
	free(copy);
	if (ret == 0 && n == 0)
		ret = cb_error("no mail address in '%s'", mailto);
	return ret;
}
