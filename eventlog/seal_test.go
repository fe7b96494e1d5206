package eventlog

import (
	"bytes"
	crand "crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testKey returns a deterministic 32-byte key whose bytes start at first.
func testKey(first byte) []byte {
	k := make([]byte, MasterKeySize)
	for i := range k {
		k[i] = first + byte(i)
	}
	return k
}

func newTestSealer(t *testing.T, key []byte) *Sealer {
	t.Helper()
	s, err := NewSealer(key, crand.Reader)
	if err != nil {
		t.Fatalf("NewSealer: %v", err)
	}
	return s
}

// failingReader fails every read: handing it to ReadMasterKey proves that
// the call did not need fresh random bytes.
type failingReader struct{}

func (failingReader) Read([]byte) (int, error) {
	return 0, errors.New("this call must not draw random bytes")
}

func TestSealerRoundTrip(t *testing.T) {
	s := newTestSealer(t, testKey(1))
	for _, plain := range [][]byte{[]byte("hunter2"), {}, bytes.Repeat([]byte{0xff}, 4096)} {
		sealed, err := s.Seal(plain)
		if err != nil {
			t.Fatalf("Seal(%d bytes): %v", len(plain), err)
		}
		if len(plain) > 0 && bytes.Contains(sealed, plain) {
			t.Errorf("sealed value of %d bytes contains its plaintext", len(plain))
		}
		got, err := s.Open(sealed)
		if err != nil {
			t.Fatalf("Open(%d bytes): %v", len(plain), err)
		}
		if !bytes.Equal(got, plain) {
			t.Errorf("Open = %q, want %q", got, plain)
		}
	}
}

func TestSealingTheSameSecretTwiceGivesDifferentCiphertexts(t *testing.T) {
	s := newTestSealer(t, testKey(1))
	a, err := s.Seal([]byte("same"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Seal([]byte("same"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a, b) {
		t.Error("two seals of one plaintext are identical: the nonce is not fresh")
	}
}

func TestOpenRefusesWhatItCannotAuthenticate(t *testing.T) {
	s := newTestSealer(t, testKey(1))
	sealed, err := s.Seal([]byte("hunter2"))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("another key", func(t *testing.T) {
		other := newTestSealer(t, testKey(100))
		if got, err := other.Open(sealed); !errors.Is(err, ErrUnseal) {
			t.Errorf("Open under another key = %q, %v; want ErrUnseal", got, err)
		}
	})
	for i := range sealed {
		bad := bytes.Clone(sealed)
		bad[i] ^= 0x80
		if got, err := s.Open(bad); !errors.Is(err, ErrUnseal) {
			t.Errorf("Open with byte %d of %d flipped = %q, %v; want ErrUnseal", i, len(sealed), got, err)
		}
	}
	t.Run("truncated", func(t *testing.T) {
		for _, n := range []int{0, 1, 12, 12 + 15, len(sealed) - 1} {
			if got, err := s.Open(sealed[:n]); !errors.Is(err, ErrUnseal) {
				t.Errorf("Open of the first %d bytes = %q, %v; want ErrUnseal", n, got, err)
			}
		}
	})
}

func TestNewSealerRefusesAKeyOfTheWrongLength(t *testing.T) {
	for _, n := range []int{0, 16, 24, 31, 33} {
		if _, err := NewSealer(make([]byte, n), crand.Reader); err == nil {
			t.Errorf("NewSealer accepted a %d-byte key", n)
		}
	}
}

func TestSealFailsWhenRandomnessFails(t *testing.T) {
	s, err := NewSealer(testKey(1), failingReader{})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := s.Seal([]byte("x")); err == nil {
		t.Errorf("Seal with a failing random source = %x, nil; want an error", v)
	}
}

// A new key is not written by reading it; once saved, with mode 0600, it
// is read again rather than made anew.
func TestANewMasterKeyIsKeptOnceSavedAndReadAgain(t *testing.T) {
	dir := t.TempDir()
	want := testKey(7)
	key, fresh, err := ReadMasterKey(dir, "", bytes.NewReader(want))
	if err != nil || !fresh {
		t.Fatalf("first ReadMasterKey: fresh %v, %v; want a fresh key", fresh, err)
	}
	if !bytes.Equal(key, want) {
		t.Fatalf("first ReadMasterKey = %x, want the random bytes %x", key, want)
	}
	path := filepath.Join(dir, MasterKeyFile)
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("reading a new key wrote %s: %v", path, err)
	}
	if err := SaveMasterKey(dir, key); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("master key file: %v", err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Errorf("master key file mode = %v, want 0600", perm)
	}
	if onDisk, err := os.ReadFile(path); err != nil || !bytes.Equal(onDisk, want) {
		t.Errorf("master key file holds %x (%v), want %x", onDisk, err, want)
	}
	again, fresh, err := ReadMasterKey(dir, "", failingReader{})
	if err != nil || fresh {
		t.Fatalf("second ReadMasterKey: fresh %v, %v; want the stored key", fresh, err)
	}
	if !bytes.Equal(again, want) {
		t.Errorf("second ReadMasterKey = %x, want the stored %x", again, want)
	}
}

func TestReadMasterKeyPrefersTheConfiguredKey(t *testing.T) {
	want := testKey(42)
	configured := base64.StdEncoding.EncodeToString(want)

	t.Run("no file is created", func(t *testing.T) {
		dir := t.TempDir()
		key, fresh, err := ReadMasterKey(dir, configured, failingReader{})
		if err != nil || fresh {
			t.Fatal(fresh, err)
		}
		if !bytes.Equal(key, want) {
			t.Errorf("ReadMasterKey = %x, want the configured %x", key, want)
		}
		if _, err := os.Stat(filepath.Join(dir, MasterKeyFile)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("stat of %s = %v, want not-exist", MasterKeyFile, err)
		}
	})

	t.Run("an existing file is ignored", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, MasterKeyFile), testKey(1), 0o600); err != nil {
			t.Fatal(err)
		}
		key, fresh, err := ReadMasterKey(dir, configured, failingReader{})
		if err != nil || fresh {
			t.Fatal(fresh, err)
		}
		if !bytes.Equal(key, want) {
			t.Errorf("ReadMasterKey = %x, want the configured %x", key, want)
		}
	})
}

