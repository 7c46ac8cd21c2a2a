// Command pause is the pod sandbox's process in the tests' Kubernetes
// cluster (testkube): it holds the pod's namespaces and waits for SIGTERM.
// The cluster has no registry to pull Kubernetes' own pause image from, so
// this static binary is the whole of a local image.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGINT, syscall.SIGTERM)
	<-c
}
