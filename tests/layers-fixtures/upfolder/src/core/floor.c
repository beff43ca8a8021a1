#include "cb_floor.h"

int cb_floor_add(int a, int b)
{
	return a + b;
}
