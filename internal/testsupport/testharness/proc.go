package testharness

import (
	"fmt"
	"os/exec"
	"syscall"
	"time"
)

// Proc is a started child process (an agent, a Prometheus, a
// node_exporter) whose stdout and stderr are collected in Log.
type Proc struct {
	Cmd  *exec.Cmd
	Log  *Buffer
	done chan struct{}
}

// Start starts cmd with its output going to a fresh Log and waits for it
// in the background.
func Start(cmd *exec.Cmd) (*Proc, error) {
	p := &Proc{Cmd: cmd, Log: &Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.Log, p.Log
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, nil
}

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Running reports whether the process has not exited yet.
func (p *Proc) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Stop sends SIGTERM and waits up to grace for the process to exit, then
// kills it. It returns the exit code (-1 after a signal) and whether the
// process exited by itself within grace.
func (p *Proc) Stop(grace time.Duration) (code int, inTime bool) {
	inTime = true
	if p.Running() {
		_ = p.Cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(grace):
			inTime = false
			p.Kill()
		}
	}
	return p.Cmd.ProcessState.ExitCode(), inTime
}

// Kill sends SIGKILL and waits until the process is gone.
func (p *Proc) Kill() {
	if p.Running() {
		_ = p.Cmd.Process.Kill()
	}
	<-p.done
}
