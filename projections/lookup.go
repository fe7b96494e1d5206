package projections

import (
	"fmt"
	"sort"

	"demosvc/eventlog"
)

// Every lookup of one account's entities goes through kind: in finds one by
// its API id for a caller, of finds one a record names, fresh checks the id
// of one a record creates, and page (or listing, for sessions and their
// several indexes) lists them newest first. Another account's entity is as
// unknown to a caller as a missing one: the API never tells the two apart.

// ListQuery is the paging of a list: at most Limit items, after the item
// StartingAfter (an id) in the list's order.
type ListQuery struct {
	Limit         int
	StartingAfter string
}

// Page is one page of a list, most recent first. More says whether items
// remain after it.
type Page[T any] struct {
	Data []T  `json:"data"`
	More bool `json:"-"`
}

// entity is what the state keeps of one account, in lists ordered by seq.
type entity interface {
	owner(s *State) *tenant
	listSeq() uint64
}

func (a *agent) owner(*State) *tenant       { return a.tenant }
func (c *contact) owner(s *State) *tenant   { return s.tenantOfContact(c) }
func (ses *session) owner(s *State) *tenant { return s.tenantOfSession(ses) }
func (w *webhook) owner(*State) *tenant     { return w.tenant }

func (a *agent) listSeq() uint64     { return a.seq }
func (c *contact) listSeq() uint64   { return c.seq }
func (ses *session) listSeq() uint64 { return ses.seq }
func (w *webhook) listSeq() uint64   { return w.seq }

// kind is how the API names one kind of entity and where the state keeps
// it.
type kind[K comparable, T entity] struct {
	name string                    // for messages: "agent"
	key  func(id string) (K, bool) // the index key of an API id
	get  func(s *State, key K) (T, bool)
	list func(s *State, t *tenant) ordered[T] // the tenant's list, in seq order
}

func ulidKey(prefix string) func(string) (ID, bool) {
	return func(id string) (ID, bool) { return ParseID(prefix, id) }
}

var (
	agentKind = kind[ID, *agent]{"agent", ulidKey(PrefixAgent),
		func(s *State, id ID) (*agent, bool) { a, ok := s.agents[id]; return a, ok }, func(_ *State, t *tenant) ordered[*agent] { return &t.agents }}
	contactKind = kind[ID, *contact]{"contact", ulidKey(PrefixContact),
		func(s *State, id ID) (*contact, bool) { return s.contacts.get(id) }, func(s *State, t *tenant) ordered[*contact] { return s.contactsIn(&t.contacts) }}
	sessionKind = kind[ID, *session]{"session", ulidKey(PrefixSession),
		func(s *State, id ID) (*session, bool) { return s.sessions.get(id) }, func(s *State, t *tenant) ordered[*session] { return s.sessionsIn(&t.sessions) }}
	// Webhook ids are kept as the strings they were minted as.
	webhookKind = kind[string, *webhook]{"webhook", func(id string) (string, bool) { return id, true },
		func(s *State, id string) (*webhook, bool) { w, ok := s.webhooks[id]; return w, ok }, func(_ *State, t *tenant) ordered[*webhook] { return &t.webhooks }}
)

// in returns the entity of account whose API id is id; false for an id
// that does not parse, an unknown one and another account's alike.
func (k kind[K, T]) in(s *State, account, id string) (T, bool) {
	var none T
	key, ok := k.key(id)
	if !ok {
		return none, false
	}
	e, ok := k.get(s, key)
	if !ok || e.owner(s).account.ID != account {
		return none, false
	}
	return e, true
}

// of returns the entity a record names. An id that is bad, unknown or of
// another account than the record's is an error: replay stops there.
func (k kind[K, T]) of(s *State, rec *eventlog.Record, id string) (T, error) {
	var none T
	key, ok := k.key(id)
	if !ok {
		return none, errorf("%q is not a valid %s id", id, k.name)
	}
	e, ok := k.get(s, key)
	if !ok {
		return none, errorf("unknown %s %s", k.name, id)
	}
	if e.owner(s).account.ID != rec.Account {
		return none, fmt.Errorf("%s %s %w", k.name, id, errWrongAccount)
	}
	return e, nil
}

// fresh returns the index key of the entity a record creates. An id that
// is bad or already taken is an error: replay stops there.
func (k kind[K, T]) fresh(s *State, id string) (K, error) {
	key, ok := k.key(id)
	if !ok {
		return key, errorf("%q is not a valid %s id", id, k.name)
	}
	if _, taken := k.get(s, key); taken {
		return key, errorf("%s %s exists", k.name, id)
	}
	return key, nil
}

