#include "cb_scan.h"

int cb_scan_feed(struct cb_list *l, const char *buf)
{
	return cb_list_add(l, buf);
}
