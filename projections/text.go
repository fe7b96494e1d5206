package projections

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Names and other display strings (an agent's name, a contact's name and
// company, an account's name) are shown to people, in dashboards, e-mails
// and logs. They hold no control characters and no bidirectional
// formatting (which can make a name read as something else), do not begin
// or end with white space, and are not white space only. The API trims
// surrounding white space before checking (TrimText); an imported record
// must already be trimmed, as the service writes it.

// TrimText returns v without surrounding white space, unless that leaves
// nothing: an all-space value stays as it is, to be refused as blank.
func TrimText(v string) string {
	if t := strings.TrimSpace(v); t != "" {
		return t
	}
	return v
}

// checkText checks a required display string: valid UTF-8, min to max
// characters, no control or dangerous format character, trimmed and not
// blank.
func checkText(param, v string, min, max int) error {
	if !utf8.ValidString(v) {
		return ParamErrorf(EInvalid, param, "must be valid UTF-8")
	}
	n := utf8.RuneCountInString(v)
	if n < min || n > max {
		if min == 1 && n == 0 {
			return ParamErrorf(EInvalid, param, "must not be empty")
		}
		return ParamErrorf(EInvalid, param, "must be %d to %d characters, got %d", min, max, n)
	}
	if blank(v) {
		return ParamErrorf(EInvalid, param, "must not be blank (white space or invisible characters only)")
	}
	if strings.TrimSpace(v) != v {
		return ParamErrorf(EInvalid, param, "must not begin or end with white space")
	}
	return checkChars(param, v, false)
}

// blank reports whether v shows nothing: white space and format
// characters (Cf: zero-width space and joiners, word joiner, soft hyphen)
// only. A format character beside visible ones is kept: joiners belong in
// emoji sequences and several scripts.
func blank(v string) bool {
	for _, r := range v {
		if !unicode.IsSpace(r) && !unicode.Is(unicode.Cf, r) {
			return false
		}
	}
	return true
}

// checkOptionalText checks a display string that may be empty.
func checkOptionalText(param, v string, max int) error {
	if v == "" {
		return nil
	}
	return checkText(param, v, 1, max)
}

// checkChars refuses a control character (other than line breaks and
// tabs when multiline), a bidirectional formatting character (U+061C,
// U+200E–U+200F, U+202A–U+202E, U+2066–U+2069), a line or paragraph
// separator, and the invisible format characters that hide text (U+FEFF,
// U+FFF9–U+FFFB). Joiners (U+200C, U+200D) stay: scripts and emoji need
// them.
func checkChars(param, v string, multiline bool) error {
	for i, r := range v {
		switch {
		case multiline && (r == '\n' || r == '\t' || r == '\r'):
		case unicode.IsControl(r):
			return ParamErrorf(EInvalid, param, "must not contain control characters (U+%04X at byte %d)", r, i)
		case unicode.Is(unicode.Bidi_Control, r):
			return ParamErrorf(EInvalid, param, "must not contain bidirectional formatting characters (U+%04X at byte %d)", r, i)
		case r == '\u2028', r == '\u2029', r == '\uFEFF', r >= '\uFFF9' && r <= '\uFFFB':
			return ParamErrorf(EInvalid, param, "must not contain invisible format characters (U+%04X at byte %d)", r, i)
		}
	}
	return nil
}
