// Package mux multiplexes streams over one connection with yamux
// (github.com/hashicorp/yamux), adding what tendril needs around it:
//
//   - Coalescing. yamux writes a frame's 12-byte header and its body with two
//     Write calls. Over a secure connection that would be two encrypted frames
//     per yamux frame. The connection handed to yamux holds a data frame's
//     header until its body is complete and writes both in one Write, so each
//     yamux frame becomes exactly one secure frame. A stream's opening (SYN)
//     and acceptance (ACK) are header-only frames that usually precede that
//     stream's first data: they wait for the next frame and go out in its
//     Write, so opening a stream and sending a request is one secure frame,
//     and so is accepting it and answering. A Read sends a held opening at
//     once (the peer cannot answer a stream it has not heard of), and a timer
//     sends whatever is still held after 500 µs. Other header-only frames
//     (window updates, pings, go-away, close) are written at once. Size the
//     secure connection's frame limit with MaxFrameSize.
//   - Limits. At most Config.MaxStreams streams live in a session (inbound and
//     outbound together) and at most Config.AcceptBacklog inbound streams wait
//     for AcceptStream. Opening beyond the limit fails locally with
//     ErrTooManyStreams; an inbound stream beyond either limit is reset at once
//     (the opener's reads and writes fail with ErrStreamReset), never queued.
//   - No idle goroutines of its own. Streams the peer opens can be taken with
//     AcceptStream, or handed to a function with Serve: the frame reader sees
//     each stream opening before yamux does and starts a goroutine for it then,
//     so an idle session costs only yamux's receive and send loops.
//   - Go-shaped API: context on everything that blocks, a Stream that is a
//     net.Conn with deadlines, errors of this package (no need to import yamux),
//     log output through log/slog.
//
// The package works over any net.Conn and has no dependency on the secure
// channel below it.
package mux
