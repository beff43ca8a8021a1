int cb_floor_add(int a, int b);
