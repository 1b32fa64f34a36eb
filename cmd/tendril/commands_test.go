package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/internal/testutil"
)

func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestKeygenAndID(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.key")
	code, out, errs := runCmd(t, "keygen", "-o", path)
	if code != 0 {
		t.Fatalf("keygen: %d %s", code, errs)
	}
	id := strings.TrimSpace(out)
	if code, _, _ := runCmd(t, "keygen", "-o", path); code == 0 {
		t.Fatal("keygen overwrote an existing key without -f")
	}
	code, out, _ = runCmd(t, "id", "-key", path)
	if code != 0 || strings.TrimSpace(out) != id {
		t.Fatalf("id: %d %q, want %q", code, out, id)
	}
	if code, _, _ := runCmd(t, "keygen", "-f", "-o", path); code != 0 {
		t.Fatal("keygen -f refused to overwrite")
	}
	if code, _, _ := runCmd(t, "id", "-key", filepath.Join(t.TempDir(), "missing")); code != 1 {
		t.Fatalf("id of a missing file: exit %d", code)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{{}, {"nope"}, {"ping"}, {"ping", "not-an-addr"}, {"bench", "-streams", "0", "/ip4/127.0.0.1/tcp/1"}, {"keygen"}} {
		if code, _, _ := runCmd(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
	// Limits are checked before anything is dialled: the address here refuses connections,
	// and a refusal would be exit 1.
	if code, _, errs := runCmd(t, "ping", "-size", "100000000", "/ip4/127.0.0.1/tcp/1"); code != 2 || !strings.Contains(errs, "-size") {
		t.Errorf("ping -size 100000000: exit %d %q, want a usage error before dialling", code, errs)
	}
	if code, _, errs := runCmd(t, "bench", "-streams", "1024", "/ip4/127.0.0.1/tcp/1"); code != 2 || !strings.Contains(errs, "MaxSessionMemory") {
		t.Errorf("bench -streams 1024: exit %d %q, want a usage error naming the setting", code, errs)
	}
	if code, _, _ := runCmd(t, "ping", "-h"); code != 0 {
		t.Errorf("ping -h: exit %d", code)
	}
	if code, out, _ := runCmd(t, "version"); code != 0 || !strings.HasPrefix(out, "tendril ") {
		t.Errorf("version: %d %q", code, out)
	}
}

// startResponder runs `tendril listen` until the test ends and returns its address.
func startResponder(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out testutil.SyncBuffer
	done := make(chan int)
	go func() { done <- run(ctx, []string{"listen", "/ip4/127.0.0.1/tcp/0"}, &out, &out) }()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("listen exited %d: %s", code, out.String())
		}
	})
	return testutil.ListeningAddr(t, &out)
}

func TestPingAndBench(t *testing.T) {
	addr := startResponder(t)
	code, out, errs := runCmd(t, "ping", "-c", "3", "-i", "10ms", addr)
	if code != 0 {
		t.Fatalf("ping: %d %s %s", code, out, errs)
	}
	if !strings.Contains(out, "3 sent, 3 received, 0% loss") || !strings.Contains(out, "seq=3") {
		t.Fatalf("ping output:\n%s", out)
	}
	code, out, errs = runCmd(t, "bench", "-t", "300ms", "-streams", "2", addr)
	if code != 0 {
		t.Fatalf("bench: %d %s %s", code, out, errs)
	}
	if !strings.Contains(out, "all bytes acknowledged") {
		t.Fatalf("bench output:\n%s", out)
	}
	// Not a terminal: no \r redraws, and one stream is "1 stream".
	code, out, errs = runCmd(t, "bench", "-t", "700ms", "-streams", "1", addr)
	if code != 0 || strings.Contains(out, "\r") || !strings.Contains(out, "1 stream,") {
		t.Fatalf("bench -streams 1 into a buffer: %d %q %s", code, out, errs)
	}
}

func TestPingWrongPeer(t *testing.T) {
	addr := startResponder(t)
	keyPath := filepath.Join(t.TempDir(), "other.key")
	_, out, _ := runCmd(t, "keygen", "-o", keyPath)
	wrong := addr[:strings.Index(addr, "/p2p/")] + "/p2p/" + strings.TrimSpace(out)
	code, _, errs := runCmd(t, "ping", "-c", "1", wrong)
	if code != 1 || !strings.Contains(errs, "peer") {
		t.Fatalf("ping to wrong peer ID: exit %d, %s", code, errs)
	}
}

func TestPingUnreachable(t *testing.T) {
	code, _, errs := runCmd(t, "ping", "-c", "1", "/ip4/127.0.0.1/tcp/1")
	if code != 1 {
		t.Fatalf("ping unreachable: exit %d %s", code, errs)
	}
}

// TestKeyMessages: the key file mistakes a new user makes each get one line that names the
// file and the remedy.
func TestKeyMessages(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "node.key")
	if code, _, errs := runCmd(t, "keygen", "-o", path); code != 0 {
		t.Fatal(errs)
	}
	code, _, errs := runCmd(t, "keygen", "-o", path)
	if code != 1 || !strings.Contains(errs, "-f") || strings.Count(errs, "\n") != 1 {
		t.Errorf("keygen over an existing key: %d %q", code, errs)
	}
	code, out, errs := runCmd(t, "id", path)
	if code != 0 || len(strings.TrimSpace(out)) < 20 {
		t.Errorf("id FILE: %d %q %q", code, out, errs)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"id", path}, {"id", "-key", path}} {
		code, _, errs := runCmd(t, args...)
		if code != 1 || !strings.Contains(errs, "chmod 600 "+path) || strings.Count(errs, "\n") != 1 {
			t.Errorf("%v on a 0644 key: %d %q", args, code, errs)
		}
	}
	bad := filepath.Join(dir, "bad.key")
	if err := os.WriteFile(bad, []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errs = runCmd(t, "id", bad)
	if code != 1 || !strings.Contains(errs, bad) || strings.Contains(errs, "asn1") || strings.Count(errs, "secio") > 1 {
		t.Errorf("id of a mangled key: %d %q", code, errs)
	}
	if code, _, _ := runCmd(t, "id"); code != 2 {
		t.Errorf("id without a file: exit %d, want 2", code)
	}
}

// TestBenchNotServed: bench against a node that does not serve the bench protocol fails at
// once with the refusal (before, it hung until the node's idle timeout, 30 s).
func TestBenchNotServed(t *testing.T) {
	svc, err := tendril.New(tendril.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	addr, err := svc.Listen(context.Background(), tendril.MustParseAddr("/ip4/127.0.0.1/tcp/0"))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	code, _, errs := runCmd(t, "bench", "-t", "5s", "-streams", "2", addr.String())
	if code != 1 || !strings.Contains(errs, "unknown protocol") {
		t.Fatalf("bench against a node without it: exit %d %q, want the refusal", code, errs)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("the refusal came after %v", d)
	}
}
