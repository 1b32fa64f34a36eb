package addrbook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril/secio"
)

// The saved book is one JSON document:
//
//	{"version":1,"entries":[{"peer":"gV...","addr":"/ip4/1.2.3.4/tcp/4001",
//	  "source":"identify","via":"ip4:5.6.0.0/16","first_seen":"2026-...","last_seen":"...",
//	  "last_attempt":"...","last_success":"...","failures":0,"last_error":"...",
//	  "tried":true}, ...]}
//
// Positions are not saved: Load recomputes them with the loading book's key, through the
// same rules as Add, so a file cannot place an entry where the book would not.

// formatVersion is the version Save writes and Load reads.
const formatVersion = 1

// bytesPerEntry is a generous bound on one saved entry: the longest address, a peer ID,
// a group, four timestamps and a cut error message fit in it.
const bytesPerEntry = 2048

type savedBook struct {
	Version int          `json:"version"`
	Entries []savedEntry `json:"entries"`
}

type savedEntry struct {
	Peer        string    `json:"peer"`
	Addr        string    `json:"addr"`
	Source      string    `json:"source"`
	Via         Group     `json:"via,omitzero"`
	FirstSeen   time.Time `json:"first_seen"`
	LastSeen    time.Time `json:"last_seen"`
	LastAttempt time.Time `json:"last_attempt,omitzero"`
	LastSuccess time.Time `json:"last_success,omitzero"`
	Failures    int       `json:"failures,omitzero"`
	LastError   string    `json:"last_error,omitzero"`
	Tried       bool      `json:"tried,omitzero"`
}

// capacity is the number of addresses the tables hold.
func (b *Book) capacity() int { return len(b.newT.slots) + len(b.triedT.slots) }

// maxFileSize bounds what Load reads: a full book's file with room to spare.
func (b *Book) maxFileSize() int64 { return int64(b.capacity())*bytesPerEntry + 4096 }

// Save writes the book's entries that have not expired by now, tried ones first.
func (b *Book) Save(w io.Writer, now time.Time) error {
	b.mu.Lock()
	doc := savedBook{Version: formatVersion, Entries: []savedEntry{}}
	for _, t := range []*table{&b.triedT, &b.newT} {
		for _, e := range t.slots {
			if e == nil || !now.Before(b.expires(e)) {
				continue
			}
			doc.Entries = append(doc.Entries, savedEntry{
				Peer: e.peer.String(), Addr: e.addr.String(),
				Source: e.src.Kind.String(), Via: e.src.Via,
				FirstSeen: e.firstSeen, LastSeen: e.lastSeen,
				LastAttempt: e.lastAttempt, LastSuccess: e.lastSuccess,
				Failures: e.failures, LastError: e.lastErr, Tried: e.tried,
			})
		}
	}
	b.mu.Unlock()
	enc := json.NewEncoder(w)
	return enc.Encode(&doc)
}

// SaveFile saves the book to path atomically: it writes a temporary file in the same
// directory, syncs it, renames it over path and syncs the directory, so that a crash
// leaves either the old book or the new one, never half of one. The file is readable by
// its owner only (os.CreateTemp's mode, kept by the rename): it tells who the node talks
// to.
func (b *Book) SaveFile(path string, now time.Time) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("addrbook: save: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err = b.Save(f, now); err != nil {
		return fmt.Errorf("addrbook: save: %w", err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("addrbook: save: %w", err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("addrbook: save: %w", err)
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("addrbook: save: %w", err)
	}
	// The rename is durable once the directory is synced; not every system can sync a
	// directory, and the book is saved by then, so a failure here is not one to report.
	if d, derr := os.Open(dir); derr == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// LoadFile is Load from the file at path.
func (b *Book) LoadFile(path string, now time.Time) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("addrbook: load: %w", err)
	}
	defer f.Close()
	return b.Load(f, now)
}

// Load adds the entries of a book saved by Save to b and returns how many it kept. It
// reads at most a full book's worth of bytes (else *LoadError with ErrFileTooLarge) and
// checks the document before changing b (else *LoadError with ErrCorrupt or ErrVersion;
// b is unchanged). Each entry then goes through Add's rules and bounds, with its history;
// entries that are invalid (a bad peer ID or address, an unknown source), expired, or
// that the bounds refuse are skipped. Times after now are taken as now, so a file from
// the future cannot keep an entry forever.
func (b *Book) Load(r io.Reader, now time.Time) (int, error) {
	limit := b.maxFileSize()
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return 0, fmt.Errorf("addrbook: load: %w", err)
	}
	if int64(len(data)) > limit {
		return 0, &LoadError{Err: ErrFileTooLarge, Detail: fmt.Sprintf("more than %d bytes", limit)}
	}
	var doc savedBook
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		return 0, &LoadError{Err: ErrCorrupt, Detail: err.Error()}
	}
	if dec.More() {
		return 0, &LoadError{Err: ErrCorrupt, Detail: "data after the document"}
	}
	if doc.Version != formatVersion {
		return 0, &LoadError{Err: ErrVersion, Detail: fmt.Sprintf("version %d, want %d", doc.Version, formatVersion)}
	}
	if len(doc.Entries) > b.capacity() {
		return 0, &LoadError{Err: ErrFileTooLarge, Detail: fmt.Sprintf("%d entries, the tables hold %d", len(doc.Entries), b.capacity())}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	kept := 0
	// Tried entries first, so that they win their tried slots before new entries take
	// the new slots they would go back to.
	for _, tried := range []bool{true, false} {
		for i := range doc.Entries {
			if s := &doc.Entries[i]; s.Tried == tried && b.restore(now, s) {
				kept++
			}
		}
	}
	return kept, nil
}

// restore adds one saved entry with its history; it reports whether the book kept it.
func (b *Book) restore(now time.Time, s *savedEntry) bool {
	peer, err := secio.ParsePeerID(s.Peer)
	if err != nil {
		return false
	}
	if len(s.Addr) > 4*MaxAddrSize {
		return false // too long to be kept; spare the parser
	}
	a, err := ma.NewMultiaddr(s.Addr)
	if err != nil {
		return false
	}
	kind := parseSourceKind(s.Source)
	if kind == 0 {
		return false
	}
	src := Source{Kind: kind}
	if kind == SourcePeer {
		if len(s.Via) > MaxAddrSize {
			return false
		}
		src.Via = s.Via
	}
	clamp := func(t time.Time) time.Time {
		if t.After(now) {
			return now
		}
		return t
	}
	if b.find(peer, string(a.Bytes())) != nil {
		return false // a duplicate: the first copy stands
	}
	if !b.add(now, peer, a, src) {
		return false
	}
	e := b.find(peer, string(a.Bytes()))
	lastSeen := clamp(s.LastSeen)
	e.lastSeen = lastSeen
	e.firstSeen = clamp(s.FirstSeen)
	if e.firstSeen.After(lastSeen) {
		e.firstSeen = lastSeen
	}
	e.lastAttempt = clamp(s.LastAttempt)
	e.lastSuccess = clamp(s.LastSuccess)
	e.failures = min(max(s.Failures, 0), b.cfg.MaxFailuresTried)
	e.lastErr = truncate(s.LastError, maxErrorLen)
	if !now.Before(b.expires(e)) {
		b.drop(e)
		return false
	}
	if s.Tried && !e.lastSuccess.IsZero() {
		b.promote(now, e)
	}
	return true
}
