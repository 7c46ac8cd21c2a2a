package main

import (
	"log/slog"
	"runtime/debug"
)

// agentGCPercent is the agent's garbage collection target (GOGC) unless the
// operator sets GOGC. The agent's live heap is small, and at Go's default
// of 100 the heap may grow to the runtime's minimum heap goal between
// collections, about twice that; at 50 it stays nearer the live heap. The
// extra collections are cheap on a heap that small, and the agent is idle
// nearly all the time (docs/configuration.md, "The agent's memory", has
// the figures).
const agentGCPercent = 50

// memoryTuning is how the agent keeps its anonymous memory small.
type memoryTuning struct {
	// gcPercent, when positive, is set with debug.SetGCPercent.
	gcPercent int
	// releaseAfterCycle returns the memory a cycle freed to the operating
	// system after start-up and after every cycle
	// (agent.Agent.releaseMemory).
	releaseAfterCycle bool
}

// agentMemoryTuning decides the agent's memory tuning from its environment:
// an operator's GOGC is kept as the Go runtime already applied it (as is
// GOMEMLIMIT, which the agent never sets), and
// LAYERPROBE_TEST_MEMORY_TUNING=off turns all of it off in a binary built
// with the test hooks (testhooks.go), so the footprint benchmark can
// measure the agent without it.
func agentMemoryTuning(getenv func(string) string) memoryTuning {
	if !testMemoryTuning(getenv) {
		return memoryTuning{}
	}
	t := memoryTuning{releaseAfterCycle: true}
	if getenv("GOGC") == "" {
		t.gcPercent = agentGCPercent
	}
	return t
}

// apply sets the process-wide runtime settings.
func (t memoryTuning) apply(logger *slog.Logger) {
	if t.gcPercent > 0 {
		debug.SetGCPercent(t.gcPercent)
	}
	logger.Debug("memory tuning", "gc_percent", t.gcPercent, "release_after_cycle", t.releaseAfterCycle)
}
