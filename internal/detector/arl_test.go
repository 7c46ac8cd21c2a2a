package detector

import "math"

// cusumARL returns the in-control average run length of the one-sided
// CUSUM S = max(0, S + clip(y) − k), alarm at S > h, for iid y with
// distribution function cdf, by the Markov-chain approximation of Brook
// and Evans (1972): S is discretised into m cells of width h/m, cell 0
// being S = 0, and the expected steps to absorption solve (I − Q)·L = 1.
func cusumARL(cdf func(float64) float64, k, h, clip float64, m int) float64 {
	w := h / float64(m)
	// The clipped score has atoms at ±clip; its distribution function is
	// cdf inside (−clip, clip), 0 below −clip and 1 at clip and above.
	zcdf := func(t float64) float64 {
		switch {
		case t < -clip:
			return 0
		case t >= clip:
			return 1
		}
		return cdf(t)
	}
	a := make([][]float64, m) // I − Q, augmented with the right-hand side 1
	for i := range m {
		a[i] = make([]float64, m+1)
		s := float64(i) * w
		for j := range m {
			// S' = s + z − k lands in cell j when it lies in
			// ((j−½)w, (j+½)w]; cell 0 also takes everything at or below w/2.
			hiT := (float64(j)+0.5)*w - s + k
			p := zcdf(hiT)
			if j > 0 {
				p -= zcdf(hiT - w)
			}
			a[i][j] = -p
		}
		a[i][i]++
		a[i][m] = 1
	}
	// Gaussian elimination with partial pivoting.
	for c := range m {
		piv := c
		for r := c + 1; r < m; r++ {
			if math.Abs(a[r][c]) > math.Abs(a[piv][c]) {
				piv = r
			}
		}
		a[c], a[piv] = a[piv], a[c]
		for r := c + 1; r < m; r++ {
			f := a[r][c] / a[c][c]
			if f == 0 {
				continue
			}
			for j := c; j <= m; j++ {
				a[r][j] -= f * a[c][j]
			}
		}
	}
	l := make([]float64, m)
	for r := m - 1; r >= 0; r-- {
		v := a[r][m]
		for j := r + 1; j < m; j++ {
			v -= a[r][j] * l[j]
		}
		l[r] = v / a[r][r]
	}
	return l[0]
}

func normalCDF(t float64) float64 { return 0.5 * math.Erfc(-t/math.Sqrt2) }

// laplaceCDF is the distribution function of a Laplace variable with scale
// b, centred at 0.
func laplaceCDF(b float64) func(float64) float64 {
	return func(t float64) float64 {
		if t < 0 {
			return 0.5 * math.Exp(t/b)
		}
		return 1 - 0.5*math.Exp(-t/b)
	}
}
