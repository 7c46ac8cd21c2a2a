package report

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/layerprobe/layerprobe/api"
	"github.com/layerprobe/layerprobe/internal/measure"
)

// Agent is what `layerprobe overhead` knows of a running agent: its latest
// overheads (GET /api/v1/overhead), its engines (GET /api/v1/engines) and
// its recent cycles (GET /api/v1/cycles).
type Agent struct {
	URL      string
	Overhead api.OverheadResponse
	Engines  []api.Engine
	Cycles   []api.Cycle // newest first, as the API lists them
}

// WriteAgentTable writes a running agent's latest overheads for a human:
// per engine what the agent says of the engine, its last cycle of each
// mode, and the steady and cold tables, each named by its mode and the
// rounds it is estimated over. Fields the agent does not report are left
// out rather than shown empty.
func WriteAgentTable(w io.Writer, a Agent) error {
	ew := &errWriter{w: w}
	conf := a.Overhead.Confidence
	if !(conf > 0 && conf < 1) {
		conf = measure.DefaultConfidence
	}
	ew.printf("Agent %s: latest overheads at %s, %s confidence intervals\n",
		a.URL, a.Overhead.GeneratedAt.UTC().Format(time.RFC3339), formatPercentPlain(100*conf))

	var names []string
	for _, e := range a.Engines {
		names = append(names, e.Name)
	}
	for _, o := range a.Overhead.Engines {
		if !slices.Contains(names, o.Engine) {
			names = append(names, o.Engine)
		}
	}
	if len(names) == 0 {
		ew.printf("\nno engines configured\n")
	}
	for _, name := range names {
		ew.printf("\n")
		writeAgentEngine(ew, a, name, conf)
	}
	if ew.err != nil {
		return fmt.Errorf("write the agent's overhead table: %w", ew.err)
	}
	return nil
}

func writeAgentEngine(ew *errWriter, a Agent, name string, conf float64) {
	e := Engine{Name: name}
	var info *api.Engine
	for i := range a.Engines {
		if a.Engines[i].Name == name {
			info = &a.Engines[i]
		}
	}
	if info != nil {
		e.Endpoint, e.EngineFacts = info.Endpoint, info.EngineFacts
		e.Warnings = slices.Clone(info.Warnings)
	}
	var steady, cold *api.EngineOverhead
	for i := range a.Overhead.Engines {
		o := &a.Overhead.Engines[i]
		if o.Engine != name {
			continue
		}
		if o.Mode == measure.ModeCold {
			cold = o
		} else {
			steady = o
		}
		if e.Driver == "" {
			e.Driver, e.BackingFS = o.Driver, o.BackingFS
		}
	}
	writeEngineInfo(ew, e)
	if info != nil && !info.Reachable {
		ew.printf("  reachable:    no (the agent cannot reach this engine now)\n")
	}
	for _, mode := range []measure.Mode{measure.ModeSteady, measure.ModeCold} {
		if c := lastCycle(a.Cycles, name, mode); c != nil {
			ew.printf("  %-14s%s\n", "last "+string(mode)+":", cycleText(*c))
		}
	}

	steadyTitle, coldTitle := "", ""
	if steady != nil {
		e.Results = steady.Results
		steadyTitle = "Steady state (one long-lived probe container), " + windowText(steady)
	}
	if cold != nil && (len(cold.Results) > 0 || cold.CopyUp != nil) {
		e.Cold = &Cold{Results: cold.Results, noCopyUp: cold.CopyUp == nil}
		if cold.CopyUp != nil {
			e.Cold.CopyUp = *cold.CopyUp
		}
		coldTitle = "Cold (a fresh container per round, fsync job in its first seconds), " + windowText(cold)
	}
	if steady != nil && steady.LastSuccess == nil {
		e.Warnings = append(e.Warnings, "no successful steady cycle yet")
	}
	writeEngineBody(ew, e, conf, steadyTitle, coldTitle)
	for _, o := range []*api.EngineOverhead{steady, cold} {
		if line := pendingText(o, a.Overhead.GeneratedAt); line != "" {
			ew.printf("  %s\n", line)
		}
	}
}

// pendingText says, for a mode whose results lack an interval for want of
// rounds, how many the shortest has and when the next cycle comes ("" when
// every result has its interval): "steady: no interval yet: 4 of 6 rounds;
// the next cycle at 18:00 UTC".
func pendingText(o *api.EngineOverhead, now time.Time) string {
	if o == nil || o.IntervalRounds <= 0 {
		return ""
	}
	fewest := -1
	for _, r := range o.Results {
		if r.Target == measure.TargetHost {
			continue
		}
		if ov, ok := r.Overhead[measure.HeadlineMetric(r.Workload)]; ok && ov.N < o.IntervalRounds && (fewest < 0 || ov.N < fewest) {
			fewest = ov.N
		}
	}
	if fewest < 0 {
		return ""
	}
	s := fmt.Sprintf("%s: no interval yet: %d of %d rounds", o.Mode, fewest, o.IntervalRounds)
	if o.NextCycleAt != nil {
		t := o.NextCycleAt.UTC()
		if n := now.UTC(); t.YearDay() == n.YearDay() && t.Year() == n.Year() {
			s += "; the next cycle at " + t.Format("15:04 UTC")
		} else {
			s += "; the next cycle at " + t.Format("2 Jan 15:04 UTC")
		}
	}
	return s
}

// lastCycle is the newest cycle of the engine and mode in cycles.
func lastCycle(cycles []api.Cycle, engine string, mode measure.Mode) *api.Cycle {
	var last *api.Cycle
	for i := range cycles {
		c := &cycles[i]
		if c.Engine == engine && c.Mode == mode && (last == nil || c.StartedAt.After(last.StartedAt)) {
			last = c
		}
	}
	return last
}

// cycleText is one cycle on one line: which, how it ended, and its budget.
func cycleText(c api.Cycle) string {
	s := fmt.Sprintf("cycle %d, %s", c.ID, c.Result)
	if c.Reason != "" {
		s += " (" + c.Reason + ")"
	}
	when := c.FinishedAt
	if when.IsZero() {
		when = c.StartedAt
	}
	s += fmt.Sprintf(" at %s, %s", when.UTC().Format(time.RFC3339), orDash(c.Trigger))
	if c.Profile != "" {
		s += ", profile " + c.Profile
	}
	if c.Rounds > 0 {
		s += fmt.Sprintf(", %d rounds", c.Rounds)
		if c.StopReason != "" {
			s += " (stopped by " + string(c.StopReason) + ")"
		}
	}
	if c.DurationSeconds > 0 {
		s += ", " + formatDuration(c.DurationSeconds)
	}
	if c.BytesWritten > 0 {
		s += ", " + formatBytes(c.BytesWritten) + " written"
	}
	if p := c.Running; p != nil {
		s += "; now " + p.Phase
		if p.Workload != "" {
			s += " on " + string(p.Workload)
		}
		s += fmt.Sprintf(", %d rounds done, %s written", p.RoundsDone, formatBytes(p.BytesWritten))
		if p.EstimatedEnd != nil {
			s += ", ends about " + p.EstimatedEnd.UTC().Format("15:04:05 UTC")
		}
	}
	return s
}

// windowText says what a mode's estimates are computed over.
func windowText(o *api.EngineOverhead) string {
	if o.LastSuccess == nil {
		return "no successful cycle yet:"
	}
	return fmt.Sprintf("estimated over the last %d rounds up to the cycle of %s:", o.Window, o.LastSuccess.UTC().Format(time.RFC3339))
}
