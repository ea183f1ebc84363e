package ui

import "fmt"

// Bar is one bar of a small stacked bar chart: good (successes) under
// bad (failures), each as a height in the chart's units.
type Bar struct {
	X, Width     int
	GoodY, GoodH int
	BadY, BadH   int
	Label        string
	Good, Bad    int
}

// Chart is a small stacked bar chart drawn as inline SVG (presentation
// attributes only: the CSP allows no inline style), with a text
// equivalent for screen readers in Summary.
type Chart struct {
	Width, Height int
	Bars          []Bar
	Summary       string
}

// Bars lays out counts (pairs of good, bad per slot, labels alongside)
// as a chart of height h, each bar w wide; the tallest slot fills it.
func Bars(good, bad []int, labels []string, summary string) Chart {
	const w, h, gap = 6, 32, 2
	peak := 1
	for i := range good {
		peak = max(peak, good[i]+bad[i])
	}
	c := Chart{Width: len(good) * (w + gap), Height: h, Summary: summary}
	for i := range good {
		gh := good[i] * h / peak
		bh := bad[i] * h / peak
		if good[i] > 0 && gh == 0 {
			gh = 1
		}
		if bad[i] > 0 && bh == 0 {
			bh = 1
		}
		c.Bars = append(c.Bars, Bar{
			X: i * (w + gap), Width: w,
			GoodY: h - gh, GoodH: gh,
			BadY: h - gh - bh, BadH: bh,
			Good: good[i], Bad: bad[i],
			Label: fmt.Sprintf("%s: %d succeeded, %d failed", labels[i], good[i], bad[i]),
		})
	}
	return c
}
