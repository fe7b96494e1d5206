package projections

import (
	"cmp"
	"maps"
	"slices"
	"time"
)

// The overview's counters and series, kept by apply as events arrive, so
// that the dashboard's overview reads a few dozen numbers whatever the
// account's size: nothing here is computed by walking sessions.
//
// Days are UTC days numbered from the Unix epoch, taken from the time of
// the event that counts (a session completed on day d counts on day d,
// whenever it started). The per-day records are kept for every day that
// had one: a day costs about 30 bytes, so ten years of an account are
// 110 KB. They are written into snapshots (snapshot_cut.go copies them at
// the cut); the active-agent count and each agent's meetings are derived
// again from agents and sessions when a snapshot is loaded.

// scoreBuckets splits intent scores 0..100 into tens; 90..100 is the last.
const scoreBuckets = 10

// dayStats is what happened in one account on one UTC day.
type dayStats struct {
	started, completed, abandoned, hot, meetings uint32
	// scores is the intent score of the sessions completed that day, by
	// tens (scoreBuckets).
	scores [scoreBuckets]uint32
}

// tenantStats are an account's counters.
type tenantStats struct {
	activeAgents int
	days         map[int32]*dayStats
}

func dayOf(sec int64) int32 { return int32(sec / 86400) }

func scoreBucket(score uint8) int { return min(int(score)/10, scoreBuckets-1) }

// day returns the record of day d, creating it.
func (st *tenantStats) day(d int32) *dayStats {
	if st.days == nil {
		st.days = map[int32]*dayStats{}
	}
	ds := st.days[d]
	if ds == nil {
		ds = &dayStats{}
		st.days[d] = ds
	}
	return ds
}

// The counting hooks: apply calls each once the event is known to apply.

func (st *tenantStats) sessionStarted(at int64) { st.day(dayOf(at)).started++ }

func (st *tenantStats) sessionEnded(to sessionStatus, score uint8, at int64) {
	ds := st.day(dayOf(at))
	if to == completed {
		ds.completed++
		ds.scores[scoreBucket(score)]++
	} else {
		ds.abandoned++
	}
}

func (st *tenantStats) leadHot(at int64) { st.day(dayOf(at)).hot++ }

func (st *tenantStats) meetingBooked(a *agent, at int64) {
	st.day(dayOf(at)).meetings++
	a.meetings++
}

// agentActive records a change of an agent's status (created counts as a
// change from inactive).
func (st *tenantStats) agentActive(was, is bool) {
	switch {
	case is && !was:
		st.activeAgents++
	case was && !is:
		st.activeAgents--
	}
}

// copyDays returns a copy of the per-day records, for a snapshot's cut.
func (st *tenantStats) copyDays() map[int32]dayStats {
	out := make(map[int32]dayStats, len(st.days))
	for d, ds := range st.days {
		out[d] = *ds
	}
	return out
}

func (w *snapWriter) days(days map[int32]dayStats) {
	w.len(len(days))
	for _, d := range slices.Sorted(maps.Keys(days)) {
		ds := days[d]
		w.int(int64(d))
		for _, v := range [...]uint32{ds.started, ds.completed, ds.abandoned, ds.hot, ds.meetings} {
			w.uint(uint64(v))
		}
		for _, v := range ds.scores {
			w.uint(uint64(v))
		}
	}
}

func (r *snapReader) days(st *tenantStats) {
	for i, n := 0, r.len(); i < n && r.err == nil; i++ {
		ds := st.day(int32(r.int()))
		for _, p := range [...]*uint32{&ds.started, &ds.completed, &ds.abandoned, &ds.hot, &ds.meetings} {
			*p = uint32(r.uint())
		}
		for j := range ds.scores {
			ds.scores[j] = uint32(r.uint())
		}
	}
}

// deriveStats sets what a snapshot does not hold but its agents and
// sessions say: the active agents and each agent's meetings.
func (s *State) deriveStats(t *tenant) {
	for _, a := range t.agents {
		t.stats.agentActive(false, a.active)
	}
	for n := range t.sessions.all() {
		if ses := s.sessions.num(n); ses.meeting != 0 {
			s.agentOf(ses).meetings++
		}
	}
}

// Overview is the dashboard's overview of one account at a moment.
type Overview struct {
	ActiveAgents       int
	InProgress         int
	Today, Week, Month Window // the UTC day so far; the last 7 and 30 days, today included
	// Days are the last 30 UTC days, oldest first, today last.
	Days []DayCount
	// Scores is the intent-score distribution of the sessions completed
	// in the last 30 days: Scores[i] counts scores i*10..i*10+9 (the last
	// bucket 90..100).
	Scores [scoreBuckets]int
	// TopAgents are the agents with the most meetings booked (ever), most
	// first, at most five; agents with none are left out.
	TopAgents []AgentMeetings
}

// Window is what happened over some days.
type Window struct {
	Started, Completed, Abandoned, HotLeads, Meetings int
}

// CompletionRate is completed / (completed + abandoned) in percent, or -1
// when no session ended.
func (w Window) CompletionRate() int {
	if w.Completed+w.Abandoned == 0 {
		return -1
	}
	return w.Completed * 100 / (w.Completed + w.Abandoned)
}

// DayCount is one day of the overview's series.
type DayCount struct {
	Day                  time.Time // 00:00 UTC
	Completed, Abandoned int
}

// AgentMeetings is an agent and its meetings booked.
type AgentMeetings struct {
	ID, Name string
	Meetings int
}

// topAgents is how many agents the overview ranks.
const topAgents = 5

// Overview returns account's overview as of now. Its cost is 30 day
// records and one pass over the account's agents (for the ranking), never
// its sessions.
func (p *Projections) Overview(account string, now time.Time) Overview {
	var o Overview
	today := dayOf(now.Unix())
	p.View(func(s *State) {
		t := s.tenants[account]
		if t == nil {
			return
		}
		o.ActiveAgents = t.stats.activeAgents
		o.InProgress = t.byStatus[inProgress].Len()
		o.Days = make([]DayCount, 30)
		for i := range 30 {
			d := today - 29 + int32(i)
			o.Days[i].Day = time.Unix(int64(d)*86400, 0).UTC()
			ds := t.stats.days[d]
			if ds == nil {
				continue
			}
			o.Days[i].Completed, o.Days[i].Abandoned = int(ds.completed), int(ds.abandoned)
			add := func(w *Window) {
				w.Started += int(ds.started)
				w.Completed += int(ds.completed)
				w.Abandoned += int(ds.abandoned)
				w.HotLeads += int(ds.hot)
				w.Meetings += int(ds.meetings)
			}
			add(&o.Month)
			if d > today-7 {
				add(&o.Week)
			}
			if d == today {
				add(&o.Today)
			}
			for j, v := range ds.scores {
				o.Scores[j] += int(v)
			}
		}
		for _, a := range t.agents {
			if a.meetings == 0 {
				continue
			}
			o.TopAgents = append(o.TopAgents, AgentMeetings{ID: FormatID(PrefixAgent, a.id), Name: a.name, Meetings: int(a.meetings)})
		}
	})
	slices.SortStableFunc(o.TopAgents, func(a, b AgentMeetings) int { return cmp.Compare(b.Meetings, a.Meetings) })
	o.TopAgents = o.TopAgents[:min(len(o.TopAgents), topAgents)]
	return o
}
