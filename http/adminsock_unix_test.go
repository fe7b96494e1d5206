//go:build unix

package http

import (
	"os"
	"syscall"
	"testing"
)

// TestTheAdminSocketIsItsOwnersFromItsFirstMoment: whatever the process's
// umask, the socket is bound owner-only, with no chmod after it (another
// user could connect in between, in a data dir others may enter).
func TestTheAdminSocketIsItsOwnersFromItsFirstMoment(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil { // a data dir made by hand
		t.Fatal(err)
	}
	old := syscall.Umask(0)
	ln, err := ListenAdmin(dir)
	syscall.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	fi, err := os.Stat(SocketPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("the admin socket is %v; want a socket of mode 0600", fi.Mode())
	}
}
