package http

import (
	"strconv"
	"strings"
	"testing"

	"demosvc/projections"
)

// /metrics has the store's figures, read from the store at each scrape:
// what a flush writes shows at once, and the data dir's size with it.
func TestMetricsShowTheStoresFigures(t *testing.T) {
	ts := newTestServer(t, nil)
	read := func(name string) float64 {
		t.Helper()
		v, err := strconv.ParseFloat(gauge(t, ts, name), 64)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return v
	}
	for _, name := range []string{"demosvc_store_compacted_bytes_total", "demosvc_store_compactions_total",
		"demosvc_store_compaction_debt_bytes", "demosvc_store_l0_tables", "demosvc_store_errors_total"} {
		read(name) // present, a number
	}
	flushed, tables := read("demosvc_store_flushed_bytes_total"), read("demosvc_store_l0_tables")
	for i := range 50 {
		if _, err := ts.state.CreateAccount(t.Context(), "cli", "acc"+strings.Repeat("x", i), projections.PlanPro, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := ts.store.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := read("demosvc_store_flushed_bytes_total"); got <= flushed {
		t.Errorf("flushed bytes %v after a flush, %v before", got, flushed)
	}
	if got := read("demosvc_store_l0_tables"); got <= tables {
		t.Errorf("%v level-0 tables after a flush, %v before", got, tables)
	}
	if got := read("demosvc_store_disk_bytes"); got <= 0 {
		t.Errorf("disk bytes %v", got)
	}
}
