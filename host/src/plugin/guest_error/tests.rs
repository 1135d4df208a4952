use super::*;

const PY_TRACEBACK: &str = "starting\nTraceback (most recent call last):\n  File \"/app.py\", line 3, in reconcile\n    x = 1 / 0\n        ~~^~\nZeroDivisionError: division by zero\nafter";

#[test]
fn a_traceback_is_one_record() {
    let r = records(PY_TRACEBACK);
    assert_eq!(r.len(), 3, "{r:?}");
    assert!(r[1].starts_with("Traceback") && r[1].ends_with("ZeroDivisionError: division by zero"));
    assert_eq!(r[2], "after");
}

#[test]
fn a_python_exception_is_shown_first() {
    let out = GuestOutput { stderr: PY_TRACEBACK.into(), ..Default::default() };
    let m = guest_message(&out).expect("found");
    assert!(m.starts_with("ZeroDivisionError: division by zero\nTraceback"), "{m}");
}

#[test]
fn a_rust_panic_is_shown_with_its_place() {
    let out = GuestOutput {
        stderr: "thread '<unnamed>' panicked at src/lib.rs:70:24:\nchaos plugin panics on purpose\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n".into(),
        ..Default::default()
    };
    assert_eq!(guest_message(&out).as_deref(), Some("chaos plugin panics on purpose (panicked at src/lib.rs:70:24)"));
}

#[test]
fn a_python_error_inside_a_runtime_panic_gets_a_hint() {
    let out = GuestOutput {
        stderr: "thread '<unnamed>' panicked at src/lib.rs:1:1:\ncalled `Result::unwrap()` on an `Err` value: PyErr { type: <class 'TypeError'>, value: TypeError(\"'dict' object is not an instance of 'str'\"), traceback: None }\n".into(),
        ..Default::default()
    };
    let m = guest_message(&out).expect("found");
    assert!(m.starts_with("TypeError: 'dict' object is not an instance of 'str' (raised while converting"), "{m}");
    assert!(m.contains("json.dumps"), "{m}");
}

#[test]
fn a_javascript_error_keeps_its_stack() {
    let out = GuestOutput {
        stderr: "Error: boom\n    at reconcile (plugin.js:10:11)\n    at x (y.js:1:1)\n".into(),
        ..Default::default()
    };
    assert_eq!(
        guest_message(&out).as_deref(),
        Some("Error: boom\n    at reconcile (plugin.js:10:11)\n    at x (y.js:1:1)")
    );
}

#[test]
fn the_wasm_backtrace_stays_out_of_the_message() {
    let trap = "error while executing at wasm backtrace:\n    0: 0x1234 - libc.so!abort\n    1: 0x99 - wit_dylib_pop_string\n\nCaused by:\n    wasm trap: wasm `unreachable` instruction executed";
    let e = explain(CallError::Trap(trap.into()), &GuestOutput::default(), "p", "o");
    assert_eq!(e, CallError::Trap("wasm trap: wasm `unreachable` instruction executed".into()));
    let out = GuestOutput { stderr: PY_TRACEBACK.into(), ..Default::default() };
    let CallError::Trap(m) = explain(CallError::Trap(trap.into()), &out, "p", "o") else { panic!() };
    assert!(
        m.starts_with("ZeroDivisionError") && m.ends_with("(wasm trap: wasm `unreachable` instruction executed)"),
        "{m}"
    );
    assert!(!m.contains("wit_dylib_pop_string"));
}

#[test]
fn the_hosts_own_reason_for_a_trap_is_kept() {
    let trap = "error while executing at wasm backtrace:\n    0:  0x20d2b - <unknown>!<wasm function 443>\n\nCaused by:\n    plugins cannot sleep (poll on a clock)";
    let e = explain(CallError::Trap(trap.into()), &GuestOutput::default(), "p", "o");
    assert_eq!(e, CallError::Trap("plugins cannot sleep (poll on a clock)".into()));
    // As `{:#}` prints it: the cause after the last frame.
    let trap = "error while executing at wasm backtrace:\n    0: 0x1 - a!b\n    1:  0x20d2b - <unknown>!<wasm function 443>: plugins cannot sleep: return requeueAfterMs";
    let e = explain(CallError::Trap(trap.into()), &GuestOutput::default(), "p", "o");
    assert_eq!(e, CallError::Trap("plugins cannot sleep: return requeueAfterMs".into()));
}

#[test]
fn a_long_error_is_capped_for_the_event() {
    let out = GuestOutput { stderr: format!("Error: {}", "x".repeat(5000)), ..Default::default() };
    let CallError::Trap(m) = explain(CallError::Trap("wasm trap: unreachable".into()), &out, "p", "o") else {
        panic!()
    };
    assert!(m.len() < 1000 && m.ends_with("(the rest is in the host's log)"), "{}", m.len());
}

#[test]
fn an_uncaught_starlingmonkey_error_is_its_message_and_stack() {
    let out = GuestOutput {
        stderr: "info is broken\nStack:\n  info@src/component.js:14:9\n  export_info@initializer.js:3001:18\nRedirecting call to abort() to mozalloc_abort\n".into(),
        ..Default::default()
    };
    assert_eq!(records(&out.stderr).len(), 2);
    assert_eq!(
        guest_message(&out).as_deref(),
        Some("info is broken\nStack:\n  info@src/component.js:14:9\n  export_info@initializer.js:3001:18")
    );
}

#[test]
fn a_thrown_error_lost_in_the_js_glue_gets_a_hint() {
    let out = GuestOutput {
        stderr: "can't access property \"length\", vec29 is undefined\nStack:\n  export_reconcile@/tmp/x/initializer.js:3355:17\n".into(),
        ..Default::default()
    };
    let m = guest_message(&out).expect("found");
    assert!(m.starts_with("reconcile threw a value that is not a failure record"), "{m}");
}
