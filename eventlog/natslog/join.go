package natslog

import (
	"errors"
	"fmt"

	"github.com/nats-io/nats-server/v2/server"
)

// Joined returns nil once this node's embedded NATS server has held a
// current copy of everything it replicates (the cluster's metadata, the
// log's stream, the lease bucket), and from then on: it is the node's
// first readiness after a start, not a health check that fails while a
// dead node's leaders are re-elected. Until then it says what is missing.
//
// Why it matters: NATS counts the vote of a replica with an empty log
// only when every peer answers, since it cannot tell a new replica from
// one that lost its data. A node started with an empty data dir therefore
// adds nothing to a quorum until it has caught up, and stopping another
// node of three before then leaves the stream and the lease bucket with
// no leader (so no writer) until the stopped node comes back. /readyz
// answers 503 "joining" until Joined is nil, so a rolling restart that
// waits for /readyz waits for this too.
//
// With an external NATS cluster (cluster.nats_url) there is no server in
// this process to ask; its servers' own /healthz say it, and Joined
// returns nil.
func (n *Node) Joined() error {
	if n.srv == nil || n.joined.Load() {
		return nil
	}
	// NATS's own readiness check (its /healthz): the metadata leader is
	// known and this server is current with it, and every stream and
	// consumer this server holds a replica of is current.
	h := n.srv.Healthz(&server.HealthzOptions{Account: n.srv.GlobalAccount().GetName()})
	if h.Status != "ok" {
		if h.Error == "" {
			return errors.New("the NATS server is not current with the cluster")
		}
		return fmt.Errorf("the NATS server is not current with the cluster: %s", h.Error)
	}
	n.joined.Store(true)
	return nil
}
