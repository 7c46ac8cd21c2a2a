package fio

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/layerprobe/layerprobe/internal/measure"
	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

// capture rewrites the captured fio outputs in testdata/ by running the real
// fio binary. It needs root (tmpfs/ramfs mounts, chattr):
//
//	go test ./internal/fio -run TestCapture -capture
var capture = flag.Bool("capture", false, "run real fio and rewrite testdata/*.stdout|stderr|exit and testdata/derived-*.json")

// captureCase is one real fio execution recorded in testdata. The same
// table drives TestParseCaptured.
type captureCase struct {
	name string
	job  Job
	// dir prepares the job's directory (a fresh one under base) and
	// returns it with a cleanup; nil means base itself.
	dir func(t *testing.T, base string) (string, func())
	// signal, when set, is sent to fio's process group after delay.
	signal syscall.Signal
	delay  time.Duration
}

func quickJob(t testing.TB, w measure.Workload) Job {
	t.Helper()
	p, err := LookupProfile("quick")
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range p.Jobs {
		if j.Workload == w {
			return j
		}
	}
	t.Fatalf("quick profile has no %s job", w)
	return Job{}
}

// mountDir mounts a fresh filesystem of type fstype under base.
func mountDir(fstype, opts string) func(t *testing.T, base string) (string, func()) {
	return func(t *testing.T, base string) (string, func()) {
		dir := filepath.Join(base, fstype)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		args := []string{"-t", fstype}
		if opts != "" {
			args = append(args, "-o", opts)
		}
		args = append(args, fstype, dir)
		if out, err := exec.Command("mount", args...).CombinedOutput(); err != nil {
			t.Fatalf("mount %v: %v: %s", args, err, out)
		}
		return dir, func() {
			if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
				t.Errorf("umount %s: %v: %s", dir, err, out)
			}
		}
	}
}

