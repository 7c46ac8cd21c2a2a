package store

import (
	"context"
	"math"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/measure"
)

// TestDocsQueries keeps docs/store.md honest: every ```sql example runs
// against a populated store and returns at least one row with a non-NULL
// last column (a misspelt JSON path yields NULL, not an error), and every
// column the doc's tables list exists.
func TestDocsQueries(t *testing.T) {
	doc, err := os.ReadFile("../../docs/store.md")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s := openStore(t, t.TempDir())

	// Recent cycles, so that the "last 24 hours" example finds them.
	now := time.Now().UTC().Add(-time.Hour)
	ok := &Cycle{Engine: "default", Mode: "steady", Profile: "default", Trigger: "schedule", StartedAt: now}
	if err := s.StartCycle(ctx, ok); err != nil {
		t.Fatal(err)
	}
	ok.Result, ok.FirstRound, ok.Rounds, ok.BytesWritten = ResultOK, 1, 2, 1<<20
	ok.Samples = append(roundSamples(1, now), roundSamples(2, now)...)
	ok.Samples = append(ok.Samples, measure.Sample{Round: 2, Order: 3, Target: measure.TargetVolume, StartedAt: now,
		JobResult: measure.JobResult{Workload: measure.Fsync, Failure: &measure.Failure{Reason: measure.ReasonTimeout, Message: "killed"}}})
	nan := math.NaN()
	ok.Results = []measure.Result{{Target: measure.TargetContainer, Workload: "fsync", RoundsOK: 2,
		Raw: measure.Raw{IOPS: 100, BandwidthBytes: 4e5, LatencyP50: 0.001, LatencyP99: 0.002, FsyncP99: 0.01},
		Overhead: map[string]measure.Overhead{
			measure.MetricFsyncP99: {Ratio: 0.2, CILow: 0.1, CIHigh: 0.3, PercentOfHost: 83, PercentLow: nan, PercentHigh: nan, N: 2, Coverage: 0.5},
			measure.MetricIOPS:     {Ratio: 0.05, CILow: nan, CIHigh: nan, PercentOfHost: 95, PercentLow: nan, PercentHigh: nan, N: 2, Coverage: nan},
		}}}
	if err := s.FinishCycle(ctx, ok); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordSkip(ctx, &Cycle{Engine: "default", Mode: "steady", StartedAt: now.Add(time.Minute), Reason: "busy_io_pressure"}); err != nil {
		t.Fatal(err)
	}

	coldCycle(t, s, now.Add(2*time.Minute), 1, 2, ResultOK, nil)

	blocks := regexp.MustCompile("(?s)```sql\n(.*?)```").FindAllStringSubmatch(string(doc), -1)
	if len(blocks) < 5 {
		t.Fatalf("found %d sql examples in docs/store.md, want at least 5", len(blocks))
	}
	for _, b := range blocks {
		q := b[1]
		rows, err := s.db.QueryContext(ctx, q)
		if err != nil {
			t.Errorf("example fails: %v\n%s", err, q)
			continue
		}
		cols, _ := rows.Columns()
		n, nonNull := 0, 0
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Errorf("scan: %v", err)
			}
			n++
			if vals[len(vals)-1] != nil {
				nonNull++
			}
		}
		if err := rows.Err(); err != nil {
			t.Errorf("example fails: %v\n%s", err, q)
		}
		rows.Close()
		if n == 0 || nonNull == 0 {
			t.Errorf("example returns %d rows, %d with a value in the last column:\n%s", n, nonNull, q)
		}
	}

	// Every `column` in the first cell of a table row under "### `table`"
	// must exist in that table.
	table, checked := "", 0
	for line := range strings.Lines(string(doc)) {
		if m := regexp.MustCompile("^### `(\\w+)`").FindStringSubmatch(line); m != nil {
			table = m[1]
			continue
		}
		if strings.HasPrefix(line, "## ") {
			table = ""
		}
		if table == "" || !strings.HasPrefix(line, "| `") {
			continue
		}
		first := strings.Split(line, "|")[1]
		for _, m := range regexp.MustCompile("`(\\w+)`").FindAllStringSubmatch(first, -1) {
			checked++
			var n int
			if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM pragma_table_info(?) WHERE name = ?`, table, m[1]).Scan(&n); err != nil || n != 1 {
				t.Errorf("docs/store.md lists column %s.%s, which does not exist (%v)", table, m[1], err)
			}
		}
	}
	if checked < 30 {
		t.Errorf("checked %d documented columns; the doc's tables were not found", checked)
	}
}
