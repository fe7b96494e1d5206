package delivery

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"demosvc/projections"
)

// The wire, against real receivers on 127.0.0.1: what a delivery looks
// like, and how a bad receiver or a refused address ends.

func TestEveryEventIsDeliveredSignedInTheSeedsShape(t *testing.T) {
	w := openWorld(t, "")
	rv := newReceiver(t, nil)
	wh := w.register(rv.URL, "contact.created", "demo.abandoned", "demo.completed", "lead.hot", "meeting.booked")
	w.start(testConfig())
	ctx := t.Context()
	agent := w.newAgent()
	s1 := w.startSession(agent, "pat@example.com")
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.state.ProgressSession(ctx, w.pr, s1.ID, projections.Figures{IntentScore: ptr(90), Signals: &projections.Signals{Interest: 80, Objections: 10, BuyingSignals: 95}}, nil))
	must(w.state.CompleteSession(ctx, w.pr, s1.ID, projections.Figures{IntentScore: ptr(91), Signals: &projections.Signals{Interest: 88, Objections: 12, BuyingSignals: 95},
		DurationSeconds: ptr(1200), ReplayURL: ptr("https://replay.example.com/s1")}, nil))
	must(w.state.BookMeeting(ctx, w.pr, s1.ID, projections.MeetingInput{ScheduledAt: "2026-12-01T15:00:00Z", CalendarLink: "https://cal.example.com/m1"}, nil))
	s2 := w.startSession(agent, "pat@example.com") // the same contact: no contact.created
	must(w.state.AbandonSession(ctx, w.pr, s2.ID, projections.Figures{DurationSeconds: ptr(42), IntentScore: ptr(10)}, nil))
	waitFor(t, "5 deliveries", func() bool { return rv.count() >= 5 })

	want := map[string]string{
		"contact.created": `{"contact_id":"` + s1.ContactID + `","contact":{"name":"Pat Lee","email":"pat@example.com","company":"Globex"},"session_id":"` + s1.ID + `","agent_id":"` + agent + `"}`,
		"lead.hot":        `{"session_id":"` + s1.ID + `","agent_id":"` + agent + `","contact":{"name":"Pat Lee","email":"pat@example.com","company":"Globex"},"signals":{"interest":80,"objections":10,"buying_signals":95}}`,
		"demo.completed":  `{"session_id":"` + s1.ID + `","agent_id":"` + agent + `","contact":{"name":"Pat Lee","email":"pat@example.com","company":"Globex"},"duration_seconds":1200,"intent_score":91,"meeting_booked":false,"replay_url":"https://replay.example.com/s1"}`,
		"meeting.booked":  `{"session_id":"` + s1.ID + `","contact":{"name":"Pat Lee","email":"pat@example.com"},"meeting":{"scheduled_at":"2026-12-01T15:00:00Z","calendar_link":"https://cal.example.com/m1"}}`,
		"demo.abandoned":  `{"session_id":"` + s2.ID + `","agent_id":"` + agent + `","contact":{"name":"Pat Lee","email":"pat@example.com","company":"Globex"},"duration_seconds":42,"intent_score":10,"meeting_booked":false,"replay_url":null}`, // as the API shows it
	}
	var order []string
	for _, r := range rv.all() {
		var env map[string]json.RawMessage
		if err := json.Unmarshal(r.body, &env); err != nil {
			t.Fatalf("body %s: %v", r.body, err)
		}
		if len(env) != 3 || env["event"] == nil || env["timestamp"] == nil || env["data"] == nil {
			t.Errorf("envelope has keys other than event, timestamp, data: %s", r.body)
		}
		var name, ts string
		json.Unmarshal(env["event"], &name)
		json.Unmarshal(env["timestamp"], &ts)
		order = append(order, name)
		if _, err := time.Parse(time.RFC3339, ts); err != nil || !strings.HasSuffix(ts, "Z") {
			t.Errorf("%s: timestamp %q is not RFC 3339 UTC", name, ts)
		}
		if got := string(env["data"]); got != want[name] {
			t.Errorf("%s data:\n got  %s\n want %s", name, got, want[name])
		}
		// The receiver's own HMAC over the exact body, keyed with the
		// secret string as shown at registration.
		mac := hmac.New(sha256.New, []byte(wh.Secret))
		mac.Write(r.body)
		if got, want := r.header.Get("X-Service-Signature"), "sha256="+hex.EncodeToString(mac.Sum(nil)); got != want {
			t.Errorf("%s: X-Service-Signature %q, want %q", name, got, want)
		}
		// Standard Webhooks: key is the base64 after whsec_, message id.ts.body.
		key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(wh.Secret, "whsec_"))
		smac := hmac.New(sha256.New, key)
		smac.Write([]byte(r.header.Get("webhook-id") + "." + r.header.Get("webhook-timestamp") + "."))
		smac.Write(r.body)
		if got, want := r.header.Get("webhook-signature"), "v1,"+base64.StdEncoding.EncodeToString(smac.Sum(nil)); got != want {
			t.Errorf("%s: webhook-signature %q, want %q", name, got, want)
		}
		if r.header.Get("X-Service-Webhook-Id") != wh.ID || !strings.HasPrefix(r.header.Get("X-Service-Event-Id"), "evt_") ||
			r.header.Get("X-Service-Delivery-Attempt") != "1" || r.header.Get("Content-Type") != "application/json" ||
			r.header.Get("User-Agent") != "demosvc/test" || r.header.Get("webhook-id") != r.header.Get("X-Service-Event-Id") {
			t.Errorf("%s: headers %v", name, r.header)
		}
	}
	if len(order) != 5 {
		t.Errorf("deliveries %v, want 5", order)
	}
}

