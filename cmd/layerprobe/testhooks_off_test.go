//go:build !testhooks

package main

// offWithHooks is what LAYERPROBE_TEST_MEMORY_TUNING=off leaves of the
// memory tuning: all of it, without the test hooks.
var offWithHooks = memoryTuning{gcPercent: agentGCPercent, releaseAfterCycle: true}
