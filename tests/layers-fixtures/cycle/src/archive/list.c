#include "cb_scan.h"

int cb_list_add(struct cb_list *l,
		const char *name)
{
	return name[0] ? cb_scan_feed(l, name + 1) : 0;
}
