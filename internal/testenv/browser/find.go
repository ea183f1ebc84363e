package browser

import (
	"fmt"
	"strings"

	"github.com/chromedp/chromedp"
)

// Selectors that read a page as a person does: by a control's label, a
// button's or link's visible name, a heading's text; never by CSS paths.

// xq quotes s as an XPath string literal.
func xq(s string) string {
	if !strings.Contains(s, `"`) {
		return `"` + s + `"`
	}
	return "concat(\"" + strings.ReplaceAll(s, `"`, `", '"', "`) + "\")"
}

// Labelled is the form control whose <label> reads label.
func Labelled(label string) chromedp.Search {
	return chromedp.Search(fmt.Sprintf(`//*[@id=//label[normalize-space()=%s]/@for]`, xq(label)))
}

// Button is the button named name (its text, or its aria-label).
func Button(name string) chromedp.Search {
	return chromedp.Search(fmt.Sprintf(`//button[normalize-space()=%[1]s or @aria-label=%[1]s]`, xq(name)))
}

// ButtonIn is the button named name in the table row that mentions text.
func ButtonIn(text, name string) chromedp.Search {
	return chromedp.Search(fmt.Sprintf(`//tr[td[contains(normalize-space(), %s)]]//button[normalize-space()=%s]`, xq(text), xq(name)))
}

// Link is the link whose text is name.
func Link(name string) chromedp.Search {
	return chromedp.Search(fmt.Sprintf(`//a[normalize-space()=%s]`, xq(name)))
}

// Heading is the heading (h1-h3) whose text is name.
func Heading(name string) chromedp.Search {
	return chromedp.Search(fmt.Sprintf(`//*[self::h1 or self::h2 or self::h3][normalize-space()=%s]`, xq(name)))
}

// Cell is the table cell whose text contains text.
func Cell(text string) chromedp.Search {
	return chromedp.Search(fmt.Sprintf(`//td[contains(normalize-space(), %s)]`, xq(text)))
}
