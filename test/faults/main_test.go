// Package faults is layerprobe's end-to-end fault suite: the real binary
// against real, private dockerd daemons (internal/testsupport/testdaemon) with real fio,
// while the daemon is killed, the agent is killed, the data root's file
// system fills up, fio is missing, crashes or hangs, the probe container is
// removed by someone else, a second agent shares the state directory; plus a
// table of malformed requests against a running agent, a load test and the
// security tests. docs/reliability.md and docs/security.md describe what
// these tests prove.
//
// The tests need root and start daemons; with env CI set a missing
// prerequisite fails them instead of skipping (testdaemon.Require). Set
// LP_FAULTS_AGENT_LOG=1 to see the end of every agent's log, not only of
// failed tests.
package faults

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/layerprobe/layerprobe/internal/testsupport/testharness"
)

// binary is the release layerprobe binary, built once for the package.
var binary string

// workDir holds the fake fio builds and the lock file.
var workDir string

func TestMain(m *testing.M) {
	// The load generator is this test binary run again as a separate
	// process (load_test.go).
	if os.Getenv(loadgenEnv) != "" {
		os.Exit(loadgenMain())
	}
	flag.Parse()
	if testing.Short() {
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "lpfaults")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	workDir = dir
	if binary, err = testharness.Binary(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	testharness.RemoveBinary()
	os.RemoveAll(dir)
	os.Exit(code)
}
