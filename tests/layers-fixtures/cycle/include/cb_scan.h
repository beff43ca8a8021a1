struct cb_list;
int cb_scan_feed(struct cb_list *l, const char *buf);
int cb_list_add(struct cb_list *l,
		const char *name);
