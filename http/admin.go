package http

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/julienschmidt/httprouter"

	"demosvc/config"
	"demosvc/eventlog"
	"demosvc/projections"
)

// AdminSocket is the name of the admin unix socket inside the data dir.
const AdminSocket = "admin.sock"

// Admin serves the operator commands of the CLI (`demosvc log`, `accounts`,
// `keys`): over the unix socket in the data dir while `serve` runs, and
// in-process against an opened data dir when it does not. One handler, so
// the two paths cannot drift apart.
type Admin struct {
	Log    *eventlog.Log
	State  *projections.Projections
	Config *config.Config // for the rate limits in force
	// DashboardURL is the base of the setup links `users` prints.
	DashboardURL string
	// Clock dates setup links; nil means time.Now.
	Clock func() time.Time
	// Cluster, set on a cluster node, reports the node's view of the
	// cluster for `demosvc cluster status`.
	Cluster func(ctx context.Context) any
	// WriterAddr, set on a cluster node, is the API address of the node
	// that takes writes now ("" while none does).
	WriterAddr func() string
}

// Handler returns the admin routes.
func (a *Admin) Handler() http.Handler {
	r := httprouter.New()
	r.GET("/admin/log", a.handleLog)
	r.GET("/admin/log/export", a.handleExport)
	r.GET("/admin/log/verify", a.handleVerify)
	r.POST("/admin/accounts", a.handleCreateAccount)
	r.GET("/admin/accounts", a.handleListAccounts)
	r.POST("/admin/keys", a.handleCreateKey)
	r.GET("/admin/keys", a.handleListKeys)
	r.POST("/admin/keys/:id/revoke", a.handleRevokeKey)
	r.POST("/admin/users", a.handleCreateUser)
	r.GET("/admin/users", a.handleListUsers)
	r.POST("/admin/users/:id/reset-password", a.handleResetPassword)
	r.POST("/admin/users/:id/disable", a.handleDisableUser)
	r.POST("/admin/backup", a.handleBackup)
	r.GET("/admin/cluster", a.handleCluster)
	r.NotFound = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeAdminError(w, http.StatusNotFound, "no admin command at "+r.URL.Path)
	})
	return r
}

// AdminError is the body of every failed admin request.
type AdminError struct {
	Error string `json:"error"`
}

func writeAdminError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, AdminError{Error: msg})
}

// seqParam reads an optional positive seq query parameter.
func seqParam(r *http.Request, name string) (uint64, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("--%s must be a positive integer, got %q", name, s)
	}
	return n, nil
}

// handleLog streams the log as JSON lines, filtered by type and account,
// waiting for new records when follow is set.
func (a *Admin) handleLog(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	q := r.URL.Query()
	from, err := seqParam(r, "from")
	if err != nil {
		writeAdminError(w, http.StatusBadRequest, err.Error())
		return
	}
	types := q["type"]
	reg := a.Log.Registry()
	for _, t := range types {
		if !reg.Known(t) {
			writeAdminError(w, http.StatusBadRequest, fmt.Sprintf("--type %q is not an event type; known: %v", t, reg.Types()))
			return
		}
	}
	account := q.Get("account")
	follow := q.Get("follow") == "true"

	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	emit := func(rec *eventlog.Record) error {
		if err := r.Context().Err(); err != nil {
			return err // interrupted: the command run in this process stops
		}
		if len(types) > 0 && !slices.Contains(types, rec.Type) {
			return nil
		}
		if account != "" && rec.Account != account {
			return nil
		}
		j, err := reg.ToJSON(rec, false)
		if err != nil {
			return err
		}
		return enc.Encode(j)
	}
	if !follow {
		if err := a.Log.Read(from, 0, emit); err != nil {
			writeStreamError(enc, err)
		}
		return
	}
	err = a.Log.Follow(r.Context(), from, func(rec *eventlog.Record) error {
		if err := emit(rec); err != nil {
			return err
		}
		if flusher != nil && rec.Seq == a.Log.DurableSeq() {
			flusher.Flush()
		}
		return nil
	})
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, eventlog.ErrClosed) {
		writeStreamError(enc, err)
	}
}

// writeStreamError ends a stream whose 200 header is already sent with a
// final line the CLI recognises as a failure.
func writeStreamError(enc *json.Encoder, err error) {
	_ = enc.Encode(AdminError{Error: err.Error()})
}

