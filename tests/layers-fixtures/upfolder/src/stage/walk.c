#include "cb_walk.h"

int cb_walk_tree(const char *path)
{
	return path[0] == '/';
}
