package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"

	"demosvc/eventlog"
	demohttp "demosvc/http"
)

// backup writes a consistent copy of the data dir to DIR: through the
// running server's admin socket while one runs (it goes on serving),
// otherwise by opening the data dir here. `serve --data DIR` restores it.
func (c *cli) backup(args []string) int {
	fs, cf := c.flagSet("backup")
	withKey := fs.Bool("with-master-key", false, "also copy master.key, which opens the webhook secrets (the backup then holds a secret)")
	if !c.parse(fs, args, 1) {
		return c.usageExit()
	}
	cfg, err := c.config(cf)
	if err != nil {
		return c.fail(cf, "%v", err)
	}
	dir, err := filepath.Abs(c.args[0])
	if err != nil {
		return c.fail(cf, "%v", err)
	}
	// Checked here too, so that a wrong DIR fails before a server is asked
	// or the data dir opened; the server checks again.
	if err := backupDirUsable(dir); err != nil {
		return c.fail(cf, "%v", err)
	}
	bar := c.newProgress("backup", true)
	in, _ := json.Marshal(demohttp.BackupInput{Dir: dir, WithMasterKey: *withKey, Progress: bar.enabled()})
	var body bytes.Buffer
	out := &progressFilter{bar: bar, next: &body}
	status, err := c.admin(cfg, http.MethodPost, "/admin/backup", bytes.NewReader(in), out)
	out.flush()
	var res demohttp.BackupResult
	ok := err == nil && status == http.StatusOK && !bytes.HasPrefix(body.Bytes(), []byte(`{"error":`)) &&
		json.Unmarshal(body.Bytes(), &res) == nil && res.Backup != ""
	bar.finish(ok)
	if err != nil {
		return c.fail(cf, "%v", err)
	}
	if !ok {
		var e demohttp.AdminError
		if json.Unmarshal(body.Bytes(), &e) != nil || e.Error == "" {
			e.Error = body.String()
		}
		return c.fail(cf, "%s", e.Error)
	}
	if err := backupVisible(dir); err != nil {
		return c.fail(cf, "%v", err)
	}
	c.stdout.Write(body.Bytes())
	c.warnMasterKey(res, *withKey)
	return exitOK
}

// backupVisible checks that the backup a server wrote is where this
// process looks: a server in a mount namespace of its own (systemd's
// PrivateTmp= or ProtectSystem=) writes DIR in its view of the file
// system, which for /tmp is a directory removed when the service stops.
func backupVisible(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, eventlog.PebbleDir)); err != nil {
		return fmt.Errorf("the server reports a backup in %s, but this command does not see one there (%v): "+
			"the server runs with a view of the file system of its own (systemd's PrivateTmp= or ProtectSystem=), "+
			"where it wrote it; back up into a directory the service can write and you can read, such as "+
			"/var/backups/demosvc in contrib/demosvc.service", dir, err)
	}
	return nil
}

// backupDirUsable refuses a DIR that exists and is not an empty directory.
func backupDirUsable(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case len(entries) > 0:
		return fmt.Errorf("%s is not empty: a backup goes into a new or empty directory", dir)
	}
	return nil
}

// warnMasterKey says, either way, what the backup needs to open webhook
// secrets and dashboard passwords, which are sealed under the master key.
func (c *cli) warnMasterKey(res demohttp.BackupResult, asked bool) {
	switch {
	case res.MasterKeyIncluded:
		fmt.Fprintf(c.stderr, "warning: the backup holds %s, a secret: anyone with the backup can open the webhook secrets and dashboard password hashes; keep it as safe as the data dir\n", eventlog.MasterKeyFile)
	case asked:
		fmt.Fprintf(c.stderr, "warning: the data dir has no %s to include; webhook secrets and dashboard passwords open only under the master key the server uses (secrets.master_key)\n", eventlog.MasterKeyFile)
	default:
		fmt.Fprintf(c.stderr, "warning: %s was not included (use --with-master-key to include it): webhook secrets and dashboard passwords in the backup open only with the same master key; copy %s from the data dir or set secrets.master_key when restoring, or webhooks stop and dashboard users cannot sign in\n", eventlog.MasterKeyFile, eventlog.MasterKeyFile)
	}
}
