//! A WASI command: a perfectly valid component that is not a kwop plugin.
fn main() {
    println!("hello from a component of the wrong world");
}
