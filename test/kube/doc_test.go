// Package kube installs the Helm chart on a real single-node Kubernetes
// (internal/testsupport/testkube). Its test carries the build tag kube: it
// is not part of make test until it has passed on the test machine
// (CONTRIBUTING.md, "Tests").
package kube
