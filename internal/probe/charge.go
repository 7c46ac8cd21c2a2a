package probe

import (
	"math"
	"time"
)

// budget names the budget the planner charges a round to.
type budget int

const (
	chargeBytes budget = iota // the round's bytes
	chargeTime                // the round's seconds
)

func (b budget) String() string {
	if b == chargeTime {
		return "time"
	}
	return "bytes"
}

// roundSpend is one job's next round as the planner prices it.
type roundSpend struct {
	// bytes the round is expected to write (Session.roundCost).
	bytes float64
	// seconds it is expected to take; 0: not measured yet.
	seconds float64
	// noise is hw²·n, the squared half-width of the job's interval times
	// the rounds it rests on: what one round alone would leave.
	noise float64
}

// binding is the budget the rounds to come will run out of first, which
// is the one to charge them to. A round of smallfiles on overlay2 takes
// three times the share of a default run's time that it takes of its
// bytes; charged the larger share, as every round was, it got 17 rounds
// in runs that stopped on bytes with half their time left. The time it
// was charged bound nothing: every round the run could still have made
// was one of bytes.
//
// Charged bytes, the planner gives a job rounds until its narrowing per
// byte matches the others' (narrowing: hw²/(n+1) per round, so its rounds
// grow as √(noise/bytes)); the rounds to come then mix the jobs in the
// proportions w = √(noise/bytes). Spending what is left of the bytes in
// that mix takes bytesLeft·Σw·seconds/Σw·bytes seconds: when that fits in
// the time left, bytes bind; otherwise time does. Whichever it says, the
// planner asks again before every round, against what is left: where each
// budget's own mix would run out of the other one first (both bind), the
// charge changes as one budget runs ahead of the other, and the run ends
// with both spent.
//
// Without a time cap bytes bind (no caps at all: bytes too, the measure of
// a round's cost the planner had before it had budgets), without a byte
// cap time does. Jobs whose round has no measured time yet or no noise
// (an interval within the precision or not yet there) are left out of
// the mix; when no job is left, bytes bind. A job that writes nothing
// would take every round charged bytes: it makes time bind.
func binding(jobs []roundSpend, maxBytes, spent int64, maxDuration, elapsed time.Duration) budget {
	switch {
	case maxDuration <= 0:
		return chargeBytes
	case maxBytes <= 0:
		return chargeTime
	}
	bytesLeft, timeLeft := float64(maxBytes-spent), (maxDuration - elapsed).Seconds()
	switch {
	case bytesLeft <= 0:
		return chargeBytes
	case timeLeft <= 0:
		return chargeTime
	}
	var wBytes, wSeconds float64
	for _, j := range jobs {
		if j.seconds <= 0 || j.noise <= 0 || math.IsInf(j.noise, 0) || math.IsNaN(j.noise) {
			continue
		}
		b := max(j.bytes, 1)
		w := math.Sqrt(j.noise / b)
		wBytes += w * b
		wSeconds += w * j.seconds
	}
	if wBytes == 0 || bytesLeft*wSeconds <= timeLeft*wBytes {
		return chargeBytes
	}
	return chargeTime
}
