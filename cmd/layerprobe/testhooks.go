//go:build testhooks

// The test hooks: settings the end-to-end tests and the benchmark use to
// inject faults and shorten waits, read from LAYERPROBE_TEST_* environment
// variables. They are built only with the build tag testhooks (the tests'
// binary, testharness.HookTags); the binary `make build` builds has
// testhooks_off.go instead, and no such variable reaches it.

package main

import (
	"os"
	"strconv"
	"time"
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

// testJobTimeout reads LAYERPROBE_TEST_JOB_TIMEOUT (a Go duration such as
// "2s"): a test-only setting that replaces every fio job's timeout, so the
// fault tests can make a hung fio time out in seconds rather than after the
// profile's minutes. Like the throttle, it is an environment variable only:
// neither the API nor a config file can reach it. Anything but a positive
// duration is ignored.
func testJobTimeout() time.Duration {
	d, err := time.ParseDuration(os.Getenv("LAYERPROBE_TEST_JOB_TIMEOUT"))
	if err != nil || d <= 0 {
		return 0
	}
	return d
}

// testFirstCycleDelay reads LAYERPROBE_TEST_FIRST_CYCLE_DELAY (a Go
// duration): a test-only setting for how soon after start the first
// scheduled cycle runs (default 5s). The fault tests set it to an hour and
// start every cycle with POST /api/v1/cycles, so no scheduled cycle races
// with the fault they inject. Environment only, like the others.
func testFirstCycleDelay() time.Duration {
	d, err := time.ParseDuration(os.Getenv("LAYERPROBE_TEST_FIRST_CYCLE_DELAY"))
	if err != nil || d <= 0 {
		return 0
	}
	return d
}

// testMemoryTuning reads LAYERPROBE_TEST_MEMORY_TUNING: "off" runs the
// agent without its memory tuning (memory.go), so the footprint benchmark
// can measure the agent before and after it with one binary. Environment
// only, like the others.
func testMemoryTuning(getenv func(string) string) bool {
	return getenv("LAYERPROBE_TEST_MEMORY_TUNING") != "off"
}
