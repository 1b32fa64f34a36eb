package mux

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
)

// discardLogger implements yamux.Logger by doing nothing, not even
// formatting.
type discardLogger struct{}

func (discardLogger) Print(...any)          {}
func (discardLogger) Printf(string, ...any) {}
func (discardLogger) Println(...any)        {}

// slogAdapter implements yamux.Logger on top of slog.
type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) Print(v ...any)   { a.log(fmt.Sprint(v...)) }
func (a slogAdapter) Println(v ...any) { a.log(fmt.Sprintln(v...)) }

// Printf formats only if the level of the line is enabled.
func (a slogAdapter) Printf(format string, v ...any) {
	if !a.l.Enabled(context.Background(), levelOf(format)) {
		return
	}
	a.log(fmt.Sprintf(format, v...))
}

// levelOf maps yamux's "[ERR] " and "[WARN] " prefixes to slog levels.
func levelOf(msg string) slog.Level {
	switch {
	case strings.HasPrefix(msg, "[ERR] "):
		return slog.LevelWarn
	case strings.HasPrefix(msg, "[WARN] "):
		return slog.LevelDebug
	}
	return slog.LevelInfo
}

func (a slogAdapter) log(msg string) {
	level := levelOf(msg)
	if i := strings.Index(msg, "] "); i >= 0 && level != slog.LevelInfo {
		msg = msg[i+2:]
	}
	msg = strings.TrimSuffix(msg, "\n")
	a.l.Log(context.Background(), level, msg, slog.String("component", "mux"))
}
