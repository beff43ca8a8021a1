/* a header of src/core/ that includes one of src/archive/ */
#include "cb_tar.h"
int cb_floor_add(int a, int b);
