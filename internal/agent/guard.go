package agent

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/layerprobe/layerprobe/internal/engine"
	"github.com/layerprobe/layerprobe/internal/fio"
	"github.com/layerprobe/layerprobe/internal/hostfs"
)

// Skip reasons: a fixed set, because they become metric label values.
const (
	SkipBusyIOPressure  = "busy_io_pressure"
	SkipBusyDisk        = "busy_disk"
	SkipContainerChurn  = "container_churn"
	SkipBudgetExhausted = "budget_exhausted"
	SkipLowSpace        = "low_space"
	SkipHostLocked      = "host_locked"
)

// SkipReasons lists every skip reason, for pre-initialised counters.
var SkipReasons = []string{SkipBusyIOPressure, SkipBusyDisk, SkipContainerChurn, SkipBudgetExhausted, SkipLowSpace, SkipHostLocked}

// skip is why a cycle did not run.
type skip struct {
	reason, message string
}

// guard decides whether a cycle may run now. The agent measures intrinsic
// overhead, not contention, and must not add load to a busy production host,
// so it stays away when the host is busy, the disk is full, containers were
// just started or stopped, or the day's write budget is spent.
func (a *Agent) guard(ctx context.Context, e *engineState, info engine.Info, prof fio.Profile, est int64) *skip {
	cfg := a.cfg.Agent
	if b := int64(cfg.DailyByteBudget); b > 0 {
		used, err := a.store.BytesWrittenSince(ctx, e.cfg.Name, a.now().Add(-24*time.Hour))
		if err == nil {
			if used+est > b {
				return &skip{SkipBudgetExhausted, fmt.Sprintf(
					"daily byte budget %d MiB: %d MiB written in the last 24 h, the cycle would write about %d MiB",
					b>>20, used>>20, est>>20)}
			}
		}
	}
	if sp, err := hostfs.FreeSpace(info.DataRoot); err == nil {
		reserve := max(uint64(max(int64(a.cfg.FreeSpace.MinFreeBytes), 0)), uint64(float64(sp.Total)*a.cfg.FreeSpace.MinFreeRatio))
		need := uint64(prof.FileSpace(len(a.cfg.Targets) + 1))
		if sp.Avail < reserve+need+need/10 {
			return &skip{SkipLowSpace, fmt.Sprintf("%d MiB free on the data root's file system, %d MiB must stay free",
				sp.Avail>>20, reserve>>20)}
		}
	}
	if cfg.MaxIOPressure < 100 {
		if p, ok := ioPressure(a.procRoot); ok && p > cfg.MaxIOPressure {
			return &skip{SkipBusyIOPressure, fmt.Sprintf("I/O pressure (PSI some avg10) %.1f%% > %.1f%%", p, cfg.MaxIOPressure)}
		}
	}
	if cfg.MaxDiskUtil < 1 {
		if dev, err := hostfs.DeviceOf(info.DataRoot); err == nil {
			if u, ok := diskUtil(ctx, a.sysRoot, filepath.Base(dev), time.Second); ok && u > cfg.MaxDiskUtil {
				return &skip{SkipBusyDisk, fmt.Sprintf("%s busy %.0f%% of the time > %.0f%%", dev, u*100, cfg.MaxDiskUtil*100)}
			}
		}
	}
	if q := cfg.ChurnQuietPeriod; q > 0 {
		n, err := e.cli.ContainerChurn(ctx, a.now().Add(-q))
		if err == nil && n > 0 {
			return &skip{SkipContainerChurn, fmt.Sprintf("%d container start/stop events in the last %s", n, q)}
		}
	}
	return nil
}

// ioPressure reads "some avg10" from /proc/pressure/io. ok is false when the
// kernel has no PSI (then the check is skipped).
func ioPressure(procRoot string) (float64, bool) {
	f, err := os.Open(filepath.Join(procRoot, "pressure/io"))
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || fields[0] != "some" {
			continue
		}
		for _, kv := range fields[1:] {
			if v, ok := strings.CutPrefix(kv, "avg10="); ok {
				p, err := strconv.ParseFloat(v, 64)
				return p, err == nil
			}
		}
	}
	return 0, false
}

// diskUtil samples the fraction of time the block device was busy
// (io_ticks, field 10 of /sys/block/DEV/stat) over window.
func diskUtil(ctx context.Context, sysRoot, dev string, window time.Duration) (float64, bool) {
	read := func() (uint64, bool) {
		b, err := os.ReadFile(filepath.Join(sysRoot, "block", dev, "stat"))
		if err != nil {
			return 0, false
		}
		f := strings.Fields(string(b))
		if len(f) < 10 {
			return 0, false
		}
		v, err := strconv.ParseUint(f[9], 10, 64)
		return v, err == nil
	}
	t0, ok := read()
	if !ok {
		return 0, false
	}
	start := time.Now()
	select {
	case <-ctx.Done():
		return 0, false
	case <-time.After(window):
	}
	t1, ok := read()
	if !ok || t1 < t0 {
		return 0, false
	}
	el := time.Since(start).Milliseconds()
	if el <= 0 {
		return 0, false
	}
	return float64(t1-t0) / float64(el), true
}
