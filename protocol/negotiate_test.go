package protocol

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestNegotiateMatrix(t *testing.T) {
	tests := []struct {
		name          string
		local, remote []string // acceptor, opener
		want          string   // opener's spelling; "" = no common version
		wantAcceptor  string
	}{
		{"same", []string{"1.0"}, []string{"1.0"}, "1.0", "1.0"},
		{"highest", []string{"1.0", "2.0", "3.0"}, []string{"2.0", "1.0", "3.0"}, "3.0", "3.0"},
		{"numeric", []string{"9.0", "10.0"}, []string{"9.0", "10.0"}, "10.0", "10.0"},
		{"minor", []string{"1.9", "1.10"}, []string{"1.10", "1.9", "1.11"}, "1.10", "1.10"},
		{"spelling", []string{"2", "1"}, []string{"2.0", "1.0.0"}, "2.0", "2"},
		{"overlap", []string{"1", "2", "3"}, []string{"3", "4"}, "3", "3"},
		{"none", []string{"1.0"}, []string{"2.0"}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			transports(t, func(t *testing.T, a, b net.Conn) {
				reg := NewRegistry()
				if err := reg.Register(Info{Name: "/chat", Versions: tt.local}); err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				acc := goAccept(ctx, b, reg)
				got, err := Negotiate(ctx, a, "/chat", tt.remote)
				res := <-acc
				if tt.want == "" {
					if !errors.Is(err, ErrNoCommonVersion) || !errors.Is(err, ErrRefused) {
						t.Fatalf("Negotiate error = %v, want ErrNoCommonVersion", err)
					}
					wantRefused(t, err, CodeNoCommonVersion, "")
					if !errors.Is(res.err, ErrNoCommonVersion) || res.info.Name != "/chat" {
						t.Fatalf("Accept = %+v, want ErrNoCommonVersion", res)
					}
					return
				}
				if err != nil || got != tt.want {
					t.Fatalf("Negotiate = %q, %v; want %q", got, err, tt.want)
				}
				if res.err != nil || res.version != tt.wantAcceptor || res.info.Name != "/chat" {
					t.Fatalf("Accept = %+v; want version %q", res, tt.wantAcceptor)
				}
			})
		})
	}
}

func TestNegotiateUnknownProtocol(t *testing.T) {
	transports(t, func(t *testing.T, a, b net.Conn) {
		reg := NewRegistry()
		ctx := context.Background()
		acc := goAccept(ctx, b, reg)
		_, err := Negotiate(ctx, a, "/nope", []string{"1"})
		if !errors.Is(err, ErrUnknownProtocol) || errors.Is(err, ErrNoCommonVersion) {
			t.Fatalf("Negotiate error = %v, want ErrUnknownProtocol", err)
		}
		res := <-acc
		if !errors.Is(res.err, ErrUnknownProtocol) || res.info.Name != "/nope" {
			t.Fatalf("Accept = %+v, want ErrUnknownProtocol", res)
		}
	})
}

func TestNegotiateCustomSelect(t *testing.T) {
	transports(t, func(t *testing.T, a, b net.Conn) {
		reg := NewRegistry()
		lowest := func(local, remote []string) (string, bool) {
			v, ok := SelectHighest(local, remote)
			for _, l := range local {
				for _, r := range remote {
					if CompareVersions(l, r) == 0 && CompareVersions(l, v) < 0 {
						v = l
					}
				}
			}
			return v, ok
		}
		if err := reg.Register(Info{Name: "/low", Versions: []string{"1", "2", "3"}, Select: lowest}); err != nil {
			t.Fatal(err)
		}
		acc := goAccept(context.Background(), b, reg)
		got, err := Negotiate(context.Background(), a, "/low", []string{"2", "3"})
		if err != nil || got != "2" {
			t.Fatalf("Negotiate = %q, %v; want 2", got, err)
		}
		if res := <-acc; res.err != nil || res.version != "2" {
			t.Fatalf("Accept = %+v", res)
		}
	})
}

