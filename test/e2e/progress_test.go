package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/layerprobe/layerprobe/internal/report"
	"github.com/layerprobe/layerprobe/internal/testsupport/testdaemon"
)

// `layerprobe run` reports its progress on stderr and nowhere else: one
// plain line per round when stderr is a pipe, a live bar when it is a
// terminal, nothing with --quiet; stdout holds the JSON alone each time.
func TestRunProgress(t *testing.T) {
	queue.Parallel(t) // its own private engine, and no assertion on the disk's timing
	d := testdaemon.Start(t, testdaemon.Options{Driver: "overlay2"})
	// The fewest executions that still make rounds, a layout and a bar:
	// two targets, one job with a layout (fsync's rotated files), two
	// rounds of the smoke profile.
	cfg := filepath.Join(t.TempDir(), "config.yml")
	must(t, os.WriteFile(cfg, []byte("profile: smoke\ntargets: [container]\nworkloads: [fsync]\n"), 0o600))
	args := []string{"run", "--config", cfg, "--rounds", "2", "--output", "json", "--log.level", "warn"}
	decode := func(what, stdout string) report.Run {
		t.Helper()
		var run report.Run
		if err := json.Unmarshal([]byte(stdout), &run); err != nil || len(run.Engines) != 1 || run.Engines[0].Rounds == 0 {
			t.Fatalf("%s: stdout is not the run's JSON (%v):\n%s", what, err, stdout)
		}
		return run
	}

	// A pipe, as in CI logs.
	res := layerprobe(t, d.Host, 5*time.Minute, args...)
	if res.code != 0 {
		t.Fatalf("run exited %d: %s", res.code, res.stderr)
	}
	run := decode("plain", res.stdout)
	lines := strings.Split(strings.TrimSuffix(res.stderr, "\n"), "\n")
	roundLine := regexp.MustCompile(`^\[default\] round (\d+) done: (seqwrite|randwrite|fsync|smallfiles) \| (\d+ of )?\d+ MiB written( \| widest interval ±[\d.]+ pts)? \| \d+:\d\d elapsed, (about \d+:\d\d left|--:-- left|finished)$`)
	if len(lines) != 1+run.Engines[0].Rounds || lines[0] != "[default] laying out the job files on every target" {
		t.Errorf("stderr has %d lines for %d rounds, want the layout line and one per round:\n%s", len(lines), run.Engines[0].Rounds, res.stderr)
	}
	for i, l := range lines[min(1, len(lines)):] {
		m := roundLine.FindStringSubmatch(l)
		if m == nil || m[1] != strconv.Itoa(i+1) {
			t.Errorf("line %d: %q, want round %d's line", i+2, l, i+1)
		}
	}
	if !strings.HasSuffix(res.stderr, "finished\n") || strings.ContainsAny(res.stderr, "\r\x1b") {
		t.Errorf("plain progress: want lines without control characters ending with the finished round:\n%q", res.stderr)
	}

	// --quiet: nothing.
	res = layerprobe(t, d.Host, 5*time.Minute, append(args, "--quiet")...)
	decode("--quiet", res.stdout)
	if res.code != 0 || res.stderr != "" {
		t.Errorf("--quiet: exit %d, stderr %q; want 0 and nothing", res.code, res.stderr)
	}

	// A terminal: the bar, redrawn in place, and cleared at the end.
	term := runOnTerminal(t, d.Host, args...)
	decode("terminal", term.stdout)
	if err := os.WriteFile(filepath.Join(t.ArtifactDir(), "terminal.txt"), []byte(term.stderr), 0o644); err != nil {
		t.Error(err)
	}
	for _, want := range []string{"[default] laying out", "[default] round 1: ", "round 2: ", "MiB written", "elapsed", "left", "\x1b[2K\r"} {
		if !strings.Contains(term.stderr, want) {
			t.Errorf("terminal progress lacks %q:\n%q", want, term.stderr)
		}
	}
	if strings.Contains(term.stderr, "done:") {
		t.Errorf("the terminal got the plain lines instead of the bar:\n%q", term.stderr)
	}
	// The bar is cleared at the end: the last thing written erases it.
	if !strings.HasSuffix(term.stderr, "\x1b[2K\r") {
		t.Errorf("the bar is not cleared at the end: ...%q", term.stderr[max(0, len(term.stderr)-200):])
	}
}

// runOnTerminal runs layerprobe with stderr on a pseudo-terminal (stdout a
// pipe) and returns both.
func runOnTerminal(t *testing.T, host string, args ...string) result {
	t.Helper()
	ptmx, tty, err := pty.Open()
	must(t, err)
	defer ptmx.Close()
	must(t, pty.Setsize(ptmx, &pty.Winsize{Rows: 40, Cols: 160}))
	cmd := exec.Command(binary, args...)
	cmd.Env = lpEnv(t, host)
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, tty
	must(t, cmd.Start())
	tty.Close() // the child has it; reads end when the child exits
	var term bytes.Buffer
	copied := make(chan struct{})
	go func() {
		_, _ = io.Copy(&term, ptmx) // ends with EIO once the child has closed it
		close(copied)
	}()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(5 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("layerprobe %v on a terminal did not finish within 5 minutes", args)
	}
	<-copied
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if code != 0 {
		t.Fatalf("layerprobe %v on a terminal exited %d:\n%s", args, code, term.String())
	}
	return result{stdout.String(), term.String(), code}
}
