# bench/lib.sh: helpers the benchmarks share (POSIX sh; sourced).
now() { date +%s.%N; }
# elapsed T0 T1: seconds between two now()s, 3 decimals, one line
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f\n", b - a }'; }
# median FILE: of the numbers in FILE, one a line
median() { sort -n "$1" | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
