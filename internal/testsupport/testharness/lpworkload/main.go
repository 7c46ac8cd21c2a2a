// Command lpworkload is the process of the test containers the advisor's
// end-to-end tests start: a static binary with no shell, built and imported
// into a private daemon by testharness.ImportWorkload (nothing is pulled).
//
//	lpworkload idle             wait for SIGTERM
//	lpworkload spin             keep one CPU busy until SIGTERM (a loaded host)
//	lpworkload write PATH SIZE  write SIZE (4096, 64KiB, 64MiB) to PATH with
//	                            fsync, print "done PATH", then idle
//	lpworkload armcg PID OUT STOP [POLL]
//	                            until the file STOP exists, write to OUT the
//	                            cgroups of agent PID, of every process it
//	                            starts and their children (the host arms),
//	                            and of every probe container process
//	                            (argv[0] under /lp/bin/), scanning /proc
//	                            every POLL (3ms); see armcg.go
package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fail("want a verb: idle or write PATH SIZE")
	}
	switch os.Args[1] {
	case "idle":
	case "spin":
		spin()
	case "armcg":
		if len(os.Args) != 5 && len(os.Args) != 6 {
			fail("armcg PID OUT STOP [POLL]")
		}
		poll := armcgPoll
		if len(os.Args) == 6 {
			d, err := time.ParseDuration(os.Args[5])
			if err != nil || d <= 0 {
				fail("armcg: bad POLL " + os.Args[5])
			}
			poll = d
		}
		if err := armcg(os.Args[2], os.Args[3], os.Args[4], poll); err != nil {
			fail(err.Error())
		}
		return
	case "write":
		if len(os.Args) != 4 {
			fail("write PATH SIZE")
		}
		n, err := parseSize(os.Args[3])
		if err != nil {
			fail(err.Error())
		}
		if err := write(os.Args[2], n); err != nil {
			fail(err.Error())
		}
		fmt.Println("done", os.Args[2])
	default:
		fail("unknown verb " + os.Args[1])
	}
	idle()
}

// spin keeps one CPU busy: the loop has no call and no allocation, and the
// runtime preempts it asynchronously, so SIGTERM still ends the process.
func spin() {
	var x uint64
	for {
		x = x*6364136223846793005 + 1442695040888963407
	}
}

// write writes n bytes of random data (nothing a file system could
// compress or dedupe) in 1 MiB pieces, then fsyncs: the writes are on the
// disk, and charged to the container's cgroup, when "done" is printed.
func write(path string, n int64) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	rng := rand.NewChaCha8([32]byte{1})
	for n > 0 {
		_, _ = rng.Read(buf)
		k := min(n, int64(len(buf)))
		if _, err := f.Write(buf[:k]); err != nil {
			f.Close()
			return err
		}
		n -= k
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// idle waits for SIGTERM or SIGINT; as PID 1 nothing else stops it.
func idle() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
}

func parseSize(s string) (int64, error) {
	mult := int64(1)
	for suffix, m := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20} {
		if v, ok := strings.CutSuffix(s, suffix); ok {
			s, mult = v, m
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return n * mult, nil
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "lpworkload:", msg)
	os.Exit(2)
}
