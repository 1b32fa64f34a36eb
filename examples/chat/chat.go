package main

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/hash/blake3"
	"github.com/tendril-p2p/tendril/protocol"
)

// ChatProtocol is the chat protocol's name. Version 1.1 carries the sender's nick; 1.0 does
// not, which lets the demo show version negotiation between old and new peers.
const ChatProtocol = "/tendril/chat"

const idSize = 32

// message is one chat line as it travels, relayed hop by hop.
//
// Wire format (all versions): 32-byte message ID, then for 1.1 a 1-byte nick length and the
// nick, then the text. The ID is BLAKE3(origin peer ID || 16-byte run nonce || 8-byte
// big-endian sequence): the nonce is drawn at every start, so that a peer restarted with
// the same key (-key) does not repeat the IDs of its earlier lines, which the others would
// take for lines they have seen.
// A 1.1 message with empty text is an introduction: the nick of the peer at the other end of
// the stream, sent once when the stream opens; it is neither shown nor relayed.
type message struct {
	id   [idSize]byte
	nick string
	text string
}

var errBadMessage = errors.New("chat: malformed message")

func (m *message) encode(version string) []byte {
	b := make([]byte, 0, idSize+1+len(m.nick)+len(m.text))
	b = append(b, m.id[:]...)
	if protocol.CompareVersions(version, "1.1") >= 0 {
		nick := m.nick
		if len(nick) > 255 {
			nick = nick[:255]
		}
		b = append(b, byte(len(nick)))
		b = append(b, nick...)
	}
	return append(b, m.text...)
}

func decode(b []byte, version string) (message, error) {
	var m message
	if len(b) < idSize {
		return m, errBadMessage
	}
	copy(m.id[:], b)
	b = b[idSize:]
	if protocol.CompareVersions(version, "1.1") >= 0 {
		if len(b) < 1 || len(b) < 1+int(b[0]) {
			return m, errBadMessage
		}
		m.nick = string(b[1 : 1+b[0]])
		b = b[1+b[0]:]
	}
	m.text = string(b)
	return m, nil
}

// seenSet remembers the last capacity message IDs, so that a relayed line is shown and
// forwarded once, with bounded memory.
type seenSet struct {
	ring []([idSize]byte)
	set  map[[idSize]byte]struct{}
	next int
}

func newSeenSet(capacity int) *seenSet {
	return &seenSet{ring: make([][idSize]byte, capacity), set: make(map[[idSize]byte]struct{}, capacity)}
}

// add reports whether id is new, and remembers it.
func (s *seenSet) add(id [idSize]byte) bool {
	if _, ok := s.set[id]; ok {
		return false
	}
	if len(s.set) == len(s.ring) {
		delete(s.set, s.ring[s.next])
	}
	s.ring[s.next] = id
	s.set[id] = struct{}{}
	s.next = (s.next + 1) % len(s.ring)
	return true
}

// node is one chat peer: a tendril Service with the chat protocol.
type node struct {
	name string
	out  io.Writer
	svc  *tendril.Service

	mu    sync.Mutex
	seen  *seenSet
	peers map[*tendril.Context]string // the peer's nick, once it has introduced itself
	seq   uint64
	run   [16]byte // drawn at start: this run's line IDs differ from any earlier run's
	// onLine, if set, is told of every line shown (the demo counts them).
	onLine func(origin string, text string)
	// onPeers, if set, is told after a peer joins, introduces itself or leaves (the page
	// redraws its list of peers). It is called without n.mu held.
	onPeers func()
	// bare drops the "[name] " before each line: a page shows one peer's lines only, where
	// the demo's shared output needs to say whose they are.
	bare bool
}

func newNode(name string, out io.Writer) *node {
	n := &node{name: name, out: out, seen: newSeenSet(4096), peers: make(map[*tendril.Context]string)}
	rand.Read(n.run[:]) // crypto/rand never fails
	return n
}

func (n *node) printf(format string, args ...any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.bare {
		fmt.Fprintf(n.out, format+"\n", args...)
		return
	}
	fmt.Fprintf(n.out, "[%s] "+format+"\n", append([]any{n.name}, args...)...)
}

// peerInfo is a connected peer as the page lists it.
type peerInfo struct {
	id   string // the peer ID, or the address of a legacy peer, which has none
	nick string // empty until the peer has introduced itself (chat 1.1)
}

// connected returns the peers the chat protocol is open with, by ID.
func (n *node) connected() []peerInfo {
	n.mu.Lock()
	out := make([]peerInfo, 0, len(n.peers))
	for c, nick := range n.peers {
		id := c.Peer().String()
		if c.Peer().IsZero() {
			id = peerName(c)
		}
		out = append(out, peerInfo{id: id, nick: nick})
	}
	n.mu.Unlock()
	slices.SortFunc(out, func(a, b peerInfo) int { return strings.Compare(a.id, b.id) })
	return out
}

