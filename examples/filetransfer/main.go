// Command filetransfer sends a file over a raw tendril protocol stream and verifies it with
// BLAKE3 on arrival, showing progress and throughput.
//
//	go run ./examples/filetransfer -listen /ip4/127.0.0.1/tcp/4002 -dir ./incoming
//	go run ./examples/filetransfer -dial /ip4/127.0.0.1/tcp/4002/p2p/PEERID -send big.iso
//
// The sender writes a header (file name, size, BLAKE3-256 of the content) and waits for the
// receiver's answer before sending any content: one byte 1 (go ahead), or 0 followed by a
// one-byte length and the reason (the file exists, the directory is not writable), so that a
// refusal reaches the sender before it streams the file into nothing. Then the content; the
// receiver hashes as it writes, and answers one byte: 1 if the digest matched, 0 if not.
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/hash/blake3"
)

const protoName = "/tendril/file"

// maxName bounds the file name in a header: every byte from the network is hostile.
const maxName = 255

func main() {
	listen := flag.String("listen", "", "receive files on this multiaddr")
	dir := flag.String("dir", ".", "where received files are written")
	dial := flag.String("dial", "", "peer to send to")
	send := flag.String("send", "", "file to send")
	flag.Parse()
	// Ctrl-C or SIGTERM cancels: the receiver closes, a sender stops mid-file.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch {
	case flag.NArg() > 0:
		fmt.Fprintf(os.Stderr, "filetransfer: unexpected arguments %q\n", flag.Args())
		flag.Usage()
		os.Exit(2)
	case *listen != "" && *dial == "" && *send == "":
		err = receive(ctx, *listen, *dir, os.Stdout)
	case *listen == "" && *dial != "" && *send != "":
		err = sendFile(ctx, *dial, *send, os.Stdout)
	default:
		flag.Usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "filetransfer:", err)
		os.Exit(1)
	}
}

// header is what precedes the content on the stream.
type header struct {
	name   string
	size   uint64
	digest [32]byte
}

func (h *header) write(w io.Writer) error {
	b := make([]byte, 0, 1+len(h.name)+8+32)
	b = append(b, byte(len(h.name)))
	b = append(b, h.name...)
	b = binary.BigEndian.AppendUint64(b, h.size)
	b = append(b, h.digest[:]...)
	_, err := w.Write(b)
	return err
}

func readHeader(r io.Reader) (header, error) {
	var h header
	var n [1]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return h, err
	}
	rest := make([]byte, int(n[0])+8+32)
	if _, err := io.ReadFull(r, rest); err != nil {
		return h, err
	}
	h.name = filepath.Base(string(rest[:n[0]]))
	if h.name == "." || h.name == ".." || h.name == string(filepath.Separator) || h.name == "" {
		return h, errors.New("bad file name")
	}
	h.size = binary.BigEndian.Uint64(rest[n[0]:])
	copy(h.digest[:], rest[int(n[0])+8:])
	return h, nil
}

func newService(handler tendril.StreamHandler) (*tendril.Service, error) {
	return tendril.New(tendril.Config{Protocols: []tendril.Protocol{{
		Name: protoName, Versions: []string{"1.0"}, StreamHandler: handler,
	}}})
}

// receive serves the file protocol until ctx ends, writing files into dir.
func receive(ctx context.Context, listen, dir string, out io.Writer) error {
	addr, err := tendril.ParseAddr(listen)
	if err != nil {
		return err
	}
	if err := checkDir(dir); err != nil {
		return err
	}
	svc, err := newService(tendril.StreamHandlerFunc(func(c *tendril.Context, _ string, st net.Conn) {
		if err := receiveOne(st, dir, out); err != nil {
			fmt.Fprintf(out, "receive from %s failed: %v\n", c.Peer(), err)
		}
	}))
	if err != nil {
		return err
	}
	defer svc.Close()
	bound, err := svc.Listen(ctx, addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "listening on %s\n", bound)
	<-ctx.Done()
	return nil
}

// checkDir fails unless files can be created in dir, so that a receiver started with a
// missing or read-only -dir says so at once, not after a sender has sent a whole file.
func checkDir(dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("-dir: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("-dir %s is not a directory", dir)
	}
	f, err := os.CreateTemp(dir, ".filetransfer-probe-*")
	if err != nil {
		return fmt.Errorf("-dir %s is not writable: %w", dir, errors.Unwrap(err))
	}
	f.Close()
	return os.Remove(f.Name())
}

