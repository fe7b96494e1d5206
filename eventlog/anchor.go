package eventlog

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// The chain shows that each record follows the one before it, unchanged
// since it was written. It is not keyed: whoever can write the data dir can
// change a record and compute every hash after it again, and the head mark
// with them, and `log verify` then finds nothing wrong. What such a rewrite
// cannot match is a record's hash written down somewhere else: the
// head_hash that `log verify` and `log import` print, or the hash on an
// export's last line. An Anchor is one, and CheckAnchor holds the log to
// it: the records up to its seq are then the ones it was taken from.

// Anchor is a record's seq and chain hash, kept outside the data dir.
type Anchor struct {
	Seq  uint64
	Hash [HashSize]byte
}

// ParseAnchor reads an anchor written SEQ:HASH, the hash in hex.
func ParseAnchor(s string) (Anchor, error) {
	var a Anchor
	seq, hash, ok := strings.Cut(s, ":")
	n, err := strconv.ParseUint(seq, 10, 64)
	if !ok || err != nil || n == 0 {
		return a, fmt.Errorf("%q is not an anchor: want SEQ:HASH, a seq from 1 and the record's hash "+
			"(the records and head_hash that log verify prints)", s)
	}
	b, err := hex.DecodeString(hash)
	if err != nil || len(b) != HashSize {
		return a, fmt.Errorf("%q is not an anchor: its hash must be %d hex digits", s, 2*HashSize)
	}
	a.Seq = n
	copy(a.Hash[:], b)
	return a, nil
}

func (a Anchor) String() string { return fmt.Sprintf("%d:%x", a.Seq, a.Hash) }

// HashAt returns the chain hash of the durable record at seq, and false
// when the log ends before it.
func (l *Log) HashAt(seq uint64) (hash [HashSize]byte, ok bool, err error) {
	if seq == 0 || seq > l.DurableSeq() {
		return hash, false, nil
	}
	err = l.Read(seq, seq, func(r *Record) error { hash = r.Hash; return nil })
	return hash, err == nil, err
}

// CheckAnchor returns a *VerifyError when the log does not hold the record
// a names: it ends before a.Seq, or holds another record there. It checks
// only that record; Verify checks that the records before it lead to it.
func (l *Log) CheckAnchor(a Anchor) error {
	hash, ok, err := l.HashAt(a.Seq)
	switch {
	case err != nil:
		return err
	case !ok:
		return &VerifyError{Seq: l.DurableSeq() + 1, Reason: fmt.Sprintf(
			"missing: the log ends at seq %d, but the anchor %s names seq %d; records that were in the log are gone",
			l.DurableSeq(), a, a.Seq)}
	case hash != a.Hash:
		return &VerifyError{Seq: a.Seq, Reason: fmt.Sprintf(
			"not the record the anchor names: its hash is %x, the anchor says %x; the log was rewritten "+
				"after the anchor was taken (its chain computed again), or it is another log", hash, a.Hash)}
	}
	return nil
}

// Head returns the last record of the store's log (seq 0 when it is
// empty), read from the store with no Log open on it: after an import.
func (s *Store) Head() (Record, error) { return s.readHead() }
