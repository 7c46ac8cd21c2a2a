// Package bench measures layerprobe itself against the goals of its
// measurement method: precision for the bytes written next to the earlier
// method (BENCH_OLD_REV, built from git), bias and interval coverage of
// the default runs against a long reference (its runs interleaved with
// the default runs), the detection power and
// false alarms of its fsync regression detector (live and replayed), the
// agent's footprint, and one default run on every engine and storage
// driver the machine can run, on real private daemons with real fio.
//
// Everything but this file sits behind the `bench` build tag, so the
// ordinary test command (`go test ./...`) neither builds nor runs it: a
// full run takes about 7 hours on a shared 2-core machine and writes
// hundreds of GiB. `make bench` runs it and writes docs/benchmarks.md,
// its plots and the raw results (docs/bench/results.json);
// `make bench-smoke` runs every section with tiny sizes into a temporary
// directory to check the harness; `make bench-report` regenerates the
// report from the raw results.
package bench
