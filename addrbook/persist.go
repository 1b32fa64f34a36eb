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

	"github.com/tendril-p2p/tendril/peerrecord"
	"github.com/tendril-p2p/tendril/secio"
)

// The saved book is one JSON document:
//
//	{"version":2,"entries":[{"peer":"gV...","addr":"/ip4/1.2.3.4/tcp/4001",
//	  "source":"identify","via":"ip4:5.6.0.0/16","first_seen":"2026-...","last_seen":"...",
//	  "last_attempt":"...","last_success":"...","failures":0,"last_error":"...",
//	  "tried":true}, ...],
//	 "records":["AS1x...", ...]}
//
// Positions are not saved: Load recomputes them with the loading book's key, through the
// same rules as Add, so a file cannot place an entry where the book would not. Records are
// their signed encodings in base64, verified again on Load: the file is no more trusted
// than a peer. Version 1 (no records) is still read.

// formatVersion is the version Save writes; Load reads it and formatVersionNoRecords.
const (
	formatVersion          = 2
	formatVersionNoRecords = 1
)

// bytesPerRecord bounds one saved record: MaxSize bytes in base64, quotes and a comma.
const bytesPerRecord = (peerrecord.MaxSize+2)/3*4 + 4

// bytesPerEntry is a generous bound on one saved entry: the longest address, a peer ID,
// a group, four timestamps and a cut error message fit in it.
const bytesPerEntry = 2048

type savedBook struct {
	Version int          `json:"version"`
	Entries []savedEntry `json:"entries"`
	Records [][]byte     `json:"records,omitempty"`
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
func (b *Book) maxFileSize() int64 {
	return int64(b.capacity())*bytesPerEntry + int64(b.maxRecords())*bytesPerRecord + 4096
}

// maxRecords is the number of records the book can hold: one per peer, and a peer has an
// address in the tables.
func (b *Book) maxRecords() int { return min(b.cfg.MaxPeers, b.capacity()) }

// Save writes the book's entries that have not expired by now, tried ones first, and the
// records of their peers.
func (b *Book) Save(w io.Writer, now time.Time) error {
	b.mu.Lock()
	doc := savedBook{Version: formatVersion, Entries: []savedEntry{}}
	saved := make(map[secio.PeerID]bool)
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
			if h := b.records[e.peer]; h != nil && !saved[e.peer] {
				saved[e.peer] = true
				doc.Records = append(doc.Records, h.rec.Bytes())
			}
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
// the future cannot keep an entry forever. Each record is verified (peerrecord.Parse: at
// most one per peer the book can hold, one signature check each) and kept, as AddRecord keeps one, only
// for a peer the book then holds; records that fail are skipped.
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
	switch doc.Version {
	case formatVersion:
	case formatVersionNoRecords:
		doc.Records = nil
	default:
		return 0, &LoadError{Err: ErrVersion, Detail: fmt.Sprintf("version %d, want %d or %d", doc.Version, formatVersion, formatVersionNoRecords)}
	}
	if len(doc.Entries) > b.capacity() {
		return 0, &LoadError{Err: ErrFileTooLarge, Detail: fmt.Sprintf("%d entries, the tables hold %d", len(doc.Entries), b.capacity())}
	}
	if len(doc.Records) > b.maxRecords() {
		return 0, &LoadError{Err: ErrFileTooLarge, Detail: fmt.Sprintf("%d records, the book holds %d", len(doc.Records), b.maxRecords())}
	}
	// Verify before locking: a signature check is the slow part, and the book stays
	// usable meanwhile.
	var recs []*peerrecord.Record
	for _, raw := range doc.Records {
		if rec, err := peerrecord.Parse(raw); err == nil {
			recs = append(recs, rec)
		}
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
	for _, rec := range recs {
		peer := rec.Peer()
		old := b.records[peer]
		if _, in := b.peers[peer]; in && (old == nil || rec.Supersedes(old.rec)) {
			b.records[peer] = newHeldRecord(rec)
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