func captureCases(t testing.TB) []captureCase {
	smallRandWrite := func(extra ...string) Job {
		return Job{
			Workload:  measure.RandWrite,
			Options:   append([]string{"rw=randwrite", "bs=4k", "ioengine=libaio", "direct=1", "iodepth=4", "size=8M", "number_ios=1000", "randrepeat=1", "runtime=60"}, extra...),
			FileBytes: 4 * 8 * mib,
			Timeout:   time.Minute,
		}
	}
	return []captureCase{
		{name: "quick-seqwrite", job: quickJob(t, measure.SeqWrite)},
		{name: "quick-randwrite", job: quickJob(t, measure.RandWrite)},
		{name: "quick-fsync", job: quickJob(t, measure.Fsync)},
		{
			// A synchronous engine with iodepth>1: fio prints a note line
			// before the JSON on stdout.
			name: "psync-iodepth",
			job: Job{
				Workload:  measure.RandWrite,
				Options:   []string{"rw=randwrite", "bs=4k", "ioengine=psync", "iodepth=4", "size=4M", "number_ios=500", "runtime=60"},
				FileBytes: 4 * mib,
				Timeout:   time.Minute,
			},
		},
		{
			// 64 MiB of buffered writes into an 8 MiB tmpfs: ENOSPC.
			name: "enospc",
			job: Job{
				Workload:  measure.SeqWrite,
				Options:   []string{"rw=write", "bs=1M", "ioengine=psync", "size=64M", "runtime=60"},
				FileBytes: 64 * mib,
				Timeout:   time.Minute,
			},
			dir: mountDir("tmpfs", "size=8m"),
		},
		{
			// The quick seqwrite job (direct=1) on ramfs, which has no
			// O_DIRECT (tmpfs gained it in Linux 6.6): EINVAL at open.
			name: "odirect-ramfs",
			job:  quickJob(t, measure.SeqWrite),
			dir:  mountDir("ramfs", ""),
		},
		{
			// A directory that does not exist: fio refuses the option and
			// prints no JSON (exit 1).
			name: "baddir-missing",
			job:  quickJob(t, measure.RandWrite),
			dir: func(t *testing.T, base string) (string, func()) {
				return filepath.Join(base, "missing"), func() {}
			},
		},
		{
			// An immutable directory (chattr +i): open fails with EPERM,
			// JSON with "error" : 1 (exit 1).
			name: "baddir-immutable",
			job:  quickJob(t, measure.RandWrite),
			dir: func(t *testing.T, base string) (string, func()) {
				dir := filepath.Join(base, "immutable")
				if err := os.Mkdir(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				if out, err := exec.Command("chattr", "+i", dir).CombinedOutput(); err != nil {
					t.Fatalf("chattr +i: %v: %s", err, out)
				}
				return dir, func() {
					if out, err := exec.Command("chattr", "-i", dir).CombinedOutput(); err != nil {
						t.Errorf("chattr -i: %v: %s", err, out)
					}
				}
			},
		},
		{name: "numjobs4", job: smallRandWrite("numjobs=4")},
		{name: "numjobs4-group", job: smallRandWrite("numjobs=4", "group_reporting=1")},
		{
			// SIGKILL mid-run: no JSON at all, exit -1.
			name: "killed",
			job: Job{
				Workload:  measure.SeqWrite,
				Options:   []string{"rw=write", "bs=4k", "ioengine=psync", "size=64M", "time_based=1", "runtime=30"},
				FileBytes: 64 * mib,
				Timeout:   time.Minute,
			},
			signal: syscall.SIGKILL,
			delay:  1500 * time.Millisecond,
		},
		{
			// SIGTERM mid-run (what a canceled context sends first): fio
			// stops its jobs, prints partial JSON and exits non-zero.
			name: "sigterm",
			job: Job{
				Workload:  measure.SeqWrite,
				Options:   []string{"rw=write", "bs=4k", "ioengine=psync", "size=64M", "time_based=1", "runtime=30"},
				FileBytes: 64 * mib,
				Timeout:   time.Minute,
			},
			signal: syscall.SIGTERM,
			delay:  1500 * time.Millisecond,
		},
	}
}

func TestCapture(t *testing.T) {
	if !*capture {
		t.Skip("run with -capture to rewrite testdata from real fio")
	}
	if os.Geteuid() != 0 {
		t.Fatal("-capture needs root (mounts, chattr)")
	}
	for _, c := range captureCases(t) {
		t.Run(c.name, func(t *testing.T) {
			base := t.TempDir()
			dir := base
			if c.dir != nil {
				d, cleanup := c.dir(t, base)
				defer cleanup()
				dir = d
			}
			argv := Command(testharness.HostFio, c.job, dir, Fresh, 0)
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Dir = t.TempDir()
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if c.signal != 0 {
				time.AfterFunc(c.delay, func() { _ = syscall.Kill(-cmd.Process.Pid, c.signal) })
			}
			err := cmd.Wait()
			if _, ok := err.(*exec.ExitError); err != nil && !ok {
				t.Fatal(err)
			}
			code := cmd.ProcessState.ExitCode()
			t.Logf("%s: exit %d, %d bytes stdout, %d bytes stderr", strings.Join(argv, " "), code, stdout.Len(), stderr.Len())
			writeTestdata(t, c.name+".stdout", stdout.Bytes())
			writeTestdata(t, c.name+".stderr", stderr.Bytes())
			writeTestdata(t, c.name+".exit", []byte(strconv.Itoa(code)+"\n"))
		})
	}
	t.Run("derived", func(t *testing.T) {
		for name, derive := range derivations {
			src, err := os.ReadFile(filepath.Join("testdata", derive.from+".stdout"))
			if err != nil {
				t.Fatal(err)
			}
			writeTestdata(t, name, derive.edit(t, src))
		}
	})
}

func writeTestdata(t *testing.T, name string, b []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join("testdata", name), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// derivations build older-fio and edge-case shapes from captured files.
// testdata/README.md describes each.
var derivations = map[string]struct {
	from string
	edit func(t *testing.T, src []byte) []byte
}{
	// fio-3.1-like: no bw_bytes (3.2), no sync section (3.4), no job_runtime.
	"derived-fio31.json": {from: "quick-fsync", edit: func(t *testing.T, src []byte) []byte {
		out := regexp.MustCompile(`(?m)^\s*"(bw_bytes|job_runtime)" : [0-9]+,\n`).ReplaceAll(src, nil)
		out = removeObject(t, out, `"sync" : {`)
		return bytes.Replace(out, []byte(`"fio version" : "fio-3.33"`), []byte(`"fio version" : "fio-3.1"`), 1)
	}},
	// nan/-nan/inf tokens as fio's printf("%f") can print them.
	"derived-nan.json": {from: "quick-fsync", edit: func(t *testing.T, src []byte) []byte {
		// The first "mean" of each direction is slat_ns's; replace the
		// clat_ns mean of read, the clat_ns stddev of write and the sync
		// mean.
		out := replaceAfter(t, src, `"read" : {`, `"clat_ns" : {`, `"mean" : `, "nan")
		out = replaceAfter(t, out, `"write" : {`, `"clat_ns" : {`, `"stddev" : `, "-nan")
		out = replaceAfter(t, out, `"sync" : {`, `"lat_ns" : {`, `"mean" : `, "-nan")
		return replaceAfter(t, out, `"write" : {`, `"bw_dev" : `, `"bw_dev" : `, "inf")
	}},
	// No percentile objects at all (as fio prints when N=0, or with
	// clat_percentiles=0).
	"derived-nopercentiles.json": {from: "quick-fsync", edit: func(t *testing.T, src []byte) []byte {
		out := src
		for bytes.Contains(out, []byte(`"percentile" : {`)) {
			out = removeObject(t, out, `"percentile" : {`)
		}
		return out
	}},
	// fio-2-like: latencies in microseconds under clat/lat (no N), io_bytes
	// in KiB, no io_kbytes/bw_bytes/sync/job_runtime.
	"derived-fio2.json": {from: "quick-randwrite", edit: func(t *testing.T, src []byte) []byte {
		var doc map[string]any
		dec := json.NewDecoder(bytes.NewReader(src))
		dec.UseNumber()
		if err := dec.Decode(&doc); err != nil {
			t.Fatal(err)
		}
		doc["fio version"] = "fio-2.2.10"
		for _, j := range doc["jobs"].([]any) {
			job := j.(map[string]any)
			delete(job, "sync")
			delete(job, "job_runtime")
			for _, dir := range []string{"read", "write", "trim"} {
				d := job[dir].(map[string]any)
				kib, _ := d["io_kbytes"].(json.Number).Int64()
				d["io_bytes"] = kib
				delete(d, "io_kbytes")
				delete(d, "bw_bytes")
				for _, lat := range []string{"slat", "clat", "lat"} {
					l := d[lat+"_ns"].(map[string]any)
					delete(d, lat+"_ns")
					delete(l, "N")
					for _, k := range []string{"min", "max", "mean", "stddev"} {
						f, _ := l[k].(json.Number).Float64()
						l[k] = f / 1000
					}
					if p, ok := l["percentile"].(map[string]any); ok {
						for k, v := range p {
							f, _ := v.(json.Number).Float64()
							p[k] = int64(f / 1000)
						}
					}
					d[lat] = l
				}
			}
		}
		var out bytes.Buffer
		enc := json.NewEncoder(&out)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(doc); err != nil {
			t.Fatal(err)
		}
		return out.Bytes()
	}},
}

// removeObject deletes the member that starts with key (e.g. `"sync" : {`)
// through its closing brace and the comma that follows, if any.
func removeObject(t *testing.T, b []byte, key string) []byte {
	t.Helper()
	i := bytes.Index(b, []byte(key))
	if i < 0 {
		t.Fatalf("%q not found", key)
	}
	brace := i + len(key) - 1
	end, ok := objectEnd(b, brace)
	if !ok {
		t.Fatalf("unbalanced object at %q", key)
	}
	if end < len(b) && b[end] == ',' {
		// A member followed by others: drop its whole lines.
		end++
		for i > 0 && (b[i-1] == ' ' || b[i-1] == '\t') {
			i--
		}
		if end < len(b) && b[end] == '\n' {
			end++
		}
	} else if j := bytes.LastIndexByte(b[:i], ','); j >= 0 && strings.TrimSpace(string(b[j+1:i])) == "" {
		// The last member: drop the comma before it instead.
		i = j
	}
	return append(append([]byte(nil), b[:i]...), b[end:]...)
}

// replaceAfter finds anchor, then within it sub, then field, and replaces
// the number after field with tok.
func replaceAfter(t *testing.T, b []byte, anchor, sub, field, tok string) []byte {
	t.Helper()
	a := bytes.Index(b, []byte(anchor))
	if a < 0 {
		t.Fatalf("%q not found", anchor)
	}
	s := bytes.Index(b[a:], []byte(sub))
	if s < 0 {
		t.Fatalf("%q not found after %q", sub, anchor)
	}
	f := a + s
	if sub != field {
		k := bytes.Index(b[f:], []byte(field))
		if k < 0 {
			t.Fatalf("%q not found after %q/%q", field, anchor, sub)
		}
		f += k
	}
	v := f + len(field)
	e := v
	for e < len(b) && strings.IndexByte("0123456789.-+e", b[e]) >= 0 {
		e++
	}
	if e == v {
		t.Fatalf("no number after %q", field)
	}
	return []byte(fmt.Sprintf("%s%s%s", b[:v], tok, b[e:]))
}
