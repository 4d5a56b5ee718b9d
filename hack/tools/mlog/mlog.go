// Package mlog is a logging shim with the names of monis.app/mlog that the upstream peers built
// in hack/tools use: the Azure Workload Identity webhook (v0.0.4's API) and the Secrets Store CSI
// Driver (v0.0.2's: the text format and ValidateAndSetKlogLevelAndFormatGlobally). The Go module
// proxy refuses monis.app/mlog at every version; the peers themselves are built unmodified against
// this shim, which logs through log/slog and leaves klog's own output as it is.
package mlog

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
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
	FormatText LogFormat = "text"
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

// ValidateAndSetKlogLevelAndFormatGlobally checks the format (v0.0.2's API). klog keeps its
// level from its own -v flag and its text output; the shim's own records follow the level.
func ValidateAndSetKlogLevelAndFormatGlobally(_ context.Context, l klog.Level, format LogFormat) error {
	switch format {
	case FormatText, FormatCLI, FormatJSON:
	default:
		return fmt.Errorf("invalid log format %q", format)
	}
	if l >= 4 {
		level.Set(slog.LevelDebug)
	}
	return nil
}

// Setup returns the flush function (nothing to flush).
func Setup() func() { return func() {} }

// Enabled reports whether l is logged.
func Enabled(l LogLevel) bool { return toSlog(l) >= level.Level() }

// Logr is the logger for controller-runtime.
func Logr() logr.Logger { return logr.New(sink{l: root}) }

// sink is a logr.LogSink over slog, written out because the CSI driver pins a logr older than
// logr.FromSlogHandler. logr's V(n) is slog's Info-n.
type sink struct {
	l    *slog.Logger
	name string
}

func (s sink) Init(logr.RuntimeInfo) {}
func (s sink) Enabled(v int) bool {
	return s.l.Enabled(context.Background(), slog.LevelInfo-slog.Level(v))
}
func (s sink) Info(v int, msg string, kv ...any) {
	s.l.Log(context.Background(), slog.LevelInfo-slog.Level(v), msg, kv...)
}
func (s sink) Error(err error, msg string, kv ...any) { s.l.Error(msg, append(kv, "err", err)...) }
func (s sink) WithValues(kv ...any) logr.LogSink      { return sink{l: s.l.With(kv...), name: s.name} }
func (s sink) WithName(name string) logr.LogSink {
	if s.name != "" {
		name = s.name + "." + name
	}
	return sink{l: s.l.With("logger", name), name: name}
}

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
