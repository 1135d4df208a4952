//! The Rust guest (guest-foo) over the differential cases: the same lines in and out as
//! tests/driver.c. Mirrors guest-foo/src/component.rs around `guest_foo::sync`.
use serde_json::Value;
use std::io::BufRead;
fn esc(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}
fn main() {
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let line = line.unwrap();
        let mut parts = line.splitn(2, '\t');
        let p: String = serde_json::from_str(parts.next().unwrap()).unwrap();
        let d: Option<String> = serde_json::from_str(parts.next().unwrap()).unwrap();
        let mut out = String::new();
        let lookups = std::cell::RefCell::new(Vec::<String>::new());
        match serde_json::from_str::<Value>(&p) {
            Err(e) => {
                out.push_str(&format!(
                    "{{\"err\":{},\"events\":[],\"retry\":false",
                    esc(&format!("primary is not JSON: {e}"))
                ));
            }
            Ok(foo) => {
                let lookup = |ns: &str, name: &str| {
                    lookups.borrow_mut().push(format!("{ns}/{name}"));
                    let json = d.clone()?;
                    match serde_json::from_str(&json) {
                        Ok(v) => Some(v),
                        Err(e) => {
                            lookups.borrow_mut().push(format!("LOG cached Deployment {ns}/{name} is not JSON: {e}"));
                            None
                        }
                    }
                };
                match guest_foo::sync(&foo, &lookup) {
                    Ok(dd) => {
                        out.push_str("{\"apply\":[");
                        out.push_str(&dd.apply.iter().map(Value::to_string).collect::<Vec<_>>().join(","));
                        out.push_str("],\"status\":");
                        out.push_str(&dd.status.to_string());
                        out.push_str(",\"events\":[");
                        out.push_str(
                            &dd.events
                                .iter()
                                .map(|e| {
                                    format!(
                                        "[{},{},{}]",
                                        if e.severity == guest_foo::Severity::Normal {
                                            "\"Normal\""
                                        } else {
                                            "\"Warning\""
                                        },
                                        esc(&e.reason),
                                        esc(&e.message)
                                    )
                                })
                                .collect::<Vec<_>>()
                                .join(","),
                        );
                        out.push_str("]");
                    }
                    Err(f) => {
                        out.push_str(&format!("{{\"err\":{},\"events\":[", esc(&f.message)));
                        out.push_str(
                            &f.events
                                .iter()
                                .map(|e| {
                                    format!(
                                        "[{},{},{}]",
                                        if e.severity == guest_foo::Severity::Normal {
                                            "\"Normal\""
                                        } else {
                                            "\"Warning\""
                                        },
                                        esc(&e.reason),
                                        esc(&e.message)
                                    )
                                })
                                .collect::<Vec<_>>()
                                .join(","),
                        );
                        out.push_str(&format!("],\"retry\":{}", f.retry));
                    }
                }
            }
        }
        out.push_str(",\"lookups\":[");
        out.push_str(&lookups.borrow().iter().map(|s| esc(s)).collect::<Vec<_>>().join(","));
        out.push_str("]}");
        println!("{out}");
    }
}
