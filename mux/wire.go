package mux

import "encoding/binary"

// The yamux wire format (spec: github.com/hashicorp/yamux spec.md, which go-yamux and
// tentacle's tokio-yamux follow too): every frame starts with a 12-byte header
//
//	version(1) = 0 | type(1) | flags(2, BE) | stream ID(4, BE) | length(4, BE)
//
// where length is the body size of a data frame, the window increment of a window update,
// the opaque value of a ping, and the error code of a go-away.
const (
	// FrameHeaderSize is the size of a yamux frame header.
	FrameHeaderSize = 12

	protoVersion = 0

	typeData         = 0
	typeWindowUpdate = 1
	typePing         = 2
	typeGoAway       = 3

	flagSYN = 1
	flagACK = 2
	flagFIN = 4
	flagRST = 8

	goAwayNormal   = 0
	goAwayProtocol = 1
	goAwayInternal = 2

	// InitialStreamWindow is the receive window every stream starts with, fixed by the
	// yamux specification: a peer may send this much on a stream before any window update.
	InitialStreamWindow = 256 << 10
)

// header is one frame header.
type header [FrameHeaderSize]byte

func (h *header) version() uint8   { return h[0] }
func (h *header) typ() uint8       { return h[1] }
func (h *header) flags() uint16    { return binary.BigEndian.Uint16(h[2:4]) }
func (h *header) streamID() uint32 { return binary.BigEndian.Uint32(h[4:8]) }
func (h *header) length() uint32   { return binary.BigEndian.Uint32(h[8:12]) }

// appendFrameHeader appends a header to dst.
func appendFrameHeader(dst []byte, typ uint8, flags uint16, id, length uint32) []byte {
	dst = append(dst, protoVersion, typ)
	dst = binary.BigEndian.AppendUint16(dst, flags)
	dst = binary.BigEndian.AppendUint32(dst, id)
	return binary.BigEndian.AppendUint32(dst, length)
}