func receiveOne(st net.Conn, dir string, out io.Writer) error {
	h, err := readHeader(st)
	if err != nil {
		return fmt.Errorf("header: %w", err)
	}
	path := filepath.Join(dir, h.name)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		reason := "cannot create " + h.name + " here"
		if errors.Is(err, os.ErrExist) {
			reason = h.name + " already exists on the receiver (it never overwrites)"
		}
		if werr := refuse(st, reason); werr != nil {
			return werr
		}
		return fmt.Errorf("refused %s: %w", h.name, err)
	}
	if _, err := st.Write([]byte{1}); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	hasher := blake3.New()
	n, err := io.Copy(io.MultiWriter(f, hasher), io.LimitReader(st, int64(h.size)))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	ok := err == nil && uint64(n) == h.size && [32]byte(hasher.Sum(nil)) == h.digest
	verdict := byte(0)
	if ok {
		verdict = 1
	} else {
		os.Remove(path)
	}
	if _, werr := st.Write([]byte{verdict}); werr != nil && err == nil {
		err = werr
	}
	if !ok {
		return fmt.Errorf("%s: %d of %d bytes, digest mismatch or error (%v); removed", h.name, n, h.size, err)
	}
	fmt.Fprintf(out, "received %s (%d bytes), BLAKE3 verified\n", h.name, n)
	return nil
}

// refuse tells the sender why its file is not taken, before it sends the content.
func refuse(st net.Conn, reason string) error {
	if len(reason) > 255 {
		reason = reason[:255]
	}
	_, err := st.Write(append([]byte{0, byte(len(reason))}, reason...))
	return err
}

// readAnswer reads the receiver's go-ahead or its refusal with the reason.
func readAnswer(r io.Reader) error {
	var b [2]byte
	if _, err := io.ReadFull(r, b[:1]); err != nil {
		return fmt.Errorf("waiting for the receiver to accept: %w", err)
	}
	if b[0] == 1 {
		return nil
	}
	if _, err := io.ReadFull(r, b[1:]); err != nil {
		return fmt.Errorf("receiver refused (no reason given: %w)", err)
	}
	reason := make([]byte, b[1])
	if _, err := io.ReadFull(r, reason); err != nil {
		return fmt.Errorf("receiver refused (reason cut short: %w)", err)
	}
	return fmt.Errorf("receiver refused: %q", reason)
}

// sendFile sends path to the peer at dial and waits for its verdict. Cancelling ctx stops it
// at once, mid-file included.
func sendFile(ctx context.Context, dial, path string, out io.Writer) error {
	addr, err := tendril.ParseAddr(dial)
	if err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	hasher := blake3.New()
	size, err := io.Copy(hasher, f)
	if err != nil {
		return err
	}
	h := header{name: filepath.Base(path), size: uint64(size)}
	hasher.Sum(h.digest[:0])
	if len(h.name) > maxName {
		return fmt.Errorf("file name longer than %d bytes", maxName)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	svc, err := newService(tendril.StreamHandlerFunc(func(*tendril.Context, string, net.Conn) {}))
	if err != nil {
		return err
	}
	defer svc.Close()
	sess, err := svc.Dial(ctx, addr)
	if err != nil {
		return err
	}
	st, _, err := sess.OpenStream(ctx, protoName)
	if err != nil {
		return err
	}
	defer st.Close()
	// Reads and writes on the stream do not take a context: closing it is what stops them.
	stop := context.AfterFunc(ctx, func() { st.Close() })
	defer stop()
	canceled := func(err error) error {
		if ctx.Err() != nil {
			return fmt.Errorf("stopped: %w", ctx.Err())
		}
		return err
	}
	if err := h.write(st); err != nil {
		return canceled(err)
	}
	if err := readAnswer(st); err != nil {
		return canceled(err)
	}
	p := &progress{total: size, out: out, start: time.Now()}
	if _, err := io.Copy(st, io.TeeReader(f, p)); err != nil {
		return canceled(err)
	}
	p.finish()
	var verdict [1]byte
	if _, err := io.ReadFull(st, verdict[:]); err != nil {
		return canceled(fmt.Errorf("waiting for the receiver's verdict: %w", err))
	}
	if verdict[0] != 1 {
		return errors.New("receiver reports a digest mismatch")
	}
	fmt.Fprintf(out, "sent %s (%d bytes), receiver verified BLAKE3 %x\n", h.name, size, h.digest[:8])
	return nil
}

// progress draws a one-line progress bar with throughput, at most ten times a second.
type progress struct {
	total, done int64
	out         io.Writer
	start, last time.Time
}

func (p *progress) Write(b []byte) (int, error) {
	p.done += int64(len(b))
	if time.Since(p.last) > 100*time.Millisecond {
		p.last = time.Now()
		p.draw()
	}
	return len(b), nil
}

func (p *progress) draw() {
	const width = 30
	frac := 1.0
	if p.total > 0 {
		frac = float64(p.done) / float64(p.total)
	}
	bar := make([]byte, width)
	for i := range bar {
		bar[i] = ' '
		if float64(i) < frac*width {
			bar[i] = '='
		}
	}
	secs := time.Since(p.start).Seconds()
	fmt.Fprintf(p.out, "\r[%s] %5.1f%% %8.1f MiB/s", bar, 100*frac, float64(p.done)/(1<<20)/max(secs, 1e-9))
}

func (p *progress) finish() {
	p.draw()
	fmt.Fprintln(p.out)
}
