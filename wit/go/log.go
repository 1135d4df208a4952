package guest

import (
	"fmt"
	"os"
)

// LogLevel is a level of the host's log (as in tracing).
type LogLevel uint8

const (
	LevelTrace LogLevel = iota
	LevelDebug
	LevelInfo
	LevelWarn
	LevelError
)

// logSink writes one line: the host's log import in the component, stderr natively (Run
// collects the lines of one reconcile).
var logSink = nativeLog

// Log writes one line to the host's log, tagged with the plugin and the object (the host
// rate-limits plugin logs).
func Log(level LogLevel, message string) { logSink(level, message) }

// Debugf logs at debug level.
func Debugf(format string, args ...any) { Log(LevelDebug, fmt.Sprintf(format, args...)) }

// Infof logs at info level.
func Infof(format string, args ...any) { Log(LevelInfo, fmt.Sprintf(format, args...)) }

// Warnf logs at warn level.
func Warnf(format string, args ...any) { Log(LevelWarn, fmt.Sprintf(format, args...)) }

// Errorf logs at error level.
func Errorf(format string, args ...any) { Log(LevelError, fmt.Sprintf(format, args...)) }

func (l LogLevel) String() string {
	switch l {
	case LevelTrace:
		return "TRACE"
	case LevelDebug:
		return "DEBUG"
	case LevelInfo:
		return "INFO"
	case LevelWarn:
		return "WARN"
	case LevelError:
		return "ERROR"
	}
	return fmt.Sprintf("LogLevel(%d)", uint8(l))
}

func nativeLog(level LogLevel, message string) {
	fmt.Fprintf(os.Stderr, "%s %s\n", level, message)
}
