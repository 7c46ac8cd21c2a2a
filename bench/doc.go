// Package bench measures layerprobe itself: the precision and the cost of
// its profiles, the detection power of its fsync regression detector and
// the agent's footprint, on real private dockerd daemons with real fio.
//
// Everything but this file sits behind the `bench` build tag, so the
// ordinary test command (`go test ./...`) neither builds nor runs it: a
// full run takes over an hour and writes tens of GiB. `make bench` runs it
// and writes docs/benchmarks.md, its plots and the raw results
// (docs/bench/results.json); `make bench-smoke` runs every section with
// tiny sizes into a temporary directory to check the harness;
// `make bench-report` regenerates the report from the raw results.
package bench
