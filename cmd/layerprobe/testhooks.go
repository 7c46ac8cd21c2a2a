package main

import (
	"os"
	"strconv"
)

// testThrottleIOPS reads LAYERPROBE_TEST_THROTTLE_WRITE_IOPS: a test-only
// setting that throttles the probe container's writes with cgroup blkio, to
// inject a real slowdown. It is an environment variable, not a flag or a
// config key, so no API input or config file can reach it.
func testThrottleIOPS() uint64 {
	v, err := strconv.ParseUint(os.Getenv("LAYERPROBE_TEST_THROTTLE_WRITE_IOPS"), 10, 64)
	if err != nil {
		return 0
	}
	return v
}
