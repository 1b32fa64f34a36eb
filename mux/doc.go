// Package mux multiplexes streams over one connection with the yamux wire protocol (the
// specification hashicorp/yamux publishes, which libp2p/go-yamux and tentacle's
// tokio-yamux follow too; interoperability with both Go implementations is tested). The
// engine is tendril's own, built for what a p2p node on the open internet needs:
//
//   - Windows that grow with the path. Every stream starts at the specification's 256 KiB
//     window; each time the application has read half its window within 1.5 measured
//     round trips (the window, not the reader, was the limit), the window doubles, up to
//     Config.MaxStreamWindow (32 MiB). One stream moves a window per round trip, so a fixed
//     window caps throughput on long paths: 1 MiB is 21 MB/s at 50 ms.
//   - Memory budgets. What a peer sends is what it makes this side hold, so it is reserved
//     from a per-session Budget (Config.MaxSessionMemory) and an optional shared one
//     (Config.Memory) as it arrives, chunk by chunk (or record by record, below), and
//     given back as the application reads it: an idle stream, or a stream the peer opened
//     and never sent on, holds nothing. A stream whose window grows keeps the whole window reserved. Data that does
//     not fit resets its stream (ErrMemoryBudget), windows stop growing when the budget is
//     spent, and the session lives on. A shared budget keeps its last eighth for sessions
//     holding little (NewcomerShare), so no set of sessions can starve the rest. No timer
//     keeps anything alive.
//   - Few, large writes. Data frames are capped at Config.MaxDataFrame (64 KiB) so that
//     streams interleave, but a writer hands up to 256 KiB of its stream, with the control
//     frames queued meanwhile in front, to the connection in one Write: over secio that is
//     one encrypted frame and one system call. Size the secure connection's frame limit
//     with MaxFrameSize.
//   - Openings with the first data. A stream is announced by its first frame (its first
//     data, or its first Read if the peer speaks first), and accepted by the first frame of
//     the answer (or after 500 µs): opening a stream and sending a request is one frame,
//     and so is accepting it and answering.
//   - At most one goroutine per session, the frame reader. Writers write themselves, one at
//     a time; control frames queued while nobody writes go out from a goroutine that lives
//     only while it writes. A Read that waits for its data while nobody else waits for
//     frames reads the connection itself (the read turn), so a request/response exchange
//     wakes one goroutine per message, not two; the frame reader takes over again for bulk
//     data, for several waiting goroutines, and after a millisecond with nobody reading. Streams the peer opens can be taken with AcceptStream, or handed to
//     a function with Serve, which starts a goroutine per stream only when one arrives.
//   - Limits for hostile peers: Config.MaxStreams counts a stream until this side's work for
//     it ends (its Serve handler returned, its last frame written), not until the peer
//     resets it; Serve runs at most Config.ServeConcurrency handlers and leaves the rest
//     unacknowledged in Config.AcceptBacklog; frames that make this side work for nothing
//     (streams opened and reset at once, the "rapid reset" attack; refused streams; frames
//     for streams never opened; empty frames) are metered per session
//     (Config.UselessFrames) and close a session that sends too many with
//     ErrPeerMisbehaving; a bounded number of queued resets and ping answers; a write
//     timeout on the connection; and a protocol error (ErrProtocol) for any frame that
//     breaks the specification (data or FIN after FIN, a window overflow, ...), which
//     closes the session. A Read or Write returns by its deadline whatever the session is
//     doing.
//   - Go-shaped API: context on everything that blocks, a Stream that is a net.Conn with
//     deadlines (a deadline set while a call is blocked wakes it; a call made after its
//     deadline passed fails at once), errors of this package, log output through log/slog.
//   - Stream ends as TCP's: data that reaches a stream this side has closed (Close, not
//     CloseWrite), reset or refused gets a reset, and Close with the peer's data unread
//     sends its FIN and then a reset, so a peer never writes into a window that nothing
//     will reopen. A reset that comes after the peer's FIN only stops this side's writes:
//     what the peer sent stays readable, then io.EOF (as QUIC's STOP_SENDING).
//
// The package works over any net.Conn and has no dependency on the secure channel below
// it. It reads frames with small reads: over a connection that does not buffer (plain TCP)
// give it a bufio-backed net.Conn. A connection that authenticates its input a record at a
// time and says so with a NextRecord method (secio.Conn) is read a whole record at a time
// instead, into a buffer sized to the record and charged to the session's budget: the
// record is decrypted straight into it, and a large data frame in it goes to its stream
// without a copy, the stream's Read copying it out of the record's buffer; small frames are
// copied into the stream's chunks, so that a few bytes never keep a record's buffer alive.
package mux
