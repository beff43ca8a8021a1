/* a middle floor (archive/) calling the folder above it (stage/) */
#include "cb_tar.h"
#include "cb_walk.h"

int cb_tar_add(int a)
{
	return a + cb_walk_tree("/");
}
