// Package bench holds benchmarks that compare tendril's packages with other
// Go libraries. It is a separate module so that the comparison libraries
// never enter tendril's own go.mod. It has no exported API; run it with
// go test -bench . in this directory.
package main
