package projections

import "crypto/sha256"

// authIndex maps the SHA-256 of every live API key to who it acts for. It
// is immutable once published: Authenticate, which every request calls,
// reads it without the state's lock, so requests authenticate while the
// writer holds the state for a group in flight.
type authIndex map[[sha256.Size]byte]Principal

// publishAuth rebuilds the index from the state. The caller holds the
// write lock (or is Open), and the state holds nothing that is not durable,
// so the index never names a key or account before its event is durable,
// nor a revoked key after its revocation is.
func (p *Projections) publishAuth() {
	s := p.state
	ix := make(authIndex, len(s.keysByHash))
	for sum, k := range s.keysByHash {
		if k.RevokedAt == nil {
			ix[sum] = Principal{Account: *s.accounts[k.AccountID], KeyID: k.ID}
		}
	}
	p.auth.Store(&ix)
}
