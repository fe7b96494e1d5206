package projections

import (
	"crypto/sha256"
	"maps"
	"slices"

	"demosvc/eventlog"
)

// The users' block of a snapshot, written after everything else: the
// creator of each key (in key order), the users, the outstanding setup
// links and the live sessions. Maps are written in sorted order, so the
// same state always gives the same bytes.

func (s *State) encodeUsers(w *snapWriter) {
	for _, k := range s.keyOrder {
		w.str(k.CreatedBy)
	}
	u := &s.users
	w.len(len(u.order))
	for _, r := range u.order {
		w.str(r.ID)
		w.str(r.AccountID)
		w.str(r.Email)
		w.str(r.Role)
		w.time(r.CreatedAt)
		w.bool(r.HasPassword)
		w.bool(r.Disabled)
		w.bytes(r.password)
	}
	w.len(len(u.links))
	for _, h := range slices.SortedFunc(maps.Keys(u.links), compareHash) {
		l := u.links[h]
		w.bytes(h[:])
		w.str(l.account)
		w.str(l.userID)
		w.int(l.expiresAt)
		w.uint(l.seq)
	}
	w.len(len(u.sessions))
	for _, h := range slices.SortedFunc(maps.Keys(u.sessions), compareHash) {
		ses := u.sessions[h]
		w.bytes(h[:])
		w.str(ses.userID)
		w.int(ses.signedInAt)
		w.int(ses.expiresAt)
		w.str(ses.clientAddr)
		w.str(ses.userAgent)
	}
}

func compareHash(a, b [sha256.Size]byte) int { return slices.Compare(a[:], b[:]) }

func (s *State) decodeUsers(r *snapReader) {
	for _, k := range s.keyOrder {
		k.CreatedBy = r.str()
	}
	u := &s.users
	for i, n := 0, r.len(); i < n && r.err == nil; i++ {
		rec := &userRec{User: User{ID: r.str(), AccountID: r.str(), Email: r.str(), Role: r.str(), CreatedAt: r.time(),
			HasPassword: r.bool(), Disabled: r.bool()}}
		rec.password = append(eventlog.Sealed(nil), r.raw()...)
		u.byID[rec.ID] = rec
		u.byEmail[emailKey(rec.Email)] = rec
		u.order = append(u.order, rec)
	}
	for i, n := 0, r.len(); i < n && r.err == nil; i++ {
		var h [sha256.Size]byte
		r.fixed(h[:])
		u.links[h] = &setupLink{account: r.str(), userID: r.str(), expiresAt: r.int(), seq: r.uint()}
	}
	for i, n := 0, r.len(); i < n && r.err == nil; i++ {
		var h [sha256.Size]byte
		r.fixed(h[:])
		u.addSession(h, &userSession{userID: r.str(), signedInAt: r.int(), expiresAt: r.int(), clientAddr: r.str(), userAgent: r.str()})
	}
}
