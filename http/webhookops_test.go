package http

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"demosvc/eventlog"
)

// TestSecretAnswersAreSealedInTheIdempotencyStore registers a webhook and
// rotates its secret under Idempotency-Keys: each retry gets the secret
// of the first answer, and no recorded answer holds a secret in
// plaintext.
func TestSecretAnswersAreSealedInTheIdempotencyStore(t *testing.T) {
	ts := newTestServer(t, nil)
	h := []string{"Content-Type", "application/json", "Idempotency-Key", "reg-1"}
	body := `{"url":"https://hooks.example.com/x","events":["lead.hot"]}`
	first := ts.do("POST", "/v1/webhooks", body, h...)
	if first.Code != http.StatusCreated {
		t.Fatalf("register: %d %s", first.Code, first.Body)
	}
	var wh struct{ ID, Secret string }
	json.Unmarshal(first.Body.Bytes(), &wh)
	if again := ts.do("POST", "/v1/webhooks", body, h...); again.Body.String() != first.Body.String() {
		t.Errorf("the retry of a registration got %s, want %s", again.Body, first.Body)
	}
	rh := []string{"Content-Type", "application/json", "Idempotency-Key", "rot-1"}
	rot := ts.do("POST", "/v1/webhooks/"+wh.ID+"/rotate-secret", `{"previous_expires_in":0}`, rh...)
	var rotated struct{ Secret string }
	json.Unmarshal(rot.Body.Bytes(), &rotated)
	if rot.Code != http.StatusOK || rotated.Secret == "" || rotated.Secret == wh.Secret {
		t.Fatalf("rotate: %d %s", rot.Code, rot.Body)
	}
	if again := ts.do("POST", "/v1/webhooks/"+wh.ID+"/rotate-secret", `{"previous_expires_in":0}`, rh...); again.Body.String() != rot.Body.String() {
		t.Errorf("the retry of a rotation got %s, want %s", again.Body, rot.Body)
	}
	records := 0
	err := ts.store.Scan([]byte{eventlog.KeyspaceIdempotency}, func(_, v []byte) error {
		records++
		for _, s := range []string{wh.Secret, rotated.Secret, "whsec_"} {
			if strings.Contains(string(v), s) {
				t.Errorf("a recorded answer holds %q in plaintext", s)
			}
		}
		return nil
	})
	if err != nil || records != 2 {
		t.Errorf("%d recorded answers (%v), want 2", records, err)
	}
}

// A body left out is the defaults, whatever Content-Type says: many
// clients send application/json on every POST.
func TestAnEmptyBodyIsTheDefaultsEvenAsJSON(t *testing.T) {
	ts := newTestServer(t, nil)
	reg := ts.do("POST", "/v1/webhooks", `{"url":"https://hooks.example.com/x","events":["lead.hot"]}`, "Content-Type", "application/json")
	var wh struct{ ID string }
	json.Unmarshal(reg.Body.Bytes(), &wh)
	for _, h := range [][]string{nil, {"Content-Type", "application/json"}} {
		if rot := ts.do("POST", "/v1/webhooks/"+wh.ID+"/rotate-secret", "", h...); rot.Code != http.StatusOK {
			t.Errorf("rotate-secret with no body, headers %v: %d %s", h, rot.Code, rot.Body)
		}
	}
}
