package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"runtime/debug"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/mux"
	"github.com/tendril-p2p/tendril/secio"
)

// The protocols `tendril listen` answers.
const (
	pingProtocol  = "/tendril/ping"  // message mode: every message is echoed back
	benchProtocol = "/tendril/bench" // raw mode: the responder counts bytes to EOF, then writes the count
)

func cmdKeygen(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("keygen", "keygen -o FILE [-f]", stderr)
	out := fs.String("o", "", "key file to write (required)")
	force := fs.Bool("f", false, "overwrite an existing file")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if *out == "" {
		return fmt.Errorf("%w: -o FILE is required", errUsage)
	}
	key, err := secio.GenerateKey()
	if err != nil {
		return err
	}
	if err := secio.SaveKeyFile(*out, key, *force); err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%s already exists; -f overwrites it (the old identity is lost)", *out)
		}
		return err
	}
	// The ID alone on stdout, for scripts; what to do with it on stderr, for people.
	fmt.Fprintf(stdout, "%s\n", key.PeerID())
	fmt.Fprintf(stderr, "wrote the identity key %s (keep it private); the line above is its peer ID.\n"+
		"Serve with:  tendril listen -key %s /ip4/0.0.0.0/tcp/4001\n"+
		"Others dial: /ip4/THIS-HOST/tcp/4001/p2p/%s\n", *out, *out, key.PeerID())
	return nil
}

func cmdID(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("id", "id [-key] FILE", stderr)
	keyFile := fs.String("key", "", "key file (or give it as the argument)")
	if err := fs.Parse(args); err != nil {
		return parseErr(err)
	}
	switch {
	case *keyFile == "" && fs.NArg() == 1:
		*keyFile = fs.Arg(0)
	case *keyFile == "" || fs.NArg() != 0:
		return fmt.Errorf("%w: give one key file, as -key FILE or FILE", errUsage)
	}
	key, err := secio.LoadKeyFile(*keyFile)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, key.PeerID())
	return nil
}

func cmdVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("version", "version", stderr)
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	v := "(devel)"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		v = bi.Main.Version
	}
	fmt.Fprintf(stdout, "tendril %s\n", v)
	return nil
}

// responderProtocols are what `tendril listen` serves.
func responderProtocols() []tendril.Protocol {
	echo := tendril.HandlerFuncs{OnReceived: func(c *tendril.Context, msg []byte) {
		_ = c.SendContext(context.Background(), msg)
	}}
	sink := tendril.StreamHandlerFunc(func(_ *tendril.Context, _ string, st net.Conn) {
		n, err := io.Copy(io.Discard, st)
		if err != nil {
			return
		}
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], uint64(n))
		_, _ = st.Write(b[:])
	})
	return []tendril.Protocol{
		{Name: pingProtocol, Versions: []string{"1.0"}, Handler: echo},
		{Name: benchProtocol, Versions: []string{"1.0"}, StreamHandler: sink},
	}
}

func cmdListen(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("listen", "listen [-key FILE] ADDR", stderr)
	keyFile := fs.String("key", "", "identity key file (created if missing); default: a fresh identity")
	if err := parse(fs, args, 1); err != nil {
		return err
	}
	addr, err := tendril.ParseAddr(fs.Arg(0))
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	var key *secio.PrivateKey
	if *keyFile != "" {
		if key, _, err = secio.LoadOrCreateKeyFile(*keyFile); err != nil {
			return err
		}
	}
	svc, err := tendril.New(tendril.Config{PrivateKey: key, Protocols: responderProtocols()})
	if err != nil {
		return err
	}
	defer svc.Close()
	bound, err := svc.Listen(ctx, addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "listening on %s\n", bound)
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-svc.Events():
			if !ok {
				return nil
			}
			switch e.Type {
			case tendril.EventSessionOpened, tendril.EventSessionClosed, tendril.EventHandshakeFailed,
				tendril.EventNegotiationFailed, tendril.EventLimitReached:
				fmt.Fprintf(stdout, "%s %s\n", e.Time.Format("15:04:05"), e)
			}
		}
	}
}

// dialer is a client-side Service with the responder's protocols, and what it received.
type dialer struct {
	svc     *tendril.Service
	replies chan []byte
}

func newDialer() (*dialer, error) {
	d := &dialer{replies: make(chan []byte, 64)}
	protos := responderProtocols()
	protos[0].Handler = tendril.HandlerFuncs{OnReceived: func(_ *tendril.Context, msg []byte) {
		select {
		case d.replies <- msg:
		default: // a reply nobody waits for (late, after a timeout) is dropped
		}
	}}
	svc, err := tendril.New(tendril.Config{Protocols: protos})
	if err != nil {
		return nil, err
	}
	d.svc = svc
	return d, nil
}

