package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Template functions of Dashboard II. Links to what a client reported
// (replay URLs, calendar links) are made only of http(s) URLs: anything
// else (javascript:, data:, a relative path) is shown as text, never as a
// link, whatever html/template's own URL filter would make of it.

func init() {
	funcs["httpURL"] = httpURL
	funcs["duration"] = func(sec int) string { return (time.Duration(sec) * time.Second).String() }
	funcs["ms"] = func(ms int64) string {
		if ms == 0 {
			return ""
		}
		return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05 UTC")
	}
	funcs["tookMs"] = func(ms int64) string { return fmt.Sprintf("%d ms", ms) }
	funcs["join"] = strings.Join
	funcs["pct"] = percent
	funcs["timeOf"] = func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") }
}

// httpURL returns s when it is an absolute http or https URL with a host,
// else "".
func httpURL(s string) string {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return ""
	}
	return u.String()
}

// contextWithTimeout is r's context, ending after d at the latest.
func contextWithTimeout(r *http.Request, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), d)
}

// percent is n of of in percent, one decimal; "—" when of is 0.
func percent(n, of int) string {
	if of == 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f%%", float64(n)*100/float64(of))
}

func init() {
	funcs["mul1000"] = func(sec int64) int64 { return sec * 1000 }
}
