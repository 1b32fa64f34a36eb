// Package protocol implements the wire mechanics of tendril protocols: names and
// versions, version comparison and selection, the one-round-trip negotiation that
// runs on every new stream, and length-delimited messages.
//
// It knows nothing about sessions, peers or handlers; the root tendril package
// builds those on top. Everything here works over any [net.Conn] or
// [io.Reader]/[io.Writer], and every byte read from the peer is treated as
// hostile: lengths are checked against fixed caps before anything is
// allocated, and malformed input yields [ErrMalformed], never a panic.
//
// Versions are dot-separated decimal numbers compared component by component
// as numbers, so "10.0" is newer than "9.0" and "1.10" newer than "1.9"; a
// missing component counts as zero, so "1" and "1.0" are the same version.
//
// The negotiation and message formats are specified in docs/protocol.md.
package protocol
