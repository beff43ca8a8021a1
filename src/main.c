#include <stdio.h>
int main(void) { puts("cbackup skeleton"); return 0; }
