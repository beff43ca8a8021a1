/* a folder that ORDER does not place */
#include "cb_floor.h"

int cb_odd(void)
{
	return cb_floor_add(1, 2);
}
