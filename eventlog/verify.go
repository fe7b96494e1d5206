package eventlog

import (
	"context"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// VerifyError names the first record that breaks the chain.
type VerifyError struct {
	Seq    uint64
	Reason string
}

func (e *VerifyError) Error() string { return fmt.Sprintf("seq %d: %s", e.Seq, e.Reason) }

// Verify recomputes the hash chain over the whole durable log. It returns
// the number of records checked, or a *VerifyError naming the first bad seq;
// storage damage is such an error too, naming the seqs it may hold.
func (l *Log) Verify() (uint64, error) {
	return l.VerifyProgress(nil)
}

// VerifyProgress is Verify telling progress, if not nil, how many records
// of the durable head it checked: at the start and after every chunk.
func (l *Log) VerifyProgress(progress Progress) (uint64, error) {
	return l.VerifyContext(context.Background(), progress)
}

// VerifyContext is VerifyProgress that stops with ctx.Err() when ctx is
// done (checked between chunks).
func (l *Log) VerifyContext(ctx context.Context, progress Progress) (uint64, error) {
	head := l.DurableSeq()
	if progress != nil {
		progress(0, head) // the start, from which a rate is measured
	}
	var verified uint64
	var prev [HashSize]byte
	for verified < head {
		if err := ctx.Err(); err != nil {
			return verified, err
		}
		to := min(head, verified+verifyChunk)
		n, last, err := l.verifyRange(verified+1, to, prev, true)
		verified += n
		if err != nil {
			return verified, err
		}
		prev = last
		if progress != nil {
			progress(verified, head)
		}
	}
	return verified, nil
}

// verifyChunk is how many records the background verification checks
// between two progress reports.
const verifyChunk = 50_000

// VerifyFollow checks the chain of every durable record from seq 1 on, then
// of each new record once it is durable, until ctx is done (it then returns
// ctx.Err()), the log closes, or it finds a break, which it returns as a
// *VerifyError. progress is called with the highest seq verified so far,
// after every chunk. A server runs it in the background from start-up, so
// damage that a start from a snapshot never reads is still found.
//
// The records durable when it starts are checked as Verify checks them,
// payloads decoded too. A record that comes after has its chain and
// envelope checked, not its payload decoded again: this process either
// encoded it from a typed payload or, on a cluster node, decoded it before
// storing it (ApplyEntry), and the chain shows the stored bytes are still
// those (an encoder whose bytes did not decode would be found at the next
// start, whose replay would fail on them too). Decoding each new payload
// once more was 4 of the 53 allocations of a created session, and over a
// quarter of this goroutine's CPU.
func (l *Log) VerifyFollow(ctx context.Context, progress func(verified uint64)) error {
	var verified uint64
	var prev [HashSize]byte
	// upTo checks the records after verified up to head, in chunks.
	upTo := func(head uint64, payloads bool) error {
		for verified < head {
			to := min(head, verified+verifyChunk)
			n, last, err := l.verifyRange(verified+1, to, prev, payloads)
			if err != nil {
				return err
			}
			verified, prev = verified+n, last
			progress(verified)
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		return nil
	}
	if err := upTo(l.DurableSeq(), true); err != nil {
		return err
	}
	for {
		if err := upTo(l.DurableSeq(), false); err != nil {
			return err
		}
		if err := l.WaitFor(ctx, verified+1); err != nil {
			return err
		}
		// New records come in many small commits: checking them in passes
		// at most every verifyPace pays a pass's iterator (its seek into
		// the memtable and every level) per pass, not per commit, which
		// under write load was over half of this goroutine's CPU.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-l.closing:
			return ErrClosed
		case <-time.After(verifyPace):
		}
	}
}

// verifyPace is the shortest time between two passes of VerifyFollow over
// new records.
const verifyPace = 100 * time.Millisecond

// verifyRange checks records from..to, the one before from having hash
// prev, and with payloads each payload's decoding too. It returns how many
// it checked and the hash of the last.
func (l *Log) verifyRange(from, to uint64, prev [HashSize]byte, payloads bool) (uint64, [HashSize]byte, error) {
	if to < from {
		return 0, prev, nil
	}
	it, err := l.db.db.NewIter(&pebble.IterOptions{LowerBound: logKey(from), UpperBound: logKey(to + 1)})
	if err != nil {
		return 0, prev, err
	}
	defer it.Close()
	var rec Record
	in := interned{}
	expect := from
	checked := func() uint64 { return expect - from }
	for valid := it.First(); valid; valid = it.Next() {
		seq, ok := seqFromKey(it.Key())
		if !ok {
			return checked(), prev, &VerifyError{Seq: expect, Reason: fmt.Sprintf("malformed key %x", it.Key())}
		}
		if seq != expect {
			return checked(), prev, &VerifyError{Seq: expect, Reason: fmt.Sprintf("missing; next stored seq is %d", seq)}
		}
		if err := decodeRecord(it.Value(), &rec, in); err != nil {
			return checked(), prev, &VerifyError{Seq: seq, Reason: err.Error()}
		}
		if rec.Seq != seq {
			return checked(), prev, &VerifyError{Seq: seq, Reason: fmt.Sprintf("record says seq %d", rec.Seq)}
		}
		body, stored, _ := splitValue(it.Value())
		if chainHash(prev, body) != stored {
			return checked(), prev, &VerifyError{Seq: seq, Reason: "hash does not match the record and the previous hash"}
		}
		if payloads {
			if _, err := l.opts.Registry.DecodeStored(&rec); err != nil {
				return checked(), prev, &VerifyError{Seq: seq, Reason: err.Error()}
			}
		}
		prev = stored
		expect++
	}
	if err := it.Error(); err != nil {
		reason := fmt.Sprintf("reading the log failed: %v", err)
		if d := l.db.Damage(); d != nil {
			reason = d.Error()
		}
		return checked(), prev, &VerifyError{Seq: expect, Reason: reason}
	}
	if expect <= to {
		return checked(), prev, &VerifyError{Seq: expect, Reason: fmt.Sprintf("missing; the log ends at seq %d, its durable head is %d", expect-1, to)}
	}
	return checked(), prev, nil
}
