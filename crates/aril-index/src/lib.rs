//! Search over the store's units (turns, windows, segments, cards) behind one seam,
//! [`UnitSearch`]: [`EmbeddedIndex`], the indexes derived beside an embedded store, or
//! [`InStore`], a store's own search (PostgreSQL). Every derived index has the same shape: built
//! from the store, updated after each committed batch, queried with a scope filter, and
//! rebuildable from the store at any time (`aril reindex`). None holds anything the store lacks.
//!
//! - [`LexicalIndex`]: BM25 over unit texts (tantivy, English stemming), each word under its
//!   unit's user, kind and role (`namespace`), so a search reads only its scope's postings.
//!   Cost: one tantivy query per search (block-max WAND); a commit per ingest batch.
//! - [`VectorIndex`]: cosine search over the chunk vectors of a user, loaded on first use and
//!   kept up by appends. A small block is held in memory and scanned whole (one dot product per
//!   chunk, a bounded heap of the best k units); a large one holds only its HNSW graph (`ann`,
//!   saved in the data directory), asks it for candidates, and rescores them exactly with their
//!   vectors read from the store. `similarity` of two held units is two id lookups.

mod ann;
mod embedded;
mod error;
mod in_store;
mod lexical;
mod namespace;
mod scope_stats;
mod search;
mod top_ties;
mod vector;

pub use aril_store::Hit;
pub use embedded::EmbeddedIndex;
pub use error::IndexError;
pub use in_store::InStore;
pub use lexical::{LexicalIndex, Watermark};
pub use search::UnitSearch;
pub use vector::{FromStore, StoredUnits, UserVectors, VectorIndex, VectorSettings};
