package eventlog

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// The head mark is a small file beside Pebble's directory that names the
// last record the log held when it was last closed or checkpointed. Pebble
// reads a damaged WAL as ending early, so a log that lost its newest
// records would otherwise open without a word; with the mark, opening
// finds that records once durable are gone and says so. A serving process
// moves it every HeadMarkInterval while the log grows (KeepHeadMarked), so
// that after a crash too only the records of that last interval could be
// lost without a word.

// HeadMarkFile is the head mark's name inside the data dir.
const HeadMarkFile = "log-head.json"

type headMark struct {
	Seq  uint64 `json:"seq"`
	Hash string `json:"hash"`
}

// readHeadMark returns the mark, or a zero mark when there is none.
func readHeadMark(dataDir string) (headMark, error) {
	var m headMark
	b, err := os.ReadFile(filepath.Join(dataDir, HeadMarkFile))
	if errors.Is(err, fs.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("%w: %s is not a head mark (%v): restore the data dir from a backup, "+
			"or remove the file to open the log without checking its head", ErrDamaged, HeadMarkFile, err)
	}
	return m, nil
}

// writeHeadMark replaces the mark atomically and durably.
func writeHeadMark(dataDir string, m headMark) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dataDir, HeadMarkFile+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dataDir, HeadMarkFile)); err != nil {
		return err
	}
	dir, err := os.Open(dataDir)
	if err != nil {
		return err
	}
	defer dir.Close()
	return dir.Sync()
}

// checkHeadMark compares the log's head with the mark left by the last
// close: a log that ends before the mark, or holds another record at its
// seq, lost records that were durable. It removes the temporary files of
// marks whose writing a crash cut short.
func (l *Log) checkHeadMark(head Record) error {
	if stale, _ := filepath.Glob(filepath.Join(l.db.Dir(), HeadMarkFile+".*")); len(stale) > 0 {
		for _, f := range stale {
			os.Remove(f)
		}
	}
	m, err := readHeadMark(l.db.Dir())
	if err != nil {
		return fmt.Errorf("reading the head mark: %w", err)
	}
	if m.Seq == 0 {
		return nil
	}
	if head.Seq < m.Seq {
		return fmt.Errorf("%w: %w", ErrDamaged, &VerifyError{Seq: head.Seq + 1, Reason: fmt.Sprintf(
			"missing: the log ends at seq %d, but it held seq %d when it was last closed; records that were durable "+
				"are gone (a damaged or deleted WAL or SST file in %s); restore the data dir from a backup",
			head.Seq, m.Seq, filepath.Join(l.db.Dir(), PebbleDir))})
	}
	var rec Record
	found := false
	err = l.Read(m.Seq, m.Seq, func(r *Record) error { rec, found = *r, true; return nil })
	if err != nil {
		return fmt.Errorf("%w: reading seq %d named by the head mark: %v", ErrDamaged, m.Seq, err)
	}
	if !found || hex.EncodeToString(rec.Hash[:]) != m.Hash {
		return fmt.Errorf("%w: %w", ErrDamaged, &VerifyError{Seq: m.Seq, Reason: "not the record the log held at this seq " +
			"when it was last closed (its hash differs): the log was damaged or replaced; restore the data dir from a backup"})
	}
	return nil
}

// MarkHead records the log's durable head in the head mark, so that a later
// open notices if records up to it are lost. Close calls it; a long-running
// writer may call it after a checkpoint.
func (l *Log) MarkHead() error {
	l.durableMu.Lock()
	seq, hash := l.next-1, l.lastHash
	l.durableMu.Unlock()
	if seq == 0 {
		return nil
	}
	return writeHeadMark(l.db.Dir(), headMark{Seq: seq, Hash: hex.EncodeToString(hash[:])})
}

// HeadMarkInterval is how often KeepHeadMarked moves the mark while the
// log grows: one small file written and synced, beside fsyncs of the WAL
// that run hundreds a second under load.
const HeadMarkInterval = time.Second

// KeepHeadMarked moves the head mark to the durable head every interval
// in which the log grew, until ctx is done; a failure goes to onErr and is
// tried again at the next interval. The mark otherwise moves only at a
// clean close, an import or a snapshot, so that a crash followed by a
// damaged WAL could drop records acknowledged since then without a word.
func (l *Log) KeepHeadMarked(ctx context.Context, interval time.Duration, onErr func(error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	marked := l.DurableSeq()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		seq := l.DurableSeq()
		if seq == marked {
			continue
		}
		if err := l.MarkHead(); err != nil {
			onErr(err)
			continue
		}
		marked = seq
	}
}
