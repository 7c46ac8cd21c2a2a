//go:build bench

package bench

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Plot file names, relative to the plot directory (docs/bench).
const (
	plotPrecision   = "precision.png"
	plotDetection   = "detection.png"
	plotCalibration = "calibration.png"
	plotAA          = "bind-aa.png"
	plotSeries      = "unperturbed-series.png"
)

// pointsWithErrors is what plotter.NewYErrorBars needs.
type pointsWithErrors struct {
	plotter.XYs
	plotter.YErrors
}

// estimate is one point with its interval, in percent.
type estimate struct {
	group       int // x position
	est, lo, hi float64
}

// savePrecisionPlot draws each variant's overhead with its interval, per
// driver and job.
func savePrecisionPlot(dir string, groups []string, variants []string, points [][]estimate) error {
	p := plot.New()
	p.Title.Text = "Overhead vs host with 95% interval (seed: range of 3 rounds)"
	p.Y.Label.Text = "overhead, % slower than host"
	p.NominalX(groups...)
	p.Add(plotter.NewGrid())
	zero := plotter.NewFunction(func(float64) float64 { return 0 })
	zero.Color = color.Gray{Y: 120}
	p.Add(zero)
	width := 0.6
	for vi, pts := range points {
		if len(pts) == 0 {
			continue
		}
		off := -width/2 + width*(float64(vi)+0.5)/float64(len(points))
		var pe pointsWithErrors
		for _, e := range pts {
			pe.XYs = append(pe.XYs, plotter.XY{X: float64(e.group) + off, Y: e.est})
			pe.YErrors = append(pe.YErrors, struct{ Low, High float64 }{e.est - e.lo, e.hi - e.est})
		}
		sc, err := plotter.NewScatter(pe.XYs)
		if err != nil {
			return err
		}
		sc.GlyphStyle.Color = plotutil.Color(vi)
		sc.GlyphStyle.Shape = plotutil.Shape(vi)
		sc.GlyphStyle.Radius = vg.Points(3)
		eb, err := plotter.NewYErrorBars(pe)
		if err != nil {
			return err
		}
		eb.LineStyle.Color = plotutil.Color(vi)
		eb.LineStyle.Width = vg.Points(1.2)
		p.Add(eb, sc)
		p.Legend.Add(variants[vi], sc)
	}
	p.Legend.Top = true
	// Headroom for the legend above the highest interval.
	p.Y.Max += 0.3 * (p.Y.Max - p.Y.Min)
	return p.Save(vg.Length(max(6, 1.3*float64(len(groups))))*vg.Inch, 4*vg.Inch, filepath.Join(dir, plotPrecision))
}

// detectionPoint is one injected slowdown.
type detectionPoint struct {
	label    string
	slowdown float64 // measured
	cycles   int     // 0 = not flagged
}

