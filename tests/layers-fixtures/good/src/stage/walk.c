#include "cb_floor.h"
#include "cb_walk.h"

int cb_walk_tree(const char *path)
{
	return cb_floor_add(path[0], 1);
}
