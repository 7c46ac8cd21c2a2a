//go:build race

package detector

// raceEnabled shortens the simulations: the race detector makes every
// round about ten times slower and finds nothing more in a long run than
// in a short one.
const raceEnabled = true