func TestReadMasterKeyRefusesABadKey(t *testing.T) {
	for _, tc := range []struct {
		name       string
		configured string
		file       []byte // written to master.key first when not nil
	}{
		{name: "configured key of 16 bytes", configured: base64.StdEncoding.EncodeToString(make([]byte, 16))},
		{name: "configured key of 33 bytes", configured: base64.StdEncoding.EncodeToString(make([]byte, 33))},
		{name: "configured key not base64", configured: strings.Repeat("!", 44)},
		{name: "configured key in URL base64", configured: base64.URLEncoding.EncodeToString(bytes.Repeat([]byte{0xfb}, 32))},
		{name: "file of 31 bytes", file: make([]byte, 31)},
		{name: "file of 33 bytes", file: make([]byte, 33)},
		{name: "empty file", file: []byte{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, MasterKeyFile)
			if tc.file != nil {
				if err := os.WriteFile(path, tc.file, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			key, _, err := ReadMasterKey(dir, tc.configured, failingReader{})
			if err == nil {
				t.Fatalf("ReadMasterKey = %x, nil; want an error", key)
			}
			if tc.file != nil {
				// The bad file must be reported, not replaced.
				if onDisk, err := os.ReadFile(path); err != nil || !bytes.Equal(onDisk, tc.file) {
					t.Errorf("master key file now holds %x (%v), want it untouched", onDisk, err)
				}
			} else if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a refused configured key created %s (stat: %v)", MasterKeyFile, err)
			}
		})
	}
}

func TestReadMasterKeyReportsAFailingRandomSource(t *testing.T) {
	dir := t.TempDir()
	if key, _, err := ReadMasterKey(dir, "", io.LimitReader(crand.Reader, 8)); err == nil {
		t.Fatalf("ReadMasterKey with 8 random bytes = %x, nil; want an error", key)
	}
	if _, err := os.Stat(filepath.Join(dir, MasterKeyFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed key creation left %s behind (stat: %v)", MasterKeyFile, err)
	}
}

func TestSealedJSON(t *testing.T) {
	v := Sealed{0, 1, 2, 0xfe, 0xff}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"$sealed":"AAEC/v8="}`; string(b) != want {
		t.Errorf("MarshalJSON = %s, want %s", b, want)
	}
	t.Run("round trip", func(t *testing.T) {
		var got Sealed
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, v) {
			t.Errorf("UnmarshalJSON = %x, want %x", got, v)
		}
	})
	for _, tc := range []struct{ name, in string }{
		{"plain string", `"hunter2"`},
		{"base64 string without the wrapper", `"AAEC/v8="`},
		{"empty object", `{}`},
		{"extra field", `{"$sealed":"AAEC/v8=","plain":"hunter2"}`},
		{"ciphertext not base64", `{"$sealed":"not base64!"}`},
		{"number", `42`},
		{"array", `["AAEC/v8="]`},
	} {
		t.Run("refuses "+tc.name, func(t *testing.T) {
			var got Sealed
			if err := json.Unmarshal([]byte(tc.in), &got); err == nil {
				t.Errorf("UnmarshalJSON(%s) = %x, nil; want an error", tc.in, got)
			}
		})
	}
	t.Run("null round-trips as no value", func(t *testing.T) {
		var s Sealed
		b, _ := json.Marshal(s)
		if string(b) != `{"$sealed":null}` {
			t.Fatalf("nil Sealed marshals as %s", b)
		}
		got := Sealed{1}
		if err := json.Unmarshal(b, &got); err != nil || got != nil {
			t.Errorf("Unmarshal(%s) = %x, %v; want nil, nil", b, got, err)
		}
	})
	t.Run("refuses a plain string inside a payload", func(t *testing.T) {
		var n secretNote
		err := json.Unmarshal([]byte(`{"name":"db","secret":"hunter2"}`), &n)
		if err == nil {
			t.Fatalf("a plaintext secret was accepted: %+v", n)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("the error repeats the plaintext: %v", err)
		}
	})
}
