int cb_util_alloc(int n);
int cb_path_push(int n);
