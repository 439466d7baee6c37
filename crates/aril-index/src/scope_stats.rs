//! BM25 statistics over the units one search may return: the documents of its scope and unit
//! kinds that are alive now. tantivy's own statistics cover the whole index — every user, every
//! kind, and deleted documents until a merge drops them — so a user's scores would move with
//! other users' writes, with the mix of turns, windows and segments, and with when tantivy last
//! merged. Taken over the search's own units, BM25 depends on that user's memory alone, is the
//! same on a fresh and a reopened index, and matches PostgreSQL's, which counts N, the mean
//! length and each word's document frequency over the same units.
//!
//! Cost: one pass over the scope's documents per searcher generation (cached until the next
//! commit), and per query word a walk of the shorter of its postings and the scope's documents
//! (a bitset answers whether a posting is in the scope).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use aril_core::ScopeFilter;
use aril_core::UnitKind;
use tantivy::query::{Bm25StatisticsProvider, EnableScoring, Query};
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{BitSet, DocId, DocSet, Searcher, TERMINATED, Term};

/// The alive documents of one scope and set of kinds, per segment in doc order, with the total
/// (fieldnorm) length of their text.
#[derive(Default)]
pub(crate) struct ScopeDocs {
    per_segment: Vec<Vec<DocId>>,
    /// The same documents as a bitset per segment.
    members: Vec<BitSet>,
    tokens: u64,
}

impl ScopeDocs {
    /// Walks the documents `scope` admits in every segment of `searcher`, skipping deleted ones.
    fn collect(searcher: &Searcher, scope: &dyn Query, text: Field) -> tantivy::Result<Self> {
        let weight = scope.weight(EnableScoring::disabled_from_searcher(searcher))?;
        let mut out = ScopeDocs::default();
        for reader in searcher.segment_readers() {
            let norms = reader.get_fieldnorms_reader(text)?;
            let alive = reader.alive_bitset();
            let mut scorer = weight.scorer(reader, 1.0)?;
            let mut docs = Vec::new();
            let mut members = BitSet::with_max_value(reader.max_doc());
            let mut doc = scorer.doc();
            while doc != TERMINATED {
                if alive.is_none_or(|a| a.is_alive(doc)) {
                    docs.push(doc);
                    members.insert(doc);
                    out.tokens += u64::from(norms.fieldnorm(doc));
                }
                doc = scorer.advance();
            }
            out.per_segment.push(docs);
            out.members.push(members);
        }
        Ok(out)
    }

    fn docs(&self) -> u64 {
        self.per_segment.iter().map(|d| d.len() as u64).sum()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.per_segment.iter().all(Vec::is_empty)
    }
}

/// What a search may return: a scope, and the unit kinds searched in it.
pub(crate) type ScopeKey = (ScopeFilter, Vec<UnitKind>);

/// The scope documents of recent searches, valid for one searcher generation.
#[derive(Default)]
pub(crate) struct ScopeCache {
    entries: Mutex<(u64, HashMap<ScopeKey, Arc<ScopeDocs>>)>,
}

/// Scopes cached per generation at most; beyond it the cache starts again.
const CACHED_SCOPES: usize = 64;

impl ScopeCache {
    /// The documents `scope` (the query for `key`) admits in `searcher`'s generation.
    pub(crate) fn get(
        &self,
        searcher: &Searcher,
        key: ScopeKey,
        scope: &dyn Query,
        text: Field,
    ) -> tantivy::Result<Arc<ScopeDocs>> {
        let generation = searcher.generation().generation_id();
        {
            let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
            if entries.0 == generation
                && let Some(docs) = entries.1.get(&key)
            {
                return Ok(docs.clone());
            }
        }
        let docs = Arc::new(ScopeDocs::collect(searcher, scope, text)?);
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.0 != generation || entries.1.len() >= CACHED_SCOPES {
            *entries = (generation, HashMap::new());
        }
        entries.1.insert(key, docs.clone());
        Ok(docs)
    }
}

/// [`Bm25StatisticsProvider`] over a [`ScopeDocs`].
pub(crate) struct ScopeStats<'a> {
    pub searcher: &'a Searcher,
    pub docs: &'a ScopeDocs,
}

impl Bm25StatisticsProvider for ScopeStats<'_> {
    fn total_num_tokens(&self, _field: Field) -> tantivy::Result<u64> {
        Ok(self.docs.tokens)
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        Ok(self.docs.docs())
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        let mut n = 0u64;
        for ((reader, docs), members) in self
            .searcher
            .segment_readers()
            .iter()
            .zip(&self.docs.per_segment)
            .zip(&self.docs.members)
        {
            if docs.is_empty() {
                continue;
            }
            let index = reader.inverted_index(term.field())?;
            let Some(mut postings) = index.read_postings(term, IndexRecordOption::Basic)? else {
                continue;
            };
            if (postings.doc_freq() as usize) < docs.len() {
                let mut doc = postings.doc();
                while doc != TERMINATED {
                    if members.contains(doc) {
                        n += 1;
                    }
                    doc = postings.advance();
                }
            } else {
                for &d in docs {
                    if postings.doc() < d && postings.seek(d) == TERMINATED {
                        break;
                    }
                    if postings.doc() == d {
                        n += 1;
                    }
                }
            }
        }
        Ok(n)
    }
}