func saveDetectionPlot(dir string, pts []detectionPoint, capCycles int, floor float64) error {
	p := plot.New()
	p.Title.Text = "Cycles until layerprobe_fsync_regression{target=\"container\"} = 1"
	p.X.Label.Text = "measured slowdown of the container's fsync p99 ratio (x baseline)"
	p.Y.Label.Text = "measurement cycles (3 rounds each)"
	p.Add(plotter.NewGrid())
	var flagged, missed plotter.XYs
	var labels []string
	var lxy plotter.XYs
	for _, d := range pts {
		if math.IsNaN(d.slowdown) {
			continue
		}
		y := float64(d.cycles)
		if d.cycles == 0 {
			y = float64(capCycles + 1)
			missed = append(missed, plotter.XY{X: d.slowdown, Y: y})
		} else {
			flagged = append(flagged, plotter.XY{X: d.slowdown, Y: y})
		}
		lxy = append(lxy, plotter.XY{X: d.slowdown, Y: y + 0.25})
		labels = append(labels, d.label)
	}
	if err := addScatter(p, "flagged", flagged,
		draw.GlyphStyle{Color: plotutil.Color(0), Shape: draw.CircleGlyph{}, Radius: vg.Points(4)}); err != nil {
		return err
	}
	if err := addScatter(p, fmt.Sprintf("not flagged within %d cycles", capCycles), missed,
		draw.GlyphStyle{Color: plotutil.Color(1), Shape: draw.CrossGlyph{}, Radius: vg.Points(5)}); err != nil {
		return err
	}
	if len(lxy) > 0 {
		l, err := plotter.NewLabels(plotter.XYLabels{XYs: lxy, Labels: labels})
		if err != nil {
			return err
		}
		p.Add(l)
	}
	target := plotter.NewFunction(func(float64) float64 { return 2 })
	target.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	target.Color = color.Gray{Y: 100}
	p.Add(target)
	p.Legend.Add("target for 2x: within 2 cycles", target)
	if floor > 0 && !math.IsNaN(floor) {
		fl, err := plotter.NewLine(plotter.XYs{{X: floor, Y: 0}, {X: floor, Y: float64(capCycles) + 1.5}})
		if err != nil {
			return err
		}
		fl.Color = plotutil.Color(2)
		fl.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
		p.Add(fl)
		p.Legend.Add("detector floor", fl)
	}
	p.Y.Min, p.Y.Max = 0, float64(capCycles)+2.5
	p.X.Min, p.X.Max = 0.9, 2.2
	for _, d := range pts {
		if !math.IsNaN(d.slowdown) {
			p.X.Min, p.X.Max = min(p.X.Min, d.slowdown*0.9), max(p.X.Max, d.slowdown*1.1)
		}
	}
	if floor > 0 && !math.IsNaN(floor) {
		p.X.Max = max(p.X.Max, floor*1.1)
	}
	p.Legend.Top = true
	return p.Save(7*vg.Inch, 4*vg.Inch, filepath.Join(dir, plotDetection))
}

func saveCalibrationPlot(dir string, limits []float64, slowdowns []float64) error {
	p := plot.New()
	p.Title.Text = "Calibration: write IOPS limit on the probe container vs fsync p99 ratio"
	p.X.Label.Text = "blkio write IOPS limit (log scale)"
	p.Y.Label.Text = "slowdown vs unperturbed baseline (x, log scale)"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
	p.Add(plotter.NewGrid())
	var xy plotter.XYs
	for i := range limits {
		if slowdowns[i] > 0 && !math.IsInf(slowdowns[i], 0) {
			xy = append(xy, plotter.XY{X: limits[i], Y: slowdowns[i]})
		}
	}
	if len(xy) == 0 {
		return fmt.Errorf("no calibration point")
	}
	l, sc, err := plotter.NewLinePoints(xy)
	if err != nil {
		return err
	}
	sc.GlyphStyle.Radius = vg.Points(3)
	p.Add(l, sc)
	return p.Save(6*vg.Inch, 4*vg.Inch, filepath.Join(dir, plotCalibration))
}

