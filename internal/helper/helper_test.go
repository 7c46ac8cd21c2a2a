package helper

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCleanRefusesOutsideRoot(t *testing.T) {
	dir := t.TempDir()
	keep := filepath.Join(dir, "keep")
	if err := os.WriteFile(keep, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, "/lp", "/lp/", "/lp/../etc", "/"} {
		err := Run(context.Background(), []string{"clean", d})
		if err == nil || !strings.Contains(err.Error(), "only directories under /lp/") {
			t.Errorf("clean %s: err = %v; want a refusal", d, err)
		}
	}
	if _, err := os.Stat(keep); err != nil {
		t.Fatalf("a refused clean removed a file: %v", err)
	}
}

func TestUnknownVerb(t *testing.T) {
	if err := Run(context.Background(), nil); err == nil {
		t.Error("no verb: want an error")
	}
	if err := Run(context.Background(), []string{"rm"}); err == nil || !strings.Contains(err.Error(), "idle, kill-fio, clean, copyup, lookup, smallfiles, mountinfo or cgexec") {
		t.Errorf("unknown verb: err = %v", err)
	}
}

func TestIdleReturnsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, []string{"idle"}) }()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("idle did not return after cancel")
	}
}

func TestKillByName(t *testing.T) {
	// A copy of sleep under a unique name, so no other process is hit.
	src, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep(1)")
	}
	name := "lpkilltest"
	bin := filepath.Join(t.TempDir(), name)
	in, _ := os.Open(src)
	out, _ := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	_, _ = io.Copy(out, in)
	in.Close()
	out.Close()
	cmd := exec.Command(bin, "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	for i := 0; i < 100 && len(pidsNamed(name)) == 0; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if len(pidsNamed(name)) == 0 {
		t.Fatal("test process not visible in /proc")
	}
	if err := KillByName(name, time.Second); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("process survived KillByName")
	}
}

func TestFirstWriteChangesOnlyTheFirstPage(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	orig := bytes.Repeat([]byte{0xAB}, 3*FirstWriteBytes)
	if err := os.WriteFile(p, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := FirstWrite(p)
	if err != nil {
		t.Fatal(err)
	}
	if d <= 0 {
		t.Errorf("FirstWrite took %v, want a positive duration", d)
	}
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(orig) {
		t.Fatalf("file is %d bytes after the write, want %d (no truncation)", len(got), len(orig))
	}
	if bytes.Equal(got[:FirstWriteBytes], orig[:FirstWriteBytes]) {
		t.Error("first page unchanged")
	}
	if !bytes.Equal(got[FirstWriteBytes:], orig[FirstWriteBytes:]) {
		t.Error("bytes after the first page changed")
	}
	if _, err := FirstWrite(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("FirstWrite created a missing file; it must only change existing ones")
	}
}

func TestCopyUpRefusesOutsideRoot(t *testing.T) {
	var buf bytes.Buffer
	files := []string{"/etc/passwd", CopyUpRoot + "../bin/fio", CopyUpRoot + "missing"}
	if err := copyUp(&buf, files); err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(&buf)
	for _, f := range files {
		var l CopyUpLine
		if err := dec.Decode(&l); err != nil {
			t.Fatalf("line for %s: %v", f, err)
		}
		if l.Path != f || l.Error == "" || l.Seconds != 0 {
			t.Errorf("copyup %s: %+v, want an error and no time", f, l)
		}
	}
	if err := copyUp(&buf, nil); err == nil {
		t.Error("copyup without files: no error")
	}
}

func TestCgexecNeedsAProgram(t *testing.T) {
	for _, args := range [][]string{{"cgexec"}, {"cgexec", "/sys/fs/cgroup/cpu"}, {"cgexec", "/sys/fs/cgroup/cpu", "--"}} {
		if err := Run(context.Background(), args); err == nil || !strings.Contains(err.Error(), "DIR... -- PROGRAM") {
			t.Errorf("%q: err = %v, want the usage", args, err)
		}
	}
	// A plain directory is no cgroup. Were it joined, cgexec would exec
	// /bin/false in place of this test binary, which then exits 1 with no
	// PASS: a failure go test shows, where /bin/true would pass silently.
	if err := Run(context.Background(), []string{"cgexec", t.TempDir(), "--", "/bin/false"}); err == nil || !strings.Contains(err.Error(), "not on a cgroup file system") {
		t.Errorf("a directory that is no cgroup: err = %v", err)
	}
	// A cgroup namespace is entered before the join: one that cannot be
	// is an error, and nothing is exec'd.
	for _, ns := range []string{"--cgroupns=", "--cgroupns=" + filepath.Join(t.TempDir(), "none")} {
		err := Run(context.Background(), []string{"cgexec", ns, "/sys/fs/cgroup/cpu", "--", "/bin/false"})
		if err == nil || !strings.Contains(err.Error(), "cgroupns") && !strings.Contains(err.Error(), "cgroup namespace") {
			t.Errorf("%s: err = %v, want one about the namespace", ns, err)
		}
	}
}

// TestSmallFilesVerb: the verb prints one fio-shaped JSON document of its
// execution and refuses arguments it does not know or a relative
// directory.
func TestSmallFilesVerb(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	if err := smallFiles(&out, []string{"--name=smallfiles", "--directory=" + dir, "--files=50"}); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Jobs []struct {
			Name  string `json:"jobname"`
			Write struct {
				TotalIOs int     `json:"total_ios"`
				IOPS     float64 `json:"iops"`
			} `json:"write"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil || len(doc.Jobs) != 1 || doc.Jobs[0].Name != "smallfiles" ||
		doc.Jobs[0].Write.TotalIOs < 150 || !(doc.Jobs[0].Write.IOPS > 0) {
		t.Errorf("output %s (%v)", out.String(), err)
	}
	for _, args := range [][]string{
		{"--directory=relative", "--files=5"},
		{"--directory=" + dir, "--files=5", "--exec=rm"},
		{"--directory=" + dir, "--files=none"},
		{"--directory=" + dir + "/missing", "--files=5"},
	} {
		if err := smallFiles(io.Discard, args); err == nil {
			t.Errorf("smallfiles %q: want an error", args)
		}
	}
}
