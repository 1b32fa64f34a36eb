package main

import (
	"context"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/internal/testutil"
)

func TestEcho(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan string, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		err := run(ctx, "/ip4/127.0.0.1/tcp/0", "", "", func(s string) {
			addrs <- strings.TrimPrefix(s, "listening on ")
		})
		if err != nil {
			t.Error(err)
		}
	}()
	defer func() { cancel(); wg.Wait() }()
	var addr string
	select {
	case addr = <-addrs:
	case <-time.After(10 * time.Second):
		t.Fatal("server did not start")
	}
	var got string
	if err := run(context.Background(), "", addr, "hello there", func(s string) { got = s }); err != nil {
		t.Fatal(err)
	}
	if got != "echo: hello there" {
		t.Fatalf("got %q", got)
	}
}

// TestBinaryBadInput runs the program as a user would with the usual mistakes: each gets a
// one-line error or the usage and a non-zero exit, never a stack trace.
func TestBinaryBadInput(t *testing.T) {
	bin := testutil.BuildMain(t)
	testutil.CheckExit(t, bin, 2, "Usage")
	testutil.CheckExit(t, bin, 1, "echo: ", "-listen", "127.0.0.1:4010")
	testutil.CheckExit(t, bin, 1, "echo: ", "-dial", "not-an-addr", "hi")
	testutil.CheckExit(t, bin, 2, "Usage", "-listen", "/ip4/127.0.0.1/tcp/0", "-dial", "/ip4/127.0.0.1/tcp/1")
	testutil.CheckExit(t, bin, 0, "Usage", "-h")
}

// TestBinarySIGTERM: a server stopped by SIGTERM (a service manager, docker stop) closes
// gracefully and exits 0, as with Ctrl-C.
func TestBinarySIGTERM(t *testing.T) {
	bin := testutil.BuildMain(t)
	testutil.RunUntilReadyThenTERM(t, exec.Command(bin, "-listen", "/ip4/127.0.0.1/tcp/0"), "listening on")
}
