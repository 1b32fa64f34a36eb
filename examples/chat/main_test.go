package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

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

func TestFlags(t *testing.T) {
	var out bytes.Buffer
	for _, args := range [][]string{{}, {"-legacy-tea", "zz"}, {"-demo", "-peers", "1"}, {"extra"}} {
		if err := run(context.Background(), args, strings.NewReader(""), &out); err == nil {
			t.Errorf("%v: accepted", args)
		}
	}
}
