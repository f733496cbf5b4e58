package redlock

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/quorumlock/quorumlock/redlock/driver"
)

// The commands other than the scripts that the Client sends a node (New's
// probe, Inspect, Check), and their replies read as package driver
// describes them, so that they read alike from every driver.

// infoOf reads the node's INFO (of sections, or the default ones).
func infoOf(ctx context.Context, conn driver.Conn, sections ...string) (string, error) {
	args := make([]any, 0, 1+len(sections))
	args = append(args, "info")
	for _, s := range sections {
		args = append(args, s)
	}
	return replyText(conn.Do(ctx, args...))
}

// replyText is a reply that must be a string.
func replyText(v any, err error) (string, error) {
	if err != nil {
		return "", err
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("reply %T is not a string", v)
	}
	return s, nil
}

// replyTime reads the reply of TIME: seconds and microseconds, as two
// strings (or integers, from a driver that converts them).
func replyTime(v any, err error) (time.Time, error) {
	if err != nil {
		return time.Time{}, err
	}
	a, ok := v.([]any)
	if !ok || len(a) != 2 {
		return time.Time{}, fmt.Errorf("TIME reply %v is not two numbers", v)
	}
	var n [2]int64
	for i, x := range a {
		switch x := x.(type) {
		case int64:
			n[i] = x
		case string:
			if n[i], err = strconv.ParseInt(x, 10, 64); err != nil {
				return time.Time{}, fmt.Errorf("TIME reply %v is not two numbers", v)
			}
		default:
			return time.Time{}, fmt.Errorf("TIME reply %v is not two numbers", v)
		}
	}
	return time.Unix(n[0], n[1]*1000), nil
}

// configValue reads the value of name from the reply of CONFIG GET name:
// a map (RESP3), or a flat array of names and values (RESP2).
func configValue(v any, err error, name string) (string, error) {
	if err != nil {
		return "", err
	}
	switch m := v.(type) {
	case map[any]any:
		if s, ok := m[name].(string); ok {
			return s, nil
		}
	case map[string]any:
		if s, ok := m[name].(string); ok {
			return s, nil
		}
	case []any:
		for i := 0; i+1 < len(m); i += 2 {
			if k, _ := m[i].(string); strings.EqualFold(k, name) {
				if s, ok := m[i+1].(string); ok {
					return s, nil
				}
			}
		}
	}
	return "", fmt.Errorf("CONFIG GET %s: no value in %v", name, v)
}
