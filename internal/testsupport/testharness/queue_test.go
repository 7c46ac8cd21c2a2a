package testharness

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// The queue starts the tests it was told are longest first, whatever
// order they arrive in, then in arrival order, and never runs more than
// its width at once.
func TestQueueStartsTheLongestFirst(t *testing.T) {
	q := NewQueue(2, "TestLong", "TestMiddle")
	q.settle = 100 * time.Millisecond
	var mu sync.Mutex
	var started []string
	running, most := 0, 0
	var wg sync.WaitGroup
	for i, name := range []string{"TestShort1", "TestMiddle/sub", "TestShort2", "TestLong", "TestShort3"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Arrivals in this order, within the settle time.
			time.Sleep(time.Duration(i) * 10 * time.Millisecond)
			done := q.wait(name)
			mu.Lock()
			started = append(started, name)
			running++
			most = max(most, running)
			mu.Unlock()
			time.Sleep(50 * time.Millisecond)
			mu.Lock()
			running--
			mu.Unlock()
			done()
		}()
	}
	wg.Wait()
	// Two start together each time, so either of a pair may append first.
	pairs := slices.Clone(started)
	slices.Sort(pairs[:2])
	slices.Sort(pairs[2:4])
	if !slices.Equal(pairs, []string{"TestLong", "TestMiddle/sub", "TestShort1", "TestShort2", "TestShort3"}) {
		t.Errorf("started %v; want TestLong and TestMiddle/sub first, then the others as they arrived", started)
	}
	if most > 2 {
		t.Errorf("%d ran at once, want at most the width 2", most)
	}
	// After the settle time a test starts as soon as there is room.
	start := time.Now()
	q.wait("TestLate")()
	if d := time.Since(start); d > 50*time.Millisecond {
		t.Errorf("a test arriving at an idle, settled queue waited %s", d)
	}
}
