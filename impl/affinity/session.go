package affinity

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/textproto"
)

// Namespace is the trusted scope a session id is read in: the model, the
// routing group and the tenant, set by the router from what it trusts (its
// route, the authenticated caller), never from the client's session id.
// Keys of different namespaces never meet: the same client id under two
// tenants names two sessions.
type Namespace struct {
	Model, Group, Tenant string
}

// Key is a session's key in the layer's tables: an injective encoding of
// the namespace and the client's session id, so no client id reaches
// another namespace's binding, and a binding's memory is bounded whatever
// the client sent (at most MaxKeyBytes). The zero Key means "no session":
// the request is routed unpinned.
//
// Two forms, told apart by the first byte, both the same on every replica:
//   - short ids (the whole encoding fits in maxRawKeyBytes, as a UUID or a
//     ULID under a usual namespace does): the kind byte kindRaw, the
//     namespace's three fields each prefixed by its length (one byte: a
//     field of 128 bytes or more takes the hashed form), then the id. No
//     two inputs share it (the lengths delimit the fields, the id is the
//     rest), so it needs no hash: collision-free by construction.
//   - longer ones: kindSession and the SHA-256 of the fields and the id,
//     each prefixed by its 8-byte length (the key every id had before the
//     raw form; see Replicas.LegacyKeys).
//
// A sibling group's key is always hashed (kindSibling).
type Key struct{ k string }

// kindSession, kindRaw and kindSibling are the first byte of a key: a
// client's session id always yields kindSession or kindRaw, so no
// client-supplied id can produce a sibling group's key.
const (
	kindSession byte = 's'
	kindRaw     byte = 'r'
	kindSibling byte = 'g'
	keyBytes         = 1 + sha256.Size
	// maxRawKeyBytes bounds the raw form: an id whose encoding under its
	// namespace is longer is hashed.
	maxRawKeyBytes = 64
	// maxRawField bounds a namespace field's length in the raw form (its
	// length prefix is one byte, below 0x80).
	maxRawField = 0x7f
)

// MaxKeyBytes is the longest Key (a raw one), the claim key's length
// over replicas less its phase byte.
const MaxKeyBytes = maxRawKeyBytes

// IsZero reports whether k is the zero Key (no session).
func (k Key) IsZero() bool { return k.k == "" }

// Sibling reports whether k is a sibling group's key.
func (k Key) Sibling() bool { return len(k.k) == keyBytes && k.k[0] == kindSibling }

// String formats k for logs: its kind and the first bytes of its digest
// (never the client's id). A raw key prints its hashed form's, so a
// session prints as it did before keys had a raw form (and a picker that
// hashes String, as impl/picker's do, places it as it did).
func (k Key) String() string {
	if k.IsZero() {
		return "none"
	}
	h, ok := k.hashed()
	if !ok {
		return "invalid"
	}
	return string(h.k[0]) + ":" + hex.EncodeToString([]byte(h.k[1:9]))
}

// Session returns the key of the client session id under ns. The id is
// validated first (see ValidateSessionID).
func (ns Namespace) Session(id string) (Key, error) {
	if err := ValidateSessionID(id); err != nil {
		return Key{}, err
	}
	if k, ok := ns.raw(id); ok {
		return k, nil
	}
	return ns.derive(kindSession, id), nil
}

// SiblingGroup returns the key of the sibling group of parent's subagents:
// requests of the subagents an agent fans out share one binding (and so
// one worker's cache of their common prefix). Its first byte is one no
// session key has, so no client-supplied id can produce it.
func (ns Namespace) SiblingGroup(parent Key) (Key, error) {
	if parent.IsZero() || parent.Sibling() {
		return Key{}, &SessionIDError{Reason: "a sibling group needs a parent session's key"}
	}
	// Of the parent's hashed form, so that a group's key is the one it
	// had before session keys had a raw form.
	h, ok := parent.hashed()
	if !ok {
		return Key{}, &SessionIDError{Reason: "a sibling group needs a parent session's key"}
	}
	return ns.derive(kindSibling, h.k), nil
}

// raw is the raw form of id's key under ns, when it fits.
func (ns Namespace) raw(id string) (Key, bool) {
	m, g, t := len(ns.Model), len(ns.Group), len(ns.Tenant)
	n := 4 + m + g + t + len(id)
	if n > maxRawKeyBytes || m > maxRawField || g > maxRawField || t > maxRawField {
		return Key{}, false
	}
	var stack [maxRawKeyBytes]byte
	buf := append(stack[:0], kindRaw, byte(m))
	buf = append(buf, ns.Model...)
	buf = append(buf, byte(g))
	buf = append(buf, ns.Group...)
	buf = append(buf, byte(t))
	buf = append(buf, ns.Tenant...)
	buf = append(buf, id...)
	return Key{k: string(buf)}, true
}

// hashed returns k in its hashed form: k itself unless it is raw, else
// the key the same namespace and id had before the raw form (the SHA-256
// of the fields). ok is false for a malformed raw key.
func (k Key) hashed() (Key, bool) {
	if len(k.k) == 0 || k.k[0] != kindRaw {
		return k, true
	}
	var f [3]string
	rest := k.k[1:]
	for i := range f {
		if len(rest) == 0 || int(rest[0]) >= len(rest) {
			return Key{}, false
		}
		n := int(rest[0])
		f[i], rest = rest[1:1+n], rest[1+n:]
	}
	return Namespace{Model: f[0], Group: f[1], Tenant: f[2]}.derive(kindSession, rest), true
}

