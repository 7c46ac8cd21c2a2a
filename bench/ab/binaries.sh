#!/usr/bin/env bash
# Two layerprobe binaries, measured alternately on one engine: whether a
# change to a profile's jobs buys precision per byte, and whether it moves
# the estimate. Pairs in ABBA order (A B, B A, A B, ...), so that the
# disk's drift over the hour falls on both alike; every run is a default
# adaptive `layerprobe run` of the given workloads with an unreachable
# precision, so the byte budget ends it. One JSON report per run in OUT.
# Usage: bench/ab/binaries.sh OLD_BIN NEW_BIN OUT [pairs] [workloads] [max-bytes]
#   e.g. DOCKER_HOST=unix:///run/docker.sock bench/ab/binaries.sh /tmp/lp-old /tmp/lp-new /tmp/ab 10 randwrite 1GiB
# then bench/ab/summary.py OUT container randwrite iops.
set -euo pipefail
old=$1 new=$2 out=$3 pairs=${4:-10} workloads=${5:-randwrite} maxbytes=${6:-1GiB}
mkdir -p "$out"
i=0
for pair in $(seq 1 "$pairs"); do
	if ((pair % 2)); then order="new old"; else order="old new"; fi
	for v in $order; do
		i=$((i + 1))
		bin=$old
		[[ $v == new ]] && bin=$new
		rc=0
		timeout 600 "$bin" run --config /dev/null --workloads "$workloads" --max-bytes "$maxbytes" \
			--precision 0.0001 -o json --log.level warn >"$out/$i-$v.json" 2>"$out/$i-$v.err" || rc=$?
		echo "$(date -u +%T) run $i $v rc=$rc"
	done
done
