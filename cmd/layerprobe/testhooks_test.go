//go:build testhooks

package main

// offWithHooks is what LAYERPROBE_TEST_MEMORY_TUNING=off leaves of the
// memory tuning: nothing, with the test hooks built in.
var offWithHooks = memoryTuning{}
