package stats

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func BenchmarkMedianCI(b *testing.B) {
	for _, n := range []int{20, 1000, 10000} {
		xs := ranks(n, rand.New(rand.NewPCG(1, 1)))
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				MedianCI(xs, 0.95)
			}
		})
	}
}
