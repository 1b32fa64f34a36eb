package defaults

import (
	"testing"
	"time"
)

func TestSet(t *testing.T) {
	a, b := 0, 5
	Set(&a, 3)
	Set(&b, 3)
	d := time.Duration(0)
	Set(&d, time.Second)
	if a != 3 || b != 5 || d != time.Second {
		t.Fatalf("a %d b %d d %v", a, b, d)
	}
}
