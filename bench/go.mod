module github.com/tendril-p2p/tendril/bench

go 1.26.0

require (
	github.com/tendril-p2p/tendril v0.0.0
	github.com/zeebo/blake3 v0.2.4
	lukechampine.com/blake3 v1.4.1
)

require (
	github.com/klauspost/cpuid/v2 v2.2.6 // indirect
	golang.org/x/sys v0.50.0 // indirect
)

replace github.com/tendril-p2p/tendril => ../
