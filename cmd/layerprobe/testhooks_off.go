//go:build !testhooks

package main

import "time"

// Without the build tag testhooks (the release binary) the test hooks of
// testhooks.go read nothing: their settings keep the product's values.

func testThrottleIOPS() uint64 { return 0 }

func testJobTimeout() time.Duration { return 0 }

func testFirstCycleDelay() time.Duration { return 0 }

func testMemoryTuning(func(string) string) bool { return true }
