//! 1. Plugin call cost (criterion): guest-foo reconciling a realistic Foo whose Deployment exists.
//!
//! - `rust_native`: guest-foo compiled natively, with the same JSON work at the boundary as the
//!   plugin (`guest_foo::reconcile_json`: parse the primary, read the Deployment as JSON text from
//!   the cache and parse it, print the intent and the status);
//! - `rust_wasm_fresh`: what kwop does per reconcile — a fresh instance from the pooling allocator,
//!   call, drop;
//! - `rust_wasm_reused`: the same component, one instance kept across calls;
//! - `rust_wasm_fresh_inline`: a fresh instance created and called on the benchmark's thread,
//!   without admission and the hop to the plugin runtime (what that plumbing costs);
//! - `rust_wasm_fresh_*`: the fresh call with one of wasmtime's settings turned off (no pooling
//!   allocator, no copy-on-write memory image, eager table initialisation, madvise instead of
//!   memset to reset a pooled slot), to measure what each buys;
//! - the same two for the C, JS, Python and Go ports when their components have been built
//!   (by `scripts/build-guests` into `$KWOP_GUESTS_DIR` or `$CARGO_TARGET_DIR/guests`, or by
//!   `guest-foo/{c,js,python,go}/build.sh` into their `dist/`; skipped otherwise);
//! - `{lang}_validate_fresh`: each port's `validate` (0.2) of the same Foo on CREATE, a fresh
//!   instance per call, as the webhook does;
//! - `{lang}_v01_wasm_{fresh,reused}`: the ports as last built for `kwop:reconciler@0.1`, from
//!   `$KWOP_GUESTS_V01_DIR` (scripts/bench builds them from the revision before they moved to
//!   0.2), so 0.1 and 0.2 are measured side by side.
//!
//! `cargo bench -p kwop-tests --bench plugin_call` (scripts/bench runs it and puts the medians in
//! BENCHMARKS.md).

use criterion::{criterion_group, criterion_main, Criterion};
use kwop::plugin::{CacheView, Request};
use kwop::vocab::Gvk;
use kwop_tests::bench::calls;
use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

fn native(req: &Request, cache: &Arc<dyn CacheView>, gvk: &Gvk) -> (Vec<String>, String) {
    let lookup = |ns: &str, name: &str| cache.get(gvk, Some(ns), name);
    match guest_foo::reconcile_json(&req.primary, &lookup, now()) {
        Ok(r) => r,
        Err(_) => panic!("guest-foo failed natively"),
    }
}

/// The reconcile's instant as the host gives it to the plugin (its request's `now`).
fn now() -> guest_foo::Time {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    guest_foo::Time { seconds: since.as_secs(), nanoseconds: since.subsec_nanos() }
}

