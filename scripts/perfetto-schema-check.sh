#!/usr/bin/env bash
# Decode gpufeed's Perfetto files with protoc against Perfetto's own protos,
# and fail on any field the schema does not know.
#
#   scripts/perfetto-schema-check.sh PERFETTO_CHECKOUT FILE.pftrace...
#
# PERFETTO_CHECKOUT is a checkout of github.com/google/perfetto kept outside
# this repository; protoc comes from Debian's protobuf-compiler package.
set -euo pipefail
if [ $# -lt 2 ]; then
	echo "usage: $0 PERFETTO_CHECKOUT FILE.pftrace..." >&2
	exit 2
fi
root=$1
shift
command -v protoc >/dev/null || { echo "$0: protoc not found (apt-get install protobuf-compiler)" >&2; exit 2; }
status=0
for f in "$@"; do
	txt=$(protoc -I"$root" --decode=perfetto.protos.Trace protos/perfetto/trace/trace.proto <"$f")
	unknown=$(grep -cE '^\s*[0-9]+:' <<<"$txt" || true)
	printf '%s: %d packets, %d unknown fields\n' "$f" "$(grep -c '^packet {' <<<"$txt")" "$unknown"
	[ "$unknown" -eq 0 ] || status=1
done
exit $status
