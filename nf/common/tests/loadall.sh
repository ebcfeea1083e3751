#!/bin/sh
# The operator's path without Morpheus: each network function's object, as
# plain clang built it, loads with `bpftool prog loadall` (the shared
# nf/common/*.bpf.h headers included). Usage: loadall.sh OBJECT...
set -u
status=0
for object in "$@"; do
	pins=/sys/fs/bpf/nf-loadall-$(basename "$object" .bpf.o)-$$
	if bpftool prog loadall "$object" "$pins" && [ -n "$(ls "$pins")" ]; then
		echo "$object: loaded ($(ls "$pins" | tr '\n' ' '))"
	else
		echo "$object: bpftool prog loadall failed" >&2
		status=1
	fi
	rm -rf "$pins"
done
exit $status
