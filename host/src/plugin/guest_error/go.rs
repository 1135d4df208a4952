//! A Go plugin's account of a failed call, as the Go SDK (`wit/go`) prints it before trapping (a
//! panic or an error in `Validate`, which must fail the admission call rather than refuse):
//! `panic: <message>` as Go prints a panic, or `kwop.dev/guest: <message>`, with the goroutine's
//! stack indented under it, so that [`super::records`] keeps it as one record.

/// The record itself when it is the Go SDK's account of a failure.
pub(super) fn go_failure(record: &str) -> Option<String> {
    let first = record.lines().next().unwrap_or_default();
    (first.starts_with("panic: ") || first.starts_with("kwop.dev/guest: ")).then(|| record.to_string())
}

#[cfg(test)]
mod tests {
    use super::super::{guest_message, GuestOutput};

    #[test]
    fn a_go_panic_from_the_sdk_is_its_message_and_stack() {
        let stderr = "panic: assignment to entry in nil map\n\tgoroutine 1 [running]:\n\tmain.GuestFoo.Validate(...)\n\t\tkwop.dev/guest-foo/admission.go:19\nafter\n";
        let out = GuestOutput { stderr: stderr.into(), ..Default::default() };
        assert_eq!(
            guest_message(&out).as_deref(),
            Some("panic: assignment to entry in nil map\n\tgoroutine 1 [running]:\n\tmain.GuestFoo.Validate(...)\n\t\tkwop.dev/guest-foo/admission.go:19")
        );
        let out =
            GuestOutput { stderr: "kwop.dev/guest: Validate failed: down\n\t(hint)\n".into(), ..Default::default() };
        assert_eq!(guest_message(&out).as_deref(), Some("kwop.dev/guest: Validate failed: down\n\t(hint)"));
    }
}