// dial starts a dialer and dials target with it, saying on stdout whom it reached and how
// fast; the caller closes d.svc.
func dial(ctx context.Context, target string, stdout io.Writer) (*dialer, *tendril.Session, error) {
	addr, err := tendril.ParseAddr(target)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	d, err := newDialer()
	if err != nil {
		return nil, nil, err
	}
	start := time.Now()
	sess, err := d.svc.Dial(ctx, addr)
	if err != nil {
		d.svc.Close()
		return nil, nil, err
	}
	fmt.Fprintf(stdout, "connected to %s in %v (TCP + handshake), %s\n", sess.Peer(), time.Since(start).Round(time.Microsecond), sess.Suite())
	return d, sess, nil
}

func cmdPing(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("ping", "ping [-c N] [-i DURATION] [-size N] ADDR", stderr)
	count := fs.Int("c", 5, "number of pings (0: until interrupted)")
	interval := fs.Duration("i", time.Second, "interval between pings")
	size := fs.Int("size", 64, "payload bytes per ping (at least 8)")
	timeout := fs.Duration("W", 5*time.Second, "time to wait for each reply")
	if err := parse(fs, args, 1); err != nil {
		return err
	}
	if *size < 8 || *size > tendril.DefaultMaxMessageSize || *count < 0 || *interval < 0 {
		return fmt.Errorf("%w: -size must be 8 to %d (a node's largest message), -c and -i non-negative", errUsage, tendril.DefaultMaxMessageSize)
	}
	d, sess, err := dial(ctx, fs.Arg(0), stdout)
	if err != nil {
		return err
	}
	defer d.svc.Close()
	if err := sess.OpenProtocol(ctx, pingProtocol); err != nil {
		return err
	}
	var rtts []time.Duration
	payload := make([]byte, *size)
	for seq := 1; *count == 0 || seq <= *count; seq++ {
		binary.BigEndian.PutUint64(payload, uint64(seq))
		start := time.Now()
		if err := sess.SendContext(ctx, pingProtocol, payload); err != nil {
			return err
		}
		wait := time.NewTimer(*timeout)
	recv:
		for {
			select {
			case <-ctx.Done():
				wait.Stop()
				printPingStats(stdout, seq-1, rtts)
				return nil
			case <-wait.C:
				fmt.Fprintf(stdout, "seq=%d timeout after %v\n", seq, *timeout)
				break recv
			case m := <-d.replies:
				if len(m) < 8 || binary.BigEndian.Uint64(m) != uint64(seq) {
					continue // a late reply to an earlier ping
				}
				rtt := time.Since(start)
				rtts = append(rtts, rtt)
				fmt.Fprintf(stdout, "%d bytes from %s: seq=%d time=%v\n", len(m), short(sess.Peer().String()), seq, rtt.Round(time.Microsecond))
				wait.Stop()
				break recv
			}
		}
		if *count == 0 || seq < *count {
			select {
			case <-ctx.Done():
				printPingStats(stdout, seq, rtts)
				return nil
			case <-time.After(*interval):
			}
		}
	}
	printPingStats(stdout, *count, rtts)
	if len(rtts) == 0 {
		return errors.New("no replies")
	}
	return nil
}

func short(s string) string {
	if len(s) > 12 {
		return s[:6] + ".." + s[len(s)-4:]
	}
	return s
}