func TestSSRFGuardRefusesLoopbackWithAClearError(t *testing.T) {
	w := openWorld(t, "")
	rv := newReceiver(t, nil)
	wh := w.register(rv.URL, "contact.created")
	cfg := testConfig()
	cfg.AllowPrivate, cfg.MaxRetries = false, 0
	w.start(cfg)
	w.startSession(w.newAgent(), "a@example.com")
	waitFor(t, "a failed delivery", func() bool {
		ds := deliveriesOf(t, w, wh.ID)
		return len(ds) == 1 && ds[0].Status == StatusFailed
	})
	d := deliveriesOf(t, w, wh.ID)[0]
	if !strings.Contains(d.LastError, "refused: not a public address: 127.0.0.1") {
		t.Errorf("last_error %q", d.LastError)
	}
	if rv.count() != 0 {
		t.Errorf("the receiver got %d requests", rv.count())
	}
}

func TestBadReceiversEndInAClearError(t *testing.T) {
	// What the 100 MB answer's handler got written before the attempt
	// closed the connection: about maxResponseBody and the sockets'
	// buffers, far from all of it.
	var bigWritten atomic.Int64
	bigDone := make(chan struct{})
	for _, tc := range []struct {
		name      string
		handler   http.HandlerFunc
		tls       bool // the webhook URL says https, the receiver speaks plain HTTP
		status    string
		lastError string
	}{
		{"a 100 MB answer is not read", func(w http.ResponseWriter, r *http.Request) {
			defer close(bigDone)
			w.WriteHeader(200)
			chunk := make([]byte, 1<<20)
			for i := 0; i < 100; i++ {
				n, err := w.Write(chunk)
				bigWritten.Add(int64(n))
				if err != nil {
					return
				}
			}
		}, false, StatusSucceeded, ""},
		{"a slowloris trickle times out", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(200)
			for i := 0; i < 100; i++ {
				if _, err := w.Write([]byte("x")); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				select {
				case <-time.After(50 * time.Millisecond): // the trickle's pace, on the wire
				case <-r.Context().Done():
					return
				}
			}
		}, false, StatusFailed, "within 300ms"},
		{"a TLS error", func(w http.ResponseWriter, r *http.Request) {}, true, StatusFailed, "http: server gave HTTP response to HTTPS client"},
		{"a connection reset", func(w http.ResponseWriter, r *http.Request) {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
		}, false, StatusFailed, "EOF"},
		{"an answer cut short is a failure", rawAnswer("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nok"),
			false, StatusFailed, "reading the answer's body: unexpected EOF"},
		{"a malformed chunked answer is a failure", rawAnswer("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"),
			false, StatusFailed, "reading the answer's body: invalid byte in chunk length"},
		{"a 500 cut short fails as a 500", rawAnswer("HTTP/1.1 500 Internal Server Error\r\nContent-Length: 100\r\n\r\nok"),
			false, StatusFailed, "the receiver answered 500 Internal Server Error"},
		{"a 410 cut short still disables", rawAnswer("HTTP/1.1 410 Gone\r\nContent-Length: 100\r\n\r\nok"),
			false, StatusFailed, "410 Gone; the webhook is disabled"},
		{"a redirect is a failure", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "https://elsewhere.example.com/", http.StatusFound)
		}, false, StatusFailed, "the receiver answered 302 Found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := openWorld(t, "")
			srv := httptest.NewServer(tc.handler)
			t.Cleanup(srv.Close)
			url := srv.URL
			if tc.tls {
				url = strings.Replace(url, "http://", "https://", 1)
			}
			wh := w.register(url, "contact.created")
			cfg, _ := clockedConfig()
			cfg.Timeout, cfg.MaxRetries = 300*time.Millisecond, 0
			w.start(cfg)
			w.startSession(w.newAgent(), "a@example.com")
			waitFor(t, "the delivery to end", func() bool {
				ds := deliveriesOf(t, w, wh.ID)
				return len(ds) == 1 && ds[0].Status != StatusPending
			})
			d := deliveriesOf(t, w, wh.ID)[0]
			if d.Status != tc.status || !strings.Contains(d.LastError, tc.lastError) {
				t.Errorf("status %s, last_error %q; want %s with %q", d.Status, d.LastError, tc.status, tc.lastError)
			}
			if strings.HasPrefix(tc.name, "a 100 MB answer") {
				<-bigDone // its write fails once the attempt closed the connection
				if n := bigWritten.Load(); n > 40<<20 {
					t.Errorf("the receiver wrote %d MB of its answer; want the attempt to stop reading after %d KiB", n>>20, maxResponseBody>>10)
				}
			}
		})
	}
}