func (n *node) peersChanged() {
	if n.onPeers != nil {
		n.onPeers()
	}
}

func short(s string) string {
	if len(s) > 12 {
		return s[:6] + ".." + s[len(s)-4:]
	}
	return s
}

// Connected implements tendril.Handler.
func (n *node) Connected(c *tendril.Context, version string) {
	sess := c.Session()
	n.mu.Lock()
	n.peers[c] = ""
	n.mu.Unlock()
	if protocol.CompareVersions(version, "1.1") >= 0 {
		intro := message{nick: n.name}
		if err := c.Send(intro.encode(version)); err != nil {
			n.printf("could not introduce myself to %s: %v", peerName(c), err)
		}
	}
	security := sess.Suite().String()
	if !sess.Secure() {
		security = "TEA legacy mode, INSECURE: no integrity, no authentication"
	}
	n.printf("joined: %s at %s (%s, chat %s)", peerName(c), sess.RemoteAddr().Transport, security, version)
	n.peersChanged()
}

// Received implements tendril.Handler.
func (n *node) Received(c *tendril.Context, b []byte) {
	m, err := decode(b, c.Version())
	if err != nil {
		n.printf("dropped a malformed message from %s", peerName(c))
		return
	}
	if m.text == "" && protocol.CompareVersions(c.Version(), "1.1") >= 0 {
		n.mu.Lock()
		if _, ok := n.peers[c]; ok {
			n.peers[c] = m.nick
		}
		n.mu.Unlock()
		n.peersChanged()
		return
	}
	n.mu.Lock()
	fresh := n.seen.add(m.id)
	n.mu.Unlock()
	if !fresh {
		return
	}
	nick := m.nick
	if nick == "" {
		nick = "(v1.0 peer)"
	}
	n.printf("<%s> %s", nick, m.text)
	if n.onLine != nil {
		n.onLine(m.nick, m.text)
	}
	n.forward(&m, c)
}

// Disconnected implements tendril.Handler.
func (n *node) Disconnected(c *tendril.Context) {
	n.mu.Lock()
	nick := n.peers[c]
	delete(n.peers, c)
	n.mu.Unlock()
	n.peersChanged()
	if nick != "" {
		n.printf("left: %s (%s)", nick, peerName(c))
		return
	}
	n.printf("left: %s", peerName(c))
}

func peerName(c *tendril.Context) string {
	if c.Peer().IsZero() {
		return "legacy peer " + c.Session().RemoteAddr().Transport.String()
	}
	return short(c.Peer().String())
}

// say sends a line typed here to every peer, and returns to how many.
func (n *node) say(text string) int {
	n.mu.Lock()
	n.seq++
	var seq [8]byte
	binary.BigEndian.PutUint64(seq[:], n.seq)
	h := blake3.New()
	h.Write(n.svc.ID().Bytes())
	h.Write(n.run[:])
	h.Write(seq[:])
	m := message{nick: n.name, text: text}
	h.Sum(m.id[:0])
	n.seen.add(m.id)
	n.mu.Unlock()
	return n.forward(&m, nil)
}

// forward sends m to every connected peer but the one it came from, encoded for each
// stream's negotiated version, and returns to how many it was sent.
func (n *node) forward(m *message, from *tendril.Context) int {
	n.mu.Lock()
	targets := make([]*tendril.Context, 0, len(n.peers))
	for c := range n.peers {
		if c != from {
			targets = append(targets, c)
		}
	}
	n.mu.Unlock()
	sent := 0
	for _, c := range targets {
		if err := c.Send(m.encode(c.Version())); err != nil {
			n.printf("could not send to %s: %v", peerName(c), err)
			continue
		}
		sent++
	}
	return sent
}

// chatProtocol returns the chat protocol speaking the given versions, handled by n.
func chatProtocol(n *node, versions ...string) tendril.Protocol {
	if len(versions) == 0 {
		versions = []string{"1.0", "1.1"}
	}
	return tendril.Protocol{Name: ChatProtocol, Versions: versions, Handler: n, OpenOnConnect: true}
}

// logEvents shows session-level events (failures included) until the Service closes.
func logEvents(svc *tendril.Service, n *node) {
	for e := range svc.Events() {
		switch e.Type {
		case tendril.EventSessionOpened:
			sec := "secure"
			if !e.Secure {
				sec = "INSECURE legacy TEA"
			}
			n.printf("session %s with %s (%s)", e.Direction, e.Addr.Transport, sec)
		case tendril.EventSessionClosed:
			if errors.Is(e.Err, tendril.ErrPeerClosed) {
				n.printf("session with %s closed by the peer", e.Addr.Transport)
			} else if e.Err != nil {
				n.printf("session with %s closed: %v", e.Addr.Transport, e.Err)
			}
		case tendril.EventDialFailed, tendril.EventHandshakeFailed, tendril.EventPeerIDMismatch,
			tendril.EventNegotiationFailed, tendril.EventLimitReached:
			n.printf("%s", e)
		}
	}
}
