#!/usr/bin/env bash
# Where overlay2's random-write gap on a fast device comes from.
#
# On ext4 in RAM (no disk noise) a default `layerprobe run` read the
# container's 4 KiB random writes (4 threads at QD1 on one file, O_DIRECT)
# 12-19% slower than the host's, bind at 3-4%. This script takes the
# engine out: an overlay mount made by hand over the same ext4, fio on a
# file in its upper layer against fio on a file beside it, paired and
# alternated, in three shapes that tell a per-I/O CPU cost from a lock:
#   one-file: quick's job, 4 threads on one file
#   four-files: 4 threads, a file each (no shared inode)
#   one-thread: 1 thread on one file
# and perf's share of the kernel's lock paths (rwsem) and overlayfs's own
# functions in each arm. Needs root, fio, perf, mkfs.ext4; a quiet machine.
# Usage: bench/quiet/overlay-randwrite.sh [reps] > result.txt
set -euo pipefail
reps=${1:-10}
dir=$(mktemp -d /tmp/lpquiet.XXXXXX)
cleanup() {
	umount "$dir/fs/merged" 2>/dev/null || true
	umount "$dir/fs" 2>/dev/null || true
	umount "$dir" 2>/dev/null || true
	rmdir "$dir" 2>/dev/null || true
}
trap cleanup EXIT
mount -t tmpfs -o size=2200m tmpfs "$dir"
truncate -s 2g "$dir/disk.img"
mkfs.ext4 -F -q "$dir/disk.img"
mkdir "$dir/fs"
mount -o loop "$dir/disk.img" "$dir/fs"
mkdir -p "$dir/fs/host" "$dir/fs/lower" "$dir/fs/upper" "$dir/fs/work" "$dir/fs/merged"
mount -t overlay overlay -o "lowerdir=$dir/fs/lower,upperdir=$dir/fs/upper,workdir=$dir/fs/work" "$dir/fs/merged"

# fio_iops DIR JOBS FILES: IOPS of quick's random-write job shape for 2 s.
fio_iops() {
	local names=() i
	if [ "$3" = 1 ]; then names=(--filename="$1/f0"); else names=(--directory="$1" --filename_format='f$jobnum'); fi
	fio --name=rw "${names[@]}" --size=16M --rw=randwrite --bs=4k --ioengine=libaio --direct=1 --iodepth=1 \
		--numjobs="$2" --thread --group_reporting --time_based --runtime=2 --ramp_time=0.2 --output-format=json |
		python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["write"]["iops"])'
}
for d in host merged; do
	for i in 0 1 2 3; do fio --name=lay --filename="$dir/fs/$d/f$i" --size=16M --rw=write --bs=1M --direct=1 --output=/dev/null; done
done
echo "shape       overlay/host IOPS: median [min, max] over $reps alternated pairs"
for shape in "one-file 4 1" "four-files 4 4" "one-thread 1 1"; do
	set -- $shape
	ratios=()
	for r in $(seq "$reps"); do
		if [ $((r % 2)) = 1 ]; then h=$(fio_iops "$dir/fs/host" "$2" "$3"); o=$(fio_iops "$dir/fs/merged" "$2" "$3")
		else o=$(fio_iops "$dir/fs/merged" "$2" "$3"); h=$(fio_iops "$dir/fs/host" "$2" "$3"); fi
		ratios+=("$(python3 -c "print($o/$h)")")
	done
	python3 -c "
import statistics,sys
r=sorted(float(x) for x in sys.argv[2:])
print('%-11s %.3f [%.3f, %.3f]' % (sys.argv[1], statistics.median(r), r[0], r[-1]))" "$1" "${ratios[@]}"
done
echo
echo "perf: share of fio's samples in the kernel's rwsem paths and in overlayfs (4 threads, one file)"
for d in host merged; do
	perf record -q -o "$dir/perf.data" -- fio --name=rw --filename="$dir/fs/$d/f0" --size=16M --rw=randwrite --bs=4k \
		--ioengine=libaio --direct=1 --iodepth=1 --numjobs=4 --thread --time_based --runtime=3 --output=/dev/null >/dev/null 2>&1
	perf report -i "$dir/perf.data" --no-children --sort symbol --stdio 2>/dev/null | awk -v d="$d" '
		/\[k\]/ { p=$1; sub("%","",p); s=$3
			if (s ~ /rwsem|down_write|up_write|osq_lock/) w+=p
			if (s ~ /down_read|up_read/) r+=p
			if (s ~ /^ovl_|backing_file/) o+=p }
		END { printf "%-7s exclusive-lock paths %.2f%%, shared-lock %.2f%%, overlayfs %.2f%%\n", d, w, r, o }'
	rm -f "$dir/perf.data"
done
