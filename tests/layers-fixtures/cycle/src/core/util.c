#include "cb_util.h"

int cb_util_alloc(int n)
{
	return n > 0 ? cb_path_push(n - 1) : 0;
}
