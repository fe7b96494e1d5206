// Package projtest is test support for the packages that test or benchmark
// against the projections: a synthetic log to load. Only tests import it;
// the binary does not contain it.
package projtest

import (
	"fmt"
	"os"
	"strconv"

	"demosvc/eventlog"
	"demosvc/projections"
)

// BenchSessions is the number of sessions the large benchmarks load:
// 1,000,000, or DEMOSVC_BENCH_SESSIONS (CI runs every benchmark once with a
// small figure).
func BenchSessions() int {
	if n, err := strconv.Atoi(os.Getenv("DEMOSVC_BENCH_SESSIONS")); err == nil && n > 0 {
		return n
	}
	return 1_000_000
}

// BenchShape is the benchmarks' synthetic log of n sessions: 100 agents
// and a contact for every ten sessions.
func BenchShape(n int) SyntheticShape {
	return SyntheticShape{Sessions: n, Agents: 100, Contacts: max(1, n/10)}
}

// SyntheticShape is the shape of a synthetic log for benchmarks and load
// tests: one account with Agents agents and Contacts contacts, and Sessions
// sessions spread over them, each progressed once; of them 50% end
// completed, 30% abandoned, 20% stay in progress.
type SyntheticShape struct {
	Sessions, Agents, Contacts int
}

// Synthetic appends a synthetic account's history to log, in
// transactions of many events each, and returns the account id and the
// ids of its sessions in start order. It writes through the log like any
// writer, so the records are chained and durable.
func Synthetic(log *eventlog.Log, shape SyntheticShape) (account string, sessions []string, err error) {
	ids := log.IDs()
	account = ids.New("acc_")
	var pending []eventlog.Event
	add := func(payload any) {
		pending = append(pending, eventlog.Event{Account: account, Actor: "cli", Payload: payload})
	}
	flush := func() error {
		if len(pending) == 0 {
			return nil
		}
		tx, err := log.Begin()
		if err != nil {
			return err
		}
		if _, err := tx.Add(pending); err != nil {
			tx.Abort()
			return err
		}
		pending = pending[:0]
		return tx.Commit()
	}
	add(&projections.AccountCreated{AccountID: account, Name: "Synthetic", Plan: projections.PlanEnterprise})
	agents := make([]string, shape.Agents)
	for i := range agents {
		agents[i] = ids.New(projections.PrefixAgent)
		add(&projections.AgentCreated{AgentID: agents[i], Name: fmt.Sprintf("Agent %d", i), SandboxURL: "https://sandbox.example.com/a", Status: projections.AgentActive})
	}
	contacts := make([]string, shape.Contacts)
	sessions = make([]string, shape.Sessions)
	for i := range sessions {
		sid := ids.New(projections.PrefixSession)
		sessions[i] = sid
		agent := agents[i%len(agents)]
		c := i % len(contacts)
		if contacts[c] == "" {
			contacts[c] = ids.New(projections.PrefixContact)
			add(&projections.ContactCreated{ContactID: contacts[c], SessionID: sid, AgentID: agent,
				Contact: projections.Contact{Name: fmt.Sprintf("Prospect %d", c), Email: fmt.Sprintf("p%d@example.com", c), Company: "Example"}})
		}
		add(&projections.SessionStarted{SessionID: sid, AgentID: agent, ContactID: contacts[c]})
		score, dur := i%101, i%3600
		add(&projections.SessionProgressed{SessionID: sid, IntentScore: &score, DurationSeconds: &dur})
		switch i % 10 {
		case 0, 1, 2, 3, 4:
			add(&projections.SessionCompleted{SessionID: sid, IntentScore: score, Signals: projections.Signals{Interest: score, BuyingSignals: score / 2},
				DurationSeconds: dur, ReplayURL: "https://replay.example.com/" + sid})
		case 5, 6, 7:
			add(&projections.SessionAbandoned{SessionID: sid, IntentScore: &score, DurationSeconds: &dur})
		}
		if len(pending) >= 20000 {
			if err := flush(); err != nil {
				return "", nil, err
			}
		}
	}
	return account, sessions, flush()
}
