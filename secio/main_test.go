package secio

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// Most tests close net.Pipe ends whose peer is not reading: each close
	// record would wait for it. Tests of the close record read it.
	closeNotifyTimeout = 20 * time.Millisecond
	closeLinger = 20 * time.Millisecond
	goleak.VerifyTestMain(m)
}
