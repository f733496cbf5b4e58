package report

import (
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/quorumlock/quorumlock/bench/internal/suite"
)

// plotted lists the scenarios on the plot's x axis, in order.
var plotted = []string{suite.Uncontended, suite.UncontendedFenced, suite.SlowNode, suite.TwoDownHealthy,
	suite.TwoDown, suite.ThreeDown, suite.Contended, suite.ContendedSeparate, suite.ManyKeys, suite.RenewMany}

var impls = []struct {
	name  string
	color color.Color
	shape draw.GlyphDrawer
}{
	{"floor", color.RGBA{R: 120, G: 120, B: 120, A: 255}, draw.SquareGlyph{}},
	{"single-node", color.RGBA{R: 60, G: 160, B: 60, A: 255}, draw.TriangleGlyph{}},
	{"redsync", color.RGBA{R: 200, G: 60, B: 40, A: 255}, draw.CrossGlyph{}},
	{"quorumlock", color.RGBA{R: 40, G: 90, B: 200, A: 255}, draw.CircleGlyph{}},
}

type errPoints struct {
	plotter.XYs
	plotter.YErrors
}

// Plot draws, per scenario and implementation, the p50 (marker) and the
// range up to p99 (bar), in ms on a log axis; for the contended scenarios
// it is the waiters' Lock latency, for renew-many the round trips to the
// nodes while the leases were held. The file type follows path's
// extension (.svg, .png, .pdf).
func Plot(path string, rs []suite.Result) error {
	p := plot.New()
	p.Title.Text = "quorumlock bench: Lock+Release latency, p50 (marker) to p99 (bar)"
	p.Y.Label.Text = "ms, log scale (contended: waiters' Lock; renew-many: round trips)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top = true
	p.Legend.Left = true
	var names []string
	for _, s := range plotted {
		for _, r := range rs {
			if r.Scenario == s {
				names = append(names, s)
				break
			}
		}
	}
	p.NominalX(names...)
	p.X.Tick.Label.Rotation = math.Pi / 8
	p.X.Tick.Label.XAlign = draw.XRight
	for k, im := range impls {
		var pts errPoints
		for x, s := range names {
			r, ok := Find(rs, s, im.name)
			if !ok {
				continue
			}
			lo, hi := r.P50us, r.P99us
			if r.WaiterP99us != nil && r.WaiterP50us != nil {
				lo, hi = *r.WaiterP50us, *r.WaiterP99us
			}
			lo, hi = math.Max(lo, 1)/1000, math.Max(hi, 1)/1000
			pts.XYs = append(pts.XYs, plotter.XY{X: float64(x) + (float64(k)-1.5)*0.15, Y: lo})
			pts.YErrors = append(pts.YErrors, struct{ Low, High float64 }{0, hi - lo})
		}
		if len(pts.XYs) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(pts.XYs)
		if err != nil {
			return err
		}
		sc.GlyphStyle.Color = im.color
		sc.GlyphStyle.Shape = im.shape
		sc.GlyphStyle.Radius = vg.Points(4)
		eb, err := plotter.NewYErrorBars(pts)
		if err != nil {
			return err
		}
		eb.LineStyle.Color = im.color
		eb.LineStyle.Width = vg.Points(1.5)
		p.Add(eb, sc)
		p.Legend.Add(im.name, sc)
	}
	p.Add(plotter.NewGrid())
	return p.Save(11*vg.Inch, 5.5*vg.Inch, path)
}