fn bench(c: &mut Criterion) {
    let engine = calls::engine().expect("engine");
    let req = calls::request();
    let cache = calls::cache();
    let gvk = Gvk { group: "apps".into(), version: "v1".into(), kind: "Deployment".into() };
    let (apply, status) = native(&req, &cache, &gvk);
    calls::check_outcome(&apply, Some(&status)).expect("native outcome");

    let mut g = c.benchmark_group("plugin_call");
    g.bench_function("rust_native", |b| b.iter(|| black_box(native(black_box(&req), &cache, &gvk))));

    let root = kwop_tests::repo_root();
    // What scripts/build-guests built ($KWOP_GUESTS_DIR, else $CARGO_TARGET_DIR/guests), else
    // what a language's own build.sh left in its dist/.
    let built = std::env::var_os("KWOP_GUESTS_DIR")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("CARGO_TARGET_DIR").map(|t| std::path::PathBuf::from(t).join("guests")));
    let guest = |file: &str, lang: &str| {
        built
            .as_ref()
            .map(|d| d.join(format!("{file}.wasm")))
            .filter(|p| p.is_file())
            .unwrap_or_else(|| root.join(format!("guest-foo/{lang}/dist/foo.wasm")))
    };
    let guests = [
        ("rust", std::path::PathBuf::from(kwop_tests::plugins::GUEST_FOO)),
        ("c", guest("foo-c", "c")),
        ("js", guest("foo-js", "js")),
        ("python", guest("foo-py", "python")),
        ("go", guest("foo-go", "go")),
    ];
    for (lang, path) in guests {
        if !Path::new(&path).is_file() {
            eprintln!("plugin_call: no {lang} guest at {} (skipped)", path.display());
            continue;
        }
        let plugin = match calls::load(&engine, &path) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("plugin_call: {lang} guest does not load ({e:#}); skipped");
                continue;
            }
        };
        let first = plugin.reconcile(&req, "default/example-foo".into(), cache.clone());
        if let Err(e) = first.as_ref().map_err(|e| anyhow::anyhow!("{e}")).and_then(calls::check_raw) {
            eprintln!("plugin_call: {lang} guest gives an unexpected outcome ({e:#}); skipped");
            continue;
        }
        // Interpreted guests take milliseconds per fresh instance: fewer samples.
        g.sample_size(if matches!(lang, "js" | "python") { 20 } else { 100 });
        g.bench_function(format!("{lang}_wasm_fresh"), |b| {
            b.iter(|| black_box(plugin.reconcile(black_box(&req), "default/example-foo".into(), cache.clone())))
        });
        if lang == "rust" {
            // The same fresh instance, created and called on this thread: without admission, the
            // in-flight registry and the hop to the plugin runtime that `kwop run` makes.
            g.bench_function("rust_wasm_fresh_inline", |b| {
                b.iter(|| {
                    let mut s = plugin.session().expect("instance");
                    black_box(s.reconcile(black_box(&req), cache.clone()))
                })
            });
        }
        let mut session = plugin.session().expect("instance");
        g.bench_function(format!("{lang}_wasm_reused"), |b| {
            b.iter(|| black_box(session.reconcile(black_box(&req), cache.clone())))
        });
        if plugin.info.validates {
            let admission = calls::admission();
            let validate = || plugin.validate_with(&admission, calls::call_spec(), cache.clone());
            match validate() {
                Ok(Ok(_warnings)) => g.bench_function(format!("{lang}_validate_fresh"), |b| {
                    b.iter(|| black_box(plugin.validate_with(black_box(&admission), calls::call_spec(), cache.clone())))
                }),
                other => {
                    eprintln!("plugin_call: {lang} guest does not admit the Foo ({other:?}); validate skipped");
                    continue;
                }
            };
        }
    }
    // The same ports as built for 0.1, when scripts/bench built them.
    let v01 = std::env::var_os("KWOP_GUESTS_V01_DIR").map(std::path::PathBuf::from);
    for (lang, file) in [("c", "foo-c"), ("js", "foo-js"), ("python", "foo-py"), ("go", "foo-go")] {
        let Some(path) = v01.as_ref().map(|d| d.join(format!("{file}.wasm"))).filter(|p| p.is_file()) else {
            eprintln!("plugin_call: no 0.1 {lang} guest (set KWOP_GUESTS_V01_DIR; skipped)");
            continue;
        };
        let Ok(plugin) = calls::load(&engine, &path) else {
            eprintln!("plugin_call: the 0.1 {lang} guest does not load; skipped");
            continue;
        };
        g.sample_size(if matches!(lang, "js" | "python") { 20 } else { 100 });
        g.bench_function(format!("{lang}_v01_wasm_fresh"), |b| {
            b.iter(|| black_box(plugin.reconcile(black_box(&req), "default/example-foo".into(), cache.clone())))
        });
        let mut session = plugin.session().expect("instance");
        g.bench_function(format!("{lang}_v01_wasm_reused"), |b| {
            b.iter(|| black_box(session.reconcile(black_box(&req), cache.clone())))
        });
    }
    // What wasmtime's settings buy: the Rust guest's fresh call with one of them off.
    let default = kwop::plugin::Tuning::default();
    let variants = [
        ("rust_wasm_fresh_no_pooling", false, default),
        ("rust_wasm_fresh_no_cow", true, kwop::plugin::Tuning { memory_init_cow: false, ..default }),
        ("rust_wasm_fresh_eager_tables", true, kwop::plugin::Tuning { table_lazy_init: false, ..default }),
        ("rust_wasm_fresh_madvise", true, kwop::plugin::Tuning { keep_resident: false, ..default }),
    ];
    g.sample_size(100);
    for (id, pooling, tuning) in variants {
        let plugin = calls::engine_with(pooling, tuning)
            .and_then(|e| calls::load(&e, Path::new(kwop_tests::plugins::GUEST_FOO)))
            .expect("guest-foo with other engine settings");
        g.bench_function(id, |b| {
            b.iter(|| black_box(plugin.reconcile(black_box(&req), "default/example-foo".into(), cache.clone())))
        });
    }
    g.finish();
}

fn config() -> Criterion {
    Criterion::default().warm_up_time(Duration::from_secs(2)).measurement_time(Duration::from_secs(5))
}

criterion_group! { name = benches; config = config(); targets = bench }
criterion_main!(benches);
