package config

import (
	"fmt"
	"strings"
)

// Alias is a deprecated key that still sets the key that replaced it.
type Alias struct {
	Old, New string // full paths, e.g. agent.target_precision, agent.budget.precision
}

// Aliases lists the deprecated keys: a run's and a cycle's rounds and
// budgets had names of their own before both became a budget block.
var Aliases = []Alias{
	{"rounds", "budget.rounds"},
	{"precision", "budget.precision"},
	{"max_bytes", "budget.max_bytes"},
	{"max_duration", "budget.max_duration"},
	{"agent.rounds_per_cycle", "agent.budget.rounds"},
	{"agent.min_rounds_per_cycle", "agent.budget.min_rounds"},
	{"agent.target_precision", "agent.budget.precision"},
	{"agent.cycle_max_bytes", "agent.budget.max_bytes"},
	{"agent.cycle_max_duration", "agent.budget.max_duration"},
}

// Deprecation is a deprecated key a file set, and where.
type Deprecation struct {
	Line int
	Alias
}

// String says what to write instead, e.g. `line 4: agent.target_precision
// is deprecated, write agent.budget.precision`.
func (d Deprecation) String() string {
	s := fmt.Sprintf("%s is deprecated, write %s (same meaning)", d.Old, d.New)
	if d.Line > 0 {
		s = fmt.Sprintf("line %d: %s", d.Line, s)
	}
	return s
}

// aliasOf returns the key that the deprecated key at path stands for.
func aliasOf(path string) (string, bool) {
	for _, a := range Aliases {
		if a.Old == path {
			return a.New, true
		}
	}
	return "", false
}

// relativeKeys splits the full path to, seen from the mapping at path,
// into its keys: ("agent", "agent.budget.rounds") is [budget rounds].
func relativeKeys(path, to string) []string {
	if path != "" {
		to = strings.TrimPrefix(to, path+".")
	}
	return strings.Split(to, ".")
}
