// Package kube installs the Helm chart on a real single-node Kubernetes
// (internal/testsupport/testkube) with the Prometheus Operator
// kube-prometheus-stack would run (CONTRIBUTING.md, "Tests").
package kube
