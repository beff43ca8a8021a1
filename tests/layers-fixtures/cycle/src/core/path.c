#include "cb_util.h"

int cb_path_push(int n)
{
	return cb_util_alloc(n);
}
