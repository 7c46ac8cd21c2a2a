package probe

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"syscall"
	"time"
)

// killGrace is how long fio gets after SIGTERM to stop and unlink its files.
const killGrace = 5 * time.Second

// runHost runs fio on the host. fio runs in its own process group (numjobs
// forks workers) which is signalled as a whole: SIGTERM first so fio removes
// its files, SIGKILL after killGrace. Pdeathsig stops fio if layerprobe itself
// is killed, so a SIGKILLed agent does not leave fio writing.
func runHost(ctx context.Context, argv []string) (stdout, stderr []byte, exitCode int, err error) {
	var out, errb bytes.Buffer
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, nil, -1, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		pgid := cmd.Process.Pid
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case err = <-done:
		case <-time.After(killGrace):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			err = <-done
		}
		// Workers that outlived their parent belong to the group too.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code := ee.ExitCode() // -1 when killed by a signal
		return out.Bytes(), errb.Bytes(), code, nil
	}
	if err != nil {
		return out.Bytes(), errb.Bytes(), -1, err
	}
	return out.Bytes(), errb.Bytes(), 0, nil
}
