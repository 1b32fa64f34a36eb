package main

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

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
