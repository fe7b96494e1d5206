package projections

import (
	"errors"
	"strings"
	"testing"
)

// The address policy itself is tested in delivery/netguard; these check
// that registration and import apply it, as a 400 naming url.
func TestWebhookRegistrationRefusesHostsByTheAddressPolicy(t *testing.T) {
	for _, tc := range []struct {
		url          string
		allowPrivate bool
		msg          string
	}{
		{"http://127.1/x", true, "reads as a number"},
		{"http://0177.0.0.1/x", true, "reads as a number"},
		{"http://0x7f.0.0.1/x", true, "reads as a number"},
		{"http://2130706433/x", true, "reads as a number"},
		{"http://example.com./x", true, "must not end in a dot"},
		{"http://１２７.0.0.1/x", true, "must be ASCII"},
		{"http://[::FFFF:127.0.0.1]/x", true, "not in canonical form"},
		{"http://127.0.0.1:9/x", false, "the URL's host 127.0.0.1 is not a public address; deliveries there are refused (delivery.allow_private_networks)"},
		{"http://192.0.2.1/x", false, "not a public address"},
		{"http://[2001:db8::1]/x", false, "not a public address"},
		{"http://[::ffff:10.0.0.1]/x", false, "not a public address"},
		{"http://localhost:8080/x", false, "not a public address"},
	} {
		in := WebhookInput{URL: tc.url, Events: []string{"lead.hot"}}
		err := in.Validate(tc.allowPrivate)
		var e *Error
		if !errors.As(err, &e) || e.Code != EInvalid || e.Param != "url" || !strings.Contains(e.Message, tc.msg) {
			t.Errorf("%s (allow_private_networks=%v): %v; want invalid_request on url saying %q", tc.url, tc.allowPrivate, err, tc.msg)
		}
	}
	for _, u := range []string{"https://hooks.example.com/x", "https://8.8.8.8/x", "https://[2606:4700:4700::1111]/x"} {
		in := WebhookInput{URL: u, Events: []string{"lead.hot"}}
		if err := in.Validate(false); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
}
