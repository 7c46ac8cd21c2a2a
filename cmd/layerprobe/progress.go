package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/layerprobe/layerprobe/internal/probe"
)

// progressReporter shows a running measurement on stderr: update gets
// every probe.Progress, finish ends the display before the table or the
// JSON is written.
type progressReporter interface {
	update(probe.Progress)
	finish()
}

// newProgress picks how `run` reports progress on w: nothing when quiet, a
// live bar when w is a terminal, otherwise one plain line per round, which
// reads well in CI logs and leaves stdout (the table or JSON) alone.
func newProgress(w io.Writer, quiet bool) progressReporter {
	if quiet {
		return nil
	}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return newBarProgress(w)
	}
	return &lineProgress{w: w}
}

// barScale is the bar's resolution: its value is a fraction of this.
const barScale = 1000

// barProgress draws a bar with a description that says where the
// measurement is and how long it has left. An adaptive measurement knows
// no total, so the bar then shows elapsed / (elapsed + ETA). A ticker
// redraws it every second, so that the clocks move during long fio jobs
// (the seed profile runs each for a minute).
type barProgress struct {
	w    io.Writer
	mu   sync.Mutex
	bar  *progressbar.ProgressBar
	last probe.Progress
	seen time.Time // when last arrived
	frac int64     // the bar's value; it never goes back within an engine
	stop chan struct{}
	done chan struct{}
}

func newBarProgress(w io.Writer) *barProgress {
	p := &barProgress{w: w, stop: make(chan struct{}), done: make(chan struct{})}
	go p.tick()
	return p
}

func (p *barProgress) tick() {
	defer close(p.done)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.mu.Lock()
			if p.bar != nil {
				pr := p.last
				since := time.Since(p.seen)
				pr.Elapsed += since
				if pr.ETA > 0 {
					pr.ETA = max(pr.ETA-since, 0)
				}
				p.bar.Describe(describe(pr))
			}
			p.mu.Unlock()
		}
	}
}

func (p *barProgress) update(pr probe.Progress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil && pr.Engine != p.last.Engine {
		_ = p.bar.Clear()
		p.bar = nil
	}
	if p.bar == nil {
		p.frac = 0
		p.bar = progressbar.NewOptions64(barScale,
			progressbar.OptionSetWriter(p.w),
			progressbar.OptionUseANSICodes(true),
			progressbar.OptionSetPredictTime(false), // ours knows the plan
			progressbar.OptionSetElapsedTime(false),
			progressbar.OptionFullWidth(),
			progressbar.OptionClearOnFinish(),
			progressbar.OptionSetTheme(progressbar.ThemeASCII),
		)
	}
	p.last, p.seen = pr, time.Now()
	if pr.Phase == "done" {
		_ = p.bar.Clear()
		p.bar = nil
		return
	}
	p.frac = max(p.frac, min(int64(fraction(pr)*barScale), barScale-1))
	p.bar.Describe(describe(pr))
	_ = p.bar.Set64(p.frac)
}

func (p *barProgress) finish() {
	close(p.stop)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		_ = p.bar.Clear()
		p.bar = nil
	}
}

// fraction is how far the measurement is, 0 to 1: executions done of the
// total when it is known, else elapsed time of elapsed plus time left.
func fraction(pr probe.Progress) float64 {
	if pr.Total > 0 {
		return float64(pr.Done) / float64(pr.Total)
	}
	if pr.ETA <= 0 {
		return 0
	}
	return float64(pr.Elapsed) / float64(pr.Elapsed+pr.ETA)
}

