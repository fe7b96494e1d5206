package projections

import (
	"context"
	"sync"
	"testing"
	"time"

	"demosvc/eventlog"
)

type eventlogJSON = eventlog.JSONRecord

// settableClock is a log clock the test moves by days.
type settableClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *settableClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Second)
	return c.t
}

func (c *settableClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func ip(v int) *int { return &v }

// TestOverviewCountersFollowTheEvents drives sessions over several days and
// checks every figure of the overview, live, after a restart from a
// snapshot and after a full replay: the counters are kept by apply and
// stored in snapshots, not derived from anything else.
func TestOverviewCountersFollowTheEvents(t *testing.T) {
	ctx := context.Background()
	day0 := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	clock := &settableClock{t: day0}
	dir := t.TempDir()
	e := openEnvClock(t, dir, DefaultOptions, clock.now)
	pr := e.account("acc")
	other := e.account("other")
	a1 := e.agent(pr, "one")
	a2 := e.agent(pr, "two")
	idle := e.agent(pr, "idle")
	e.agent(other, "elsewhere")
	off := AgentInactive
	if _, err := e.p.UpdateAgent(ctx, pr, idle.ID, AgentPatch{Status: &off}); err != nil {
		t.Fatal(err)
	}
	complete := func(id string, score int) {
		t.Helper()
		url := "https://replay.example.com/x"
		if _, err := e.p.CompleteSession(ctx, pr, id, Figures{IntentScore: ip(score), Signals: &Signals{}, DurationSeconds: ip(60), ReplayURL: &url}, nil); err != nil {
			t.Fatal(err)
		}
	}
	meet := func(id string) {
		t.Helper()
		if _, err := e.p.BookMeeting(ctx, pr, id, MeetingInput{ScheduledAt: "2026-12-01T10:00:00Z", CalendarLink: "https://cal.example.com/m"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Day 0 (29 days before "now"): one completed at 95 (hot), meeting.
	s := e.session(pr, a1.ID, "a@example.com")
	complete(s.ID, 95)
	meet(s.ID)
	// Day 25: one abandoned, one completed at 42 with a meeting by agent two.
	clock.set(day0.Add(25 * 24 * time.Hour))
	s = e.session(pr, a1.ID, "b@example.com")
	if _, err := e.p.AbandonSession(ctx, pr, s.ID, Figures{}, nil); err != nil {
		t.Fatal(err)
	}
	s = e.session(pr, a2.ID, "c@example.com")
	complete(s.ID, 42)
	meet(s.ID)
	// Day 29 ("today"): one in progress, hot through progress; one
	// completed at 100 with a meeting by agent two.
	clock.set(day0.Add(29 * 24 * time.Hour))
	s = e.session(pr, a2.ID, "d@example.com")
	if _, err := e.p.ProgressSession(ctx, pr, s.ID, Figures{IntentScore: ip(85)}, nil); err != nil {
		t.Fatal(err)
	}
	s = e.session(pr, a2.ID, "e@example.com")
	complete(s.ID, 100)
	meet(s.ID)
	// Another account's session counts only there.
	agO := e.agent(other, "o2")
	e.session(other, agO.ID, "z@example.com")
	now := day0.Add(29*24*time.Hour + 12*time.Hour)

	check := func(name string, o Overview) {
		t.Helper()
		if o.ActiveAgents != 2 {
			t.Errorf("%s: active agents %d, want 2", name, o.ActiveAgents)
		}
		if o.InProgress != 1 {
			t.Errorf("%s: in progress %d, want 1", name, o.InProgress)
		}
		wantWin := map[string][2]Window{
			"today": {o.Today, {Started: 2, Completed: 1, HotLeads: 2, Meetings: 1}},
			"week":  {o.Week, {Started: 4, Completed: 2, Abandoned: 1, HotLeads: 2, Meetings: 2}},
			"month": {o.Month, {Started: 5, Completed: 3, Abandoned: 1, HotLeads: 3, Meetings: 3}},
		}
		for w, gw := range wantWin {
			if gw[0] != gw[1] {
				t.Errorf("%s: %s %+v, want %+v", name, w, gw[0], gw[1])
			}
		}
		if r := o.Month.CompletionRate(); r != 75 {
			t.Errorf("%s: completion rate %d, want 75", name, r)
		}
		if len(o.Days) != 30 || o.Days[0].Completed != 1 || o.Days[25].Abandoned != 1 || o.Days[25].Completed != 1 || o.Days[29].Completed != 1 {
			t.Errorf("%s: days %+v", name, o.Days)
		}
		if !o.Days[29].Day.Equal(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)) {
			t.Errorf("%s: last day %v", name, o.Days[29].Day)
		}
		if o.Scores != [scoreBuckets]int{4: 1, 9: 2} {
			t.Errorf("%s: scores %v", name, o.Scores)
		}
		if len(o.TopAgents) != 2 || o.TopAgents[0].Name != "two" || o.TopAgents[0].Meetings != 2 || o.TopAgents[1].Meetings != 1 {
			t.Errorf("%s: top agents %+v", name, o.TopAgents)
		}
	}
	check("live", e.p.Overview(pr.Account.ID, now))
	if o := e.p.Overview(other.Account.ID, now); o.InProgress != 1 || o.Month.Started != 1 || o.ActiveAgents != 2 {
		t.Errorf("the other account: %+v", o)
	}
	// A day later the oldest day leaves the 30-day window.
	if o := e.p.Overview(pr.Account.ID, now.Add(24*time.Hour)); o.Month.Completed != 2 || o.Today.Started != 0 {
		t.Errorf("a day later: month %+v today %+v", o.Month, o.Today)
	}

	if _, err := e.p.SaveSnapshot(); err != nil {
		t.Fatal(err)
	}
	e.close()
	e = openEnvClock(t, dir, DefaultOptions, clock.now)
	if e.p.LoadInfo().SnapshotSeq == 0 {
		t.Fatalf("restart did not use the snapshot: %s", e.p.LoadInfo().Ignored)
	}
	check("from the snapshot", e.p.Overview(pr.Account.ID, now))
	full, err := ReplayLog(e.log, nil)
	if err != nil {
		t.Fatal(err)
	}
	p2 := &Projections{state: full, log: e.log}
	check("replayed", p2.Overview(pr.Account.ID, now))
}

// TestSessionTimelineAndAccountEvents checks the seq indexes: a session's
// timeline is its own records (and the contact it created), an account's
// events are its records only.
func TestSessionTimelineAndAccountEvents(t *testing.T) {
	ctx := context.Background()
	e := openEnv(t, "", DefaultOptions)
	pr := e.account("acc")
	other := e.account("other")
	ag := e.agent(pr, "one")
	agO := e.agent(other, "o")
	first := e.session(pr, ag.ID, "a@example.com")
	e.session(other, agO.ID, "b@example.com")
	second := e.session(pr, ag.ID, "a@example.com") // the same contact: not created again
	if _, err := e.p.ProgressSession(ctx, pr, first.ID, Figures{IntentScore: ip(90)}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.p.AbandonSession(ctx, pr, first.ID, Figures{}, nil); err != nil {
		t.Fatal(err)
	}
	types := func(id string) []string {
		t.Helper()
		seqs, err := e.p.SessionTimeline(pr.Account.ID, id)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		if err := e.p.Records(pr.Account.ID, seqs, func(r *eventlogJSON) bool { out = append(out, r.Type); return true }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got, want := types(first.ID), []string{TypeContactCreated, TypeSessionStarted, TypeSessionProgressed, TypeLeadHot, TypeSessionAbandoned}; !equal(got, want) {
		t.Errorf("first timeline %v, want %v", got, want)
	}
	if got, want := types(second.ID), []string{TypeSessionStarted}; !equal(got, want) {
		t.Errorf("second timeline %v, want %v", got, want)
	}
	if _, err := e.p.SessionTimeline(other.Account.ID, first.ID); err == nil {
		t.Error("another account's session has a timeline")
	}
	seqs := e.p.AccountEventSeqs(pr.Account.ID, 0, 1000)
	n := 0
	if err := e.p.Records(other.Account.ID, seqs, func(*eventlogJSON) bool { n++; return true }); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("records of one account's seqs read as another's: %d", n)
	}
	var accounts []string
	for i := len(seqs) - 1; i >= 0; i-- {
		e.p.Records(pr.Account.ID, seqs[i:i+1], func(r *eventlogJSON) bool { accounts = append(accounts, r.AccountID); return true })
	}
	if len(accounts) != len(seqs) || len(seqs) < 8 {
		t.Fatalf("%d records of %d seqs", len(accounts), len(seqs))
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] >= seqs[i-1] {
			t.Fatalf("account events not newest first: %v", seqs)
		}
	}
	if got := e.p.AccountEventSeqs(pr.Account.ID, seqs[2], 2); !equal(got, seqs[3:5]) {
		t.Errorf("the page before %d is %v, want %v", seqs[2], got, seqs[3:5])
	}
}

func equal[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
