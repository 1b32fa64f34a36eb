package tendril

import (
	"errors"
	"testing"

	"github.com/tendril-p2p/tendril/mux"
	"github.com/tendril-p2p/tendril/protocol"
	"github.com/tendril-p2p/tendril/secio"
)

// TestConfigErrorsKeepSentinels: a lower layer's invalid configuration reaches the caller of
// New as ErrInvalidConfig and as that layer's own sentinel.
func TestConfigErrorsKeepSentinels(t *testing.T) {
	_, err := New(Config{Mux: &mux.Config{MaxStreams: -1}})
	if !errors.Is(err, ErrInvalidConfig) || !errors.Is(err, mux.ErrInvalidConfig) {
		t.Errorf("mux: %v", err)
	}
	_, err = New(Config{MaxFrameSize: 1})
	if !errors.Is(err, ErrInvalidConfig) || !errors.Is(err, secio.ErrInvalidConfig) {
		t.Errorf("secio: %v", err)
	}
	_, err = New(Config{Protocols: []Protocol{{Name: "no-slash", Versions: []string{"1"}, Handler: HandlerFuncs{}}}})
	if !errors.Is(err, ErrInvalidConfig) || !errors.Is(err, protocol.ErrInvalidName) {
		t.Errorf("protocol: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	bad := []Config{
		{MaxConnections: -1},
		{Protocols: []Protocol{{Name: "nope", Versions: []string{"1"}, Handler: HandlerFuncs{}}}},
		{Protocols: []Protocol{{Name: "/x", Versions: []string{"1"}, Handler: HandlerFuncs{}, RequestHandler: RequestHandlerFunc(nil)}}},
		{Protocols: []Protocol{{Name: "/x", Versions: []string{"1"}, OpenOnConnect: true}}},
		{Protocols: []Protocol{{Name: "/x", Versions: []string{"1"}, Handler: HandlerFuncs{}}, {Name: "/x", Versions: []string{"1"}, Handler: HandlerFuncs{}}}},
		{SendQueueBytes: 10, MaxMessageSize: 100},
		{LegacyTEA: &LegacyTEAConfig{Key: []byte("short")}},
	}
	for i, c := range bad {
		if _, err := New(c); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("case %d: %v, want ErrInvalidConfig", i, err)
		}
	}
}
