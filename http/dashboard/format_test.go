package dashboard

import "testing"

func TestOnlyHTTPURLsBecomeLinks(t *testing.T) {
	for in, want := range map[string]string{
		"https://replay.example.com/r/1": "https://replay.example.com/r/1",
		"http://127.0.0.1:8080/x?q=1":    "http://127.0.0.1:8080/x?q=1",
		"javascript:alert(1)":            "",
		"JavaScript:alert(1)":            "",
		" javascript:alert(1)":           "",
		"data:text/html,<script>":        "",
		"//evil.example.com/x":           "",
		"/relative/path":                 "",
		"vbscript:msgbox":                "",
		"https:///no-host":               "",
		"ftp://files.example.com/replay": "",
		"https://ok.example.com/a b":     "https://ok.example.com/a%20b",
		"https://x.example.com/?a=<b>":   "https://x.example.com/?a=<b>",
	} {
		if got := httpURL(in); got != want {
			t.Errorf("httpURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestChartScaleAndBars(t *testing.T) {
	for v, want := range map[int]int{0: 4, 3: 4, 5: 8, 9: 20, 21: 40, 41: 80, 81: 200, 1001: 2000} {
		if got := niceMax(v); got != want {
			t.Errorf("niceMax(%d) = %d, want %d", v, got, want)
		}
	}
	c := newChart("c", "t", "d", "Day", seriesOf("c", "a", "b"), []string{"x", "y"}, [][]int{{3, 1}, {0, 0}}, 1)
	if len(c.Bars) != 2 || c.Bars[0].Total != 4 || c.Bars[0].Parts[0].H+c.Bars[0].Parts[1].H != c.PlotBottom-c.PlotTop {
		t.Errorf("the tallest bar does not fill the plot: %+v", c.Bars[0])
	}
	if c.Bars[1].Parts[0].H != 0 || c.Bars[0].Parts[1].Fill != "url(#c-stripes)" {
		t.Errorf("bars %+v", c.Bars)
	}
}
