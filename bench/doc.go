// Command bench compares tendril with what users would pick instead: crypto/tls 1.3 +
// hashicorp/yamux, go-libp2p (Noise and TLS, with yamux), yamux over plain TCP and raw TCP,
// all over loopback TCP in one run, plus BLAKE3 and AEAD framing rows. It is a separate
// module so that the comparison libraries never enter tendril's own go.mod.
//
//	go run . -suite all            # markdown table of medians, min-max and ratios to tendril
//	go run . -json > results.json  # for machines
//	go run . -svg transports.svg   # a bar chart
//	go run . -wan                  # through a delay proxy: RTT 50 and 100 ms, a 100 Mbit/s bottleneck
//
// The BLAKE3 comparison against zeebo/blake3 and lukechampine.com/blake3 is a Go benchmark:
// GOMAXPROCS=1 go test -run '^$' -bench 'BLAKE3$' -count 6 -cpu 1 .
package main
