//go:build unix

package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"strconv"
	"syscall"
)

// checkOwner refuses root a data dir that belongs to another user: every
// file the store creates (a WAL, a MANIFEST, the head mark) would be
// root's, mode 0600, and the data dir's owner, the service's user, could
// no longer open it. It is the mistake of `sudo demosvc accounts list` on
// a stopped service's data dir. Only root: any other user either may
// write the data dir (a group-writable one, as Kubernetes' fsGroup makes)
// or is refused by the file system itself. A data dir that does not exist
// yet is this command's to create. viaServer says whether the command could
// run through a running server instead (serve and log import cannot).
func checkOwner(dataDir string, viaServer bool) error {
	if os.Geteuid() != 0 {
		return nil
	}
	fi, err := os.Stat(dataDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("data dir %s: %w", dataDir, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Uid == 0 {
		return nil
	}
	uid := strconv.FormatUint(uint64(st.Uid), 10)
	owner, sudo := "uid "+uid, "'#"+uid+"'"
	if u, err := user.LookupId(uid); err == nil {
		owner, sudo = "user "+u.Username, u.Username
	}
	orServer := ""
	if viaServer {
		orServer = ", or while the server runs, which answers it through its admin socket"
	}
	return fmt.Errorf("data dir %s belongs to %s, and this command runs as root: files it created there would be "+
		"root's, and %s could no longer open the store; run it as %s (sudo -u %s demosvc …)%s; "+
		"if root is to own the data dir, chown -R it first",
		dataDir, owner, owner, owner, sudo, orServer)
}
