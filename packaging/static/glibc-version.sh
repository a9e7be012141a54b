#!/bin/sh
# Print the newest glibc version an ELF executable needs ("2.34"): the highest GLIBC_2.N version among the
# symbol versions it references (objdump -T). The wheel's manylinux_2_N tag comes from it.
# Usage: glibc-version.sh FILE
set -eu
v=$(objdump -T "$1" | grep -o 'GLIBC_2\.[0-9]*' | sed 's/GLIBC_//' | sort -t. -k2,2n -u | tail -n 1)
[ -n "$v" ] || { echo "glibc-version.sh: no GLIBC_ symbol versions in $1" >&2; exit 1; }
echo "$v"
