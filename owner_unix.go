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

// checkOwner refuses to open a data dir that belongs to another user than
// the one running this command: every file the store creates (a WAL, a
// MANIFEST, the head mark) would be this user's, mode 0600, and the data
// dir's owner, the service's user, could no longer open it. It is the
// mistake of `sudo demosvc accounts list` on a stopped service's data dir.
// A data dir that does not exist yet is this command's to create.
func checkOwner(dataDir string) error {
	fi, err := os.Stat(dataDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("data dir %s: %w", dataDir, err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || int(st.Uid) == os.Geteuid() {
		return nil
	}
	uid := strconv.FormatUint(uint64(st.Uid), 10)
	owner, sudo := "uid "+uid, "'#"+uid+"'"
	if u, err := user.LookupId(uid); err == nil {
		owner, sudo = "user "+u.Username, u.Username
	}
	return fmt.Errorf("data dir %s belongs to %s, not to this command's uid %d: files it created there would be "+
		"uid %d's, and %s could no longer open the store; run it as %s (sudo -u %s demosvc …), or while the "+
		"server runs, which answers it through its admin socket", dataDir, owner, os.Geteuid(), os.Geteuid(), owner, owner, sudo)
}
