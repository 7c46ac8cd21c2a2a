package main

import "testing"

func TestAgentMemoryTuning(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want memoryTuning
	}{
		{"defaults", nil, memoryTuning{gcPercent: agentGCPercent, releaseAfterCycle: true}},
		{"operator GOGC kept", map[string]string{"GOGC": "200"}, memoryTuning{releaseAfterCycle: true}},
		{"operator GOGC=off kept", map[string]string{"GOGC": "off"}, memoryTuning{releaseAfterCycle: true}},
		{"GOMEMLIMIT alone changes nothing", map[string]string{"GOMEMLIMIT": "64MiB"},
			memoryTuning{gcPercent: agentGCPercent, releaseAfterCycle: true}},
		{"benchmark switch other value", map[string]string{"LAYERPROBE_TEST_MEMORY_TUNING": "on"},
			memoryTuning{gcPercent: agentGCPercent, releaseAfterCycle: true}},
		// The switch is a test hook: off only in the binary built with them.
		{"benchmark switch off", map[string]string{"LAYERPROBE_TEST_MEMORY_TUNING": "off"}, offWithHooks},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := agentMemoryTuning(func(k string) string { return tc.env[k] })
			if got != tc.want {
				t.Errorf("agentMemoryTuning(%v) = %+v, want %+v", tc.env, got, tc.want)
			}
		})
	}
}