func printPingStats(w io.Writer, sent int, rtts []time.Duration) {
	loss := 0.0
	if sent > 0 {
		loss = 100 * float64(sent-len(rtts)) / float64(sent)
	}
	fmt.Fprintf(w, "--- %d sent, %d received, %.0f%% loss\n", sent, len(rtts), loss)
	if len(rtts) == 0 {
		return
	}
	s := append([]time.Duration(nil), rtts...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	var sum time.Duration
	for _, r := range s {
		sum += r
	}
	fmt.Fprintf(w, "rtt min/avg/max = %v/%v/%v\n", s[0].Round(time.Microsecond),
		(sum / time.Duration(len(s))).Round(time.Microsecond), s[len(s)-1].Round(time.Microsecond))
}

func cmdBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench", "bench [-t DURATION] [-streams K] [-size N] ADDR (measures this node sending to ADDR)", stderr)
	dur := fs.Duration("t", 5*time.Second, "how long to send")
	streams := fs.Int("streams", 4, fmt.Sprintf("concurrent streams (at most %d against a node with the default budgets)", maxBenchStreams))
	size := fs.Int("size", 64<<10, "bytes per write")
	if err := parse(fs, args, 1); err != nil {
		return err
	}
	if *dur <= 0 || *streams < 1 || *size < 1 || *size > 16<<20 {
		return fmt.Errorf("%w: -t > 0, -streams >= 1, 1 <= -size <= 16 MiB", errUsage)
	}
	if *streams > maxBenchStreams {
		return fmt.Errorf("%w: -streams %d: each stream may have its %d KiB window in flight at the responder, "+
			"%d MiB in all, more than a node's default session budget (tendril.Config.MaxSessionMemory, %d MiB), "+
			"which resets streams whose data does not fit: at most %d against a node with the defaults",
			errUsage, *streams, mux.InitialStreamWindow>>10, *streams*(mux.InitialStreamWindow>>10)>>10,
			mux.DefaultConfig().MaxSessionMemory>>20, maxBenchStreams)
	}
	d, sess, err := dial(ctx, fs.Arg(0), stdout)
	if err != nil {
		return err
	}
	defer d.svc.Close()
	var (
		sent    atomic.Int64
		acked   atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		firstEr error
	)
	deadline := time.Now().Add(*dur)
	start := time.Now()
	for range *streams {
		st, _, err := sess.OpenStream(ctx, benchProtocol)
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := benchStream(ctx, st, deadline, *size, &sent)
			if err != nil {
				errOnce.Do(func() { firstEr = err })
				return
			}
			acked.Add(n)
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	// Progress redraws one line with \r, which only a terminal shows as intended: in a pipe or
	// a file it would be a run of fragments, so there only the result line is written.
	var tickC <-chan time.Time
	if isTerminal(stdout) {
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		tickC = tick.C
	}
	for running := true; running; {
		select {
		case <-done:
			running = false
		case <-tickC:
			el := time.Since(start).Seconds()
			fmt.Fprintf(stdout, "\r%6.1fs  %10s sent  %s   ", el, human(float64(sent.Load())), rate(float64(sent.Load()), el))
		}
	}
	elapsed := time.Since(start).Seconds()
	if tickC != nil {
		fmt.Fprintln(stdout)
	}
	if firstEr != nil {
		return firstEr
	}
	if acked.Load() != sent.Load() {
		return fmt.Errorf("responder counted %d bytes, %d were sent", acked.Load(), sent.Load())
	}
	fmt.Fprintf(stdout, "%s, %s sent from this node to %s in %.2fs: %s (all bytes acknowledged)\n", plural(*streams, "stream"), human(float64(sent.Load())), short(sess.Peer().String()), elapsed, rate(float64(sent.Load()), elapsed))
	return nil
}

// maxBenchStreams is the most bench streams a node with the default session budget can take
// at full window each: MaxSessionMemory / (InitialStreamWindow + 16 KiB of buffer slack).
var maxBenchStreams = int(mux.DefaultConfig().MaxSessionMemory / (mux.InitialStreamWindow + 16<<10))

// benchStream writes until the deadline, half-closes, and reads the responder's count.
func benchStream(ctx context.Context, st net.Conn, deadline time.Time, size int, sent *atomic.Int64) (int64, error) {
	defer st.Close()
	stop := context.AfterFunc(ctx, func() { st.SetDeadline(time.Now()) })
	defer stop()
	buf := make([]byte, size)
	var mine int64
	for time.Now().Before(deadline) {
		n, err := st.Write(buf)
		mine += int64(n)
		sent.Add(int64(n))
		if err != nil {
			return 0, err
		}
	}
	cw, ok := st.(interface{ CloseWrite() error })
	if !ok {
		return 0, errors.New("stream cannot half-close")
	}
	if err := cw.CloseWrite(); err != nil {
		return 0, err
	}
	var b [8]byte
	if _, err := io.ReadFull(st, b[:]); err != nil {
		return 0, fmt.Errorf("reading the responder's count: %w", err)
	}
	n := int64(binary.BigEndian.Uint64(b[:]))
	if n != mine {
		return n, fmt.Errorf("stream: responder counted %d bytes, %d sent", n, mine)
	}
	return n, nil
}

func human(b float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for b >= 1024 && i < len(units)-1 {
		b /= 1024
		i++
	}
	return fmt.Sprintf("%.1f %s", b, units[i])
}

func rate(b, secs float64) string {
	if secs <= 0 || math.IsNaN(secs) {
		return "-"
	}
	return fmt.Sprintf("%s/s (%.0f Mbit/s)", human(b/secs), b*8/secs/1e6)
}
