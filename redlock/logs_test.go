package redlock

import (
	"context"
	"log/slog"
	"strings"
	"sync"
)

// logs collects a Client's log records (WithLogger(logs.logger())), for
// tests of what it tells its user.
type logs struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *logs) logger() *slog.Logger { return slog.New(l) }

func (l *logs) Enabled(context.Context, slog.Level) bool { return true }

func (l *logs) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r.Clone())
	return nil
}

// WithAttrs and WithGroup are not used by the Client.
func (l *logs) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logs) WithGroup(string) slog.Handler      { return l }

// at returns the records at level whose message contains text.
func (l *logs) at(level slog.Level, text string) []slog.Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []slog.Record
	for _, r := range l.recs {
		if r.Level == level && strings.Contains(r.Message, text) {
			out = append(out, r)
		}
	}
	return out
}
