//! Empty: a build script makes cargo honour the `[build-dependencies]` the hack unifies.
fn main() {}