func (a *Admin) handleExport(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	from, err := seqParam(r, "from")
	if err != nil {
		writeAdminError(w, http.StatusBadRequest, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	var progress eventlog.Progress
	if r.URL.Query().Get("progress") == "true" {
		lines := newProgressLines(w)
		lines.started = true // the header is sent
		progress = lines.records
	}
	if _, err := a.Log.ExportProgress(ctxWriter{r.Context(), w}, from, progress); err != nil {
		writeStreamError(json.NewEncoder(w), err)
	}
}

// ctxWriter is w until ctx is done, then an error: a long answer written
// in this process (an export with no server running) stops when the
// command is interrupted.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}

// VerifyResult is the answer of `demosvc log verify`.
type VerifyResult struct {
	OK          bool   `json:"ok"`
	Records     uint64 `json:"records"`
	FirstBadSeq uint64 `json:"first_bad_seq,omitempty"`
	// HeadHash is the hash of the last record, when the chain holds: kept
	// outside the data dir with Records, it is the anchor a later
	// `log verify --expect-head RECORDS:HEAD_HASH` holds the log to.
	HeadHash string `json:"head_hash,omitempty"`
	// SnapshotSeq is the seq of the stored snapshot that was checked
	// against the log (projections.CheckSnapshot); absent when there is
	// none serve would load, or when the check was not asked for.
	SnapshotSeq uint64 `json:"snapshot_seq,omitempty"`
	// SnapshotIgnored says why a stored snapshot was not checked: serve
	// would not load it either (damaged, of another version), and
	// replays the log instead.
	SnapshotIgnored string `json:"snapshot_ignored,omitempty"`
	Error           string `json:"error,omitempty"`
}

// handleVerify answers VerifyResult (status 409 when the chain breaks).
// With progress=true, AdminProgress lines come first and the status is 200
// once one was sent: the CLI goes by the last line. expect_head=SEQ:HASH
// also holds the log to that anchor (eventlog.CheckAnchor).
func (a *Admin) handleVerify(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	q := r.URL.Query()
	var anchor *eventlog.Anchor
	if v := q.Get("expect_head"); v != "" {
		an, err := eventlog.ParseAnchor(v)
		if err != nil {
			writeAdminError(w, http.StatusBadRequest, err.Error())
			return
		}
		anchor = &an
	}
	checkSnapshot := q.Get("snapshot") != "false"
	out := newProgressLines(w)
	var progress eventlog.Progress
	var snapshotTotal uint64
	if q.Get("progress") == "true" {
		// One bar for both parts: the chain's records, then the replay
		// up to the snapshot's seq, which can take as long again.
		if checkSnapshot {
			snapshotTotal = projections.StoredSnapshotSeq(a.Log)
		}
		progress = func(done, head uint64) { out.records(done, head+snapshotTotal) }
	}
	n, err := a.Log.VerifyContext(r.Context(), progress)
	var head [eventlog.HashSize]byte
	if err == nil && n > 0 {
		head, _, err = a.Log.HashAt(n)
	}
	if err == nil && anchor != nil {
		err = a.Log.CheckAnchor(*anchor)
	}
	var snap projections.SnapshotCheck
	if err == nil && checkSnapshot {
		// The chain holds; a snapshot is checked against it only by its
		// own checksum when loaded, so it is checked here too.
		var report func(done, total uint64)
		if progress != nil {
			report = func(done, _ uint64) { out.records(n+done, n+snapshotTotal) }
		}
		if a.State != nil {
			snap, err = a.State.CheckSnapshot(report) // beside the snapshots it saves
		} else {
			snap, err = projections.CheckSnapshot(a.Log, report)
		}
	}
	var ve *eventlog.VerifyError
	var sm *projections.SnapshotMismatchError
	switch {
	case err == nil:
		res := VerifyResult{OK: true, Records: n, SnapshotSeq: snap.Seq, SnapshotIgnored: snap.Ignored}
		if n > 0 {
			res.HeadHash = hex.EncodeToString(head[:])
		}
		out.finish(http.StatusOK, res)
	case errors.As(err, &sm):
		out.finish(http.StatusConflict, VerifyResult{Records: n, SnapshotSeq: sm.Seq, Error: sm.Error()})
	case errors.As(err, &ve):
		out.finish(http.StatusConflict, VerifyResult{Records: n, FirstBadSeq: ve.Seq, SnapshotSeq: snap.Seq, Error: ve.Error()})
	default:
		out.finish(http.StatusInternalServerError, AdminError{Error: err.Error()})
	}
}

// handleCluster answers `demosvc cluster status`.
func (a *Admin) handleCluster(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if a.Cluster == nil {
		writeAdminError(w, http.StatusNotFound, "this node is not serving as part of a cluster: "+
			"cluster status asks a running `demosvc serve` with cluster.enabled")
		return
	}
	writeJSON(w, http.StatusOK, a.Cluster(r.Context()))
}
