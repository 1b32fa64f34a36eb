package node

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tendril-p2p/tendril"
	"github.com/tendril-p2p/tendril/transport"
	"github.com/tendril-p2p/tendril/transport/memory"
)

// TestLifecycle: Start twice and Start after Close are typed errors; Close saves the book
// and a corrupt book file fails New instead of starting empty.
func TestLifecycle(t *testing.T) {
	network := memory.NewNetwork(memory.NetworkConfig{})
	dir := t.TempDir()
	book := filepath.Join(dir, "book.json")
	cfg := Config{
		Service:  tendril.Config{Transports: []transport.Transport{network.NewTransport()}},
		Listen:   []tendril.Addr{tendril.MustParseAddr("/memory/0")},
		BookFile: book,
	}
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); !errors.Is(err, ErrStarted) {
		t.Fatalf("second Start: %v, want ErrStarted", err)
	}
	n.Close()
	if err := n.Start(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Start after Close: %v, want ErrClosed", err)
	}
	if _, err := n.Book().LoadFile(book, time.Now()); err != nil {
		t.Fatalf("the book Close saved: %v", err)
	}

	writeFile(t, book, "{not json")
	cfg.Service.Transports = []transport.Transport{network.NewTransport()}
	if m, err := New(cfg); err == nil {
		m.Close()
		t.Fatal("New with a corrupt book succeeded")
	}
	if _, err := New(Config{SaveInterval: -1}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("negative SaveInterval: %v", err)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
