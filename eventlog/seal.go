package eventlog

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"demosvc/eventlog/strictjson"
)

// MasterKeySize is the size of the AES-256 key that seals secrets.
const MasterKeySize = 32

// MasterKeyFile is the name of the master key file inside the data dir.
const MasterKeyFile = "master.key"

// Sealed is a secret encrypted with AES-256-GCM under the master key: the
// 12-byte nonce followed by the ciphertext and tag. Payload types use it for
// every secret field, so the log never holds a secret in plaintext.
//
// In JSON it is {"$sealed":"<base64>"}, which export and import carry
// unchanged; `demosvc log` shows it as "[sealed]".
type Sealed []byte

type sealedJSON struct {
	Sealed []byte `json:"$sealed"`
}

// MarshalJSON renders the ciphertext as {"$sealed":"<base64>"}.
func (s Sealed) MarshalJSON() ([]byte, error) { return json.Marshal(sealedJSON{Sealed: s}) }

// UnmarshalJSON accepts only the {"$sealed":…} form (base64, or null for
// no value), so a fixture can never smuggle a plaintext secret into the
// log.
func (s *Sealed) UnmarshalJSON(b []byte) error {
	var v struct {
		Sealed json.RawMessage `json:"$sealed"`
	}
	if err := strictjson.DecodeObject(b, &v); err != nil || v.Sealed == nil {
		return errors.New(`a sealed field must be {"$sealed":"<base64>"}`)
	}
	if string(v.Sealed) == "null" {
		*s = nil
		return nil
	}
	var raw []byte
	if err := json.Unmarshal(v.Sealed, &raw); err != nil {
		return errors.New(`a sealed field must be {"$sealed":"<base64>"}`)
	}
	*s = raw
	return nil
}

// Sealer seals and opens secrets under one master key.
type Sealer struct {
	aead cipher.AEAD
	rand io.Reader
}

// NewSealer returns a sealer for key, drawing nonces from random.
func NewSealer(key []byte, random io.Reader) (*Sealer, error) {
	if len(key) != MasterKeySize {
		return nil, fmt.Errorf("master key must be %d bytes, got %d", MasterKeySize, len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Sealer{aead: aead, rand: random}, nil
}

// Seal encrypts plaintext.
func (s *Sealer) Seal(plaintext []byte) (Sealed, error) {
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(plaintext)+s.aead.Overhead())
	if _, err := io.ReadFull(s.rand, nonce); err != nil {
		return nil, fmt.Errorf("sealing: %w", err)
	}
	return s.aead.Seal(nonce, nonce, plaintext, nil), nil
}

// ErrUnseal reports a sealed value that does not open under the master key:
// it was sealed under another key, or it was altered.
var ErrUnseal = errors.New("sealed value does not open under this master key")

// Open decrypts a sealed value. It returns ErrUnseal if the value was
// sealed under another key or was altered.
func (s *Sealer) Open(v Sealed) ([]byte, error) {
	n := s.aead.NonceSize()
	if len(v) < n+s.aead.Overhead() {
		return nil, ErrUnseal
	}
	out, err := s.aead.Open(nil, v[:n], v[n:], nil)
	if err != nil {
		return nil, ErrUnseal
	}
	return out, nil
}

// ReadMasterKey returns the master key: configured (standard base64 of 32
// bytes) when given, otherwise read from dir/master.key, otherwise a new
// one from random bytes (fresh), which it does not write: serve first
// checks that the log holds nothing sealed under a key it would then
// never have, and SaveMasterKey keeps it.
func ReadMasterKey(dir, configured string, random io.Reader) (key []byte, fresh bool, err error) {
	if configured != "" {
		key, err := base64.StdEncoding.DecodeString(configured)
		if err != nil || len(key) != MasterKeySize {
			return nil, false, fmt.Errorf("secrets.master_key must be standard base64 of %d bytes", MasterKeySize)
		}
		return key, false, nil
	}
	path := filepath.Join(dir, MasterKeyFile)
	key, err = os.ReadFile(path)
	if err == nil {
		if len(key) != MasterKeySize {
			return nil, false, fmt.Errorf("master key file %s: want %d bytes, found %d", path, MasterKeySize, len(key))
		}
		return key, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, false, fmt.Errorf("reading master key: %w", err)
	}
	key = make([]byte, MasterKeySize)
	if _, err := io.ReadFull(random, key); err != nil {
		return nil, false, err
	}
	return key, true, nil
}

// SaveMasterKey writes key to dir/master.key, mode 0600, durably.
func SaveMasterKey(dir string, key []byte) error {
	path := filepath.Join(dir, MasterKeyFile)
	// Write a temp file and rename it, so a crash never leaves a short key.
	tmp := path + ".tmp"
	os.Remove(tmp)
	if err := writeFileSync(tmp, key, 0o600); err != nil {
		return fmt.Errorf("creating master key: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("creating master key: %w", err)
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("creating master key: %w", err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// writeFileSync creates path exclusively and makes it durable, directory
// entry included.
func writeFileSync(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
