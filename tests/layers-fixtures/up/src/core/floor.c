/* the ground floor, calling up */
#include "cb_floor.h"
#include "cb_walk.h"

int cb_floor_add(int a, int b)
{
	return a + b + cb_walk_tree("/");
}
