package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestConcurrentReadersAndWriter runs the agent's writer (cycles, detector
// states) against the readers the HTTP API and metrics run at the same
// time. Readers check what a transaction boundary promises: a cycle is
// either running without samples or finished with all of them.
func TestConcurrentReadersAndWriter(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, t.TempDir())
	const cycles, roundsPer = 30, 2

	var writerDone atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer writerDone.Store(true)
		for i := range cycles {
			start := t0.Add(time.Duration(i) * time.Minute)
			c := &Cycle{Engine: "e", Mode: "steady", StartedAt: start}
			if err := s.StartCycle(ctx, c); err != nil {
				t.Errorf("StartCycle: %v", err)
				return
			}
			first, err := s.NextRound(ctx, "e", "steady")
			if err != nil {
				t.Errorf("NextRound: %v", err)
				return
			}
			c.FirstRound, c.Rounds, c.Result = first, roundsPer, ResultOK
			for r := first; r < first+roundsPer; r++ {
				c.Samples = append(c.Samples, roundSamples(r, start)...)
			}
			c.BytesWritten = int64(len(c.Samples))
			if err := s.FinishCycle(ctx, c); err != nil {
				t.Errorf("FinishCycle: %v", err)
				return
			}
			if err := s.SaveDetectorState(ctx, "e", "steady", "container", fmt.Appendf(nil, `{"i":%d}`, i)); err != nil {
				t.Errorf("SaveDetectorState: %v", err)
				return
			}
		}
	}()

	var reads atomic.Int64
	reader := func() {
		defer wg.Done()
		for !writerDone.Load() {
			list, err := s.Cycles(ctx, Query{Engine: "e", Limit: 5})
			if err != nil {
				t.Errorf("Cycles: %v", err)
				return
			}
			for _, l := range list {
				c, err := s.Cycle(ctx, l.ID)
				if err != nil {
					t.Errorf("Cycle(%d): %v", l.ID, err)
					return
				}
				switch c.Result {
				case ResultOK:
					if len(c.Samples) != roundsPer*perRound {
						t.Errorf("ok cycle %d seen with %d samples", c.ID, len(c.Samples))
					}
				case ResultRunning:
					if len(c.Samples) != 0 {
						t.Errorf("running cycle %d seen with %d samples", c.ID, len(c.Samples))
					}
				}
			}
			recent, err := s.RecentSamples(ctx, "e", "steady", 3)
			if err != nil {
				t.Errorf("RecentSamples: %v", err)
				return
			}
			if len(recent)%perRound != 0 || len(recent) > 3*perRound {
				t.Errorf("RecentSamples(3) returned %d samples: a partial round", len(recent))
			}
			if _, err := s.LatestCycle(ctx, "e", ResultOK); err != nil && !errors.Is(err, ErrNotFound) {
				t.Errorf("LatestCycle: %v", err)
			}
			if _, err := s.Counts(ctx, "e"); err != nil {
				t.Errorf("Counts: %v", err)
			}
			if _, err := s.BytesWrittenSince(ctx, "e", t0); err != nil {
				t.Errorf("BytesWrittenSince: %v", err)
			}
			if _, err := s.DetectorState(ctx, "e", "steady", "container"); err != nil && !errors.Is(err, ErrNotFound) {
				t.Errorf("DetectorState: %v", err)
			}
			reads.Add(1)
		}
	}
	for range 4 {
		wg.Add(1)
		go reader()
	}
	wg.Wait()

	if reads.Load() == 0 {
		t.Log("readers never ran a full pass while the writer wrote")
	}
	counts, err := s.Counts(ctx, "e")
	if err != nil || counts[ResultOK] != cycles {
		t.Errorf("after the run: %v, %v; want %d ok cycles", counts, err, cycles)
	}
	// The writer numbered rounds through NextRound while readers read: no
	// number was handed out twice.
	if n, err := s.NextRound(ctx, "e", "steady"); err != nil || n != cycles*roundsPer+1 {
		t.Errorf("NextRound = %d, %v; want %d", n, err, cycles*roundsPer+1)
	}
}
