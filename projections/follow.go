package projections

import (
	"fmt"

	"demosvc/eventlog"
)

// In a cluster every node follows the replicated log: the entries other
// nodes appended come here, land in this node's store and then in the
// state, under the same lock the writer holds for a group, so a reader
// sees an entry whole or not at all and never an entry whose local commit
// has not returned. The node that appended an entry itself already holds
// it; the log skips it.

// ApplyEntry applies the replicated log's entry at position pos to the
// state and the store. An error means this node cannot follow the log past
// pos and must stop; nothing of the entry is then stored, and the state is
// what it was. It wraps eventlog.ErrCorrupt when the entry does not
// continue this node's chain, eventlog.ErrUnreadable when it holds a
// record this build cannot decode, and the state's own error when the
// state refuses a record: both of the last most often a newer release's,
// during a rolling upgrade. A storage failure (eventlog.ErrUnavailable)
// leaves the state as the store holds it.
func (p *Projections) ApplyEntry(pos uint64, data []byte) error {
	err := p.applyEntry(pos, data)
	if err == nil {
		p.maybeSnapshot(p.Seq())
	}
	return err
}

func (p *Projections) applyEntry(pos uint64, data []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	gen := p.state.authGen
	defer func() {
		// Keys and accounts other nodes changed authenticate here once
		// they are in this node's store, as the writer's own do.
		if p.state.authGen != gen {
			p.publishAuth()
		}
	}()
	// The state takes the records before the store does, under the write
	// lock, so no reader sees them before their commit returns; a record
	// it refuses leaves the store without the entry.
	took := false
	err := p.log.ApplyEntry(pos, data, func(recs []eventlog.Record, payloads []any) error {
		took = true
		for i := range recs {
			if err := p.state.apply(&recs[i], payloads[i]); err != nil {
				return fmt.Errorf("seq %d (%s) from the replicated log: %w", recs[i].Seq, recs[i].Type, err)
			}
		}
		return nil
	})
	if err != nil && took {
		// The state holds part or all of an entry the store does not:
		// go back to what the store says, as after a failed commit.
		p.rebuild()
	}
	return err
}

// ReloadIdempotency reloads the recorded answers from the store. A node
// that becomes the writer calls it: while it followed, the answers other
// writers recorded reached its store but not the writer's index.
func (p *Projections) ReloadIdempotency() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	idem, err := loadIdempotency(p.log.Store(), p.log.IDs().Now())
	if err != nil {
		return err
	}
	p.idem = idem
	return nil
}
