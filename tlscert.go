package main

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
)

// certificate serves the TLS certificate of tls.cert_file and
// tls.key_file, and loads them again on SIGHUP, so that a renewed
// certificate is served without a restart. A reload that fails keeps the
// certificate in use and says why.
type certificate struct {
	certFile, keyFile string
	current           atomic.Pointer[tls.Certificate]
}

// loadCertificate reads the pair once; serve refuses to start without it.
func loadCertificate(certFile, keyFile string) (*certificate, error) {
	c := &certificate{certFile: certFile, keyFile: keyFile}
	if err := c.reload(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *certificate) reload() error {
	pair, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return fmt.Errorf("tls: loading %s and %s: %w", c.certFile, c.keyFile, err)
	}
	c.current.Store(&pair)
	return nil
}

// tlsConfig is the server's TLS configuration: TLS 1.2 or later, the
// current certificate at every handshake.
func (c *certificate) tlsConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return c.current.Load(), nil
		},
	}
}

// onHangup answers every SIGHUP on hup until stop is closed: it reloads
// cert, or with TLS off (cert nil) says there is nothing to reload.
func onHangup(logger *slog.Logger, hup <-chan os.Signal, stop <-chan struct{}, cert *certificate) {
	for {
		select {
		case <-hup:
			if cert == nil {
				logger.Info("SIGHUP: nothing to reload, tls.cert_file is not set; still serving")
				continue
			}
			if err := cert.reload(); err != nil {
				logger.Error("TLS certificate not reloaded; still serving the previous one", "err", err)
				continue
			}
			logger.Info("TLS certificate reloaded", "cert_file", cert.certFile)
		case <-stop:
			return
		}
	}
}
