package projections

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"demosvc/eventlog"
)

// cheapPasswords lowers argon2's cost for the length of a test: a stored
// hash names its parameters, so verification still checks what it must.
func cheapPasswords(t testing.TB) {
	old := PasswordParams
	PasswordParams = Argon2Params{MemoryKiB: 64, Time: 1, Threads: 1}
	t.Cleanup(func() { PasswordParams = old })
}

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func TestPasswordHashUsesOWASPArgon2idParameters(t *testing.T) {
	if PasswordParams != (Argon2Params{MemoryKiB: 19456, Time: 2, Threads: 1}) {
		t.Fatalf("PasswordParams = %+v, want OWASP's m=19456 KiB, t=2, p=1", PasswordParams)
	}
	phc, err := HashPassword(t.Context(), "correct horse battery", crand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(phc, "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Errorf("hash %q does not name argon2id with OWASP's parameters", phc)
	}
	p, salt, sum, err := ParsePasswordHash(phc)
	if err != nil || p != PasswordParams || len(salt) != 16 || len(sum) != 32 {
		t.Errorf("parsed %+v salt %d hash %d err %v", p, len(salt), len(sum), err)
	}
	if ok, err := VerifyPassword(t.Context(), phc, "correct horse battery"); !ok || err != nil {
		t.Error("the right password does not verify")
	}
	if ok, _ := VerifyPassword(t.Context(), phc, "correct horse batterY"); ok {
		t.Error("a wrong password verifies")
	}
	again, _ := HashPassword(t.Context(), "correct horse battery", crand.Reader)
	if again == phc {
		t.Error("two hashes of one password are equal: the salt is not fresh")
	}
	if err := CheckPassword("short pass"); err == nil {
		t.Error("a 10-character password is accepted")
	}
	if err := CheckPassword("twelve chars"); err != nil {
		t.Errorf("a 12-character password is refused: %v", err)
	}
}

// TestPasswordHashesRunOnePerCoreAtMost: sign-ins from many addresses,
// each within its limit, do not each take argon2's 19 MiB at once. Every
// computation is held until the test lets it go, one at a time, and the
// most under way at once is counted.
func TestPasswordHashesRunOnePerCoreAtMost(t *testing.T) {
	cheapPasswords(t)
	phc, err := HashPassword(t.Context(), "correct horse battery", crand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var running, most atomic.Int32
	release := make(chan struct{})
	real := idKey
	idKey = func(password, salt []byte, time, memory uint32, threads uint8, keyLen uint32) []byte {
		n := running.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-release
		running.Add(-1)
		return real(password, salt, time, memory, threads, keyLen)
	}
	t.Cleanup(func() { idKey = real })
	slots := int32(cap(hashSlots))
	const callers = 12
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			if ok, err := VerifyPassword(t.Context(), phc, "correct horse battery"); !ok || err != nil {
				t.Error("the right password is refused")
			}
		})
	}
	pollUntil(t, "every slot to be taken", func() bool { return running.Load() >= min(slots, callers) })
	for range callers {
		release <- struct{}{}
	}
	wg.Wait()
	if m := most.Load(); m != min(slots, callers) {
		t.Errorf("%d argon2 computations ran at once, want %d (one a core)", m, min(slots, callers))
	}
}

