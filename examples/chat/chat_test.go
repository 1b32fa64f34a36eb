//go:build !js

package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril/internal/testutil"
)

func TestDemo(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-demo"}, strings.NewReader(""), &out); err != nil {
		t.Fatalf("demo failed: %v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{"--- ok: 4 peers", "/tendril/chat 1.0", "/tendril/chat 1.1", "hello from peer1"} {
		if !strings.Contains(s, want) {
			t.Errorf("demo output lacks %q:\n%s", want, s)
		}
	}
}

func TestDemoLegacyTEA(t *testing.T) {
	var out bytes.Buffer
	key := hex.EncodeToString([]byte("0123456789abcdef"))
	if err := run(context.Background(), []string{"-demo", "-peers", "3", "-legacy-tea", key}, strings.NewReader(""), &out); err != nil {
		t.Fatalf("legacy demo failed: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "INSECURE") {
		t.Errorf("legacy demo does not say it is insecure:\n%s", out.String())
	}
}

func TestFlags(t *testing.T) {
	var out bytes.Buffer
	for _, args := range [][]string{
		{}, {"-legacy-tea", "zz"}, {"-demo", "-peers", "1"}, {"extra"},
		{"-web", "127.0.0.1:0", "-demo"}, {"-web", "127.0.0.1:0", "-legacy-tea", "000102030405060708090a0b0c0d0e0f"},
	} {
		if err := run(context.Background(), args, strings.NewReader(""), &out); err == nil {
			t.Errorf("%v: accepted", args)
		}
	}
}

// TestBinaryPiped runs chat as a user would: a listener, and a dialer whose stdin is a pipe
// that ends at once. Every piped line must arrive (Dial returns with the chat open), the
// listener names the leaver by nick, a line typed with no peer gets a word, -h exits 0.
func TestBinaryPiped(t *testing.T) {
	bin := testutil.BuildMain(t)
	if out, err := exec.Command(bin, "-h").CombinedOutput(); err != nil || !strings.Contains(string(out), "-listen") {
		t.Errorf("chat -h: %v %q", err, out)
	}
	alice := exec.Command(bin, "-listen", "/ip4/127.0.0.1/tcp/0", "-name", "alice")
	var out testutil.SyncBuffer
	alice.Stdout, alice.Stderr = &out, &out
	stdin, err := alice.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := alice.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- alice.Wait() }()
	defer func() {
		alice.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-waited:
			if err != nil {
				t.Errorf("alice after SIGTERM: %v", err)
			}
		case <-time.After(10 * time.Second):
			alice.Process.Kill()
			<-waited
			t.Error("alice ignored SIGTERM")
		}
	}()
	addr := testutil.ListeningAddr(t, &out)
	for i := range 3 {
		line := fmt.Sprintf("piped line %d", i)
		bob := exec.Command(bin, "-dial", addr, "-name", "bob")
		bob.Stdin = strings.NewReader(line + "\n")
		if b, err := bob.CombinedOutput(); err != nil {
			t.Fatalf("bob: %v\n%s", err, b)
		}
		waitOutput(t, &out, "<bob> "+line)
		waitOutput(t, &out, "left: bob (")
	}
	if _, err := io.WriteString(stdin, "anyone?\n"); err != nil {
		t.Fatal(err)
	}
	waitOutput(t, &out, "no peer connected: line not sent")
}

func waitOutput(t *testing.T, out *testutil.SyncBuffer, want string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(out.String(), want); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestBinaryRestartSameKey: a peer restarted with its key (-key) gets every line it sends
// through again; before, its first lines after the restart had the IDs of its first lines
// before it, and the others dropped them as seen.
func TestBinaryRestartSameKey(t *testing.T) {
	bin := testutil.BuildMain(t)
	alice := exec.Command(bin, "-listen", "/ip4/127.0.0.1/tcp/0", "-name", "alice")
	var out testutil.SyncBuffer
	alice.Stdout, alice.Stderr = &out, &out
	stdin, err := alice.StdinPipe() // kept open: a chat peer ends at the end of its input
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	if err := alice.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		alice.Process.Signal(syscall.SIGTERM)
		alice.Wait()
	}()
	addr := testutil.ListeningAddr(t, &out)
	key := t.TempDir() + "/bob.key"
	for run := range 3 {
		lines := fmt.Sprintf("run %d line 1\nrun %d line 2\n", run, run)
		bob := exec.Command(bin, "-dial", addr, "-name", "bob", "-key", key)
		bob.Stdin = strings.NewReader(lines)
		if b, err := bob.CombinedOutput(); err != nil {
			t.Fatalf("bob run %d: %v\n%s", run, err, b)
		}
		waitOutput(t, &out, fmt.Sprintf("<bob> run %d line 1", run))
		waitOutput(t, &out, fmt.Sprintf("<bob> run %d line 2", run))
	}
}
