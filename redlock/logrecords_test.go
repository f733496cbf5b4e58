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

// attrs returns r's attributes by key, with the attributes of a group
// without a key inlined, as handlers show them.
func recordAttrs(r slog.Record) map[string]slog.Value {
	out := map[string]slog.Value{}
	var add func(a slog.Attr)
	add = func(a slog.Attr) {
		if a.Key == "" && a.Value.Kind() == slog.KindGroup {
			for _, g := range a.Value.Group() {
				add(g)
			}
			return
		}
		out[a.Key] = a.Value
	}
	r.Attrs(func(a slog.Attr) bool { add(a); return true })
	return out
}