func TestNegotiateBadSelection(t *testing.T) {
	transports(t, func(t *testing.T, a, b net.Conn) {
		reg := NewRegistry()
		bad := func(local, remote []string) (string, bool) { return "7", true }
		if err := reg.Register(Info{Name: "/bad", Versions: []string{"1"}, Select: bad}); err != nil {
			t.Fatal(err)
		}
		acc := goAccept(context.Background(), b, reg)
		_, err := Negotiate(context.Background(), a, "/bad", []string{"1"})
		wantRefused(t, err, CodeRefused, "internal error")
		if res := <-acc; !errors.Is(res.err, ErrBadSelection) {
			t.Fatalf("Accept = %+v, want ErrBadSelection", res)
		}
	})
}

func TestNegotiateInvalidLocal(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	ctx := context.Background()
	if _, err := Negotiate(ctx, a, "chat", []string{"1"}); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("bad name: %v", err)
	}
	if _, err := Negotiate(ctx, a, "/chat", []string{"1", "x"}); !errors.Is(err, ErrInvalidVersion) {
		t.Fatalf("bad version: %v", err)
	}
	if _, err := Negotiate(ctx, a, "/chat", nil); !errors.Is(err, ErrInvalidInfo) {
		t.Fatalf("no versions: %v", err)
	}
}

// TestNegotiateTimeout checks that a silent peer yields ErrNegotiationTimeout
// and that the deadline is cleared afterwards (the conn stays usable).
func TestNegotiateTimeout(t *testing.T) {
	transports(t, func(t *testing.T, a, b net.Conn) {
		go io.Copy(io.Discard, b) // reads the request, never answers
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := Negotiate(ctx, a, "/chat", []string{"1"})
		if !errors.Is(err, ErrNegotiationTimeout) || !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("Negotiate error = %v, want ErrNegotiationTimeout", err)
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("error %v is not a net.Error timeout", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("timeout took %v", d)
		}
		// The deadline must be gone: a write now succeeds.
		if _, err := a.Write([]byte("x")); err != nil {
			t.Fatalf("write after negotiation timeout: %v", err)
		}
	})
}

func TestAcceptCancel(t *testing.T) {
	transports(t, func(t *testing.T, a, b net.Conn) {
		ctx, cancel := context.WithCancel(context.Background())
		acc := goAccept(ctx, b, NewRegistry())
		time.Sleep(20 * time.Millisecond)
		cancel()
		res := <-acc
		if !errors.Is(res.err, context.Canceled) || errors.Is(res.err, ErrNegotiationTimeout) {
			t.Fatalf("Accept after cancel = %v, want context.Canceled", res.err)
		}
		// canceled before starting
		_, _, err := Accept(ctx, b, NewRegistry())
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Accept with canceled ctx = %v", err)
		}
	})
}

func TestAcceptConnDeadline(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	_ = b.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	_, _, err := Accept(context.Background(), b, NewRegistry())
	if !errors.Is(err, ErrNegotiationTimeout) {
		t.Fatalf("Accept = %v, want ErrNegotiationTimeout", err)
	}
}

func TestAcceptGarbage(t *testing.T) {
	valid := appendRequest(nil, "/chat", []string{"1"})
	mutate := func(i int, c byte) []byte {
		b := bytes.Clone(valid)
		b[i] = c
		return b
	}
	cases := map[string][]byte{
		"http":         []byte("GET / HTTP/1.1\r\n\r\n"),
		"magic":        mutate(0, 'X'),
		"wire version": mutate(2, 9),
		"type":         mutate(3, 9),
		"answer type":  mutate(3, msgAccept),
		"length big":   append(bytes.Clone(valid[:4]), 0xff, 0xff),
		"name len":     mutate(6, 200),
		"count zero":   mutate(6+1+5, 0),
		"count big":    mutate(6+1+5, MaxVersions+1),
		"bad version":  mutate(len(valid)-1, 'x'),
		"trailing":     finish(append(bytes.Clone(valid), 0), 0),
		"bad name":     mutate(7, 'c'),
	}
	for name, msg := range cases {
		t.Run(name, func(t *testing.T) {
			_, _, err := Accept(context.Background(), readConn{bytes.NewReader(msg)}, NewRegistry())
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("Accept(%x) = %v, want ErrMalformed", msg, err)
			}
		})
	}
	t.Run("short", func(t *testing.T) {
		_, _, err := Accept(context.Background(), readConn{bytes.NewReader(valid[:len(valid)-1])}, NewRegistry())
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("Accept of truncated request = %v, want io.ErrUnexpectedEOF", err)
		}
	})
}

