package main

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/internal/testutil"
)

func TestKV(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan string, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := serve(ctx, "/ip4/127.0.0.1/tcp/0", func(s string) { addrs <- strings.TrimPrefix(s, "listening on ") }); err != nil {
			t.Error(err)
		}
	})
	defer func() { cancel(); wg.Wait() }()
	var addr string
	select {
	case addr = <-addrs:
	case <-time.After(10 * time.Second):
		t.Fatal("server did not start")
	}
	for _, step := range []struct{ cmd, want, err string }{
		{"get greeting", "", "not found"},
		{"put greeting hello there", "ok", ""},
		{"get greeting", "hello there", ""},
		{"del greeting", "ok", ""},
		{"get greeting", "", "not found"},
		{"frobnicate x", "", `unknown command "frobnicate"`},
	} {
		got, err := request(context.Background(), addr, step.cmd)
		if step.err != "" {
			if err == nil || err.Error() != step.err {
				t.Fatalf("%s: %q, %v; want the error %q", step.cmd, got, err, step.err)
			}
			continue
		}
		if err != nil || got != step.want {
			t.Fatalf("%s: %q, %v; want %q", step.cmd, got, err, step.want)
		}
	}
}

// TestBinaryBadInput runs the program with the usual mistakes: each gets a one-line error or
// the usage and a non-zero exit, never a stack trace.
func TestBinaryBadInput(t *testing.T) {
	bin := testutil.BuildMain(t)
	testutil.CheckExit(t, bin, 2, "Usage")
	testutil.CheckExit(t, bin, 2, "Usage", "-dial", "/ip4/127.0.0.1/tcp/1/p2p/x")
	testutil.CheckExit(t, bin, 1, "kv: ", "-dial", "not-an-addr", "get", "k")
	testutil.CheckExit(t, bin, 1, "kv: ", "-listen", "127.0.0.1:4010")
	testutil.CheckExit(t, bin, 0, "Usage", "-h")
}
