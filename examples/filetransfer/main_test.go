package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tendril-p2p/tendril/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSendAndVerify(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	content := make([]byte, 3<<20+123)
	rand.Read(content)
	path := filepath.Join(src, "payload.bin")
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var out testutil.SyncBuffer
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := receive(ctx, "/ip4/127.0.0.1/tcp/0", dst, &out); err != nil {
			t.Error(err)
		}
	}()
	defer func() { cancel(); wg.Wait() }()
	re := regexp.MustCompile(`listening on (\S+)`)
	var addr string
	for deadline := time.Now().Add(10 * time.Second); addr == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			addr = m[1]
		}
	}
	if addr == "" {
		t.Fatal("receiver did not start")
	}
	var sendOut bytes.Buffer
	if err := sendFile(context.Background(), addr, path, &sendOut); err != nil {
		t.Fatalf("send: %v\n%s", err, sendOut.String())
	}
	got, err := os.ReadFile(filepath.Join(dst, "payload.bin"))
	if err != nil || !bytes.Equal(got, content) {
		t.Fatalf("received file differs (%v)", err)
	}
	// Sending the same name again is refused (no overwrite), and the sender hears of it.
	if err := sendFile(context.Background(), addr, path, &sendOut); err == nil {
		t.Fatal("second send of the same name succeeded")
	}
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
