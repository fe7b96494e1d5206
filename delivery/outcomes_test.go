package delivery

import (
	"testing"
	"time"
)

// TestAttemptsHoursAndEventIndexAreRecorded: a receiver that fails twice
// then succeeds leaves, in the store, the delivery's three attempts (code,
// error, time), the hour's outcomes (two retrying, one succeeded), and the
// delivery found by the seq of the event that caused it; all of it
// survives a restart, and the filters of the attempt log select by status
// and event.
func TestAttemptsHoursAndEventIndexAreRecorded(t *testing.T) {
	dir := t.TempDir()
	w := openWorld(t, dir)
	rv := newReceiver(t, func(n int) (int, time.Duration) {
		if n <= 2 {
			return 503, 0
		}
		return 204, 0
	})
	wh := w.register(rv.URL, "contact.created")
	cfg, clock := clockedConfig()
	w.start(cfg)
	w.startSession(w.newAgent(), "a@example.com")
	waitAdvancing(t, clock, time.Second, "a succeeded delivery", deliveriesAre(t, w, wh.ID, 1, succeeded))
	check := func(when string) {
		t.Helper()
		d := deliveriesOf(t, w, wh.ID)[0]
		detail, err := w.m.Detail(wh.ID, d.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(detail.Log) != 3 {
			t.Fatalf("%s: attempt log %+v, want 3 attempts", when, detail.Log)
		}
		for i, want := range []int{503, 503, 204} {
			a := detail.Log[i]
			if a.StatusCode != want || (want == 503) != (a.Error != "") || a.StartedAt == 0 || a.DurationMS < 0 {
				t.Errorf("%s: attempt %d %+v, want status %d with an error only on failure", when, i+1, a, want)
			}
		}
		hours, err := w.m.Hourly(wh.ID, clock.Now(), 24)
		if err != nil {
			t.Fatal(err)
		}
		total := Outcomes{}
		for _, h := range hours {
			total.Succeeded += h.Succeeded
			total.Retrying += h.Retrying
			total.Failed += h.Failed
		}
		if total != (Outcomes{Succeeded: 1, Retrying: 2}) {
			t.Errorf("%s: outcomes over 24 h %+v, want 1 succeeded, 2 retrying", when, total)
		}
		if !hours[23].Hour.Equal(clock.Now().UTC().Truncate(time.Hour)) {
			t.Errorf("%s: the last hour is %v, want the current one", when, hours[23].Hour)
		}
		byEvent, err := w.m.DeliveriesOfEvent(wh.ID, d.Seq)
		if err != nil || len(byEvent) != 1 || byEvent[0].ID != d.ID {
			t.Errorf("%s: deliveries of seq %d: %+v, %v", when, d.Seq, byEvent, err)
		}
		if other, _ := w.m.DeliveriesOfEvent(wh.ID, d.Seq+1); len(other) != 0 {
			t.Errorf("%s: seq %d caused no delivery, got %+v", when, d.Seq+1, other)
		}
		for _, f := range []struct {
			f    Filter
			want int
		}{{Filter{Status: StatusSucceeded}, 1}, {Filter{Status: StatusFailed}, 0},
			{Filter{Event: "contact.created"}, 1}, {Filter{Event: "lead.hot"}, 0}} {
			ds, _, _, err := w.m.SearchDeliveries(wh.ID, 10, "", f.f)
			if err != nil || len(ds) != f.want {
				t.Errorf("%s: filter %+v gave %d deliveries (%v), want %d", when, f.f, len(ds), err, f.want)
			}
		}
	}
	check("live")
	w.close()
	w = openWorld(t, dir)
	w.start(cfg)
	check("after a restart")
}
