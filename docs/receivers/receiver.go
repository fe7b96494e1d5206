// Package receivers holds the webhook receivers the README shows, one per
// language; receivers_test.go in the repository's root runs each against
// real deliveries of a real server.
package receivers

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"sync"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// Event is the body of every delivery.
type Event struct {
	Event     string          `json:"event"`
	Timestamp string          `json:"timestamp"`
	Data      json.RawMessage `json:"data"`
}

// Handler verifies each delivery against secrets, the whsec_… strings in
// force (the one shown at registration; during a rotation, the new one and
// the previous one), and calls process once per event id: a delivery sent
// again (a retry after a lost answer) is acknowledged without calling it.
func Handler(secrets []string, process func(eventID string, e Event) error) (http.Handler, error) {
	var stds []*standardwebhooks.Webhook
	for _, secret := range secrets {
		std, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			return nil, err
		}
		stds = append(stds, std)
	}
	var mu sync.Mutex
	done := map[string]bool{} // in production: a unique key in your database
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20)) // the raw bytes, before any parsing
		if err != nil {
			http.Error(w, "unreadable body", http.StatusBadRequest)
			return
		}
		// X-Service-Signature: "sha256=" + hex HMAC-SHA256 of the raw body,
		// keyed with the whole secret string; compared in constant time.
		signed := false
		for _, secret := range secrets {
			mac := hmac.New(sha256.New, []byte(secret))
			mac.Write(body)
			want := "sha256=" + hex.EncodeToString(mac.Sum(nil))
			signed = signed || hmac.Equal([]byte(r.Header.Get("X-Service-Signature")), []byte(want))
		}
		if !signed {
			http.Error(w, "bad X-Service-Signature", http.StatusUnauthorized)
			return
		}
		// Standard Webhooks: webhook-signature over webhook-id, a
		// webhook-timestamp within 5 minutes (against replays) and the body.
		signed = false
		for _, std := range stds {
			signed = signed || std.Verify(body, r.Header) == nil
		}
		if !signed {
			http.Error(w, "bad webhook-signature", http.StatusUnauthorized)
			return
		}
		id := r.Header.Get("webhook-id") // the event id, covered by the signature
		if id == "" {
			id = r.Header.Get("X-Service-Event-Id") // the same id, sent in either mode
		}
		mu.Lock() // one delivery at a time: two tries of one event never race
		defer mu.Unlock()
		if done[id] {
			w.WriteHeader(http.StatusOK) // a duplicate: already processed
			return
		}
		var e Event
		if err := json.Unmarshal(body, &e); err != nil {
			http.Error(w, "not an event", http.StatusBadRequest)
			return
		}
		if err := process(id, e); err != nil {
			http.Error(w, "try again later", http.StatusServiceUnavailable) // the service retries
			return
		}
		done[id] = true
		w.WriteHeader(http.StatusOK)
	}), nil
}
