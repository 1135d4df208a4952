package guest

import (
	"fmt"
	"runtime"
	"strings"
)

// maxFrames is the most frames a panic's stack keeps (an event's message holds ~1 KB).
const maxFrames = 8

// sdkPackage is this package's import path, as runtime.Frame.Function spells it.
const sdkPackage = "kwop.dev/guest."

// callPanic is a panic recovered in a plugin's method: Go's message and the panicking
// goroutine's stack, from the frame that panicked down to the method the SDK called.
//
// Why recover at all: an unrecovered panic in a component never gets to print. Go's runtime
// sleeps (usleep) on its way to printing a fatal panic, and the host refuses sleeps ("plugins
// cannot sleep"), so the user would see only that.
type callPanic struct {
	message string
	frames  []runtime.Frame
}

// String is the panic as Go prints an unrecovered one (file paths as -trimpath writes them:
// module path and file, never the folder it was built in):
//
//	panic: assignment to entry in nil map
//
//	goroutine 1 [running]:
//	main.Plugin.Reconcile(...)
//		example.com/my-plugin/main.go:42
func (p *callPanic) String() string {
	var b strings.Builder
	b.WriteString("panic: ")
	b.WriteString(p.message)
	b.WriteString("\n\ngoroutine 1 [running]:")
	for i, f := range p.frames {
		if i == maxFrames {
			fmt.Fprintf(&b, "\n...%d frames elided...", len(p.frames)-maxFrames)
			break
		}
		fmt.Fprintf(&b, "\n%s(...)\n\t%s:%d", f.Function, f.File, f.Line)
	}
	return b.String()
}

// failure is a panic in Reconcile or Finalize: a failure retried with backoff, whose message is
// the panic (the host records it on its Warning event), with the events recorded before it.
func (p *callPanic) failure(events []Event) *Failure {
	f := Retryable(p.String())
	f.Events = append([]Event(nil), events...)
	return f
}

// catch runs f and returns the panic it raised, if any, with its stack.
func catch(f func()) (p *callPanic) {
	defer func() {
		if v := recover(); v != nil {
			p = &callPanic{message: panicValue(v), frames: panicFrames()}
		}
	}()
	f()
	return nil
}

// panicValue is v as Go's runtime prints a panic's value.
func panicValue(v any) string {
	switch x := v.(type) {
	case error:
		return x.Error()
	case fmt.Stringer:
		return x.String()
	case string:
		return x
	}
	return fmt.Sprintf("%v", v)
}

// panicFrames is the stack of the panicking goroutine as seen from catch's deferred function:
// the frames after the runtime's panic machinery, down to (not including) the SDK's call of
// the plugin's method (catch, and the closure it runs).
func panicFrames() []runtime.Frame {
	pcs := make([]uintptr, 64)
	n := runtime.Callers(3, pcs) // runtime.Callers, panicFrames, catch's deferred function
	frames := runtime.CallersFrames(pcs[:n])
	var out []runtime.Frame
	started := false
	for {
		f, more := frames.Next()
		switch {
		case !started && strings.HasPrefix(f.Function, "runtime."):
			// gopanic, panicmem, mapassign...: the runtime's part of the panic
		case f.Function == sdkPackage+"catch":
			if k := len(out) - 1; k >= 0 && strings.HasPrefix(out[k].Function, sdkPackage) && strings.HasSuffix(out[k].Function, ".func1") {
				out = out[:k] // the SDK's closure calling the plugin's method
			}
			return out
		default:
			started = true
			out = append(out, f)
		}
		if !more {
			break
		}
	}
	return out
}