// rawAnswer answers with the bytes of answer, as they are, then closes.
func rawAnswer(answer string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		io.WriteString(conn, answer)
	}
}

// writeCounter counts the writes to a connection.
type writeCounter struct {
	net.Conn
	writes *atomic.Int64
}

func (c writeCounter) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// An attempt's request, headers and body, leaves in one write on the
// delivery transport: a body written after the headers, in a write of its
// own (as http.Transport did with a body it did not know to be in
// memory), costs the receiver a read and the machine several microseconds
// per delivery.
func TestARequestLeavesInOneWrite(t *testing.T) {
	w := openWorld(t, "")
	rv := newReceiver(t, nil)
	w.register(rv.URL, "contact.created")
	var writes atomic.Int64
	w.startWith(testConfig(), nil, func(dp *Dispatcher) {
		tr := dp.send.transport
		dial := tr.dial
		tr.dial = func(ctx context.Context, n, a string) (net.Conn, error) {
			c, err := dial(ctx, n, a)
			if err != nil {
				return nil, err
			}
			return writeCounter{Conn: c, writes: &writes}, nil
		}
	})
	agent := w.newAgent()
	for i := range 3 {
		w.startSession(agent, fmt.Sprintf("one-write-%d@example.com", i))
	}
	waitFor(t, "3 deliveries", func() bool { return rv.count() == 3 })
	if n := writes.Load(); n != 3 {
		t.Errorf("3 requests took %d writes, want 3", n)
	}
}
