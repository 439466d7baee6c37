//! Build plumbing, no code: a workspace-hack crate managed by `cargo hakari`.
//!
//! Its `Cargo.toml` depends on every third-party crate with the union of the features the whole
//! workspace enables, and every workspace crate depends on it. Cargo unifies features only over
//! the packages one command builds, so without it `maturin build -p aril-python` (and any
//! `cargo build -p …`) would select other feature sets than `cargo nextest run --workspace` and
//! compile some seventy dependencies a second time.
