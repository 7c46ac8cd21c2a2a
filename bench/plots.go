//go:build bench

package bench

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Plot file names, relative to the plot directory (docs/bench).
const (
	plotPrecisionBytes = "precision-bytes.png"
	plotHalfWidths     = "halfwidths.png"
	plotIntervals      = "intervals.png"
	plotDetection      = "detection.png"
	plotCalibration    = "calibration.png"
	plotAA             = "bind-aa.png"
	plotSeries         = "unperturbed-series.png"
)

// pointsWithErrors is what plotter.NewYErrorBars needs.
type pointsWithErrors struct {
	plotter.XYs
	plotter.YErrors
}

// saveGrid draws plots in a grid of cols columns into one PNG.
func saveGrid(path string, plots []*plot.Plot, cols int, w, h vg.Length) error {
	if len(plots) == 0 {
		return fmt.Errorf("nothing to plot")
	}
	rows := (len(plots) + cols - 1) / cols
	grid := make([][]*plot.Plot, rows)
	for i := range grid {
		grid[i] = make([]*plot.Plot, cols)
		for j := range cols {
			if k := i*cols + j; k < len(plots) {
				grid[i][j] = plots[k]
			}
		}
	}
	img := vgimg.New(w*vg.Length(cols), h*vg.Length(rows))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Millimeter, PadY: vg.Millimeter,
		PadTop: vg.Points(2), PadBottom: vg.Points(2), PadLeft: vg.Points(2), PadRight: vg.Points(2)}
	canvases := plot.Align(grid, tiles, dc)
	for i := range grid {
		for j := range grid[i] {
			if grid[i][j] != nil {
				grid[i][j].Draw(canvases[i][j])
			}
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// dashed is the style of the goal lines.
var dashed = []vg.Length{vg.Points(4), vg.Points(3)}

// precisionPanel is one driver and workload of the precision-versus-bytes plot.
type precisionPanel struct {
	title                    string
	old, new                 []curvePoint
	oldDefaults, newDefaults []curvePoint
}

// savePrecisionBytesPlot draws half-width against GiB written (log-log:
// a 1/√bytes law is a straight line), one panel per driver and workload.
func savePrecisionBytesPlot(dir string, panels []precisionPanel, cols int) error {
	var plots []*plot.Plot
	for _, pn := range panels {
		p := plot.New()
		p.Title.Text = pn.title
		p.X.Label.Text = "GiB written"
		p.Y.Label.Text = "half-width, pp"
		p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
		p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
		p.Add(plotter.NewGrid())
		xy := func(c []curvePoint) plotter.XYs {
			var out plotter.XYs
			for _, q := range c {
				if q.HW > 0 && q.Bytes > 0 && !math.IsInf(q.HW, 0) {
					out = append(out, plotter.XY{X: float64(q.Bytes) / (1 << 30), Y: q.HW})
				}
			}
			return out
		}
		if _, err := addLine(p, "earlier method", 1, xy(pn.old)); err != nil {
			return err
		}
		if _, err := addLine(p, "adaptive method", 0, xy(pn.new)); err != nil {
			return err
		}
		if err := addScatter(p, "earlier default runs", xy(pn.oldDefaults),
			draw.GlyphStyle{Color: plotutil.Color(1), Shape: draw.CrossGlyph{}, Radius: vg.Points(3)}); err != nil {
			return err
		}
		if err := addScatter(p, "adaptive default runs", xy(pn.newDefaults),
			draw.GlyphStyle{Color: plotutil.Color(0), Shape: draw.CircleGlyph{}, Radius: vg.Points(2)}); err != nil {
			return err
		}
		// Axis ranges that hold the goal lines too.
		xmin, xmax, ymin, ymax := 0.05, 12.0, 1.0, 30.0
		for _, c := range [][]curvePoint{pn.old, pn.new, pn.oldDefaults, pn.newDefaults} {
			for _, q := range xy(c) {
				xmin, xmax = min(xmin, q.X), max(xmax, q.X)
				ymin, ymax = min(ymin, q.Y), max(ymax, q.Y)
			}
		}
		p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = xmin*0.9, xmax*1.1, ymin*0.9, ymax*1.1
		goal, err := plotter.NewLine(plotter.XYs{{X: p.X.Min, Y: goalHalfWidthPP}, {X: p.X.Max, Y: goalHalfWidthPP}})
		if err != nil {
			return err
		}
		goal.Dashes, goal.Color = dashed, color.Black
		budget, err := plotter.NewLine(plotter.XYs{{X: float64(goalRunBytes) / (1 << 30), Y: p.Y.Min}, {X: float64(goalRunBytes) / (1 << 30), Y: p.Y.Max}})
		if err != nil {
			return err
		}
		budget.Dashes, budget.Color = dashed, color.Gray{Y: 120}
		p.Add(goal, budget)
		p.Legend.Add("goal: ±3 pp", goal)
		p.Legend.Add("default budget: 2.5 GiB", budget)
		p.Legend.Top = true
		p.Legend.TextStyle.Font.Size = vg.Points(7)
		plots = append(plots, p)
	}
	return saveGrid(filepath.Join(dir, plotPrecisionBytes), plots, cols, 4.2*vg.Inch, 3.4*vg.Inch)
}

// saveHalfWidthPlot draws every default run's container half-width, the
// earlier method's beside the adaptive one's, per driver and workload.
func saveHalfWidthPlot(dir string, groups []string, old, new [][]float64) error {
	p := plot.New()
	p.Title.Text = "Default runs: half-width of the container's 95% interval"
	p.Y.Label.Text = "half-width, pp (log scale)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.NominalX(groups...)
	p.Add(plotter.NewGrid())
	ymin, ymax := 1.0, 10.0
	for vi, v := range []struct {
		name string
		hw   [][]float64
		off  float64
	}{{"earlier method", old, -0.15}, {"adaptive method", new, 0.15}} {
		var xy plotter.XYs
		for g, hws := range v.hw {
			for i, h := range hws {
				if h > 0 && !math.IsInf(h, 0) {
					// A small spread keeps equal values apart.
					jit := 0.1 * (float64(i%5)/4 - 0.5)
					xy = append(xy, plotter.XY{X: float64(g) + v.off + jit, Y: h})
					ymin, ymax = min(ymin, h), max(ymax, h)
				}
			}
		}
		shape := []draw.GlyphDrawer{draw.CrossGlyph{}, draw.CircleGlyph{}}[vi]
		if err := addScatter(p, v.name, xy, draw.GlyphStyle{Color: plotutil.Color(1 - vi), Shape: shape, Radius: vg.Points(2.5)}); err != nil {
			return err
		}
	}
	p.Y.Min, p.Y.Max = ymin*0.9, ymax*1.4
	goal := plotter.NewFunction(func(float64) float64 { return goalHalfWidthPP })
	goal.Dashes, goal.Color = dashed, color.Black
	p.Add(goal)
	p.Legend.Add("goal: ±3 pp", goal)
	p.Legend.Top = true
	return p.Save(vg.Length(max(6, 1.2*float64(len(groups))))*vg.Inch, 4*vg.Inch, filepath.Join(dir, plotHalfWidths))
}

// intervalPanel is one driver and workload of the intervals plot.
type intervalPanel struct {
	title                string
	container, bind      []est
	ref, refLow, refHigh float64
}

// hline is a horizontal line across a plot; no name, no legend entry.
type hline struct {
	name   string
	y      float64
	c      color.Color
	dashes []vg.Length
}

// saveIntervalsPlot draws every default run's container and bind
// interval, the reference's estimate and interval as lines across.
func saveIntervalsPlot(dir string, panels []intervalPanel, cols int) error {
	var plots []*plot.Plot
	for _, pn := range panels {
		p := plot.New()
		p.Title.Text = pn.title
		p.X.Label.Text = "default run"
		p.Y.Label.Text = "overhead, %"
		p.Add(plotter.NewGrid())
		for vi, v := range []struct {
			name string
			es   []est
			off  float64
		}{{"container", pn.container, 0}, {"bind (A/A)", pn.bind, 0.35}} {
			var pe pointsWithErrors
			for i, e := range v.es {
				pe.XYs = append(pe.XYs, plotter.XY{X: float64(i+1) + v.off, Y: 100 * e.Ratio})
				pe.YErrors = append(pe.YErrors, struct{ Low, High float64 }{100 * (e.Ratio - e.Low), 100 * (e.High - e.Ratio)})
			}
			if len(pe.XYs) == 0 {
				continue
			}
			eb, err := plotter.NewYErrorBars(pe)
			if err != nil {
				return err
			}
			eb.LineStyle.Color = plotutil.Color(vi)
			sc, err := plotter.NewScatter(pe.XYs)
			if err != nil {
				return err
			}
			sc.GlyphStyle.Color, sc.GlyphStyle.Radius = plotutil.Color(vi), vg.Points(1.5)
			p.Add(eb, sc)
			p.Legend.Add(v.name, sc)
		}
		lines := []hline{{"", 0, color.Gray{Y: 100}, nil}}
		if !math.IsNaN(pn.ref) {
			lines = append(lines, hline{"reference", pn.ref, plotutil.Color(2), nil},
				hline{"reference interval", pn.refLow, plotutil.Color(2), dashed}, hline{"", pn.refHigh, plotutil.Color(2), dashed})
		}
		for _, l := range lines {
			y := 100 * l.y
			f := plotter.NewFunction(func(float64) float64 { return y })
			f.Color, f.Dashes = l.c, l.dashes
			p.Add(f)
			if l.name != "" {
				p.Legend.Add(l.name, f)
			}
		}
		p.Legend.Top = true
		p.Legend.TextStyle.Font.Size = vg.Points(7)
		plots = append(plots, p)
	}
	return saveGrid(filepath.Join(dir, plotIntervals), plots, cols, 4.2*vg.Inch, 3.2*vg.Inch)
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
	p.Y.Label.Text = "measurement cycles"
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
	for _, g := range goalDetect {
		goal := plotter.NewFunction(func(float64) float64 { return float64(g.cycles) })
		goal.Dashes = dashed
		goal.Color = color.Gray{Y: 100}
		p.Add(goal)
		p.Legend.Add(fmt.Sprintf("goal for %s: within %d cycle(s)", times(g.level), g.cycles), goal)
	}
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
