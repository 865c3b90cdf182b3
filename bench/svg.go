package main

import (
	"fmt"
	"math"
	"os"
	"strings"
)

// Chart geometry.
const (
	svgW, svgH                 = 860, 520
	padL, padR, padT, padB     = 70, 200, 50, 60
	plotW, plotH               = svgW - padL - padR, svgH - padT - padB
	colorBaseline, colorBFF    = "#1f77b4", "#d62728"
	dashP50, dashP99, dashP999 = "", "7,4", "2,3"
)

// series is one polyline: one target, one percentile.
type series struct {
	label, color, dash string
	xs, ys             []float64 // offered req/s, latency ms
}

// writeSVG draws latency percentiles (log scale) against offered load.
func writeSVG(path string, pts []sweepPoint) error {
	ss := sweepSeries(pts)
	xMax, yMin, yMax := 0.0, math.Inf(1), math.Inf(-1)
	for _, s := range ss {
		for i := range s.xs {
			xMax = math.Max(xMax, s.xs[i])
			yMin = math.Min(yMin, s.ys[i])
			yMax = math.Max(yMax, s.ys[i])
		}
	}
	if len(ss) == 0 || xMax == 0 {
		return fmt.Errorf("no sweep data to draw")
	}
	lo := math.Floor(math.Log10(math.Max(yMin, 1e-3)))
	hi := math.Ceil(math.Log10(math.Max(yMax, 1e-3)))
	if hi <= lo {
		hi = lo + 1
	}
	x := func(v float64) float64 { return padL + v/xMax*plotW }
	y := func(ms float64) float64 {
		return padT + plotH - (math.Log10(math.Max(ms, 1e-3))-lo)/(hi-lo)*plotH
	}

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", svgW, svgH, svgW, svgH)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", svgW, svgH)
	fmt.Fprintf(&b, `<text x="%d" y="25" font-size="15" font-weight="bold">Latency vs offered load: bare ReverseProxy (baseline) and BFF, steady state</text>`+"\n", padL)
	drawYAxis(&b, lo, hi, y)
	drawXAxis(&b, ss[0].xs, x)
	for _, s := range ss {
		drawSeries(&b, s, x, y)
	}
	drawLegend(&b, ss)
	b.WriteString("</svg>\n")
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

func sweepSeries(pts []sweepPoint) []series {
	var out []series
	for _, tg := range []struct{ name, color string }{{"baseline", colorBaseline}, {"BFF", colorBFF}} {
		for _, pc := range []struct {
			name, dash string
			get        func(sweepPoint) float64
		}{
			{"p50", dashP50, func(p sweepPoint) float64 { return p.p50 }},
			{"p99", dashP99, func(p sweepPoint) float64 { return p.p99 }},
			{"p99.9", dashP999, func(p sweepPoint) float64 { return p.p999 }},
		} {
			s := series{label: tg.name + " " + pc.name, color: tg.color, dash: pc.dash}
			for _, p := range pts {
				if p.target == tg.name {
					s.xs = append(s.xs, p.offered)
					s.ys = append(s.ys, pc.get(p)/1000)
				}
			}
			if len(s.xs) > 0 {
				out = append(out, s)
			}
		}
	}
	return out
}

func drawYAxis(b *strings.Builder, lo, hi float64, y func(float64) float64) {
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", padL, padT, padL, padT+plotH)
	for e := lo; e <= hi; e++ {
		for _, m := range []float64{1, 2, 5} {
			v := m * math.Pow(10, e)
			if math.Log10(v) > hi+1e-9 {
				break
			}
			yy := y(v)
			stroke := "#eee"
			if m == 1 {
				stroke = "#ccc"
			}
			fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="%s"/>`+"\n", padL, yy, padL+plotW, yy, stroke)
			fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", padL-6, yy+4, trimFloat(v))
		}
	}
	fmt.Fprintf(b, `<text transform="translate(18,%d) rotate(-90)" text-anchor="middle">latency, ms (log scale)</text>`+"\n", padT+plotH/2)
}

func drawXAxis(b *strings.Builder, xs []float64, x func(float64) float64) {
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", padL, padT+plotH, padL+plotW, padT+plotH)
	for _, v := range xs {
		xx := x(v)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#eee"/>`+"\n", xx, padT, xx, padT+plotH)
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", xx, padT+plotH+18, trimFloat(v/1000)+"k")
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle">offered load, req/s (wrk -t2 -c64 with a per-request delay; approximate)</text>`+"\n", padL+plotW/2, padT+plotH+45)
}

func drawSeries(b *strings.Builder, s series, x, y func(float64) float64) {
	var pts []string
	for i := range s.xs {
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(s.xs[i]), y(s.ys[i])))
	}
	dash := ""
	if s.dash != "" {
		dash = fmt.Sprintf(` stroke-dasharray="%s"`, s.dash)
	}
	fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", s.color, dash, strings.Join(pts, " "))
	for i := range s.xs {
		fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"/>`+"\n", x(s.xs[i]), y(s.ys[i]), s.color)
	}
}

func drawLegend(b *strings.Builder, ss []series) {
	lx := padL + plotW + 20
	for i, s := range ss {
		ly := padT + 10 + i*22
		dash := ""
		if s.dash != "" {
			dash = fmt.Sprintf(` stroke-dasharray="%s"`, s.dash)
		}
		fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n", lx, ly, lx+36, ly, s.color, dash)
		fmt.Fprintf(b, `<text x="%d" y="%d">%s</text>`+"\n", lx+44, ly+4, s.label)
	}
}

// trimFloat prints 0.5, 1, 20, 1.5 without trailing zeros.
func trimFloat(v float64) string {
	s := fmt.Sprintf("%.3f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s
}
