package projections

import (
	"encoding/hex"
	"fmt"
	"time"

	"demosvc/eventlog"
)

// Reads of the log by the dashboard: a session's timeline and an account's
// audit log. Both find their records through the seq indexes apply keeps
// (a session's events, an account's events), so the work is the records
// shown, never a scan of the log; the records themselves are read from the
// log outside the state's lock.

// maxTimeline bounds the events a session's timeline shows: the first one
// (its start) and the latest ones.
const maxTimeline = 200

// SessionTimeline returns the seqs of the records of one session of
// account, oldest first: the contact.created its start caused (a contact
// is created by its first session), session.started, and every later event
// of the session (at most maxTimeline in all: the start and the latest).
func (p *Projections) SessionTimeline(account, sessionID string) ([]uint64, error) {
	return oneIn(p, sessionKind, account, sessionID, func(s *State, ses *session) []uint64 {
		ev := s.eventsOf(ses)
		out := make([]uint64, 0, 2+min(len(ev), maxTimeline))
		if c := s.contactOf(ses); c.first == ses.num+1 && c.seq < ses.seq {
			out = append(out, c.seq)
		}
		out = append(out, ses.seq)
		if len(ev) > maxTimeline {
			ev = ev[len(ev)-maxTimeline:]
		}
		return append(out, ev...)
	})
}

// AccountEventSeqs returns at most max seqs of account's records below
// before (0: from the newest), newest first.
func (p *Projections) AccountEventSeqs(account string, before uint64, max int) []uint64 {
	var out []uint64
	p.View(func(s *State) {
		if t := s.tenants[account]; t != nil {
			out = t.events.seqsBefore(before, max)
		}
	})
	return out
}

// AccountEventsAfter returns at most max seqs of account's records above
// after, oldest first: an export's next batch.
func (p *Projections) AccountEventsAfter(account string, after uint64, max int) []uint64 {
	var out []uint64
	p.View(func(s *State) {
		t := s.tenants[account]
		if t == nil {
			return
		}
		for i := t.events.search(after + 1); i < t.events.len() && len(out) < max; i++ {
			out = append(out, t.events.at(i))
		}
	})
	return out
}

// AccountSeqsBetween appends to dst at most max seqs of account's records
// above after and at most to, oldest first, and says how many there are
// in all: a delivery loop's next records, and its lag.
func (p *Projections) AccountSeqsBetween(dst []uint64, account string, after, to uint64, max int) ([]uint64, int) {
	total := 0
	p.View(func(s *State) {
		t := s.tenants[account]
		if t == nil {
			return
		}
		i, j := t.events.search(after+1), t.events.search(to+1)
		total = j - i
		for ; i < j && max > 0; i, max = i+1, max-1 {
			dst = append(dst, t.events.at(i))
		}
	})
	return dst, total
}

// AccountsWithRecords appends to has, for each of accounts, whether it has
// a record above after and at most to.
func (p *Projections) AccountsWithRecords(has []bool, accounts []string, after, to uint64) []bool {
	p.View(func(s *State) {
		for _, acc := range accounts {
			found := false
			if t := s.tenants[acc]; t != nil {
				i := t.events.search(after + 1)
				found = i < t.events.len() && t.events.at(i) <= to
			}
			has = append(has, found)
		}
	})
	return has
}

// AccountSeqAt returns the seq of account's last record at or before at,
// found by a binary search over its records' times (about 20 reads for
// millions of records); 0 when there is none.
func (p *Projections) AccountSeqAt(account string, at time.Time) (uint64, error) {
	var n int
	p.View(func(s *State) {
		if t := s.tenants[account]; t != nil {
			n = t.events.len()
		}
	})
	// Each step takes the read lock again, so that the writer is not kept
	// out while the log is read. Records are only ever added, so the
	// search stands, unless a failed commit's rebuild found the log
	// unreadable and left an empty state in between.
	var gone error
	seqAt := func(i int) (seq uint64) {
		p.View(func(s *State) {
			if t := s.tenants[account]; t != nil && i < t.events.len() {
				seq = t.events.at(i)
			} else {
				gone = fmt.Errorf("%w: the state was rebuilt during a search of the account's records", eventlog.ErrUnavailable)
			}
		})
		return seq
	}
	lo, hi := 0, n // the first record after at
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		var after bool
		seq := seqAt(m)
		if gone != nil {
			return 0, gone
		}
		if err := p.log.Read(seq, seq, func(rec *eventlog.Record) error {
			after = rec.Time.After(at)
			return nil
		}); err != nil {
			return 0, err
		}
		if after {
			hi = m
		} else {
			lo = m + 1
		}
	}
	if lo == 0 {
		return 0, nil
	}
	seq := seqAt(lo - 1)
	return seq, gone
}

// Records calls fn with each record of seqs (in the order given) of
// account, as `demosvc log` shows it (sealed values as "[sealed]"), with
// its hash, until fn returns false. A record of another account is never
// passed to fn. Seqs close together are read with one iterator.
func (p *Projections) Records(account string, seqs []uint64, fn func(*eventlog.JSONRecord) bool) error {
	reg := p.log.Registry()
	stop := false
	emit := func(rec *eventlog.Record) error {
		if stop || rec.Account != account {
			return nil
		}
		j, err := reg.ToJSON(rec, false)
		if err != nil {
			return err
		}
		j.Hash = hex.EncodeToString(rec.Hash[:])
		stop = !fn(j)
		return nil
	}
	for i := 0; i < len(seqs) && !stop; {
		// A run of seqs that are increasing and dense is one range read.
		j := i + 1
		for j < len(seqs) && seqs[j] > seqs[j-1] && seqs[j]-seqs[i] < 4*uint64(j-i+1) {
			j++
		}
		lo, hi := seqs[i], seqs[j-1]
		want := map[uint64]bool{}
		for _, s := range seqs[i:j] {
			want[s] = true
		}
		if err := p.log.Read(lo, hi, func(rec *eventlog.Record) error {
			if !want[rec.Seq] {
				return nil
			}
			return emit(rec)
		}); err != nil {
			return err
		}
		i = j
	}
	return nil
}
