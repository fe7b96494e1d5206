package projections

import (
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"unsafe"
)

// A list holds what a slice grown by append would, in order, and ptr
// finds each value where at reads it.
func TestListHoldsWhatASliceWould(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, listChunk - 1, listChunk, listChunk + 1, 2 * listChunk, 2*listChunk + 1, 3*listChunk + 17} {
		var l list[*int]
		var want []*int
		for i := range n {
			v := new(int)
			*v = i
			l.add(v)
			want = append(want, v)
		}
		if l.len() != n {
			t.Fatalf("n %d: len %d", n, l.len())
		}
		for i := range n {
			if l.at(i) != want[i] || *l.ptr(i) != want[i] {
				t.Fatalf("n %d: at(%d) = %d", n, i, *l.at(i))
			}
		}
		if got := slices.Collect(l.all()); !slices.Equal(got, want) {
			t.Fatalf("n %d: all() yields %d values, not the %d added", n, len(got), n)
		}
		var o ordered[*int] = &l
		if o.len() != n || n > 0 && o.at(n-1) != want[n-1] {
			t.Fatalf("n %d: the ordered view differs", n)
		}
	}
}

// Growing a list copies at most listChunk values (and its index of
// chunks, 24 bytes a chunk): a slice grown by append copied all of them,
// megabytes at a million sessions, inside one write under the state's
// lock. It never moves a value it holds.
func TestAListNeverMovesWhatItHolds(t *testing.T) {
	var l list[*session]
	var ms runtime.MemStats
	most := uint64(0)
	var head, chunk **session // where the head's and the first chunk's first values are kept
	for i := range 20 * listChunk {
		ses := &session{}
		boundary := i%listChunk == 0 || i&(i-1) == 0 // a new chunk, or the head's growth
		if boundary {
			runtime.ReadMemStats(&ms)
		}
		before := ms.TotalAlloc
		l.add(ses)
		if boundary {
			runtime.ReadMemStats(&ms)
			most = max(most, ms.TotalAlloc-before)
		}
		switch i {
		case listChunk - 1: // the head is full
			head = &l.head[0]
		case listChunk:
			chunk = &(*l.rest)[0][0]
		}
	}
	if &l.head[0] != head || &(*l.rest)[0][0] != chunk {
		t.Fatal("values the list held were moved")
	}
	// A chunk is one allocation of 8 KiB; MemStats also counts the growth
	// of the index of chunks, and of the span the allocation came from.
	// A slice of 20 chunks' values grown by append copies 16 of them.
	if chunk := uint64((listChunk + 1) * unsafe.Sizeof((*session)(nil))); most > 2*chunk {
		t.Errorf("one add allocated %d bytes; at most two chunks' worth (%d) expected", most, 2*chunk)
	}
}

// A contact's sessions, the first of which it holds itself and the rest
// in a list of the state's, list in full, newest first, from any point,
// and count in full on the dashboard; another contact's are not among
// them.
func TestAContactsSessionsListInFull(t *testing.T) {
	e := openEnv(t, "", Options{})
	pr := e.account("Acme")
	ag := e.agent(pr, "Ava")
	var want []string // pat's, newest first
	for i := range 7 {
		if i%3 == 1 {
			e.session(pr, ag.ID, fmt.Sprintf("other%d@example.com", i))
		}
		want = append([]string{e.session(pr, ag.ID, "pat@example.com").ID}, want...)
	}
	pat := e.session(pr, ag.ID, "PAT@example.com")
	want = append([]string{pat.ID}, want...)
	page := func(after string, limit int) []string {
		t.Helper()
		body, _, _, err := e.p.SessionsJSON(nil, pr.Account.ID, SessionFilter{ContactID: pat.ContactID}, ListQuery{Limit: limit, StartingAfter: after})
		if err != nil {
			t.Fatal(err)
		}
		var got struct{ Data []sessionFields }
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, f := range got.Data {
			ids = append(ids, f.ID)
		}
		return ids
	}
	if got := page("", 100); !slices.Equal(got, want) {
		t.Fatalf("the contact's sessions: %v, want %v", got, want)
	}
	for i := range want {
		if got := page(want[i], 100); !slices.Equal(got, want[i+1:]) {
			t.Fatalf("after %s: %v, want %v", want[i], got, want[i+1:])
		}
	}
	rows, err := e.p.ContactRows(pr.Account.ID, ContactQuery{Search: "pat@example.com", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows.Rows) != 1 || rows.Rows[0].Sessions != len(want) {
		t.Fatalf("the dashboard's row of pat: %+v, want %d sessions", rows.Rows, len(want))
	}
	// The sessions page's filter by e-mail looks the address up and
	// examines no contact when the account has none with it.
	exact := func(email string) RowPage[ContactRow] {
		rows, err := e.p.ContactRows(pr.Account.ID, ContactQuery{Search: email, Limit: 1, Exact: true})
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}
	if rows := exact("PAT@example.com"); len(rows.Rows) != 1 || rows.Rows[0].Email != "pat@example.com" {
		t.Errorf("an exact lookup of pat: %+v", rows.Rows)
	}
	if rows := exact("nobody@example.com"); len(rows.Rows) != 0 || rows.Searched != 0 || rows.Next != "" {
		t.Errorf("an exact lookup of an address the account has not: %d rows, %d contacts examined, next %q; want none", len(rows.Rows), rows.Searched, rows.Next)
	}
}
