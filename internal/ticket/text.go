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
	// Invisible or blank-looking characters that render as nothing (or
	// as a space) in most fonts, so that two titles look alike.
	0x00AD:  "SOFT HYPHEN",
	0x034F:  "COMBINING GRAPHEME JOINER",
	0x115F:  "HANGUL CHOSEONG FILLER",
	0x1160:  "HANGUL JUNGSEONG FILLER",
	0x17B4:  "KHMER VOWEL INHERENT AQ",
	0x17B5:  "KHMER VOWEL INHERENT AA",
	0x180E:  "MONGOLIAN VOWEL SEPARATOR",
	0x2061:  "FUNCTION APPLICATION",
	0x2062:  "INVISIBLE TIMES",
	0x2063:  "INVISIBLE SEPARATOR",
	0x2064:  "INVISIBLE PLUS",
	0x206A:  "INHIBIT SYMMETRIC SWAPPING",
	0x206B:  "ACTIVATE SYMMETRIC SWAPPING",
	0x206C:  "INHIBIT ARABIC FORM SHAPING",
	0x206D:  "ACTIVATE ARABIC FORM SHAPING",
	0x206E:  "NATIONAL DIGIT SHAPES",
	0x206F:  "NOMINAL DIGIT SHAPES",
	0x3164:  "HANGUL FILLER",
	0xFFA0:  "HALFWIDTH HANGUL FILLER",
	0xFFF9:  "INTERLINEAR ANNOTATION ANCHOR",
	0xFFFA:  "INTERLINEAR ANNOTATION SEPARATOR",
	0xFFFB:  "INTERLINEAR ANNOTATION TERMINATOR",
	0x1D173: "MUSICAL SYMBOL BEGIN BEAM",
	0x1D174: "MUSICAL SYMBOL END BEAM",
	0x1D175: "MUSICAL SYMBOL BEGIN TIE",
	0x1D176: "MUSICAL SYMBOL END TIE",
	0x1D177: "MUSICAL SYMBOL BEGIN SLUR",
	0x1D178: "MUSICAL SYMBOL END SLUR",
	0x1D179: "MUSICAL SYMBOL BEGIN PHRASE",
	0x1D17A: "MUSICAL SYMBOL END PHRASE",
}

// RefusedRune says why r may not appear in a ticket title, naming it
// (`U+202E RIGHT-TO-LEFT OVERRIDE`); "" when it may. Refused: control
// characters (C0, DEL, C1), the bidirectional, zero-width and invisible
// format characters of spoofing, and the tag characters (U+E0000–E007F,
// invisible letters that can carry hidden text).
func RefusedRune(r rune) string {
	switch name, ok := spoofing[r]; {
	case ok:
		kind := "an invisible formatting character"
		if r == 0x061C || (r >= 0x200E && r <= 0x200F) || (r >= 0x202A && r <= 0x202E) || (r >= 0x2066 && r <= 0x2069) {
			kind = "a bidirectional control character"
		}
		return fmt.Sprintf("U+%04X %s (%s)", r, name, kind)
	case r >= 0xE0000 && r <= 0xE007F:
		return fmt.Sprintf("U+%04X (a tag character: invisible)", r)
	case r >= 0x80 && r <= 0x9F:
		return fmt.Sprintf("U+%04X (a C1 control character)", r)
	case r < 0x20 || r == 0x7F:
		return fmt.Sprintf("U+%04X (a control character)", r)
	}
	return ""
}
