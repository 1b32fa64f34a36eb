module github.com/tendril-p2p/tendril

go 1.26

require (
	github.com/hashicorp/yamux v0.1.2
	github.com/multiformats/go-multiaddr v0.16.1
	go.uber.org/goleak v1.3.0
	golang.org/x/crypto v0.59.0
	golang.org/x/sys v0.50.0
)
