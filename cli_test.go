package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// A data dir's lock is blamed on the server its serve.json names only
// while that process runs: one killed with SIGKILL leaves the file behind,
// and its pid may since be another process's.
func TestLockMessageTrustsServeJSONOnlyWhileItsProcessRuns(t *testing.T) {
	dir := t.TempDir()
	info := func(pid int) {
		b := `{"pid":` + strconv.Itoa(pid) + `,"listen":"127.0.0.1:1","started_at":"2026-11-27T00:00:00Z"}`
		if err := os.WriteFile(filepath.Join(dir, serveInfoFile), []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	info(os.Getpid())
	if got := lockMessage(dir); !strings.Contains(got, "in use by demosvc serve (pid "+strconv.Itoa(os.Getpid())) {
		t.Errorf("with a running pid: %q; want it named", got)
	}
	info(1<<31 - 1) // beyond any pid_max: no such process
	if got := lockMessage(dir); !strings.Contains(got, "in use by another process") || strings.Contains(got, "pid") {
		t.Errorf("with a pid that is gone: %q; want another process, no pid", got)
	}
}
