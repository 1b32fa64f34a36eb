package pex

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/addrbook"
	"github.com/tendril-p2p/tendril/peerrecord"
	"github.com/tendril-p2p/tendril/protocol"
	"github.com/tendril-p2p/tendril/secio"
)

// Protocol and Version name the protocol on the wire.
const (
	Protocol = "/tendril/pex"
	Version  = "1"
)

// PEX runs peer exchange on a Service for an address book: it answers peers' requests
// and, unless Config.NoAutoAsk, asks peers itself (see New). Its methods are safe for
// concurrent use.
type PEX struct {
	svc  *tendril.Service
	book *addrbook.Book
	cfg  Config
	log  *slog.Logger

	serveMu sync.Mutex // guards serve
	serve   *serveLimiter

	strikesMu sync.Mutex // guards strikes
	strikes   *strikes

	stats counters

	ctx    context.Context
	cancel context.CancelFunc
	sub    *tendril.Subscription // nil with NoAutoAsk
	wg     sync.WaitGroup        // the asking loop and its asks
	once   sync.Once
}

// counters are the PEX's statistics; see Stats.
type counters struct {
	served, refused, badRequests            atomic.Uint64
	asks, answersRefused, ignored           atomic.Uint64
	parsed, badRecords, dropped, addrsAdded atomic.Uint64
}

// Stats are a PEX's counters since New.
type Stats struct {
	// Served counts the answers given; Refused the requests refused by the rate limits;
	// BadRequests the malformed ones.
	Served, Refused, BadRequests uint64
	// Asks counts the requests this node sent; AnswersRefused the answers refused whole
	// (too large, too many records, malformed); Ignored the asks not sent, or answers
	// dropped, because the peer was ignored.
	Asks, AnswersRefused, Ignored uint64
	// RecordsParsed counts the records given to peerrecord.Parse (one signature check
	// each); BadRecords those that failed; RecordsDropped those of this node or left with
	// no address by the filters; AddrsAdded the addresses new to the book.
	RecordsParsed, BadRecords, RecordsDropped, AddrsAdded uint64
}

// Stats returns the PEX's counters.
func (p *PEX) Stats() Stats {
	c := &p.stats
	return Stats{
		Served: c.served.Load(), Refused: c.refused.Load(), BadRequests: c.badRequests.Load(),
		Asks: c.asks.Load(), AnswersRefused: c.answersRefused.Load(), Ignored: c.ignored.Load(),
		RecordsParsed: c.parsed.Load(), BadRecords: c.badRecords.Load(),
		RecordsDropped: c.dropped.Load(), AddrsAdded: c.addrsAdded.Load(),
	}
}

