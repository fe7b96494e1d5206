package dashboard

import (
	"context"
	crand "crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"demosvc/config"
	"demosvc/delivery"
	"demosvc/eventlog"
	"demosvc/projections"
	"demosvc/projections/projtest"
)

// benchAccount is a dashboard over an account of n synthetic sessions
// (projtest's shape: 100 agents, a contact per ten sessions), plus, for
// the pages that show them, benchExtra sessions made through the commands
// after a webhook was registered: hot leads, meetings, and their
// deliveries to a receiver on 127.0.0.1 (one in ten answered 500).
type benchAccount struct {
	n       int
	db      *Dashboard
	cookie  *http.Cookie
	webhook string
}

const benchExtra = 1000

func newBenchAccount(b *testing.B, n int) *benchAccount {
	b.Helper()
	store, err := eventlog.OpenStore(b.TempDir(), eventlog.StoreOptions{Create: true})
	if err != nil {
		b.Fatal(err)
	}
	log, err := eventlog.OpenLog(store, eventlog.Options{Registry: projections.NewRegistry(), IDs: eventlog.NewIDs(time.Now)})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	acc, _, err := projtest.Synthetic(log, projtest.BenchShape(n))
	if err != nil {
		b.Fatal(err)
	}
	sealer, err := eventlog.NewSealer(make([]byte, eventlog.MasterKeySize), crand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	opts := projections.DefaultOptions
	opts.Sealer, opts.AllowPrivateNetworks = sealer, true
	p, err := projections.Open(log, opts)
	if err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	calls := 0
	rv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		fail := calls%10 == 0
		mu.Unlock()
		if fail {
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	dp := delivery.New(log, p, delivery.Config{Timeout: 5 * time.Second, MaxRetries: 0, Backoff: time.Millisecond, BackoffFactor: 1,
		Concurrency: 16, AllowPrivate: true}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { dp.Run(ctx); close(done) }()
	b.Cleanup(func() {
		cancel()
		<-done
		rv.Close()
		p.Close()
		log.Close()
		store.Close()
	})

	account, _ := p.AccountByID(acc)
	key, err := p.CreateKey(ctx, "cli", acc)
	if err != nil {
		b.Fatal(err)
	}
	pr := projections.Principal{Account: account, KeyID: key.ID}
	v, err := p.RegisterWebhook(ctx, pr, projections.WebhookInput{URL: rv.URL, Events: projections.WebhookEventNames()}, nil)
	if err != nil {
		b.Fatal(err)
	}
	ba := &benchAccount{n: n, webhook: v.(projections.WebhookView).ID}
	ag, err := p.CreateAgent(ctx, pr, projections.AgentInput{Name: "Closer", SandboxURL: "https://s.example.com"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	agent := ag.(projections.AgentView).ID
	score := func(v int) *int { return &v }
	want := benchExtra * 2 // contact.created, demo.completed; then lead.hot and meeting.booked
	for i := range benchExtra {
		sv, err := p.StartSession(ctx, pr, projections.SessionInput{AgentID: agent,
			Contact: &projections.Contact{Name: fmt.Sprint("Lead ", i), Email: fmt.Sprintf("lead%d@example.com", i)}}, nil)
		if err != nil {
			b.Fatal(err)
		}
		var s struct{ ID string }
		json.Unmarshal(sv.(json.RawMessage), &s)
		replay := "https://replay.example.com/" + s.ID
		if 60+i%41 >= projections.DefaultOptions.HotThreshold {
			want++
		}
		if _, err := p.CompleteSession(ctx, pr, s.ID, projections.Figures{IntentScore: score(60 + i%41), Signals: &projections.Signals{},
			DurationSeconds: score(600), ReplayURL: &replay}, nil); err != nil {
			b.Fatal(err)
		}
		if i%4 == 0 {
			want++
			if _, err := p.BookMeeting(ctx, pr, s.ID, projections.MeetingInput{ScheduledAt: "2026-12-01T10:00:00Z", CalendarLink: "https://cal.example.com/x"}, nil); err != nil {
				b.Fatal(err)
			}
		}
	}
	// Every delivery attempted once (max_retries 0): the attempt log and
	// the hourly counts are whole before anything is measured.
	deadline := time.Now().Add(5 * time.Minute)
	for {
		hours, err := dp.Hourly(ba.webhook, time.Now(), 2)
		if err != nil {
			b.Fatal(err)
		}
		got := hours[0].Attempts() + hours[1].Attempts()
		if got >= want {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d deliveries attempted", got, want)
		}
		time.Sleep(50 * time.Millisecond) // polling interval, not synchronisation
	}
	user, link, err := p.CreateUser(ctx, "cli", acc, "bench@example.com", projections.RoleAdmin, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	_, tok, err := p.CompleteSetup(ctx, link.Token, "", "a long bench password", projections.ClientInfo{}, time.Now(), time.Hour)
	if err != nil || user.ID == "" {
		b.Fatal(err)
	}
	ba.cookie = &http.Cookie{Name: "demosvc_session", Value: tok}
	ba.db = New(Deps{State: p, Config: config.Default(), Deliveries: dp})
	b.Logf("%d sessions (%d events) and %d deliveries ready in %v", n, log.DurableSeq(), want, time.Since(start).Round(time.Millisecond))
	return ba
}

// render renders path once and fails on anything but 200.
func (ba *benchAccount) render(b *testing.B, path string) {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.AddCookie(ba.cookie)
	rec := httptest.NewRecorder()
	ba.db.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		b.Fatalf("GET %s over %d sessions: %d %s", path, ba.n, rec.Code, rec.Body.String())
	}
}

// BenchmarkPagesAtScale renders /, /sessions and /webhooks/{id} over an
// account of 10,000 sessions and one of DEMOSVC_BENCH_SESSIONS (default
// 1,000,000), in alternating rounds in one run, and reports each page's
// median render time at both sizes and the median of the rounds' ratios
// (small / large: 1.0 means no slower at the large size; the target is
// >= 0.8).
//
//	DEMOSVC_BENCH_SESSIONS=1000000 go test -run '^$' -bench PagesAtScale -benchtime 1x ./http/dashboard
func BenchmarkPagesAtScale(b *testing.B) {
	large := projtest.BenchSessions()
	small := min(10_000, max(1, large/10))
	accounts := []*benchAccount{newBenchAccount(b, small), newBenchAccount(b, large)}
	pages := []struct{ name, path string }{
		{"overview", "/"},
		{"sessions", "/sessions"},
		{"sessions_completed", "/sessions?status=completed"},
		{"webhook", "/webhooks/" + accounts[0].webhook},
	}
	// Short rounds, alternating which size goes first, and the median of
	// each round's ratio: on a shared machine the load drifts by the
	// second, and both sizes of one round see about the same.
	const rounds, perRound = 25, 60
	b.ResetTimer()
	for range b.N {
		for _, pg := range pages {
			var took [2][]time.Duration
			var ratios []float64
			for r := range rounds {
				var t [2]time.Duration
				for k := range accounts {
					i := (k + r) % 2
					ba := accounts[i]
					path := pg.path
					if pg.name == "webhook" {
						path = "/webhooks/" + ba.webhook
					}
					ba.render(b, path) // warm
					start := time.Now()
					for range perRound {
						ba.render(b, path)
					}
					t[i] = time.Since(start) / perRound
					took[i] = append(took[i], t[i])
				}
				ratios = append(ratios, float64(t[0])/float64(t[1]))
			}
			med := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2] }
			slices.Sort(ratios)
			s, l, ratio := med(took[0]), med(took[1]), ratios[len(ratios)/2]
			b.ReportMetric(float64(s.Microseconds()), pg.name+"_small_us")
			b.ReportMetric(float64(l.Microseconds()), pg.name+"_large_us")
			b.ReportMetric(ratio, pg.name+"_ratio")
			b.Logf("%s: %d sessions %v, %d sessions %v (medians), median ratio of the rounds %.2f", pg.path, small, s, large, l, ratio)
		}
	}
}
