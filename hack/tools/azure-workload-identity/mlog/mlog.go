// Package mlog is a logging shim with the names of monis.app/mlog that the upstream webhook
// uses. The Go module proxy refuses monis.app/mlog at every version; the webhook itself is built
// unmodified against this shim, which logs through log/slog.
package mlog

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/go-logr/logr"
)

// LogLevel is a verbosity.
type LogLevel string

// Levels, most verbose first.
const (
	LevelAll     LogLevel = "all"
	LevelTrace   LogLevel = "trace"
	LevelDebug   LogLevel = "debug"
	LevelInfo    LogLevel = "info"
	LevelWarning LogLevel = "warning"
)

// LogFormat is an output format.
type LogFormat string

// Formats.
const (
	FormatCLI  LogFormat = "cli"
	FormatJSON LogFormat = "json"
)

// LogSpec is a level and a format.
type LogSpec struct {
	Level  LogLevel
	Format LogFormat
}

var (
	level = new(slog.LevelVar)
	root  = slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
)

func toSlog(l LogLevel) slog.Level {
	switch l {
	case LevelAll, LevelTrace:
		return slog.LevelDebug - 4
	case LevelDebug:
		return slog.LevelDebug
	case LevelWarning:
		return slog.LevelWarn
	}
	return slog.LevelInfo
}

// ValidateAndSetLogLevelAndFormatGlobally sets the level; the format is always JSON.
func ValidateAndSetLogLevelAndFormatGlobally(_ context.Context, spec LogSpec) error {
	switch spec.Level {
	case "", LevelAll, LevelTrace, LevelDebug, LevelInfo, LevelWarning:
	default:
		return fmt.Errorf("invalid log level %q", spec.Level)
	}
	level.Set(toSlog(spec.Level))
	return nil
}

// Setup returns the flush function (nothing to flush).
func Setup() func() { return func() {} }

// Enabled reports whether l is logged.
func Enabled(l LogLevel) bool { return toSlog(l) >= level.Level() }

// Logr is the logger for controller-runtime.
func Logr() logr.Logger { return logr.FromSlogHandler(root.Handler()) }

// Logger is a structured logger.
type Logger struct{ l *slog.Logger }

// New returns the root logger.
func New() Logger { return Logger{l: root} }

// WithName names the logger.
func (g Logger) WithName(name string) Logger { return Logger{l: g.l.With("logger", name)} }

// WithValues adds key-value pairs.
func (g Logger) WithValues(kv ...any) Logger { return Logger{l: g.l.With(kv...)} }

// Error logs err.
func (g Logger) Error(msg string, err error, kv ...any) { g.l.Error(msg, append(kv, "err", err)...) }

// Warning logs at warning level.
func (g Logger) Warning(msg string, kv ...any) { g.l.Warn(msg, kv...) }

// Info logs at info level.
func (g Logger) Info(msg string, kv ...any) { g.l.Info(msg, kv...) }

// Debug logs at debug level.
func (g Logger) Debug(msg string, kv ...any) { g.l.Debug(msg, kv...) }

// Trace logs below debug level.
func (g Logger) Trace(msg string, kv ...any) {
	g.l.Log(context.Background(), slog.LevelDebug-4, msg, kv...)
}

// Error logs err with the root logger.
func Error(msg string, err error, kv ...any) { New().Error(msg, err, kv...) }

// Warning logs with the root logger.
func Warning(msg string, kv ...any) { New().Warning(msg, kv...) }

// Info logs with the root logger.
func Info(msg string, kv ...any) { New().Info(msg, kv...) }

// Debug logs with the root logger.
func Debug(msg string, kv ...any) { New().Debug(msg, kv...) }

// WithName names the root logger.
func WithName(name string) Logger { return New().WithName(name) }

// WithValues adds key-value pairs to the root logger.
func WithValues(kv ...any) Logger { return New().WithValues(kv...) }

// Fatal logs err and exits.
func Fatal(err error, kv ...any) {
	New().Error("fatal", err, kv...)
	os.Exit(1)
}
