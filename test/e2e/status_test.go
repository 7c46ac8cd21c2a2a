package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/layerprobe/layerprobe/internal/testsupport/testdaemon"
	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

// statusConfig: one cycle of seven rounds, enough for a 95% interval on
// every target and job with one round to spare. The byte cap is lifted:
// the smoke profile's executions are timed, so what seven rounds write
// grows with the disk's speed, and the default 512 MiB once stopped the
// cycle at 25 of 28 rounds, which withheld a workload's intervals.
var statusConfig = strings.Replace(agentConfig, "rounds_per_cycle: 2", "rounds_per_cycle: 7\n  cycle_max_bytes: 0", 1)

// The status page of a real agent that has completed a cycle, in a real
// headless Chromium: a row per target and job with its interval bar, the
// detector's state and the cycle are in the DOM the browser built, the
// browser refused nothing under the page's Content-Security-Policy, and a
// screenshot goes into the test's output directory (and, with
// LAYERPROBE_STATUS_SCREENSHOT, to that path: docs/status-page.png is made so).
func TestStatusPageInChromium(t *testing.T) {
	queue.Parallel(t) // its own private engines: runs beside the other parallel tests, after the sequential ones
	chromium := lookChromium(t)
	d := testdaemon.Start(t, testdaemon.Options{Driver: "overlay2"})
	s := newAgentSetup(t, d.Host, statusConfig)
	a := s.start(t)
	cs := a.waitCycles(t, "ok", 1, 5*time.Minute)

	dom, logs := runChromium(t, chromium, "--dump-dom", a.base+"/")
	doc, err := html.Parse(strings.NewReader(dom))
	if err != nil {
		t.Fatal(err)
	}
	rows := elements(doc, "tr", "overhead-row")
	if want := len(wantTargets[1:]) * len(wantJobs); len(rows) != want {
		t.Errorf("%d overhead rows in the DOM, want %d (every non-host target and workload):\n%s", len(rows), want, dom)
	}
	// Every row draws its interval, except one whose failed rounds left
	// fewer than 6 pairs (a round can fail on a loaded machine): that row
	// must say so and draw none.
	bars := 0
	for _, r := range rows {
		withheld := attr(r, "data-withheld") == "true"
		switch {
		case withheld && (len(elements(r, "rect", "ci")) != 0 || !strings.Contains(text(r), "no interval yet")):
			t.Errorf("withheld row %s/%s draws a bar or does not say why: %s", attr(r, "data-target"), attr(r, "data-workload"), text(r))
		case !withheld && (len(elements(r, "rect", "ci")) != 1 || len(elements(r, "line", "est")) != 1):
			t.Errorf("row %s/%s has no interval bar: %s", attr(r, "data-target"), attr(r, "data-workload"), text(r))
		case !withheld:
			bars++
		}
	}
	if bars < len(rows)-1 {
		t.Errorf("%d of %d rows draw an interval; want all but at most one", bars, len(rows))
	}
	if n := len(elements(doc, "tr", "cycle")); n != len(cs) {
		t.Errorf("%d cycle rows, want %d", n, len(cs))
	}
	if ha := elements(doc, "p", "host-arm"); len(ha) != 1 || attr(ha[0], "data-host-arm") != "joined" {
		t.Errorf("the page does not say the host arm joined the probe's CPU cgroups: %v", ha)
	}
	det := elements(doc, "table", "detector")
	if len(det) != 1 || !strings.Contains(text(det[0]), "learning") {
		t.Errorf("the detector's state is not shown: %v", det)
	}
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, "Content Security Policy") || strings.Contains(l, "Refused to") {
			t.Errorf("Chromium refused part of the page: %s", l)
		}
	}

	shot := filepath.Join(t.ArtifactDir(), "status-page.png")
	runChromium(t, chromium, "--screenshot="+shot, "--window-size=1200,1400", "--hide-scrollbars", a.base+"/")
	if fi, err := os.Stat(shot); err != nil || fi.Size() < 10_000 {
		t.Errorf("screenshot %s: %v (%v bytes)", shot, err, fi)
	}
	t.Logf("screenshot: %s", shot)
	// LAYERPROBE_STATUS_SCREENSHOT=$PWD/docs/status-page.png takes docs/agent.md's
	// screenshot anew from this agent.
	if dst := os.Getenv("LAYERPROBE_STATUS_SCREENSHOT"); dst != "" {
		b, err := os.ReadFile(shot)
		if err == nil {
			err = os.WriteFile(dst, b, 0o644)
		}
		if err != nil {
			t.Errorf("copy the screenshot to %s: %v", dst, err)
		}
	}
	a.stop()
}

// lookChromium finds Debian's chromium (scripts/install-deps.sh installs it).
func lookChromium(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("chromium")
	if err != nil {
		testharness.SkipOrFail(t, "chromium not found (scripts/install-deps.sh installs it): %v", err)
	}
	return p
}

// runChromium runs a headless Chromium with a fresh profile, without any
// network of its own beyond the page, and returns its stdout and log.
func runChromium(t *testing.T, chromium string, args ...string) (stdout, log string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
		"--user-data-dir=" + t.TempDir(), "--enable-logging=stderr", "--v=0"}
	cmd := exec.CommandContext(ctx, chromium, append(base, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, errb.String())
	}
	return out.String(), errb.String()
}

// elements returns the descendants of n with the tag and class.
func elements(n *html.Node, tag, class string) []*html.Node {
	var out []*html.Node
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == html.ElementNode && c.Data == tag && strings.Contains(" "+attr(c, "class")+" ", " "+class+" ") {
			out = append(out, c)
		}
		out = append(out, elements(c, tag, class)...)
	}
	return out
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// text is the text content of n.
func text(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
			b.WriteByte(' ')
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return strings.Join(strings.Fields(b.String()), " ")
}
