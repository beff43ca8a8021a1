int cb_walk_tree(const char *path);
