package detector

import (
	"math/rand/v2"
	"testing"

	"github.com/layerprobe/layerprobe/internal/config"
)

// BenchmarkObserve measures one watching round with a full 200-round
// baseline window, the agent's steady state.
func BenchmarkObserve(b *testing.B) {
	p := ParamsFrom(config.Default().Detector)
	rng := rand.New(rand.NewPCG(1, 2))
	w := make([]float64, p.WindowCap())
	for i := range w {
		w[i] = 0.05 * rng.NormFloat64()
	}
	st := p.Settled(w)
	xs := make([]float64, 1024)
	for i := range xs {
		xs[i] = 0.05 * rng.NormFloat64()
	}
	round := st.LastRound
	b.ReportAllocs()
	for b.Loop() {
		round++
		st, _ = p.Observe(st, Observation{Round: round, X: xs[round%len(xs)]})
	}
}
