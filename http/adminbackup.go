package http

import (
	"errors"
	"fmt"
	"net/http"
	"path/filepath"

	"github.com/julienschmidt/httprouter"

	"demosvc/eventlog"
	"demosvc/projections"
)

// BackupInput is the body of POST /admin/backup.
type BackupInput struct {
	// Dir is where the backup goes: absolute, since the server's working
	// directory is not the CLI's.
	Dir           string `json:"dir"`
	WithMasterKey bool   `json:"with_master_key"`
	// Progress asks for AdminProgress lines (bytes copied) before the
	// result.
	Progress bool `json:"progress"`
}

// BackupResult is the answer of POST /admin/backup, and what
// `demosvc backup` prints.
type BackupResult struct {
	Backup            string `json:"backup"`
	HeadSeq           uint64 `json:"head_seq"`
	Bytes             int64  `json:"bytes"`
	MasterKeyIncluded bool   `json:"master_key_included"`
}

// handleBackup writes a consistent copy of the data dir to the directory
// named in the body (see eventlog.Store.Backup) while the server goes on.
func (a *Admin) handleBackup(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	var in BackupInput
	if !a.decode(w, r, &in) {
		return
	}
	if !filepath.IsAbs(in.Dir) {
		writeAdminError(w, http.StatusBadRequest, fmt.Sprintf("dir must be an absolute path, got %q", in.Dir))
		return
	}
	out := newProgressLines(w)
	opts := eventlog.BackupOptions{WithMasterKey: in.WithMasterKey, Registry: a.Log.Registry(), Check: projections.SnapshotOnLog}
	if in.WithMasterKey && a.Config != nil && a.Config.Secrets.MasterKey != "" {
		// The key in force overrides the data dir's file, which may hold
		// another: the backup gets the one its secrets open with.
		key, _, err := eventlog.ReadMasterKey("", a.Config.Secrets.MasterKey, nil)
		if err != nil {
			writeAdminError(w, http.StatusInternalServerError, err.Error())
			return
		}
		opts.MasterKey = key
	}
	if in.Progress {
		opts.Progress = out.report
	}
	res, err := a.Log.Store().Backup(r.Context(), in.Dir, opts)
	switch {
	case err == nil:
		out.finish(http.StatusOK, BackupResult{Backup: in.Dir, HeadSeq: res.HeadSeq, Bytes: res.Bytes, MasterKeyIncluded: res.MasterKeyIncluded})
	case errors.Is(err, eventlog.ErrBackupDest):
		out.finish(http.StatusBadRequest, AdminError{Error: err.Error()})
	case errors.Is(err, eventlog.ErrBackupRunning):
		out.finish(http.StatusConflict, AdminError{Error: err.Error()})
	default:
		out.finish(http.StatusInternalServerError, AdminError{Error: "backup failed: " + err.Error()})
	}
}