// describe is the bar's text: engine, round, what runs now, the bytes and
// the precision so far, and the clocks.
func describe(pr probe.Progress) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%s] ", pr.Engine)
	switch pr.Phase {
	case "layout":
		if pr.Round > 0 {
			fmt.Fprintf(&b, "round %d: ", pr.Round)
		}
		fmt.Fprintf(&b, "laying out %s on %s", pr.Workload, pr.Target)
	case "cold":
		fmt.Fprintf(&b, "cold round %d: %s on %s", pr.Round, pr.Workload, pr.Target)
	default:
		fmt.Fprintf(&b, "round %d: %s on %s", pr.Round, pr.Workload, pr.Target)
	}
	fmt.Fprintf(&b, " | %s", written(pr))
	if s := precision(pr); s != "" {
		fmt.Fprintf(&b, " | %s", s)
	}
	fmt.Fprintf(&b, " | %s elapsed, %s left", fmtClock(pr.Elapsed), eta(pr))
	return b.String()
}

// lineProgress writes one plain line per completed round (and one when
// the file layout starts and when the measurement ends): no escape codes,
// nothing redrawn.
type lineProgress struct {
	w    io.Writer
	last probe.Progress
	have bool
}

func (p *lineProgress) update(pr probe.Progress) {
	prev, had := p.last, p.have
	p.last, p.have = pr, true
	// The layout at the start is round 0; a job with a file per round
	// lays out its files as the first part of its round.
	if pr.Phase == "layout" && pr.Round == 0 {
		if !had || prev.Phase != "layout" || prev.Engine != pr.Engine {
			fmt.Fprintf(p.w, "[%s] laying out the job files on every target\n", pr.Engine)
		}
		return
	}
	// A round has ended when the execution after its last one belongs to
	// another round, or the measurement is done; pr carries the figures
	// as they were then.
	measuring := prev.Phase == "measure" || prev.Phase == "cold" || prev.Phase == "layout" && prev.Round > 0
	if !had || !measuring || prev.Engine != pr.Engine || pr.Phase != "done" && pr.Round == prev.Round {
		return
	}
	kind := "round"
	if prev.Phase == "cold" {
		kind = "cold round"
	}
	fmt.Fprintf(p.w, "[%s] %s %d done: %s | %s", pr.Engine, kind, prev.Round, prev.Workload, written(pr))
	if s := precision(pr); s != "" {
		fmt.Fprintf(p.w, " | %s", s)
	}
	if pr.Phase == "done" {
		fmt.Fprintf(p.w, " | %s elapsed, finished\n", fmtClock(pr.Elapsed))
	} else {
		fmt.Fprintf(p.w, " | %s elapsed, %s left\n", fmtClock(pr.Elapsed), eta(pr))
	}
}

func (p *lineProgress) finish() {}

// written is the bytes written so far, with the budget when there is one.
func written(pr probe.Progress) string {
	s := fmt.Sprintf("%.0f MiB written", float64(pr.BytesWritten)/(1<<20))
	if pr.MaxBytes > 0 {
		s = fmt.Sprintf("%.0f of %.0f MiB written", float64(pr.BytesWritten)/(1<<20), float64(pr.MaxBytes)/(1<<20))
	}
	return s
}

// precision is the widest interval so far, against the target when the
// measurement is adaptive (it stops there).
func precision(pr probe.Progress) string {
	adaptive := pr.Total == 0 && pr.Precision > 0
	known := !math.IsNaN(pr.HalfWidth) && !math.IsInf(pr.HalfWidth, 0)
	switch {
	case adaptive && known:
		return fmt.Sprintf("widest interval ±%.1f pts (target ±%.1f)", 100*pr.HalfWidth, 100*pr.Precision)
	case adaptive:
		return fmt.Sprintf("intervals: not yet (target ±%.1f pts)", 100*pr.Precision)
	case known:
		return fmt.Sprintf("widest interval ±%.1f pts", 100*pr.HalfWidth)
	}
	return ""
}

func eta(pr probe.Progress) string {
	if pr.Done == 0 || pr.ETA <= 0 && pr.Phase != "done" {
		return "--:--"
	}
	return "about " + fmtClock(pr.ETA)
}

func fmtClock(d time.Duration) string {
	d = d.Round(time.Second)
	return fmt.Sprintf("%d:%02d", int(d.Minutes()), int(d.Seconds())%60)
}