func TestNegotiateGarbageAnswer(t *testing.T) {
	answers := map[string][]byte{
		"not offered":   appendAccept(nil, "2"),
		"bad version":   appendAccept(nil, "2x"),
		"request":       appendRequest(nil, "/x", []string{"1"}),
		"code zero":     appendRefuse(nil, 0, ""),
		"control chars": appendRefuse(nil, CodeRefused, "a\x00b"),
		"trailing":      finish(append(appendAccept(nil, "1"), 0), 0),
	}
	for name, ans := range answers {
		t.Run(name, func(t *testing.T) {
			a, b := net.Pipe()
			defer a.Close()
			go func() {
				defer b.Close()
				var buf [MaxNegotiationSize]byte
				if _, _, err := readNegotiation(b, &buf); err == nil {
					b.Write(ans)
				}
			}()
			_, err := Negotiate(context.Background(), a, "/chat", []string{"1"})
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("Negotiate = %v, want ErrMalformed", err)
			}
		})
	}
}

// TestNegotiateThenMessages checks that neither side consumes bytes beyond the
// negotiation, by sending a message right behind the request and the answer.
func TestNegotiateThenMessages(t *testing.T) {
	transports(t, func(t *testing.T, a, b net.Conn) {
		reg := NewRegistry()
		if err := reg.Register(Info{Name: "/echo", Versions: []string{"1"}}); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			if _, _, err := Accept(context.Background(), b, reg); err != nil {
				done <- err
				return
			}
			msg, err := NewReader(b, 0).ReadMessage()
			if err != nil {
				done <- err
				return
			}
			done <- NewWriter(b, 0).WriteMessage(append([]byte("echo:"), msg...))
		}()
		if _, err := Negotiate(context.Background(), a, "/echo", []string{"1"}); err != nil {
			t.Fatal(err)
		}
		if err := NewWriter(a, 0).WriteMessage([]byte("hi")); err != nil {
			t.Fatal(err)
		}
		msg, err := NewReader(a, 0).ReadMessage()
		if err != nil || string(msg) != "echo:hi" {
			t.Fatalf("echo = %q, %v", msg, err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

// TestNegotiationBytes pins the encoding documented in docs/protocol.md.
func TestNegotiationBytes(t *testing.T) {
	tests := []struct {
		got  []byte
		want string
	}{
		{appendRequest(nil, "/chat", []string{"1.0", "2.1"}), "544e0101000f 05 2f63686174 02 03 312e30 03 322e31"},
		{appendAccept(nil, "2.1"), "544e01020004 03 322e31"},
		{appendRefuse(nil, CodeUnknownProtocol, ""), "544e01030002 01 00"},
	}
	for _, tt := range tests {
		want := strings.ReplaceAll(tt.want, " ", "")
		if got := hex.EncodeToString(tt.got); got != want {
			t.Errorf("encoding = %s, want %s", got, want)
		}
	}
	// the largest request allowed by the limits fits in MaxNegotiationSize
	vs := make([]string, MaxVersions)
	for i := range vs {
		vs[i] = strings.Repeat("9", MaxVersionComponent) + "." + strings.Repeat("9", MaxVersionComponent) + "." + strings.Repeat("0", MaxVersionLen-2*MaxVersionComponent-2)
		vs[i] = vs[i][:MaxVersionLen-2] + string(rune('0'+i/10)) + string(rune('0'+i%10))
	}
	name := "/" + strings.Repeat("n", MaxNameLen-1)
	if err := (Info{Name: name, Versions: vs}).Validate(); err != nil {
		t.Fatal(err)
	}
	if n := len(appendRequest(nil, name, vs)); n > MaxNegotiationSize {
		t.Fatalf("largest request is %d bytes", n)
	}
}

// readConn is a net.Conn that reads from r and accepts writes.
type readConn struct{ r io.Reader }

func (c readConn) Read(p []byte) (int, error)       { return c.r.Read(p) }
func (c readConn) Write(p []byte) (int, error)      { return len(p), nil }
func (c readConn) Close() error                     { return nil }
func (c readConn) LocalAddr() net.Addr              { return nil }
func (c readConn) RemoteAddr() net.Addr             { return nil }
func (c readConn) SetDeadline(time.Time) error      { return nil }
func (c readConn) SetReadDeadline(time.Time) error  { return nil }
func (c readConn) SetWriteDeadline(time.Time) error { return nil }

// TestAcceptCommit: commit runs before the answer leaves (the opener cannot have its answer
// while commit is running), and an error from it becomes a refusal with its code and reason.
func TestAcceptCommit(t *testing.T) {
	transports(t, func(t *testing.T, a, b net.Conn) {
		reg := NewRegistry()
		if err := reg.Register(Info{Name: "/c", Versions: []string{"1", "2"}}); err != nil {
			t.Fatal(err)
		}
		answered := make(chan struct{})
		var committed atomic.Bool
		ch := make(chan acceptResult, 1)
		go func() {
			info, v, err := AcceptCommit(context.Background(), b, reg, func(info Info, v string) error {
				if info.Name != "/c" || v != "2" {
					t.Errorf("commit(%q, %q)", info.Name, v)
				}
				select {
				case <-answered:
					t.Error("the opener had its answer before commit ran")
				case <-time.After(20 * time.Millisecond):
				}
				committed.Store(true)
				return nil
			})
			ch <- acceptResult{info, v, err}
		}()
		got, err := Negotiate(context.Background(), a, "/c", []string{"1", "2"})
		close(answered)
		if err != nil || got != "2" || !committed.Load() {
			t.Fatalf("Negotiate = %q, %v (committed %v)", got, err, committed.Load())
		}
		if res := <-ch; res.err != nil || res.version != "2" {
			t.Fatalf("AcceptCommit = %+v", res)
		}
	})
	transports(t, func(t *testing.T, a, b net.Conn) {
		reg := NewRegistry()
		if err := reg.Register(Info{Name: "/c", Versions: []string{"1"}}); err != nil {
			t.Fatal(err)
		}
		why := &RefusedError{Code: CodeUnknownProtocol, Reason: "insecure session"}
		ch := make(chan acceptResult, 1)
		go func() {
			info, v, err := AcceptCommit(context.Background(), b, reg, func(Info, string) error { return why })
			ch <- acceptResult{info, v, err}
		}()
		_, err := Negotiate(context.Background(), a, "/c", []string{"1"})
		wantRefused(t, err, CodeUnknownProtocol, "insecure session")
		if res := <-ch; !errors.Is(res.err, why) {
			t.Fatalf("AcceptCommit = %+v, want the commit's error", res)
		}
	})
}

// TestAcceptHold: a held answer is not written; the caller's AppendAccept in front of its
// data completes the negotiation for the opener.
func TestAcceptHold(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	reg := NewRegistry()
	if err := reg.Register(Info{Name: "/req", Versions: []string{"1"}}); err != nil {
		t.Fatal(err)
	}
	lc, err := NegotiateLazy(a, "/req", "1", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	go lc.Write([]byte("hi"))
	_, v, held, err := AcceptHold(context.Background(), b, reg, func(Info, string) (bool, error) { return true, nil })
	if err != nil || !held || v != "1" {
		t.Fatalf("AcceptHold = %q, held %v, %v", v, held, err)
	}
	if _, err := io.ReadFull(b, make([]byte, 2)); err != nil { // the request (over net.Pipe a write waits for its reader)
		t.Fatal(err)
	}
	go b.Write(append(AppendAccept(nil, v), "reply"...))
	got := make([]byte, 5)
	if _, err := io.ReadFull(lc, got); err != nil || string(got) != "reply" {
		t.Fatalf("the opener read %q, %v", got, err)
	}
}