// derive hashes the namespace's fields and the id, each length-prefixed so
// that no two different inputs share an encoding.
func (ns Namespace) derive(kind byte, id string) Key {
	var stack [512]byte
	buf := stack[:0]
	if n := len(ns.Model) + len(ns.Group) + len(ns.Tenant) + len(id) + 32; n > len(stack) {
		buf = make([]byte, 0, n)
	}
	for _, f := range [...]string{ns.Model, ns.Group, ns.Tenant, id} {
		buf = binary.BigEndian.AppendUint64(buf, uint64(len(f)))
		buf = append(buf, f...)
	}
	sum := sha256.Sum256(buf)
	var out [keyBytes]byte
	out[0] = kind
	copy(out[1:], sum[:])
	return Key{k: string(out[:])}
}

// MaxSessionIDBytes bounds a client's session id: the anchor's limit.
const MaxSessionIDBytes = 256

// ValidateSessionID checks a client's raw session id: 1 to
// MaxSessionIDBytes bytes of visible ASCII (0x21 to 0x7e: no spaces, no
// control characters, nothing outside ASCII), which covers UUIDs, ULIDs
// and the ids agent clients send. It returns a *SessionIDError otherwise.
func ValidateSessionID(id string) error {
	if id == "" {
		return &SessionIDError{Reason: "empty session id"}
	}
	if len(id) > MaxSessionIDBytes {
		return &SessionIDError{Reason: fmt.Sprintf("session id of %d bytes exceeds %d", len(id), MaxSessionIDBytes)}
	}
	if visibleASCII(id) {
		return nil
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x21 || c > 0x7e {
			return &SessionIDError{Reason: fmt.Sprintf("session id has byte 0x%02x at %d (only visible ASCII)", c, i)}
		}
	}
	return nil
}

// Headers says where a request's session id and final-request flag are.
type Headers struct {
	// Session is the canonical session header; it wins over Alternates.
	Session string
	// Alternates are read, in order, when Session is absent.
	Alternates []string
	// Final marks the session's final request: its value is "1" or "true"
	// (any case); other values, or no header, mean not final.
	Final []string

	// canon: every name above is canonical (canonical made hs), so a
	// lookup of h by name is the whole lookup: h.Values would
	// canonicalize an already canonical name to read the same entry.
	canon bool
}

// DefaultHeaders: the canonical X-Session-ID, then the headers agent clients
// send (Dynamo's X-Dynamo-Session-ID, Claude Code's
// X-Claude-Code-Session-Id, the OpenAI Codex CLI's session_id), and
// X-Session-Final or X-Dynamo-Session-Final for the final request.
var DefaultHeaders = Headers{
	Session:    "X-Session-ID",
	Alternates: []string{"X-Dynamo-Session-ID", "X-Claude-Code-Session-Id", "session_id"},
	Final:      []string{"X-Session-Final", "X-Dynamo-Session-Final"},
}

// canonical returns hs with every name in the canonical form http.Header
// keys have, so SessionID indexes the map without converting a name.
func (hs Headers) canonical() Headers {
	out := Headers{Session: textproto.CanonicalMIMEHeaderKey(hs.Session), canon: true}
	for _, n := range hs.Alternates {
		if n = textproto.CanonicalMIMEHeaderKey(n); n != out.Session {
			out.Alternates = append(out.Alternates, n)
		}
	}
	for _, n := range hs.Final {
		out.Final = append(out.Final, textproto.CanonicalMIMEHeaderKey(n))
	}
	return out
}

// SessionID returns the session id h carries (found false when none of the
// headers is present), and whether the request is the session's final
// one. A header that is present but empty counts as present (and fails
// validation), so a client cannot fall through to a lower header by
// sending an empty canonical one. A header given twice is an error.
func (hs Headers) SessionID(h http.Header) (id string, final, found bool, err error) {
	for i := -1; i < len(hs.Alternates) && !found; i++ {
		name := hs.Session
		if i >= 0 {
			name = hs.Alternates[i]
		}
		vs := h[name]
		if len(vs) == 0 && !hs.canon {
			vs = h.Values(name) // a name given in another case than canonical
		}
		switch {
		case len(vs) == 0:
			continue
		case len(vs) > 1:
			return "", false, true, &SessionIDError{Reason: fmt.Sprintf("header %s given %d times", name, len(vs))}
		}
		id, found = vs[0], true
	}
	for _, name := range hs.Final {
		vs := h[name]
		if len(vs) == 0 && !hs.canon {
			vs = h.Values(name)
		}
		if len(vs) > 0 && (vs[0] == "1" || equalFold(vs[0], "true")) {
			final = true
		}
	}
	if !found {
		return "", final, false, nil
	}
	return id, final, true, ValidateSessionID(id)
}

// visibleASCII reports whether every byte of s is in 0x21..0x7e, eight
// bytes at a time: a word has a byte below 0x21 when (w - 0x21..21) &^ w
// has a top bit set, and one above 0x7e when (w + 0x01..01) | w does
// (both exact for these bounds, which are below 0x80).
func visibleASCII(s string) bool {
	const (
		ones = 0x0101010101010101
		high = 0x8080808080808080
	)
	i := 0
	for ; i+8 <= len(s); i += 8 {
		w := binary.LittleEndian.Uint64([]byte(s[i : i+8]))
		if ((w-0x21*ones)&^w|(w+(0x7f-0x7e)*ones)|w)&high != 0 {
			return false
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7e {
			return false
		}
	}
	return true
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}
