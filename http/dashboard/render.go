package dashboard

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"time"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// pages holds one template set per page, each the layout plus the page.
type pages struct {
	byName map[string]*template.Template
}

var funcs = template.FuncMap{
	// when renders an API timestamp (or time) as people read it, in UTC.
	"when": func(v any) string {
		var s string
		switch t := v.(type) {
		case string:
			s = t
		case time.Time:
			return t.UTC().Format("2006-01-02 15:04 UTC")
		case fmt.Stringer: // projections.Timestamp renders as RFC 3339
			s = t.String()
		}
		if p, err := time.Parse(time.RFC3339, s); err == nil {
			return p.UTC().Format("2006-01-02 15:04 UTC")
		}
		return s
	},
	"deref": func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	},
}

func loadPages() *pages {
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		panic(err)
	}
	p := &pages{byName: map[string]*template.Template{}}
	// Files named _*.html are partials every page may use.
	for _, n := range names {
		base := strings.TrimPrefix(n, "templates/")
		if base == "layout.html" || strings.HasPrefix(base, "_") {
			continue
		}
		t := template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/_*.html", n))
		p.byName[strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")] = t
	}
	return p
}

// view is what every page is rendered with.
type view struct {
	Title   string
	Section string // the navigation entry to mark current
	Caller  *caller
	Error   string            // a message above the page's content
	Fields  map[string]string // validation errors by form field
	Data    any
}

// render writes page name with status. Rendering goes to a buffer first,
// so a template error is a clean 500, never half a page.
func (db *Dashboard) render(w http.ResponseWriter, r *http.Request, status int, name string, v view) {
	if v.Caller == nil {
		v.Caller = callerOf(r)
	}
	t := db.pages.byName[name]
	var buf bytes.Buffer
	if t == nil {
		db.deps.Logger.Error("dashboard: no template", "page", name)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	if err := t.Execute(&buf, v); err != nil {
		db.deps.Logger.Error("dashboard: rendering", "page", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// errorPage renders a page that says what went wrong, with status.
func (db *Dashboard) errorPage(w http.ResponseWriter, r *http.Request, status int, msg string) {
	c := callerOf(r)
	if c == nil {
		c, _ = db.caller(r)
	}
	db.render(w, r, status, "error", view{Title: http.StatusText(status), Caller: c, Data: struct {
		Status  int
		Message string
	}{status, msg}})
}

// assetHandler serves the embedded CSS and script, cacheable for an hour.
func assetHandler() http.Handler {
	files := http.FileServerFS(assetFS)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		files.ServeHTTP(w, r)
	})
}

func urlQueryEscape(s string) string { return url.QueryEscape(s) }

// safeNext returns a local path to go back to after sign-in: only a path
// on this site, never another origin ("//host", "/\host"). A backslash
// is refused anywhere, written or %-escaped: browsers read it as a slash,
// and http.Redirect cleans the path first, so "/./\host" would leave as
// "/\host".
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.ContainsRune(next, '\\') {
		return "/"
	}
	if u, err := url.Parse(next); err != nil || u.Host != "" || u.Scheme != "" || strings.ContainsRune(u.Path, '\\') {
		return "/"
	}
	return next
}
