package protocol

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"testing"
)

// FuzzAccept feeds arbitrary bytes to the acceptor: it must never panic, must
// fail with ErrMalformed or an EOF error on bad input, and whatever it accepts
// must re-encode to the same bytes.
func FuzzAccept(f *testing.F) {
	f.Add(appendRequest(nil, "/chat", []string{"1.0", "2.1"}))
	f.Add(appendRequest(nil, "/x", []string{"1"}))
	f.Add(appendAccept(nil, "1"))
	f.Add(appendRefuse(nil, CodeRefused, "no"))
	f.Add([]byte("TN\x01\x01\x00\x00"))
	f.Add([]byte("GET / HTTP/1.1\r\n"))
	reg := NewRegistry()
	if err := reg.Register(Info{Name: "/chat", Versions: []string{"1.0", "2.0", "10"}}); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var buf [MaxNegotiationSize]byte
		typ, body, err := readNegotiation(bytes.NewReader(data), &buf)
		if err == nil && typ == msgRequest {
			name, versions, derr := decodeRequest(body)
			if derr == nil {
				if !ValidName(name) || len(versions) == 0 || len(versions) > MaxVersions {
					t.Fatalf("decoded invalid request %q %q", name, versions)
				}
				again := appendRequest(nil, name, versions)
				if !bytes.Equal(again, data[:len(again)]) {
					t.Fatalf("re-encoding differs: %x vs %x", again, data)
				}
			} else if !errors.Is(derr, ErrMalformed) {
				t.Fatalf("decodeRequest error %v", derr)
			}
		}
		_, _, err = Accept(context.Background(), readConn{bytes.NewReader(data)}, reg)
		if err != nil && !errors.Is(err, ErrMalformed) && !errors.Is(err, io.EOF) &&
			!errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, ErrUnknownProtocol) &&
			!errors.Is(err, ErrNoCommonVersion) {
			t.Fatalf("Accept error %v", err)
		}
	})
}

// FuzzAnswer feeds arbitrary answers to the decoder used by Negotiate.
func FuzzAnswer(f *testing.F) {
	f.Add(appendAccept(nil, "2.1"))
	f.Add(appendRefuse(nil, CodeUnknownProtocol, ""))
	f.Add(appendRefuse(nil, CodeNoCommonVersion, "none in common"))
	f.Add(appendRequest(nil, "/chat", []string{"1"}))
	f.Fuzz(func(t *testing.T, data []byte) {
		var buf [MaxNegotiationSize]byte
		typ, body, err := readNegotiation(bytes.NewReader(data), &buf)
		if err != nil {
			return
		}
		v, refused, err := decodeResponse(typ, body)
		switch {
		case err != nil:
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("decodeResponse error %v", err)
			}
		case refused != nil:
			again := appendRefuse(nil, refused.Code, refused.Reason)
			if !bytes.Equal(again, data[:len(again)]) {
				t.Fatalf("re-encoding differs")
			}
			_ = refused.Error()
		default:
			if !ValidVersion(v) {
				t.Fatalf("accepted invalid version %q", v)
			}
			again := appendAccept(nil, v)
			if !bytes.Equal(again, data[:len(again)]) {
				t.Fatalf("re-encoding differs")
			}
		}
	})
}

// FuzzReader reads messages from arbitrary bytes with a small limit and checks
// that every message it returns is framed exactly as in the input.
func FuzzReader(f *testing.F) {
	f.Add(AppendFrame(AppendFrame(nil, []byte("hello")), nil), 16)
	f.Add([]byte{0, 0, 0, 200, 1}, 16)
	f.Add([]byte{0xff, 0xff, 0xff, 0xff}, 0)
	f.Add([]byte{0, 5, 0, 0, 1, 2, 3}, 1<<20)
	f.Fuzz(func(t *testing.T, data []byte, limit int) {
		limit = limit%(1<<20) + 1 // up to 1 MiB: large announced lengths take the pooled path
		if limit <= 0 {
			limit += 1 << 20
		}
		r := NewReader(bytes.NewReader(data), limit)
		var out []byte
		for {
			msg, err := r.ReadMessage()
			if err != nil {
				if err != io.EOF && err != io.ErrUnexpectedEOF && !errors.Is(err, ErrMessageTooLarge) {
					t.Fatalf("unexpected error %v", err)
				}
				if err == io.EOF && !bytes.Equal(out, data) {
					t.Fatalf("clean EOF but re-framing differs")
				}
				break
			}
			if len(msg) > limit {
				t.Fatalf("message of %d bytes over limit %d", len(msg), limit)
			}
			out = AppendFrame(out, msg)
			if !slices.Equal(out, data[:len(out)]) {
				t.Fatalf("message does not match input")
			}
		}
	})
}
