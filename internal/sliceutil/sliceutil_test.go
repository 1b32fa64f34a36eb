package sliceutil

import "testing"

func TestForAppend(t *testing.T) {
	room := make([]byte, 2, 8)
	head, tail := ForAppend(room, 3)
	if len(head) != 5 || len(tail) != 3 || &head[0] != &room[0] {
		t.Fatalf("with room: len %d, %d, same array %v", len(head), len(tail), &head[0] == &room[0])
	}
	short := []byte{1, 2}
	head, tail = ForAppend(short[:2:2], 3)
	if len(head) != 5 || len(tail) != 3 || &head[0] == &short[0] || head[0] != 1 || head[1] != 2 {
		t.Fatalf("without room: %v", head)
	}
}

func TestOverlap(t *testing.T) {
	b := make([]byte, 16)
	cases := []struct {
		name         string
		x, y         []byte
		any, inexact bool
	}{
		{"same", b[:8], b[:8], true, false},
		{"shifted", b[:8], b[1:9], true, true},
		{"disjoint", b[:8], b[8:], false, false},
		{"empty", b[:0], b, false, false},
	}
	for _, c := range cases {
		if got := AnyOverlap(c.x, c.y); got != c.any {
			t.Errorf("%s: AnyOverlap %v, want %v", c.name, got, c.any)
		}
		if got := InexactOverlap(c.x, c.y); got != c.inexact {
			t.Errorf("%s: InexactOverlap %v, want %v", c.name, got, c.inexact)
		}
	}
}
