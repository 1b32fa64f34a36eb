package main

import (
	"testing"
)

func TestMessageCodec(t *testing.T) {
	m := message{nick: "ann", text: "hi there"}
	m.id[0] = 9
	for _, v := range []string{"1.0", "1.1"} {
		got, err := decode(m.encode(v), v)
		if err != nil {
			t.Fatal(err)
		}
		if got.id != m.id || got.text != m.text {
			t.Fatalf("%s: %+v", v, got)
		}
		if v == "1.1" && got.nick != "ann" {
			t.Fatalf("1.1 lost the nick")
		}
	}
	for _, bad := range [][]byte{nil, make([]byte, 31), append(make([]byte, 32), 5, 'a')} {
		if _, err := decode(bad, "1.1"); err == nil {
			t.Errorf("decoded malformed %x", bad)
		}
	}
}

func TestSeenSetBounded(t *testing.T) {
	s := newSeenSet(4)
	var ids [6][32]byte
	for i := range ids {
		ids[i][0] = byte(i)
		if !s.add(ids[i]) {
			t.Fatal("new id reported seen")
		}
	}
	if len(s.set) != 4 {
		t.Fatalf("seen set grew to %d", len(s.set))
	}
	if s.add(ids[5]) {
		t.Fatal("recent id reported new")
	}
	if !s.add(ids[0]) {
		t.Fatal("evicted id still remembered")
	}
}
