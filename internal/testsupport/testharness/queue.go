package testharness

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Queue runs a package's parallel tests a few at a time, the longest
// first. go test's -parallel bounds them too but starts the paused tests in
// whatever order the scheduler wakes them, and a test package whose
// longest test starts last ends a whole test length later than it needs
// to. The Makefile's -parallel is therefore high; each end-to-end package
// bounds its own tests with a Queue of its width.
type Queue struct {
	width   int
	order   []string
	settle  time.Duration
	mu      sync.Mutex
	running int
	opened  bool // the first arrivals have had their settle time
	armed   bool // the settle timer runs
	waiting []*queued
	arrived int
}

type queued struct {
	rank, seq int
	start     chan struct{}
}

// NewQueue runs at most width tests at once. longestFirst names tests,
// longest first: a test named there, or a subtest of one, starts before
// every test named after it and before every test not named.
func NewQueue(width int, longestFirst ...string) *Queue {
	return &Queue{width: max(width, 1), order: longestFirst, settle: 2 * time.Second}
}

// Parallel marks t parallel and returns once it may run; its place is
// freed when t and its subtests end. Go releases a package's parallel
// tests together, when its sequential ones end: the queue waits a moment
// for them all to arrive before it starts the longest. A parent whose
// body only starts parallel subtests calls t.Parallel itself and leaves
// the queue to the subtests, or it would hold a place while they wait.
func (q *Queue) Parallel(t *testing.T) {
	t.Helper()
	t.Parallel()
	queued := time.Now()
	done := q.wait(t.Name())
	ran := time.Now()
	// The test's own time, apart from its wait: go test's duration counts
	// both, and only this says which tests make a run long.
	t.Cleanup(func() {
		t.Logf("queue: waited %s, ran %s", ran.Sub(queued).Round(time.Second), time.Since(ran).Round(time.Second))
		done()
	})
}

// wait returns once the test named name may run, with the function that
// frees its place.
func (q *Queue) wait(name string) (done func()) {
	w := &queued{rank: q.rank(name), start: make(chan struct{})}
	q.mu.Lock()
	w.seq = q.arrived
	q.arrived++
	q.waiting = append(q.waiting, w)
	if !q.opened && !q.armed {
		q.armed = true
		time.AfterFunc(q.settle, func() {
			q.mu.Lock()
			q.opened = true
			q.dispatch()
			q.mu.Unlock()
		})
	}
	q.dispatch()
	q.mu.Unlock()
	<-w.start
	return func() {
		q.mu.Lock()
		q.running--
		q.dispatch()
		q.mu.Unlock()
	}
}

// dispatch starts the best-ranked waiting tests while there is room.
// Called with q.mu held.
func (q *Queue) dispatch() {
	if !q.opened {
		return
	}
	slices.SortStableFunc(q.waiting, func(a, b *queued) int {
		if a.rank != b.rank {
			return a.rank - b.rank
		}
		return a.seq - b.seq
	})
	for q.running < q.width && len(q.waiting) > 0 {
		w := q.waiting[0]
		q.waiting = q.waiting[1:]
		q.running++
		close(w.start)
	}
}

// rank is the position of the first entry of the queue's order that
// names the test or one of its parents, or after every entry.
func (q *Queue) rank(name string) int {
	for i, n := range q.order {
		if name == n || strings.HasPrefix(name, n+"/") {
			return i
		}
	}
	return len(q.order)
}
