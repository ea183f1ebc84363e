package browser

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/chromedp/chromedp"
)

// axeSource is axe-core 4.14.1 (see axe/README.md).
//
//go:embed axe/axe.min.js
var axeSource string

// Violation is an axe-core rule the page breaks.
type Violation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  []struct {
		Target []any  `json:"target"`
		HTML   string `json:"html"`
	} `json:"nodes"`
}

func (v Violation) String() string {
	var where []string
	for _, n := range v.Nodes {
		where = append(where, n.HTML)
	}
	return fmt.Sprintf("%s (%s): %s at %s", v.ID, v.Impact, v.Help, strings.Join(where, " | "))
}

// Axe runs axe-core on the page loaded in ctx and returns its serious and
// critical violations (WCAG 2.x A and AA rules and best practices). The
// script is evaluated through the DevTools protocol, so the page's CSP
// (no inline script) does not stop it, and the page itself never carries it.
func Axe(ctx context.Context) ([]Violation, error) {
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[any](axeSource)); err != nil {
		return nil, fmt.Errorf("axe: load: %w", err)
	}
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](`axe.run(document, {resultTypes: ["violations"]}).then(r => JSON.stringify(r.violations))`, chromedp.EvalAwaitPromise))
	if err != nil {
		return nil, fmt.Errorf("axe: %w", err)
	}
	var all []Violation
	if err := json.Unmarshal([]byte(raw), &all); err != nil {
		return nil, fmt.Errorf("axe result: %w", err)
	}
	var bad []Violation
	for _, v := range all {
		if v.Impact == "serious" || v.Impact == "critical" {
			bad = append(bad, v)
		}
	}
	return bad, nil
}
