package report

import (
	"fmt"
	"image/color"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// series is one line of a chart: a peer's op.
type series struct {
	peer, op string
	color    color.Color
	dashes   []vg.Length
}

var lines = []series{
	{"velero", "backup", color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, nil},
	{"velero", "restore", color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, []vg.Length{vg.Points(4), vg.Points(3)}},
	{"backstop", "backup", color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, nil},
	{"backstop", "restore", color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, []vg.Length{vg.Points(4), vg.Points(3)}},
}

// Charts writes peers-throughput.svg (items/s) and peers-memory.svg (peak
// RSS) against the object count, both peers at their default client
// limits, into dir.
func (r *Results) Charts(dir string) error {
	for _, c := range []struct {
		file, title, y string
		value          func(Transfer) float64
		// log: a logarithmic y axis (backups and restores differ by
		// orders of magnitude).
		log bool
	}{
		{"peers-throughput.svg", "Backups and restores: throughput", "items/s (log)", func(t Transfer) float64 { return t.ItemsPerSec }, true},
		{"peers-memory.svg", "Backups and restores: peak RSS (server process tree)", "MiB", func(t Transfer) float64 { return t.PeakRSSMiB }, false},
	} {
		p := plot.New()
		p.Title.Text = c.title
		p.X.Label.Text = "objects"
		p.Y.Label.Text = c.y
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
		if c.log {
			p.Y.Scale = plot.LogScale{}
			p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
		} else {
			p.Y.Min = 0
		}
		p.Legend.Top = true
		p.Legend.Left = true
		p.Add(plotter.NewGrid())
		for _, s := range lines {
			var pts plotter.XYs
			for _, n := range r.sizes(0) {
				if t, ok := r.transfer(n, 0, s.peer, s.op); ok {
					pts = append(pts, plotter.XY{X: float64(n), Y: c.value(t)})
				}
			}
			if len(pts) == 0 {
				continue
			}
			l, dots, err := plotter.NewLinePoints(pts)
			if err != nil {
				return fmt.Errorf("%s: %w", c.file, err)
			}
			l.Color, l.Dashes = s.color, s.dashes
			l.Width = vg.Points(1.5)
			dots.Color, dots.Shape = s.color, draw.CircleGlyph{}
			p.Add(l, dots)
			p.Legend.Add(s.peer+" "+s.op, l, dots)
		}
		if err := p.Save(6*vg.Inch, 4*vg.Inch, filepath.Join(dir, c.file)); err != nil {
			return fmt.Errorf("writing %s: %w", c.file, err)
		}
	}
	return nil
}
