package agent

import (
	"fmt"
	"time"

	"github.com/layerprobe/layerprobe/internal/config"
	"github.com/layerprobe/layerprobe/internal/fio"
)

// Outlook is what an agent writes, said before it writes it: the most its
// configuration lets it write in its first hour, on its first day and on
// each day after, from the first fill, the cycles' byte caps, the cold
// cycles' estimate and the start-up images, each day's total within
// agent.daily_byte_budget. A new agent once wrote 1.8 GiB in
// its first two minutes without a word about it.
type Outlook struct {
	FirstFill   int64 // the first steady cycle (agent.first_fill, or a regular cycle)
	Steady      int64 // a regular steady cycle (agent.budget.max_bytes)
	FirstCold   int64 // the first cold cycle (its rounds filled)
	Cold        int64 // a regular cold cycle (agent.cold_rounds)
	Startup     int64 // the start-up images, imported once per agent process
	FirstHour   int64
	FirstDay    int64
	PerDay      int64
	DailyBudget int64 // 0: none
}

// NewOutlook computes the outlook of a configuration whose steady and cold
// profiles are prof and coldProf, its first cycle firstDelay after start.
func NewOutlook(cfg *config.Config, prof, coldProf fio.Profile, firstDelay time.Duration) Outlook {
	ag := cfg.Agent
	targets := len(cfg.Targets) + 1
	o := Outlook{DailyBudget: int64(ag.DailyByteBudget)}
	plan := CyclePlan(cfg, prof)
	o.Steady = (&engineState{}).estimateBytes(prof, plan, targets)
	o.FirstFill = o.Steady
	if ag.FirstFill.MaxBytes > 0 && ag.Budget.Rounds == 0 {
		o.FirstFill = max(int64(ag.FirstFill.MaxBytes), o.Steady)
	}
	daily := int64(-1)
	if o.DailyBudget > 0 {
		daily = o.DailyBudget
		o.FirstFill = min(o.FirstFill, max(daily, o.Steady))
	}
	// cycles is how many cycles every iv, the first at first, start
	// within d.
	cycles := func(first, iv, d time.Duration) int64 {
		if iv <= 0 || first > d {
			return 0
		}
		return 1 + int64((d-first)/iv)
	}
	steadyIn := func(d time.Duration) int64 {
		n := cycles(firstDelay, ag.Interval, d)
		if n == 0 {
			return 0
		}
		return o.FirstFill + (n-1)*o.Steady
	}
	coldIn := func(d time.Duration) int64 { return 0 }
	if ag.ColdInterval > 0 {
		est := &engineState{}
		perRound := est.coldEstimate(coldProf, 1)
		o.Cold = est.coldEstimate(coldProf, ag.ColdRounds)
		o.FirstCold = est.coldEstimate(coldProf, coldFillRounds(ag.ColdRounds, ag.FirstFill, nil, perRound, daily))
		for _, s := range ag.StartupImages {
			o.Startup += int64(s)
		}
		coldFirst := firstDelay + time.Minute // firstColdDelay
		coldIn = func(d time.Duration) int64 {
			n := cycles(coldFirst, ag.ColdInterval, d)
			if n == 0 {
				return 0
			}
			return o.Startup + o.FirstCold + (n-1)*o.Cold
		}
	}
	capped := func(n int64) int64 {
		if o.DailyBudget > 0 {
			return min(n, o.DailyBudget)
		}
		return n
	}
	o.FirstHour = capped(steadyIn(time.Hour) + coldIn(time.Hour))
	o.FirstDay = capped(steadyIn(24*time.Hour) + coldIn(24*time.Hour))
	perDay := cycles(0, ag.Interval, 24*time.Hour-time.Nanosecond) * o.Steady
	if ag.ColdInterval > 0 {
		perDay += cycles(0, ag.ColdInterval, 24*time.Hour-time.Nanosecond) * o.Cold
	}
	o.PerDay = capped(perDay)
	return o
}

// String is the outlook in one sentence, for the agent's first log lines.
func (o Outlook) String() string {
	s := fmt.Sprintf("at most %s in the first hour (the first steady cycle %s", mib(o.FirstHour), mib(o.FirstFill))
	if o.FirstCold > 0 || o.Startup > 0 {
		s += fmt.Sprintf(", the first cold cycle %s and its start-up images %s", mib(o.FirstCold), mib(o.Startup))
	}
	s += fmt.Sprintf("), %s on the first day, %s on each day after", mib(o.FirstDay), mib(o.PerDay))
	if o.DailyBudget > 0 {
		s += fmt.Sprintf(" (agent.daily_byte_budget %s)", mib(o.DailyBudget))
	}
	return s
}

func mib(n int64) string { return fmt.Sprintf("%d MiB", (n+(1<<20)-1)>>20) }
