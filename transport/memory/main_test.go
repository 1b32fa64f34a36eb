package memory

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine a test starts, and every timer callback, must have ended: a memory
// connection or listener runs none of its own.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
