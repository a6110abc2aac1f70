//go:build linux

package dirstore

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/placementlab/placement/impl/claims"
)

// maxPlainName is the longest encoded name kept as is; longer names are
// hashed (the file's content carries the original).
const maxPlainName = 180

// encode maps any string to a file name: "k" and its base64url, or "h" and
// the hex SHA-256 of long strings.
func encode(s string) string {
	e := base64.RawURLEncoding.EncodeToString([]byte(s))
	if len(e) <= maxPlainName {
		return "k" + e
	}
	sum := sha256.Sum256([]byte(s))
	return "h" + hex.EncodeToString(sum[:])
}

// rawKey is a key (or worker name) as the files and the journal hold it:
// any bytes. A key that is valid UTF-8 is a JSON string, as files written
// before rawKey have it; any other is {"b64": its standard base64}, since
// encoding/json would replace its invalid bytes with U+FFFD (a key the
// store then could not find again: the affinity layer's keys are raw
// digest bytes).
type rawKey string

// MarshalJSON writes k as a string, or {"b64": ...} when it is not UTF-8.
func (k rawKey) MarshalJSON() ([]byte, error) {
	if utf8.ValidString(string(k)) {
		return json.Marshal(string(k))
	}
	return json.Marshal(struct {
		B64 string `json:"b64"`
	}{base64.StdEncoding.EncodeToString([]byte(k))})
}

// UnmarshalJSON reads either form MarshalJSON writes.
func (k *rawKey) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*k = rawKey(s)
		return nil
	}
	var o struct {
		B64 *string `json:"b64"`
	}
	if err := json.Unmarshal(b, &o); err != nil || o.B64 == nil {
		return fmt.Errorf("dirstore: a key is a JSON string or {\"b64\": ...}, not %s", b)
	}
	raw, err := base64.StdEncoding.DecodeString(*o.B64)
	if err != nil {
		return fmt.Errorf("dirstore: key: %w", err)
	}
	*k = rawKey(raw)
	return nil
}

// claimFile is a claim as stored.
type claimFile struct {
	Key      rawKey       `json:"key"`
	Rev      int64        `json:"rev"`
	Born     int64        `json:"born,omitempty"` // the lineage's first revision; absent (older files): Rev
	Worker   string       `json:"worker"`
	Rank     int          `json:"rank,omitempty"`
	HasRank  bool         `json:"has_rank,omitempty"`
	Gen      int64        `json:"gen"`
	State    claims.State `json:"state"`
	Attempt  uint64       `json:"attempt,omitempty"`
	Deadline int64        `json:"deadline"` // on the store's clock, in ns
}

func (f *claimFile) claim() claims.Claim {
	born := f.Born
	if born == 0 {
		born = f.Rev
	}
	return claims.Claim{
		Key: string(f.Key), Rev: f.Rev, Born: born, Gen: f.Gen, State: f.State, Attempt: f.Attempt,
		Target: claims.Target{Worker: f.Worker, Rank: f.Rank, HasRank: f.HasRank},
	}
}

func fromClaim(c claims.Claim) claimFile {
	return claimFile{
		Key: rawKey(c.Key), Rev: c.Rev, Born: c.Born, Gen: c.Gen, State: c.State, Attempt: c.Attempt,
		Worker: c.Target.Worker, Rank: c.Target.Rank, HasRank: c.Target.HasRank,
	}
}

// memberFile is a registration as stored.
type memberFile struct {
	Worker   string `json:"worker"`
	Identity string `json:"identity"`
	Gen      int64  `json:"gen"`
	Session  string `json:"session"`
}

// record is one journal line: revision Rev wrote key's claim (Op
// "claim"), deleted it ("delete") or changed worker Key's registration
// ("member"); Ended is the claim revision that ended, if any.
type record struct {
	Rev   int64  `json:"rev"`
	Op    string `json:"op"`
	Key   rawKey `json:"key"`
	Ended int64  `json:"ended,omitempty"`
}

const (
	opClaim  = "claim"
	opDelete = "delete"
	opMember = "member"
)

var tmpSeq atomic.Uint64

// writeAtomic writes data to path through a temporary file renamed into
// place: readers see the old content or the new, never a part.
func writeAtomic(path string, data []byte) error {
	dir, name := filepath.Split(path)
	tmp := filepath.Join(dir, fmt.Sprintf(".%s.%d.%d.tmp", name, os.Getpid(), tmpSeq.Add(1)))
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// readJSON reads path into v; ok false when it does not exist.
func readJSON(path string, v any) (bool, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return false, fmt.Errorf("dirstore: %s: %w", path, err)
	}
	return true, nil
}

// readCounter reads a decimal counter file (0 when absent).
func readCounter(path string) (int64, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("dirstore: counter %s: %w", path, err)
	}
	return n, nil
}

// writeCounter writes n to a counter file in place: one write of a fixed
// width (a process killed during a write(2) to a regular file does not
// leave half of it), cheaper than a rename (callers hold the store's lock,
// so nobody reads it meanwhile).
func writeCounter(path string, n int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteAt([]byte(fmt.Sprintf("%020d\n", n)), 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// flockCtx takes an flock on f (how: LOCK_EX or LOCK_SH), polling so that
// ctx can end the wait.
func flockCtx(ctx context.Context, f *os.File, how int) error {
	wait := 20 * time.Microsecond
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EWOULDBLOCK), errors.Is(err, syscall.EINTR):
		default:
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		time.Sleep(wait)
		wait = min(2*wait, 2*time.Millisecond)
	}
}

func funlock(f *os.File) { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }

// newSessionID returns a random session id (hex).
func newSessionID() (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// segmentName is the journal segment whose first revision is rev.
func segmentName(rev int64) string { return fmt.Sprintf("%020d.log", rev) }

// segments lists the journal's segments, oldest first.
func segments(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if n := e.Name(); strings.HasSuffix(n, ".log") && !strings.HasPrefix(n, ".") {
			out = append(out, n)
		}
	}
	return out, nil // ReadDir sorts by name: zero-padded, so by revision
}

// unavailable wraps a file-system error of op.
func unavailable(op string, err error) error {
	return &claims.UnavailableError{Op: op, Err: err}
}

// invalid is the error of a bad argument the claims checkers do not cover
// (a nil context, Open's configuration).
func invalid(op, what string) error {
	return &claims.ArgumentError{Op: op, What: what}
}
