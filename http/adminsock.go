package http

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
)

// ErrNoServer reports that no running server answers on the admin socket.
var ErrNoServer = errors.New("no server answers on the admin socket")

// maxSocketPath is the longest path a unix socket can be bound to on Linux,
// less its terminating NUL.
const maxSocketPath = 107

// SocketPath returns the admin socket path of dataDir.
func SocketPath(dataDir string) string { return filepath.Join(dataDir, AdminSocket) }

// CheckSocketPath refuses a data dir whose admin socket path is too long
// to bind: serve checks it before it opens the store, so that it does not
// set up a new data dir (and print its first API key) only to stop.
func CheckSocketPath(dataDir string) error {
	if abs, err := filepath.Abs(SocketPath(dataDir)); err == nil && len(abs) > maxSocketPath {
		return fmt.Errorf("admin socket path %s is longer than %d bytes; use a shorter --data path", abs, maxSocketPath)
	}
	return nil
}

// ListenAdmin binds the admin socket of dataDir, its owner's alone. The caller
// must hold the data dir's lock: any socket file already there is left over
// from a process that died, and is replaced.
func ListenAdmin(dataDir string) (net.Listener, error) {
	if err := CheckSocketPath(dataDir); err != nil {
		return nil, err
	}
	path := SocketPath(dataDir)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("removing stale admin socket: %w", err)
	}
	// Bound under a umask of 0177, so the socket is mode 0600 from its
	// first moment: in a data dir others may enter
	// (one made by hand, mode 0755), a socket bound with the usual umask
	// and then chmodded took a connection from another user in between,
	// and served that user's requests: every admin command.
	var ln net.Listener
	if err := privately(func() (err error) { ln, err = net.Listen("unix", path); return err }); err != nil {
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	return ln, nil
}

// socketClient returns an HTTP client that dials the admin socket.
func socketClient(path string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
		DisableCompression: true,
	}}
}

// DoSocket sends an admin request to the server running on dataDir and
// copies the response body to out as it arrives. It returns ErrNoServer if
// nothing answers on the socket.
func DoSocket(ctx context.Context, dataDir, method, target string, body io.Reader, out io.Writer) (int, error) {
	path := SocketPath(dataDir)
	conn, err := net.Dial("unix", path)
	if err != nil {
		return 0, ErrNoServer
	}
	conn.Close()
	req, err := http.NewRequestWithContext(ctx, method, "http://admin"+target, body)
	if err != nil {
		return 0, err
	}
	client := socketClient(path)
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("admin socket %s: %w", path, err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(out, resp.Body); err != nil {
		if ctx.Err() != nil {
			return resp.StatusCode, ctx.Err() // interrupted: the answer is cut short
		}
		return resp.StatusCode, err
	}
	return resp.StatusCode, nil
}

// DoLocal runs an admin request through h inside this process, streaming
// the response body to out.
func DoLocal(ctx context.Context, h http.Handler, method, target string, body io.Reader, out io.Writer) (int, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://admin"+target, body)
	if err != nil {
		return 0, err
	}
	w := &streamWriter{out: out, header: http.Header{}}
	h.ServeHTTP(w, req)
	if w.status == 0 {
		return http.StatusOK, nil
	}
	return w.status, nil
}

// streamWriter is a ResponseWriter that writes the body straight to out.
type streamWriter struct {
	mu     sync.Mutex
	out    io.Writer
	header http.Header
	status int
}

func (w *streamWriter) Header() http.Header { return w.header }

func (w *streamWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *streamWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.out.Write(p)
}

// Flush is a no-op: every Write already reached out.
func (w *streamWriter) Flush() {}
