package ticket

import "fmt"

// spoofing names the characters a title may not hold because they make
// text display differently from what it is (CVE-2021-42574, "Trojan
// Source"): bidirectional controls reorder what follows them, zero-width
// and invisible format characters hide or join text unseen.
var spoofing = map[rune]string{
	0x061C: "ARABIC LETTER MARK",
	0x200B: "ZERO WIDTH SPACE",
	0x200C: "ZERO WIDTH NON-JOINER",
	0x200D: "ZERO WIDTH JOINER",
	0x200E: "LEFT-TO-RIGHT MARK",
	0x200F: "RIGHT-TO-LEFT MARK",
	0x202A: "LEFT-TO-RIGHT EMBEDDING",
	0x202B: "RIGHT-TO-LEFT EMBEDDING",
	0x202C: "POP DIRECTIONAL FORMATTING",
	0x202D: "LEFT-TO-RIGHT OVERRIDE",
	0x202E: "RIGHT-TO-LEFT OVERRIDE",
	0x2060: "WORD JOINER",
	0x2066: "LEFT-TO-RIGHT ISOLATE",
	0x2067: "RIGHT-TO-LEFT ISOLATE",
	0x2068: "FIRST STRONG ISOLATE",
	0x2069: "POP DIRECTIONAL ISOLATE",
	0xFEFF: "ZERO WIDTH NO-BREAK SPACE",
}

// RefusedRune says why r may not appear in a ticket title, naming it
// (`U+202E RIGHT-TO-LEFT OVERRIDE`); "" when it may. Refused: control
// characters (C0, DEL, C1) and the bidirectional, zero-width and invisible
// format characters of spoofing.
func RefusedRune(r rune) string {
	switch name, ok := spoofing[r]; {
	case ok:
		kind := "an invisible formatting character"
		if r == 0x061C || (r >= 0x200E && r <= 0x200F) || (r >= 0x202A && r <= 0x202E) || (r >= 0x2066 && r <= 0x2069) {
			kind = "a bidirectional control character"
		}
		return fmt.Sprintf("U+%04X %s (%s)", r, name, kind)
	case r >= 0x80 && r <= 0x9F:
		return fmt.Sprintf("U+%04X (a C1 control character)", r)
	case r < 0x20 || r == 0x7F:
		return fmt.Sprintf("U+%04X (a control character)", r)
	}
	return ""
}
