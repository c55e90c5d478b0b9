package ui

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Chart geometry, in the SVG's viewBox units; CSS sets the drawn size.
const (
	chartW   = 240.0
	chartH   = 48.0
	chartPad = 3.0
)

// chart is one inline SVG line chart. The template writes Path, built
// here from numbers only, into the d attribute; Label, the accessible
// summary, is the one text and the template escapes it.
type chart struct {
	Label string
	Path  string
	// Now and Max are the newest and largest values, formatted.
	Now, Max string
	Empty    bool
}

// queueCharts are a queue's two charts of the overview, and its latest
// delivered/s ("—" before two samples).
type queueCharts struct {
	Rate              string
	Depth, Throughput chart
}

// charts draws queue's depth and throughput over the window ending at now.
func (s *sampler) charts(queue string, now time.Time) queueCharts {
	pts := s.history(queue, now)
	rate := "—"
	if len(pts) > 0 && pts[len(pts)-1].HasRate {
		rate = formatRate(pts[len(pts)-1].Rate)
	}
	span := "the last hour"
	if s.window != time.Hour {
		span = "the last " + s.window.String()
	}
	start := now.Add(-s.window)
	var oldest time.Duration
	for _, p := range pts {
		oldest = max(oldest, p.Oldest)
	}
	depth := draw(pts, start, s.window, func(p point) (float64, bool) { return float64(p.Backlog), true }, formatCount)
	depth.Label = fmt.Sprintf("%s: backlog over %s, now %s, max %s", queue, span, depth.Now, depth.Max)
	if oldest > 0 {
		depth.Label += ", oldest unprocessed up to " + ago(oldest)
	}
	tput := draw(pts, start, s.window, func(p point) (float64, bool) { return p.Rate, p.HasRate }, formatRate)
	tput.Label = fmt.Sprintf("%s: delivered per second over %s, now %s, max %s", queue, span, tput.Now, tput.Max)
	return queueCharts{Rate: rate, Depth: depth, Throughput: tput}
}

// draw builds a chart's path: x is time across the window from start, y
// the value scaled to the window's maximum. A point with no value, or one
// marked Break, starts a new line, so a gap in the samples shows as one.
func draw(pts []point, start time.Time, window time.Duration, value func(point) (float64, bool), format func(float64) string) chart {
	var c chart
	var hi, last float64
	n := 0
	for _, p := range pts {
		if v, ok := value(p); ok {
			hi, last, n = max(hi, v), v, n+1
		}
	}
	c.Now, c.Max = "—", "—"
	if n == 0 {
		c.Empty = true
		return c
	}
	c.Now, c.Max = format(last), format(hi)
	var b strings.Builder
	joined := false
	for i, p := range pts {
		v, ok := value(p)
		if !ok {
			joined = false
			continue
		}
		x := chartW * p.T.Sub(start).Seconds() / window.Seconds()
		y := chartH - chartPad
		if hi > 0 {
			y -= (chartH - 2*chartPad) * v / hi
		}
		if joined && !p.Break {
			b.WriteByte('L')
		} else {
			b.WriteByte('M')
		}
		b.WriteString(num(x))
		b.WriteByte(',')
		b.WriteString(num(y))
		// A point alone on its line is drawn as a dot (round caps).
		if !(joined && !p.Break) && (i+1 == len(pts) || !continues(pts[i+1], value)) {
			b.WriteString("h0")
		}
		joined = true
	}
	c.Path = b.String()
	return c
}

// continues reports whether p joins the line of the point before it.
func continues(p point, value func(point) (float64, bool)) bool {
	_, ok := value(p)
	return ok && !p.Break
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) }

func formatCount(f float64) string { return strconv.FormatInt(int64(f), 10) }

func formatRate(f float64) string {
	// Rounded first, so 9.96 reads "10", as 10.2 does, not "10.0".
	if r := math.Round(f*10) / 10; r < 10 {
		return strconv.FormatFloat(r, 'f', 1, 64)
	}
	return strconv.FormatFloat(f, 'f', 0, 64)
}