// Password checks waiting for a core are bounded, and a caller that
// leaves stops waiting: a flood of sign-ins from many addresses holds at
// most maxHashWaiters goroutines, and runs no argon2 for clients gone.
func TestPasswordChecksWaitBoundedAndLeaveWithTheirCaller(t *testing.T) {
	cheapPasswords(t)
	phc, err := HashPassword(t.Context(), "correct horse battery", crand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var running atomic.Int32
	release := make(chan struct{})
	real := idKey
	idKey = func(password, salt []byte, time, memory uint32, threads uint8, keyLen uint32) []byte {
		running.Add(1)
		<-release
		return real(password, salt, time, memory, threads, keyLen)
	}
	t.Cleanup(func() { idKey = real })
	slots := cap(hashSlots)
	var wg sync.WaitGroup
	check := func() {
		wg.Go(func() {
			if ok, err := VerifyPassword(context.Background(), phc, "correct horse battery"); !ok || err != nil {
				t.Errorf("a check that waited its turn: %v, %v", ok, err)
			}
		})
	}
	for range slots {
		check()
	}
	pollUntil(t, "every slot to be taken", func() bool { return int(running.Load()) == slots })
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := VerifyPassword(gone, phc, "correct horse battery"); !errors.Is(err, context.Canceled) {
		t.Errorf("a check whose caller left while it waited: %v, want context.Canceled", err)
	}
	for range maxHashWaiters - slots {
		check()
	}
	pollUntil(t, "every waiter's place to be taken", func() bool { return len(hashWaiters) == maxHashWaiters })
	if _, err := VerifyPassword(context.Background(), phc, "correct horse battery"); !errors.Is(err, ErrPasswordBusy) {
		t.Errorf("a check past %d waiting: %v, want ErrPasswordBusy", maxHashWaiters, err)
	}
	for range maxHashWaiters {
		release <- struct{}{}
	}
	wg.Wait()
	if n := running.Load(); n != maxHashWaiters {
		t.Errorf("%d argon2 computations ran, want %d: none for the caller that left or the one refused", n, maxHashWaiters)
	}
}

func TestUserLifecycle(t *testing.T) {
	cheapPasswords(t)
	e := openEnv(t, "", DefaultOptions)
	ctx := context.Background()
	pr := e.account("acme")
	client := ClientInfo{Addr: "127.0.0.1", UserAgent: "test"}
	const pw = "a long password"

	t.Run("first admin link creates the admin, sets the password and signs in", func(t *testing.T) {
		link, err := e.p.IssueSetupLink(ctx, "cli", pr.Account.ID, "", t0)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := e.p.CompleteSetup(ctx, link.Token, "Admin@Example.com", "too short", client, t0, time.Hour); err == nil {
			t.Fatal("a short password is accepted")
		}
		u, tok, err := e.p.CompleteSetup(ctx, link.Token, "Admin@Example.com", pw, client, t0, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if u.Role != RoleAdmin || !u.HasPassword || !strings.HasPrefix(u.ID, PrefixUser) {
			t.Errorf("user %+v", u)
		}
		if s, ok := e.p.Session(tok, t0.Add(time.Minute)); !ok || s.User.ID != u.ID {
			t.Errorf("session after setup: %+v %v", s, ok)
		}
		if _, ok := e.p.Session(tok, t0.Add(time.Hour)); ok {
			t.Error("a session outlives its maximum age")
		}
		if _, _, err := e.p.CompleteSetup(ctx, link.Token, "b@example.com", pw, client, t0, time.Hour); err == nil {
			t.Error("a setup link works twice")
		}
		if _, err := e.p.IssueSetupLink(ctx, "cli", pr.Account.ID, "", t0); err == nil {
			t.Error("a first-admin link is issued for an account that has users")
		}
	})

	t.Run("a first-admin link ends once the account has a user made another way", func(t *testing.T) {
		other := e.account("other")
		link, err := e.p.IssueSetupLink(ctx, "cli", other.Account.ID, "", t0) // serve printed it
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := e.p.Setup(link.Token, t0); !ok {
			t.Fatal("a fresh first-admin link does not work")
		}
		if _, _, err := e.p.CreateUser(ctx, "cli", other.Account.ID, "boss@example.com", RoleAdmin, t0); err != nil {
			t.Fatal(err)
		}
		if _, ok := e.p.Setup(link.Token, t0); ok {
			t.Error("the first-admin link's form still opens after the account got a user")
		}
		if _, _, err := e.p.CompleteSetup(ctx, link.Token, "intruder@example.com", pw, client, t0, time.Hour); err == nil {
			t.Error("the first-admin link made a second admin")
		}
	})

	t.Run("sign in is generic on failure", func(t *testing.T) {
		for _, c := range [][2]string{{"admin@example.com", "wrong password!"}, {"nobody@example.com", pw}} {
			if _, _, err := e.p.SignIn(ctx, c[0], c[1], client, t0, time.Hour); !errors.Is(err, ErrBadCredentials) {
				t.Errorf("SignIn(%q): %v, want ErrBadCredentials", c[0], err)
			}
		}
		if _, tok, err := e.p.SignIn(ctx, "ADMIN@example.com", pw, client, t0, time.Hour); err != nil {
			t.Errorf("sign in with the e-mail in another case: %v", err)
		} else if e.p.SignOut(ctx, tok) != nil {
			t.Error("sign out failed")
		} else if _, ok := e.p.Session(tok, t0); ok {
			t.Error("a signed-out session still works")
		}
	})

	t.Run("a reset ends sessions, disabling ends them and refuses sign in", func(t *testing.T) {
		u, link, err := e.p.CreateUser(ctx, "cli", pr.Account.ID, "viewer@example.com", RoleViewer, t0)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := e.p.SignIn(ctx, "viewer@example.com", pw, client, t0, time.Hour); err == nil {
			t.Error("a user without a password signs in")
		}
		if _, _, err := e.p.CompleteSetup(ctx, link.Token, "", pw, client, t0.Add(25*time.Hour), time.Hour); err == nil {
			t.Error("an expired setup link works")
		}
		_, tok, err := e.p.CompleteSetup(ctx, link.Token, "ignored@example.com", pw, client, t0, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		reset, err := e.p.IssueSetupLink(ctx, "cli", "", u.ID, t0)
		if err != nil {
			t.Fatal(err)
		}
		_, tok2, err := e.p.CompleteSetup(ctx, reset.Token, "", pw+"2", client, t0, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := e.p.Session(tok, t0); ok {
			t.Error("setting a password left an older session open")
		}
		if _, err := e.p.DisableUser(ctx, "cli", "acc_other", u.ID); err == nil {
			t.Error("a user is disabled through another account")
		}
		if _, err := e.p.DisableUser(ctx, "cli", "", u.ID); err != nil {
			t.Fatal(err)
		}
		if _, ok := e.p.Session(tok2, t0); ok {
			t.Error("disabling left a session open")
		}
		if _, _, err := e.p.SignIn(ctx, "viewer@example.com", pw+"2", client, t0, time.Hour); !errors.Is(err, ErrBadCredentials) {
			t.Errorf("a disabled user signs in: %v", err)
		}
	})

	t.Run("the log holds no password, hash or token in plaintext", func(t *testing.T) {
		var all bytes.Buffer
		if _, err := e.log.Export(&all, 1); err != nil {
			t.Fatal(err)
		}
		for _, secret := range []string{pw, "argon2id"} {
			if bytes.Contains(all.Bytes(), []byte(secret)) {
				t.Errorf("the log holds %q", secret)
			}
		}
	})
}

// userSteps drives random user commands for the property test.
type userSteps struct {
	e        *env
	links    []string
	sessions []string
	users    []string
	n        int
}

func newUserSteps(e *env) *userSteps {
	e.t.Helper()
	cheapPasswords(e.t)
	return &userSteps{e: e}
}

func (u *userSteps) step(rng *rand.Rand, pr Principal) error {
	ctx := context.Background()
	client := ClientInfo{Addr: "127.0.0.1", UserAgent: "prop"}
	pick := func(l []string) string {
		if len(l) == 0 {
			return "none"
		}
		return l[rng.IntN(len(l))]
	}
	// Some sessions expire within the run, so pruning is exercised.
	maxAge := []time.Duration{5 * time.Second, time.Hour}[rng.IntN(2)]
	u.n++
	switch rng.IntN(6) {
	case 0:
		usr, link, err := u.e.p.CreateUser(ctx, "cli", pr.Account.ID, fmt.Sprintf("u%d@example.com", rng.IntN(8)), RoleViewer, t0)
		if err == nil {
			u.links = append(u.links, link.Token)
			u.users = append(u.users, usr.ID)
		}
		return err
	case 1:
		_, tok, err := u.e.p.CompleteSetup(ctx, pick(u.links), "", "password number one", client, t0, maxAge)
		if err == nil {
			u.sessions = append(u.sessions, tok)
		}
		return err
	case 2:
		_, tok, err := u.e.p.SignIn(ctx, fmt.Sprintf("u%d@example.com", rng.IntN(8)), "password number one", client, t0, maxAge)
		if err == nil {
			u.sessions = append(u.sessions, tok)
		}
		if errors.Is(err, ErrBadCredentials) {
			return nil
		}
		return err
	case 3:
		return u.e.p.SignOut(ctx, pick(u.sessions))
	case 4:
		link, err := u.e.p.IssueSetupLink(ctx, "cli", "", pick(u.users), t0)
		if err == nil {
			u.links = append(u.links, link.Token)
		}
		return err
	default:
		_, err := u.e.p.DisableUser(ctx, "cli", "", pick(u.users))
		return err
	}
}

// dumpUsers renders the users' part of the state in a fixed order.
func dumpUsers(b *strings.Builder, s *State) {
	enc := json.NewEncoder(b)
	for _, r := range s.users.order {
		enc.Encode(r.User)
		fmt.Fprintf(b, " password %x\n", r.password)
	}
	for _, h := range slices.SortedFunc(maps.Keys(s.users.links), compareHash) {
		fmt.Fprintf(b, "link %x %+v\n", h, *s.users.links[h])
	}
	for _, h := range slices.SortedFunc(maps.Keys(s.users.sessions), compareHash) {
		fmt.Fprintf(b, "session %x %+v\n", h, *s.users.sessions[h])
	}
}

// TestPruningSessionsByExpiryRemovesWhatAScanWould: sign-ins that prune
// by the expiry heap leave the same sessions as the scan of every session
// they replace would, through sign-outs, a user's sessions ended, and a
// token signed in again with another expiry.
func TestPruningSessionsByExpiryRemovesWhatAScanWould(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	var u userState
	u.init()
	for i := range 4 {
		id := fmt.Sprint("u", i)
		u.byID[id] = &userRec{User: User{ID: id}}
	}
	want := map[[sha256.Size]byte]userSession{}
	now := int64(1_000_000)
	for i := range 20_000 {
		now += int64(rng.IntN(3))
		var h [sha256.Size]byte
		h[0], h[1] = byte(rng.IntN(64)), byte(rng.IntN(4)) // tokens come back
		switch rng.IntN(10) {
		case 0:
			delete(u.sessions, h) // a sign-out
			delete(want, h)
		case 1:
			user := fmt.Sprint("u", rng.IntN(4))
			u.endSessions(user)
			for k, ses := range want {
				if ses.userID == user {
					delete(want, k)
				}
			}
		default:
			ses := userSession{userID: fmt.Sprint("u", rng.IntN(4)), signedInAt: now, expiresAt: now + int64(rng.IntN(60))}
			u.pruneSessions(now)
			u.addSession(h, &ses)
			for k, w := range want {
				if w.expiresAt <= now {
					delete(want, k)
				}
			}
			want[h] = ses
		}
		if len(u.sessions) != len(want) {
			t.Fatalf("step %d: %d sessions kept, want %d", i, len(u.sessions), len(want))
		}
		for k, w := range want {
			if got := u.sessions[k]; got == nil || *got != w {
				t.Fatalf("step %d: session %x = %+v, want %+v", i, k[:2], got, w)
			}
		}
	}
}

// A user keeps at most maxSessionsPerUser sessions: each sign-in past it
// ends the oldest (by time, then hash), whatever order the sessions were
// added in, so that a state read from a snapshot (sessions by hash) ends
// the same ones a replay (by sign-in) does; other users keep theirs.
func TestAUserKeepsABoundedNumberOfSessions(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	type signIn struct {
		h   [sha256.Size]byte
		ses userSession
	}
	var all []signIn
	for i := range maxSessionsPerUser + 50 {
		var h [sha256.Size]byte
		for j := range h {
			h[j] = byte(rng.IntN(256))
		}
		all = append(all, signIn{h, userSession{userID: "usr_a", signedInAt: int64(1000 + i/7), expiresAt: 1_000_000}})
	}
	build := func(order []signIn) *userState {
		u := &userState{}
		u.init()
		for _, id := range []string{"usr_a", "usr_b"} {
			u.byID[id] = &userRec{User: User{ID: id}}
		}
		u.addSession([sha256.Size]byte{1}, &userSession{userID: "usr_b", signedInAt: 1, expiresAt: 1_000_000})
		for _, s := range order {
			ses := s.ses
			u.addSession(s.h, &ses)
		}
		return u
	}
	kept := func(u *userState) []string {
		var out []string
		for h, ses := range u.sessions {
			if ses.userID == "usr_a" {
				out = append(out, fmt.Sprintf("%d/%x", ses.signedInAt, h))
			}
		}
		slices.Sort(out)
		return out
	}
	byTime := build(all)
	shuffled := slices.Clone(all)
	rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	byChance := build(shuffled)

	got := kept(byTime)
	var want []string
	for _, s := range all {
		want = append(want, fmt.Sprintf("%d/%x", s.ses.signedInAt, s.h))
	}
	slices.Sort(want)
	want = want[len(want)-maxSessionsPerUser:] // the latest, by time then hash
	if !slices.Equal(got, want) {
		t.Errorf("after %d sign-ins, %d sessions kept; want the latest %d", len(all), len(got), maxSessionsPerUser)
	}
	if other := kept(byChance); !slices.Equal(other, got) {
		t.Error("sessions added in another order kept other sessions")
	}
	if byTime.sessions[[sha256.Size]byte{1}] == nil {
		t.Error("another user's session was ended")
	}
	byTime.endSessions("usr_a")
	if len(byTime.sessions) != 1 {
		t.Errorf("%d sessions after ending usr_a's, want usr_b's alone", len(byTime.sessions))
	}
}

// TestASignInKeepsABoundedUserAgentInUTF8: whatever bytes a User-Agent
// header holds, a sign-in records at most 300 bytes of UTF-8 (and an
// import refuses a user agent or address longer than any sign-in wrote).
func TestASignInKeepsABoundedUserAgentInUTF8(t *testing.T) {
	for _, ua := range []string{strings.Repeat("\xff", 400), strings.Repeat("a\xff", 200), strings.Repeat("é", 200), strings.Repeat("a", 299) + "é", "short \xfe agent"} {
		got := clip(ua, 300)
		clean := strings.ToValidUTF8(ua, "\ufffd")
		if len(got) > 300 || len(clean) > 300 && len(got) < 297 || len(clean) <= 300 && got != clean || !utf8.ValidString(got) || !strings.HasPrefix(clean, got) {
			t.Errorf("clip(%q…) = %d bytes %q…, want 297 to 300 bytes of UTF-8 from its start", ua[:10], len(got), got[:min(len(got), 10)])
		}
	}
	ok := UserSignedIn{UserID: "usr_01m80s8vkm2e8k3np7nbv61qm2", TokenHash: strings.Repeat("ab", 32), ExpiresAt: "2026-11-27T12:00:00Z",
		UserAgent: strings.Repeat("\ufffd", 300), ClientAddr: "2001:db8::1"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("a sign-in an earlier release could write: %v", err)
	}
	for param, bad := range map[string]UserSignedIn{
		"user_agent":  {UserID: ok.UserID, TokenHash: ok.TokenHash, ExpiresAt: ok.ExpiresAt, UserAgent: strings.Repeat("a", 4<<20)},
		"client_addr": {UserID: ok.UserID, TokenHash: ok.TokenHash, ExpiresAt: ok.ExpiresAt, ClientAddr: strings.Repeat("1", 300)},
	} {
		var e *Error
		if err := bad.Validate(); !errors.As(err, &e) || e.Param != param {
			t.Errorf("a sign-in with a long %s: %v, want it refused on %s", param, err, param)
		}
	}
}

// A data dir read under another master key (restored without its
// master.key) names the users whose password does not open there, the
// disabled ones aside, and none under its own key.
func TestUsersWhosePasswordDoesNotOpenAreNamed(t *testing.T) {
	cheapPasswords(t)
	dir := t.TempDir()
	e := openEnv(t, dir, DefaultOptions)
	ctx := context.Background()
	pr := e.account("acme")
	client := ClientInfo{Addr: "127.0.0.1", UserAgent: "test"}
	var ids []string
	for _, email := range []string{"a@example.com", "b@example.com", "gone@example.com"} {
		u, link, err := e.p.CreateUser(ctx, "cli", pr.Account.ID, email, RoleAdmin, t0)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := e.p.CompleteSetup(ctx, link.Token, "", "a long password", client, t0, time.Hour); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, u.ID)
	}
	if _, _, err := e.p.CreateUser(ctx, "cli", pr.Account.ID, "nopassword@example.com", RoleViewer, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.p.DisableUser(ctx, "cli", "", ids[2]); err != nil {
		t.Fatal(err)
	}
	if got := e.p.UnavailablePasswords(); len(got) != 0 {
		t.Errorf("under its own key: %v, want none", got)
	}
	e.close()

	other := make([]byte, eventlog.MasterKeySize)
	other[0] = 1
	sealer, err := eventlog.NewSealer(other, crand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	opts := DefaultOptions
	opts.Sealer = sealer
	e = openEnv(t, dir, opts)
	if got := e.p.UnavailablePasswords(); !slices.Equal(got, ids[:2]) {
		t.Errorf("under another key: %v, want %v (not the disabled user, nor one without a password)", got, ids[:2])
	}
}