// after returns the seq a list continues after: q.StartingAfter's, or 0
// (from the newest) when it is empty. An id that is not of account's is a
// bad request naming starting_after.
func (k kind[K, T]) after(s *State, account string, q ListQuery) (uint64, error) {
	if q.StartingAfter == "" {
		return 0, nil
	}
	e, ok := k.in(s, account, q.StartingAfter)
	if !ok {
		return 0, ParamErrorf(EInvalid, "starting_after", "no %s %q in this account", k.name, q.StartingAfter)
	}
	return e.listSeq(), nil
}

// notFound is the error for an id that is unknown to the caller's account,
// whether it does not exist or belongs to another account.
func notFound(kind, id string) error {
	return Errorf(ENotFound, "no %s %q", kind, id)
}

// one renders, with the state read-locked, the entity of account whose API
// id is id, or answers not_found.
func one[K comparable, T entity, V any](p *Projections, k kind[K, T], account, id string, render func(T) V) (V, error) {
	return oneIn(p, k, account, id, func(_ *State, e T) V { return render(e) })
}

// oneIn is one for a render that reads the state beside the entity.
func oneIn[K comparable, T entity, V any](p *Projections, k kind[K, T], account, id string, render func(*State, T) V) (V, error) {
	var v V
	var found bool
	p.View(func(s *State) {
		if e, ok := k.in(s, account, id); ok {
			v, found = render(s, e), true
		}
	})
	if !found {
		return v, notFound(k.name, id)
	}
	return v, nil
}

// page returns the page q selects of account's list of k, newest first:
// the entities keep accepts (nil keeps all), each as render renders it.
func page[K comparable, T entity, V any](p *Projections, k kind[K, T], account string, q ListQuery,
	keep func(T) bool, render func(T) V) (Page[V], error) {
	return pageIn(p, k, account, q, keep, func(_ *State, e T) V { return render(e) })
}

// pageIn is page for a render that reads the state beside the entity.
func pageIn[K comparable, T entity, V any](p *Projections, k kind[K, T], account string, q ListQuery,
	keep func(T) bool, render func(*State, T) V) (Page[V], error) {
	pg := Page[V]{Data: []V{}}
	err := listing(p, k, account, q, func(s *State, t *tenant, after uint64) {
		descend(k.list(s, t), after, taking(q.Limit, keep, func(e T) { pg.Data = append(pg.Data, render(s, e)) }, &pg.More))
	})
	return pg, err
}

// listing calls walk, with the state read-locked, with account's tenant and
// the seq the list continues after (0: from the newest). It does not call
// it for an account without a tenant, and answers a bad starting_after.
func listing[K comparable, T entity](p *Projections, k kind[K, T], account string, q ListQuery,
	walk func(s *State, t *tenant, after uint64)) error {
	var err error
	p.View(func(s *State) {
		t := s.tenants[account]
		if t == nil {
			return
		}
		var after uint64
		if after, err = k.after(s, account, q); err == nil {
			walk(s, t, after)
		}
	})
	return err
}

// descend walks list (in seq order) from the newest entity, or from just
// before the one at seq after when after is not 0, until visit returns
// false.
func descend[T entity, L ordered[T]](list L, after uint64, visit func(T) bool) {
	start := list.len() - 1
	if after != 0 {
		start = indexBySeq(list, after) - 1
	}
	for i := start; i >= 0; i-- {
		if !visit(list.at(i)) {
			return
		}
	}
}

// taking returns the visit function of a walk that fills one page: it
// passes each entity keep accepts (nil keeps all) to take until limit were
// taken, and stops at the next one, setting *more.
func taking[T any](limit int, keep func(T) bool, take func(T), more *bool) func(T) bool {
	n := 0
	return func(e T) bool {
		if keep != nil && !keep(e) {
			return true
		}
		if n == limit {
			*more = true
			return false
		}
		take(e)
		n++
		return true
	}
}

// indexBySeq finds the position of seq in items, which are in increasing
// seq order: a binary search, so starting_after costs O(log n).
func indexBySeq[T entity, L ordered[T]](items L, seq uint64) int {
	return sort.Search(items.len(), func(i int) bool { return items.at(i).listSeq() >= seq })
}
