package main

import (
	"bytes"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/probe"
)

// feed replays an adaptive measurement of two targets and two rounds
// (after the layout; the second round lays out its own files) into r.
func feed(r progressReporter) {
	base := probe.Progress{Engine: "default", MaxBytes: 512 << 20, Precision: 0.03, HalfWidth: math.NaN()}
	at := func(phase string, round int, t measure.Target, w measure.Workload, done int, el, eta time.Duration, hw float64) {
		p := base
		p.Phase, p.Round, p.Target, p.Workload, p.Done = phase, round, t, w, done
		p.Elapsed, p.ETA, p.BytesWritten = el, eta, int64(done)*(8<<20)
		if hw != 0 {
			p.HalfWidth = hw
		}
		r.update(p)
	}
	at("layout", 0, measure.TargetHost, measure.Fsync, 0, 0, 0, 0)
	at("layout", 0, measure.TargetContainer, measure.Fsync, 0, time.Second, 0, 0)
	at("measure", 1, measure.TargetHost, measure.Fsync, 0, 2*time.Second, 0, 0)
	at("measure", 1, measure.TargetContainer, measure.Fsync, 1, 3*time.Second, 30*time.Second, 0)
	// seqwrite lays out its round's files first (fio.Job.FilePerRound).
	at("layout", 2, measure.TargetHost, measure.SeqWrite, 2, 4*time.Second, 20*time.Second, math.Inf(1))
	at("layout", 2, measure.TargetContainer, measure.SeqWrite, 2, 4*time.Second, 20*time.Second, math.Inf(1))
	at("measure", 2, measure.TargetContainer, measure.SeqWrite, 2, 4*time.Second, 20*time.Second, math.Inf(1))
	at("measure", 2, measure.TargetHost, measure.SeqWrite, 3, 5*time.Second, 10*time.Second, math.Inf(1))
	at("done", 2, "", "", 4, 6*time.Second, 0, 0.025)
	r.finish()
}

// Off a terminal: one plain line when the layout starts and one per
// completed round, with the round's job, the bytes, the precision and the
// clocks; no escape codes.
func TestLineProgress(t *testing.T) {
	var buf bytes.Buffer
	feed(newProgress(&buf, false))
	got := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	want := []string{
		"[default] laying out the job files on every target",
		"[default] round 1 done: fsync | 16 of 512 MiB written | intervals: not yet (target ±3.0 pts) | 0:04 elapsed, about 0:20 left",
		"[default] round 2 done: seqwrite | 32 of 512 MiB written | widest interval ±2.5 pts (target ±3.0) | 0:06 elapsed, finished",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if strings.ContainsAny(buf.String(), "\r\x1b") {
		t.Errorf("control characters in the plain output: %q", buf.String())
	}
}

func TestQuietProgress(t *testing.T) {
	if p := newProgress(&bytes.Buffer{}, true); p != nil {
		t.Errorf("--quiet: %T, want no reporter", p)
	}
	// A file that is not a terminal gets lines, not the bar.
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, ok := newProgress(f, false).(*lineProgress); !ok {
		t.Error("a plain file should get one line per round")
	}
}

// The bar's text says where the measurement is and how long it has left;
// the bar never goes back and stays below full until the end.
func TestBarProgress(t *testing.T) {
	var buf bytes.Buffer
	feed(newBarProgress(&buf))
	out := buf.String()
	for _, want := range []string{"[default] laying out fsync on host", "round 1: fsync on container",
		"round 2: seqwrite on host", "16 of 512 MiB written", "0:05 elapsed, about 0:10 left", "\x1b[2K"} {
		if !strings.Contains(out, want) {
			t.Errorf("bar output lacks %q:\n%q", want, out)
		}
	}
	if got := fraction(probe.Progress{Done: 3, Total: 12}); got != 0.25 {
		t.Errorf("fraction of fixed rounds %v, want 0.25", got)
	}
	if got := fraction(probe.Progress{Elapsed: time.Minute, ETA: 3 * time.Minute}); got != 0.25 {
		t.Errorf("fraction of an adaptive run %v, want 0.25", got)
	}
}
