package node

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// labChild, if set (lab_test.go, on Linux), is the program the test binary becomes when a
// lab test starts it on a host of its network (labChildEnv set): a node.
var labChild func(arg string) int

// TestMain runs a lab node when asked to, and otherwise the tests, failing them if any
// goroutine outlives them.
func TestMain(m *testing.M) {
	if arg := os.Getenv(labChildEnv); arg != "" && labChild != nil {
		os.Exit(labChild(arg))
	}
	goleak.VerifyTestMain(m)
}

// labChildEnv holds a lab node's configuration (JSON) for the child program.
const labChildEnv = "TENDRIL_NODE_LAB_CHILD"
