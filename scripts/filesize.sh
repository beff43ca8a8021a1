#!/bin/sh
# scripts/filesize.sh [DIR]: every .c file under DIR (default src) holds one
# idea in at most 800 lines (src/README.md; a file over 600 says in its
# first comment why it is one idea). Prints each file over the limit;
# exits 1 if there is one. Part of make lint.
dir=${1:-src}
bad=0
for f in $(find "$dir" -name '*.c' | sort); do
	n=$(wc -l <"$f")
	if [ "$n" -gt 800 ]; then
		echo "$f: $n lines, over 800: split it by idea"
		bad=1
	fi
done
exit $bad
