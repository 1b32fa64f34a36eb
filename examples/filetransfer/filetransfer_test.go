package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/internal/testutil"
)

func TestSendAndVerify(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	content := make([]byte, 3<<20+123)
	rand.Read(content)
	path := filepath.Join(src, "payload.bin")
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
	addr := startReceiver(t, dst)
	var sendOut bytes.Buffer
	if err := sendFile(context.Background(), addr, path, &sendOut); err != nil {
		t.Fatalf("send: %v\n%s", err, sendOut.String())
	}
	got, err := os.ReadFile(filepath.Join(dst, "payload.bin"))
	if err != nil || !bytes.Equal(got, content) {
		t.Fatalf("received file differs (%v)", err)
	}
	// Sending the same name again is refused (no overwrite), and the sender hears why before
	// it sends the content: no progress is drawn.
	sendOut.Reset()
	err = sendFile(context.Background(), addr, path, &sendOut)
	if err == nil || !strings.Contains(err.Error(), "already exists") || strings.Contains(sendOut.String(), "%") {
		t.Fatalf("second send of the same name: %v, output %q", err, sendOut.String())
	}
}

// startReceiver runs receive into dir until the test ends and returns its address.
func startReceiver(t *testing.T, dir string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out testutil.SyncBuffer
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := receive(ctx, "/ip4/127.0.0.1/tcp/0", dir, &out); err != nil {
			t.Error(err)
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
	return testutil.ListeningAddr(t, &out)
}

// TestReceiverDirChecked: a receiver whose -dir is missing, a file or read-only fails at
// startup, not after a sender has streamed a whole file into nothing.
func TestReceiverDirChecked(t *testing.T) {
	base := t.TempDir()
	file := filepath.Join(base, "file")
	os.WriteFile(file, nil, 0o644)
	dirs := []string{filepath.Join(base, "missing"), file}
	if os.Geteuid() != 0 { // root writes into a 0555 directory anyway
		ro := filepath.Join(base, "ro")
		os.Mkdir(ro, 0o555)
		dirs = append(dirs, ro)
	}
	for _, dir := range dirs {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := receive(ctx, "/ip4/127.0.0.1/tcp/0", dir, io.Discard)
		cancel()
		if err == nil || !strings.Contains(err.Error(), "-dir") {
			t.Errorf("receive into %s: %v", dir, err)
		}
	}
}

// TestSenderCancels: cancelling the sender's context (Ctrl-C) stops a transfer stuck on a
// receiver that does not read.
func TestSenderCancels(t *testing.T) {
	release := make(chan struct{})
	svc, err := newService(tendril.StreamHandlerFunc(func(_ *tendril.Context, _ string, st net.Conn) {
		if _, err := readHeader(st); err == nil {
			st.Write([]byte{1})
		}
		<-release // reads nothing more
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	defer close(release)
	bound, err := svc.Listen(context.Background(), tendril.MustParseAddr("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(path, make([]byte, 64<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sendFile(ctx, bound.String(), path, io.Discard) }()
	time.Sleep(500 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled send returned %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("cancelled send still running after 10s")
	}
}

// TestBinary runs the program as a user would: bad input gets the usage or a one-line error
// and a non-zero exit, and SIGTERM stops a receiver cleanly.
func TestBinary(t *testing.T) {
	bin := testutil.BuildMain(t)
	dir := t.TempDir()
	testutil.CheckExit(t, bin, 2, "Usage")
	testutil.CheckExit(t, bin, 2, "Usage", "-dial", "/ip4/127.0.0.1/tcp/1")
	testutil.CheckExit(t, bin, 1, "filetransfer: ", "-listen", "127.0.0.1:4002", "-dir", dir)
	testutil.CheckExit(t, bin, 1, "filetransfer: -dir", "-listen", "/ip4/127.0.0.1/tcp/0", "-dir", filepath.Join(dir, "missing"))
	testutil.CheckExit(t, bin, 1, "filetransfer: ", "-dial", "nope", "-send", "x")
	testutil.RunUntilReadyThenTERM(t, exec.Command(bin, "-listen", "/ip4/127.0.0.1/tcp/0", "-dir", dir), "listening on")
}

func TestReadHeaderRejectsTraversal(t *testing.T) {
	for _, name := range []string{"..", "/", "."} {
		var b bytes.Buffer
		h := header{name: name, size: 1}
		h.write(&b)
		if _, err := readHeader(&b); err == nil {
			t.Errorf("name %q accepted", name)
		}
	}
	var b bytes.Buffer
	(&header{name: "../../etc/passwd", size: 1}).write(&b)
	h, err := readHeader(&b)
	if err != nil || h.name != "passwd" {
		t.Fatalf("traversal name became %q (%v)", h.name, err)
	}
}
