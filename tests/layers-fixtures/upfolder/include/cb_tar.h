int cb_tar_add(int a);