func saveAAPlot(dir string, perRound, perCycle []float64) error {
	p := plot.New()
	p.Title.Text = "A/A: bind fsync p99 / host fsync p99, unperturbed"
	p.X.Label.Text = "ratio (log scale; 1 = same as host)"
	p.Y.Label.Text = "density"
	p.X.Tick.Marker = ratioTicks{}
	p.Add(plotter.NewGrid())
	if len(perRound) == 0 {
		return fmt.Errorf("no bind rounds")
	}
	logs := func(xs []float64) plotter.Values {
		out := make(plotter.Values, len(xs))
		for i, x := range xs {
			out[i] = math.Log(x)
		}
		return out
	}
	bins := max(8, min(30, len(perRound)/5))
	h, err := plotter.NewHist(logs(perRound), bins)
	if err != nil {
		return err
	}
	h.Normalize(1)
	h.FillColor = color.RGBA{R: 120, G: 160, B: 220, A: 255}
	p.Add(h)
	p.Legend.Add(fmt.Sprintf("per round (%d)", len(perRound)), h)
	top := 0.0
	for _, b := range h.Bins {
		top = max(top, b.Weight)
	}
	if len(perCycle) > 1 {
		hc, err := plotter.NewHist(logs(perCycle), bins)
		if err == nil {
			hc.Normalize(1)
			hc.FillColor = nil
			hc.LineStyle.Color = plotutil.Color(1)
			hc.LineStyle.Width = vg.Points(1.5)
			p.Add(hc)
			p.Legend.Add(fmt.Sprintf("per cycle, median of its rounds (%d)", len(perCycle)), hc)
			for _, b := range hc.Bins {
				top = max(top, b.Weight)
			}
		}
	}
	one, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: 0, Y: top * 1.05}})
	if err == nil {
		one.Color = color.Black
		p.Add(one)
	}
	p.Y.Max = top * 1.4
	p.Legend.Top = true
	return p.Save(6*vg.Inch, 4*vg.Inch, filepath.Join(dir, plotAA))
}

// ratioTicks labels an axis of ln(ratio) values with the ratios.
type ratioTicks struct{}

func (ratioTicks) Ticks(lo, hi float64) []plot.Tick {
	var out []plot.Tick
	for _, r := range []float64{0.1, 0.2, 0.5, 0.8, 1, 1.25, 2, 5, 10, 20, 50, 100} {
		if l := math.Log(r); l >= lo && l <= hi {
			out = append(out, plot.Tick{Value: l, Label: strconv.FormatFloat(r, 'g', -1, 64)})
		}
	}
	return out
}

// saveSeriesPlot draws the per-round fsync p99 ratios of the unperturbed
// run with the detector's floor for the container.
func saveSeriesPlot(dir string, container, bind []float64, floor float64) error {
	p := plot.New()
	p.Title.Text = "Unperturbed rounds: fsync p99 ratio target/host"
	p.X.Label.Text = "round"
	p.Y.Label.Text = "ratio (log scale)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Add(plotter.NewGrid())
	for i, s := range []struct {
		name string
		xs   []float64
	}{{"container", container}, {"bind (A/A)", bind}} {
		var xy plotter.XYs
		for j, x := range s.xs {
			xy = append(xy, plotter.XY{X: float64(j + 1), Y: x})
		}
		if _, err := addLine(p, s.name, i, xy); err != nil {
			return err
		}
	}
	if floor > 0 && !math.IsNaN(floor) {
		f := plotter.NewFunction(func(float64) float64 { return floor })
		f.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		f.Color = plotutil.Color(2)
		p.Add(f)
		p.Legend.Add("container's confirmation floor at the end", f)
	}
	p.Legend.Top = true
	return p.Save(7*vg.Inch, 3.5*vg.Inch, filepath.Join(dir, plotSeries))
}

// addLine adds xy to p as a line in the i-th colour, with a legend entry;
// with no points it adds nothing and returns nil.
func addLine(p *plot.Plot, name string, i int, xy plotter.XYs) (*plotter.Line, error) {
	if len(xy) == 0 {
		return nil, nil
	}
	l, err := plotter.NewLine(xy)
	if err != nil {
		return nil, err
	}
	l.Color = plotutil.Color(i)
	p.Add(l)
	p.Legend.Add(name, l)
	return l, nil
}

// addScatter adds xy to p as points drawn with glyph, with a legend entry;
// with no points it adds nothing.
func addScatter(p *plot.Plot, name string, xy plotter.XYs, glyph draw.GlyphStyle) error {
	if len(xy) == 0 {
		return nil
	}
	sc, err := plotter.NewScatter(xy)
	if err != nil {
		return err
	}
	sc.GlyphStyle = glyph
	p.Add(sc)
	p.Legend.Add(name, sc)
	return nil
}
