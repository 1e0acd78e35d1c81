package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"math"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/backstop-io/backstop/test/integration/framework"
)

// dashboardPictureEnv names the file the picture of the shipped dashboard
// is also written to (make dashboard-picture: docs/images/dashboard.png, in
// docs/monitoring.md).
const dashboardPictureEnv = "BACKSTOP_DASHBOARD_PICTURE"

// panelTargets is a dashboard panel with its queries and their legends.
type panelTargets struct {
	Title   string
	Type    string
	Targets []struct {
		Expr         string `json:"expr"`
		LegendFormat string `json:"legendFormat"`
	}
}

// graphPanels are the time series panels of a Grafana dashboard's JSON,
// in the order it shows them.
func graphPanels(t *testing.T, file string) []panelTargets {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var board struct {
		Panels []panelTargets `json:"panels"`
	}
	if err := json.Unmarshal(data, &board); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	var out []panelTargets
	for _, p := range board.Panels {
		if p.Type == "timeseries" && len(p.Targets) > 0 {
			out = append(out, p)
		}
	}
	return out
}

var legendLabel = regexp.MustCompile(`\{\{\s*([A-Za-z_]+)\s*\}\}`)

// legend is what Grafana shows for a series: the target's legendFormat
// with the series' labels in it.
func legend(format string, labels map[string]string) string {
	if format == "" || format == "__auto" {
		var parts []string
		for k, v := range labels {
			parts = append(parts, k+"="+v)
		}
		return strings.Join(parts, ",")
	}
	return legendLabel.ReplaceAllStringFunc(format, func(m string) string {
		return labels[legendLabel.FindStringSubmatch(m)[1]]
	})
}

// renderDashboard draws the time series panels of a dashboard from
// Prometheus' data between start and end, a point each step, as Grafana
// would with an interval of five steps, into a PNG (two columns), and
// returns how many panels had data.
func renderDashboard(t *testing.T, p *framework.Prometheus, dashboard, picture string, start, end time.Time, step time.Duration) int {
	t.Helper()
	ctx := context.Background()
	interval := fmt.Sprintf("%ds", int(5*step.Seconds()))
	var plots []*plot.Plot
	withData := 0
	for _, panel := range graphPanels(t, dashboard) {
		pl := plot.New()
		pl.Title.Text = strings.ReplaceAll(panel.Title, "$__interval", interval)
		pl.X.Tick.Marker = plot.TimeTicks{Format: "15:04:05"}
		// Every graph over the whole window, as Grafana's time picker.
		pl.X.Min, pl.X.Max = float64(start.Unix()), float64(end.Unix())
		pl.Legend.Top = true
		pl.Legend.TextStyle.Font.Size = vg.Points(8)
		pl.Title.TextStyle.Font.Size = vg.Points(11)
		lines := 0
		for _, target := range panel.Targets {
			q := dashboardQuery{expr: strings.ReplaceAll(target.Expr, "$__interval", interval)}
			series, err := p.QueryRange(ctx, promQL(q, p.Instance), start, end, step)
			if err != nil {
				t.Fatalf("%s: %v", panel.Title, err)
			}
			for _, s := range series {
				var xys plotter.XYs
				for _, pt := range s.Points {
					if !math.IsNaN(pt.V) && !math.IsInf(pt.V, 0) {
						xys = append(xys, plotter.XY{X: float64(pt.T.Unix()), Y: pt.V})
					}
				}
				if len(xys) == 0 {
					continue
				}
				// Points too, so that a series of a few samples shows.
				line, points, err := plotter.NewLinePoints(xys)
				if err != nil {
					t.Fatalf("%s: %v", panel.Title, err)
				}
				line.LineStyle.Color = plotutil.Color(lines)
				line.LineStyle.Width = vg.Points(1.5)
				points.Color = plotutil.Color(lines)
				points.Radius = vg.Points(1.5)
				pl.Add(line, points)
				pl.Legend.Add(legend(target.LegendFormat, s.Labels), line)
				lines++
			}
		}
		if lines > 0 {
			withData++
		}
		pl.Add(plotter.NewGrid())
		plots = append(plots, pl)
	}
	const cols = 2
	rows := (len(plots) + cols - 1) / cols
	grid := make([][]*plot.Plot, rows)
	for i := range grid {
		grid[i] = make([]*plot.Plot, cols)
		for j := range grid[i] {
			if k := i*cols + j; k < len(plots) {
				grid[i][j] = plots[k]
			}
		}
	}
	img := vgimg.New(vg.Points(1100), vg.Points(float64(rows)*190))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Points(12), PadY: vg.Points(12),
		PadTop: vg.Points(8), PadBottom: vg.Points(8), PadLeft: vg.Points(8), PadRight: vg.Points(8)}
	canvases := plot.Align(grid, tiles, dc)
	for i := range grid {
		for j := range grid[i] {
			if grid[i][j] != nil {
				grid[i][j].Draw(canvases[i][j])
			}
		}
	}
	out, err := os.Create(picture)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(out); err != nil {
		t.Fatal(err)
	}
	return withData
}

// checkPicture decodes the PNG renderDashboard wrote and copies it where
// dashboardPictureEnv says, if it says.
func checkPicture(t *testing.T, file string) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("the dashboard's picture: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 1000 || b.Dy() < 500 {
		t.Errorf("the dashboard's picture is %dx%d", b.Dx(), b.Dy())
	}
	if dest := os.Getenv(dashboardPictureEnv); dest != "" {
		if err := os.WriteFile(dest, data, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("the dashboard's picture: %s", dest)
	}
}
