// Command bareserve is the baseline of the black-box benchmarks
// (.ci/blackbox): a bare net/http server, run as its own process, that
// does the least a server can do for the requests demosvc is measured on.
//
// With -body it answers every request with the bytes of that file, as
// application/json: what demosvc's reads are compared with. With -commit
// it reads each request's body, stores it with one raw Pebble
// Commit(Sync) in a fresh store in that directory, and answers 201 with
// the bytes of -body: what demosvc's acknowledged writes are compared with.
// It uses the timeouts demosvc serves with by default.
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"

	"demosvc/config"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "`address` to listen on")
	bodyFile := flag.String("body", "", "`file` whose bytes every answer carries")
	commitDir := flag.String("commit", "", "`dir` of a new Pebble store: each request's body is committed there with Sync")
	flag.Parse()
	body, err := os.ReadFile(*bodyFile)
	if err != nil {
		log.Fatal(err)
	}
	handler := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusOK)
		w.Write(body)
	}
	if *commitDir != "" {
		db, err := pebble.Open(*commitDir, &pebble.Options{})
		if err != nil {
			log.Fatal(err)
		}
		defer db.Close()
		var seq atomic.Uint64
		handler = func(w http.ResponseWriter, r *http.Request) {
			in, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			b := db.NewBatch()
			defer b.Close()
			b.Set(binary.BigEndian.AppendUint64([]byte{0}, seq.Add(1)), in, nil)
			if err := b.Commit(pebble.Sync); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			w.WriteHeader(http.StatusCreated)
			w.Write(body)
		}
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	// The address on stdout tells the script where to send its load.
	fmt.Println(ln.Addr().String())
	c := config.Default().HTTP
	srv := &http.Server{Handler: http.HandlerFunc(handler), ReadHeaderTimeout: c.ReadHeaderTimeout,
		ReadTimeout: c.ReadTimeout, WriteTimeout: c.WriteTimeout, IdleTimeout: c.IdleTimeout, MaxHeaderBytes: c.MaxHeaderBytes}
	log.Fatal(srv.Serve(ln))
}
