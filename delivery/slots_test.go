package delivery

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"demosvc/eventlog/eventlogtest"
)

// A slot freed by an attempt's result takes the next ready delivery while
// that result's write syncs: with one slot, the second delivery is sent
// while the first one's outcome is still inside its held fsync, and both
// end succeeded once the fsync returns.
func TestAFreedSlotSendsTheNextDeliveryWhileTheOutcomeSyncs(t *testing.T) {
	fsys, faults := eventlogtest.NewFS(nil)
	w := openWorldOn(t, "", fsys)
	firstIn, firstGo := make(chan struct{}), make(chan struct{})
	var arrived atomic.Int64
	rv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if arrived.Add(1) == 1 {
			close(firstIn)
			<-firstGo // answered once the test holds the WAL's syncs
		}
	}))
	defer rv.Close()
	wh := w.register(rv.URL, "contact.created")
	agent := w.newAgent()
	w.startSession(agent, "first@example.com")
	w.startSession(agent, "second@example.com")
	cfg := testConfig()
	cfg.Concurrency = 1
	w.start(cfg)

	recv(t, firstIn, "the first delivery to arrive")
	entered, release := faults.HoldSyncs()
	defer release()
	close(firstGo)
	recv(t, entered, "the first outcome's write to reach its fsync")
	waitFor(t, "the second delivery to arrive while the first outcome's fsync is held", func() bool {
		return arrived.Load() == 2
	})
	// (Reads of the deliveries wait for the held write: the store shows
	// only what is durable, which its own tests check.)
	release()
	waitFor(t, "both deliveries to end succeeded", func() bool {
		ds := deliveriesOf(t, w, wh.ID)
		return len(ds) == 2 && ds[0].Status == StatusSucceeded && ds[1].Status == StatusSucceeded
	})
	if n := arrived.Load(); n != 2 {
		t.Errorf("the receiver got %d requests, want 2", n)
	}
}
