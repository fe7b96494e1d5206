package projections

import (
	"math/rand/v2"
	"net/mail"
	"strings"
	"testing"
)

// checkEmail's plain path gives net/mail's verdict: on addresses picked to
// sit at its edges and on random strings of the characters that matter.
func TestCheckEmailAgreesWithNetMail(t *testing.T) {
	byNetMail := func(v string) bool {
		a, err := mail.ParseAddress(v)
		return err == nil && a.Address == v && a.Name == "" && strings.Contains(v[strings.LastIndexByte(v, '@')+1:], ".")
	}
	agree := func(v string) {
		t.Helper()
		if got, want := checkEmail("email", v) == nil, byNetMail(v); got != want {
			t.Fatalf("checkEmail(%q) accepts: %v, net/mail: %v", v, got, want)
		}
	}
	for _, v := range []string{
		"pat@example.com", "p.a.t@ex-ample.co.uk", "a+tag@x.io", "o'brien@x.org", "{}|~`!#$%&*/=?^_-@x.y",
		".pat@x.com", "pat.@x.com", "p..at@x.com", "pat@.x.com", "pat@x.com.", "pat@x..com", "pat@x",
		"@x.com", "pat@", "pat", "pat@@x.com", "pat@x@y.com", `"pat"@x.com`, `"p at"@x.com`, "pat@[1.2.3.4]",
		"pat @x.com", " pat@x.com", "pat@x.com ", "Pat <pat@x.com>", "pat(c)@x.com", "pät@x.com", "pat@exämple.com",
		"pat@x.com\t", "pat\\@x.com", "p,at@x.com", "p;at@x.com", "pat@x_y.com", "PAT@X.COM",
	} {
		agree(v)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	const chars = "ab.@.@\"() []\\,;:<>é\t-_+'"
	for range 200_000 {
		var b strings.Builder
		for range 1 + rng.IntN(12) {
			if rng.IntN(3) == 0 {
				b.WriteByte("pat"[rng.IntN(3)])
			} else {
				r := []rune(chars)
				b.WriteRune(r[rng.IntN(len(r))])
			}
		}
		agree(b.String())
	}
}

// An address net/mail takes may still hold characters no address needs
// and a display could be fooled by: C1 controls, bidirectional overrides,
// line separators, a byte order mark, format characters.
func TestCheckEmailRefusesInvisibleAndControlCharacters(t *testing.T) {
	for _, v := range []string{"a\u009b@b.test", "a\u0085@b.test", "a\u202e@b.test", "a\u2028@b.test",
		"a\ufeff@b.test", "a\u00ad@b.test", "a\u200b@b.test", "pat@exa\u200dmple.com"} {
		if err := checkEmail("email", v); err == nil {
			t.Errorf("checkEmail(%q) accepts it", v)
		}
	}
	for _, v := range []string{"pät@x.com", "pat@exämple.com", "用户@例子.广告"} {
		if err := checkEmail("email", v); err != nil {
			t.Errorf("checkEmail(%q) = %v, want it accepted", v, err)
		}
	}
}
