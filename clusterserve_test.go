package main

import (
	"encoding/base64"
	"strings"
	"testing"

	"demosvc/config"
)

// The routes' password is the same on every node that has the master key,
// and nothing without it can make it.
func TestClusterSecretIsDerivedFromTheMasterKey(t *testing.T) {
	withKey := func(b byte) *config.Config {
		cfg := config.Default()
		cfg.Secrets.MasterKey = base64.StdEncoding.EncodeToString([]byte(strings.Repeat(string(rune(b)), 32)))
		return cfg
	}
	secret := func(cfg *config.Config, purpose string) string {
		s, err := clusterSecret(cfg, purpose)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a := secret(withKey('a'), "nats routes")
	if len(a) < 40 || a != secret(withKey('a'), "nats routes") {
		t.Fatalf("the routes' password %q: want one of 32 bytes, the same from the same key", a)
	}
	if a == secret(withKey('b'), "nats routes") || a == secret(withKey('a'), "another purpose") {
		t.Error("another key or purpose gives the same secret")
	}
	if _, err := clusterSecret(config.Default(), "nats routes"); err == nil {
		t.Error("a secret derived with no master key")
	}
}
