package projections

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"

	"golang.org/x/crypto/argon2"
)

// Argon2Params are the argon2id cost parameters of a password hash.
type Argon2Params struct {
	MemoryKiB uint32
	Time      uint32
	Threads   uint8
}

// PasswordParams are OWASP's recommended argon2id settings (Password
// Storage Cheat Sheet: m=19 MiB, t=2, p=1). A stored hash names its own
// parameters, so raising these later leaves old hashes verifiable.
var PasswordParams = Argon2Params{MemoryKiB: 19 * 1024, Time: 2, Threads: 1}

// MinPasswordChars is the shortest password a user may set.
const MinPasswordChars = 12

// maxPasswordBytes bounds the work one sign-in can ask for.
const maxPasswordBytes = 1024

const (
	saltBytes = 16
	hashBytes = 32
)

// hashSlots bounds the argon2 computations that run at once to the
// cores there are: each takes PasswordParams.MemoryKiB (19 MiB), and
// sign-in attempts from many addresses, each within its own limit, would
// otherwise take that much memory each, all together. More wait their
// turn, which is no slower with every core busy.
var hashSlots = make(chan struct{}, max(1, runtime.GOMAXPROCS(0)))

// idKey is argon2.IDKey, run in one of hashSlots; a variable so that a
// test can count the computations under way.
var idKey = argon2.IDKey

// hashWaiters bounds the computations running or waiting for a slot, so
// that what they hold (a goroutine, a parsed form) is bounded too: past it
// a sign-in is refused at once (ErrPasswordBusy), not queued.
var hashWaiters = make(chan struct{}, maxHashWaiters)

const maxHashWaiters = 64

// ErrPasswordBusy reports that maxHashWaiters password checks already run
// or wait for a core: try again in a moment.
var ErrPasswordBusy = errors.New("too many password checks at once")

// boundedIDKey is idKey in one of hashSlots, waiting for one at most while
// ctx lasts (a client that gave up costs no argon2 run after it left).
func boundedIDKey(ctx context.Context, password, salt []byte, time, memory uint32, threads uint8, keyLen uint32) ([]byte, error) {
	select {
	case hashWaiters <- struct{}{}:
	default:
		return nil, ErrPasswordBusy
	}
	defer func() { <-hashWaiters }()
	select {
	case hashSlots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-hashSlots }()
	return idKey(password, salt, time, memory, threads, keyLen), nil
}

// HashPassword returns the PHC string of password under argon2id with
// PasswordParams and a fresh salt from random:
// "$argon2id$v=19$m=19456,t=2,p=1$<salt>$<hash>".
func HashPassword(ctx context.Context, password string, random io.Reader) (string, error) {
	salt := make([]byte, saltBytes)
	if _, err := io.ReadFull(random, salt); err != nil {
		return "", fmt.Errorf("drawing a salt: %w", err)
	}
	pp := PasswordParams
	sum, err := boundedIDKey(ctx, []byte(password), salt, pp.Time, pp.MemoryKiB, pp.Threads, hashBytes)
	if err != nil {
		return "", err
	}
	enc := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, pp.MemoryKiB, pp.Time, pp.Threads,
		enc.EncodeToString(salt), enc.EncodeToString(sum)), nil
}

// ParsePasswordHash reads the parameters of a PHC argon2id string.
func ParsePasswordHash(phc string) (p Argon2Params, salt, sum []byte, err error) {
	parts := strings.Split(phc, "$")
	if len(parts) != 6 || parts[1] != "argon2id" || parts[2] != fmt.Sprintf("v=%d", argon2.Version) {
		return p, nil, nil, fmt.Errorf("not an argon2id v=%d hash", argon2.Version)
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &p.MemoryKiB, &p.Time, &p.Threads); err != nil {
		return p, nil, nil, fmt.Errorf("argon2id parameters %q: %w", parts[3], err)
	}
	if p.MemoryKiB == 0 || p.MemoryKiB > 1<<20 || p.Time == 0 || p.Time > 16 || p.Threads == 0 {
		return p, nil, nil, fmt.Errorf("argon2id parameters %q out of range", parts[3])
	}
	enc := base64.RawStdEncoding
	if salt, err = enc.DecodeString(parts[4]); err != nil {
		return p, nil, nil, fmt.Errorf("argon2id salt: %w", err)
	}
	if sum, err = enc.DecodeString(parts[5]); err != nil || len(sum) == 0 {
		return p, nil, nil, fmt.Errorf("argon2id hash is not base64")
	}
	return p, salt, sum, nil
}

// VerifyPassword reports whether password matches the PHC string, in time
// that does not depend on how much of it matches. The error is
// ErrPasswordBusy or ctx's: the check did not run.
func VerifyPassword(ctx context.Context, phc, password string) (bool, error) {
	if len(password) > maxPasswordBytes {
		return false, nil
	}
	p, salt, sum, err := ParsePasswordHash(phc)
	if err != nil {
		return false, nil
	}
	got, err := boundedIDKey(ctx, []byte(password), salt, p.Time, p.MemoryKiB, p.Threads, uint32(len(sum)))
	if err != nil {
		return false, err
	}
	return subtle.ConstantTimeCompare(got, sum) == 1, nil
}

// CheckPassword applies the password rules: 12 characters or more, at
// most 1 KiB, valid UTF-8.
func CheckPassword(password string) error {
	if err := checkText("password", password, MinPasswordChars, maxPasswordBytes); err != nil {
		return ParamErrorf(EInvalid, "password", "must be at least %d characters", MinPasswordChars)
	}
	if len(password) > maxPasswordBytes {
		return ParamErrorf(EInvalid, "password", "must be at most %d bytes", maxPasswordBytes)
	}
	return nil
}
