package projections

import (
	"errors"
	"net/mail"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Field limits.
const (
	maxNameChars    = 200
	maxURLBytes     = 2048
	maxPersonaBytes = 32 << 10
	MaxEmailBytes   = 254 // exported: the dashboard counts no longer e-mail as anyone's
	maxScore        = 100
	maxDuration     = 86400
)

// checkURL checks an absolute http(s) URL without credentials.
func checkURL(param, v string) error {
	if v == "" {
		return ParamErrorf(EInvalid, param, "must not be empty")
	}
	if len(v) > maxURLBytes {
		return ParamErrorf(EInvalid, param, "must be at most %d bytes", maxURLBytes)
	}
	if !utf8.ValidString(v) {
		return ParamErrorf(EInvalid, param, "must be valid UTF-8")
	}
	// url.Parse takes a space, and a webhook's request line would carry it
	// as it is: a request every receiver refuses.
	if strings.IndexFunc(v, func(r rune) bool { return r == ' ' || unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		return ParamErrorf(EInvalid, param, "must be a URL without spaces or control characters (percent-encode them: %%20 for a space)")
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return ParamErrorf(EInvalid, param, "must be an absolute http or https URL")
	}
	if u.User != nil {
		return ParamErrorf(EInvalid, param, "must not carry credentials")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return ParamErrorf(EInvalid, param, "must have a port from 1 to 65535")
		}
	}
	return nil
}

// checkEmail checks a bare e-mail address (no display name).
func checkEmail(param, v string) error {
	if v == "" {
		return ParamErrorf(EInvalid, param, "must not be empty")
	}
	if len(v) > MaxEmailBytes || !utf8.ValidString(v) {
		return ParamErrorf(EInvalid, param, "must be an e-mail address of at most %d bytes", MaxEmailBytes)
	}
	if !plainEmail(v) {
		// net/mail takes any non-ASCII character: the ones a display
		// string may not hold, and format characters (a soft hyphen,
		// a zero-width space), which no address needs, are refused here.
		if err := checkChars(param, v, false); err != nil {
			return err
		}
		for i, r := range v {
			if unicode.Is(unicode.Cf, r) {
				return ParamErrorf(EInvalid, param, "must not contain invisible format characters (U+%04X at byte %d)", r, i)
			}
		}
		a, err := mail.ParseAddress(v)
		if err != nil || a.Address != v || a.Name != "" {
			return ParamErrorf(EInvalid, param, "must be an e-mail address such as pat@example.com")
		}
	}
	if !strings.Contains(v[strings.LastIndexByte(v, '@')+1:], ".") {
		return ParamErrorf(EInvalid, param, "must be an e-mail address such as pat@example.com")
	}
	return nil
}

// plainEmail reports whether v is an address net/mail takes as it is
// without asking it: two dot-atoms of RFC 5322's atext joined by one '@',
// which is nearly every address sent. Anything else (quoted local parts,
// domain literals, comments, spaces, non-ASCII) goes through
// mail.ParseAddress, whose parse was 5 allocations on every session with
// a new contact; validate_test.go holds the two verdicts equal.
func plainEmail(v string) bool {
	at := strings.IndexByte(v, '@')
	return at > 0 && dotAtom(v[:at]) && dotAtom(v[at+1:])
}

// dotAtom reports whether s is atext separated by single dots.
func dotAtom(s string) bool {
	if s == "" || s[0] == '.' || s[len(s)-1] == '.' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '.' {
			if s[i-1] == '.' {
				return false
			}
			continue
		}
		if c >= 0x80 || !atext[c] {
			return false
		}
	}
	return true
}

// atext marks RFC 5322's atext characters: letters, digits and
// !#$%&'*+-/=?^_`{|}~.
var atext = func() (t [128]bool) {
	for c := byte('a'); c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for c := byte('0'); c <= '9'; c++ {
		t[c] = true
	}
	for _, c := range []byte("!#$%&'*+-/=?^_`{|}~") {
		t[c] = true
	}
	return t
}()

func checkRange(param string, v *int, max int) error {
	if v != nil && (*v < 0 || *v > max) {
		return ParamErrorf(EInvalid, param, "must be an integer from 0 to %d", max)
	}
	return nil
}

func checkSignals(param string, s *Signals) error {
	if s == nil {
		return nil
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"interest", s.Interest}, {"objections", s.Objections}, {"buying_signals", s.BuyingSignals}} {
		v := f.v
		if err := checkRange(param+"."+f.name, &v, maxScore); err != nil {
			return err
		}
	}
	return nil
}

// checkTime parses an RFC 3339 time and returns it in UTC, whole seconds.
// Go's parser takes offsets of 24 hours or more and 60 minutes, which RFC
// 3339 does not, and a time whose year in UTC is past 9999 or before 0
// would be written with five digits or a sign: neither the API's
// timestamp format nor one the log's import takes back.
func checkTime(param, v string) (string, error) {
	t, err := time.Parse(time.RFC3339, v)
	if err == nil && !strings.HasSuffix(v, "Z") && !strings.HasSuffix(v, "z") {
		off := v[len(v)-6:] // +hh:mm, as the parse has checked
		if off[1:3] > "23" || off[4:6] > "59" {
			err = errors.New("offset out of range")
		}
	}
	if err != nil {
		return "", ParamErrorf(EInvalid, param, "must be an RFC 3339 timestamp such as 2026-11-21T15:00:00Z")
	}
	if y := t.UTC().Year(); y < 0 || y > 9999 {
		return "", ParamErrorf(EInvalid, param, "must be between 0000-01-01T00:00:00Z and 9999-12-31T23:59:59Z")
	}
	return t.UTC().Truncate(time.Second).Format(timeFormat), nil
}