// New registers the protocol on svc, answering from book, and (unless cfg.NoAutoAsk)
// starts asking: each outbound session's peer once, soon after the session opens, and a
// random connected peer every AskInterval while the book is small, less often once it is
// not (see Config). Zero fields of cfg take their defaults. Close stops it.
func New(svc *tendril.Service, book *addrbook.Book, cfg Config) (*PEX, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := cfg.withDefaults()
	if svc == nil || book == nil {
		return nil, fmt.Errorf("%w: nil Service or Book", ErrInvalidConfig)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &PEX{
		svc: svc, book: book, cfg: c, log: c.Logger,
		serve:   newServeLimiter(time.Now(), &c),
		strikes: newStrikes(&c),
		ctx:     ctx, cancel: cancel,
	}
	if !c.NoAutoAsk {
		// Subscribe before registering, so no session opened from then on is missed.
		p.sub = svc.Subscribe(0)
	}
	err := svc.AddProtocol(tendril.Protocol{
		Name: Protocol, Versions: []string{Version},
		RequestHandler: tendril.RequestHandlerFunc(p.serveRequest),
		// An answer above MaxAnswerBytes is refused by the Service as it arrives, before
		// it is read whole (a request is a few bytes).
		MaxMessageSize: min(c.MaxAnswerBytes, svc.MaxMessageSize()),
	})
	if err != nil {
		cancel()
		if p.sub != nil {
			p.sub.Close()
		}
		return nil, fmt.Errorf("pex: %w", err)
	}
	if p.sub != nil {
		p.wg.Add(1)
		go p.run()
	}
	return p, nil
}

// Close stops answering and asking, and waits for the asks in flight to end (they are
// cancelled). It is idempotent.
func (p *PEX) Close() error {
	p.once.Do(func() {
		p.cancel()
		if p.sub != nil {
			p.sub.Close()
		}
		// The Service may have closed first; nothing to unregister then.
		_ = p.svc.RemoveProtocol(Protocol)
		p.wg.Wait()
	})
	return nil
}

// serveRequest answers one request: the rate limits first, before anything of the
// request is read, then a sample of the book's records.
func (p *PEX) serveRequest(c *tendril.Context, req []byte) ([]byte, error) {
	now := time.Now()
	peer := c.Peer()
	p.serveMu.Lock()
	ok := p.serve.allow(now, peer)
	p.serveMu.Unlock()
	if !ok {
		p.stats.refused.Add(1)
		return nil, ErrRateLimited
	}
	want, err := parseRequest(req, p.cfg.MaxAnswer)
	if err != nil {
		p.stats.badRequests.Add(1)
		return nil, ErrBadRequest
	}
	remote := c.Session().RemoteAddr().Transport
	var opts addrbook.SampleOptions
	// The asker's group is held back only for a public asker: on a LAN, or in one
	// process, every peer shares one group, and holding it back would answer nothing.
	if p.cfg.Public(remote) {
		opts = addrbook.SampleOptions{Asker: addrbook.GroupOf(remote), OmitLocal: true}
	}
	// One more than wanted, in case the asker's own record is drawn.
	recs := p.book.SampleRecords(now, want+1, opts)
	p.stats.served.Add(1)
	return appendAnswer(nil, recs, peer, want, p.cfg.MaxAnswerBytes), nil
}

// Ask asks the peer of sess for records and adds what passes the filters to the book (see
// the package documentation) with addrbook.FromPeer(the peer's group) as their source. It
// returns how many addresses were new to the book. An answer refused whole is an error
// wrapping ErrAnswerTooLarge or ErrMalformedAnswer and adds nothing; bad records in an
// otherwise good answer are dropped and reported as ErrBadRecord beside what was added. A
// peer that sent too many bad records is not asked (ErrIgnored). ctx bounds the request,
// and Config.AskTimeout if ctx has no deadline.
func (p *PEX) Ask(ctx context.Context, sess *tendril.Session) (added int, err error) {
	peer := sess.Peer()
	if peer.IsZero() {
		return 0, ErrNoPeer
	}
	if p.isIgnored(peer) {
		p.stats.ignored.Add(1)
		return 0, fmt.Errorf("%w: %s", ErrIgnored, peer)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.cfg.AskTimeout)
		defer cancel()
	}
	p.stats.asks.Add(1)
	reply, err := sess.Request(ctx, Protocol, appendRequest(nil, p.cfg.MaxAnswer))
	if err != nil {
		var re *tendril.RequestError
		if errors.As(err, &re) && re.Reason == ErrRateLimited.Error() {
			return 0, fmt.Errorf("pex: ask %s: %w", peer, ErrRateLimited)
		}
		if errors.Is(err, protocol.ErrMessageTooLarge) {
			// Refused by the protocol's MaxMessageSize as it arrived, unread.
			p.stats.answersRefused.Add(1)
			p.strike(peer, p.cfg.BadRecordLimit)
			return 0, fmt.Errorf("pex: ask %s: %w: %w", peer, ErrAnswerTooLarge, err)
		}
		return 0, fmt.Errorf("pex: ask %s: %w", peer, err)
	}
	// The peer may have been found out by another ask meanwhile.
	if p.isIgnored(peer) {
		p.stats.ignored.Add(1)
		return 0, fmt.Errorf("%w: %s", ErrIgnored, peer)
	}
	return p.receive(peer, sess.RemoteAddr().Transport, reply)
}

// receive checks an answer from peer, seen at remote, and adds what passes to the book.
func (p *PEX) receive(peer secio.PeerID, remote ma.Multiaddr, reply []byte) (added int, err error) {
	raws, err := splitAnswer(reply, p.cfg.MaxAnswer, p.cfg.MaxAnswerBytes)
	if err != nil {
		p.stats.answersRefused.Add(1)
		p.strike(peer, p.cfg.BadRecordLimit)
		p.log.Debug("pex: answer refused", "peer", peer, "bytes", len(reply), "err", err)
		return 0, fmt.Errorf("pex: ask %s: %w", peer, err)
	}
	fromPublic := p.cfg.Public(remote)
	src := addrbook.FromPeer(addrbook.GroupOf(remote))
	own := make(ownAddrs)
	for _, a := range p.svc.Addrs() {
		own[string(a.Transport.Bytes())] = struct{}{}
	}
	self := p.svc.ID()
	now := time.Now()
	bad := 0
	for _, raw := range raws {
		p.stats.parsed.Add(1)
		rec, err := peerrecord.Parse(raw)
		if err != nil {
			bad++
			continue
		}
		keep := admit(rec, self, own, fromPublic)
		if len(keep) == 0 {
			p.stats.dropped.Add(1)
			continue
		}
		added += p.book.AddRecordAddrs(now, rec, keep, src)
	}
	p.stats.addrsAdded.Add(uint64(added))
	if bad > 0 {
		p.stats.badRecords.Add(uint64(bad))
		p.strike(peer, bad)
		p.log.Debug("pex: bad records", "peer", peer, "bad", bad, "of", len(raws))
		return added, fmt.Errorf("pex: ask %s: %w: %d of %d", peer, ErrBadRecord, bad, len(raws))
	}
	return added, nil
}

// isIgnored reports whether peer's answers are ignored now.
func (p *PEX) isIgnored(peer secio.PeerID) bool {
	p.strikesMu.Lock()
	defer p.strikesMu.Unlock()
	return p.strikes.ignored(time.Now(), peer)
}

// strike counts n bad records against peer.
func (p *PEX) strike(peer secio.PeerID, n int) {
	p.strikesMu.Lock()
	defer p.strikesMu.Unlock()
	if p.strikes.add(time.Now(), peer, n) {
		p.log.Debug("pex: ignoring peer", "peer", peer, "for", p.cfg.IgnoreFor)
	}
}
