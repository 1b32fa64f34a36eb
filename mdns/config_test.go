package mdns

import (
	"errors"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	if err := (Config{}).Validate(); err != nil {
		t.Fatalf("zero Config: %v", err)
	}
	bad := []Config{
		{ServiceName: "tendril._udp"}, {ServiceName: "_tendril._sctp"}, {ServiceName: "_Tendril._udp"},
		{Instance: "a.b"}, {Instance: string(make([]byte, 64))}, {Port: 70000},
		{DisableIPv4: true, DisableIPv6: true}, {Announcements: 9}, {MaxInstances: -1},
	}
	for _, c := range bad {
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: %v", c, err)
		}
	}
	if _, err := New(Config{Payload: make([]byte, MaxPayload+1)}); !errors.Is(err, ErrPayloadTooLarge) {
		t.Fatalf("oversized payload: %v", err)
	}
	a, _ := New(Config{})
	b, _ := New(Config{})
	if a.Instance() == b.Instance() || !validLabel(a.Instance()) {
		t.Fatalf("default instances %q, %q", a.Instance(), b.Instance())
	}
	a.Close()
	if err := a.SetPayload(nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("SetPayload after Close: %v", err)
	}
}
