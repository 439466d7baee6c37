//! BM25 statistics over the units one search may return: the documents of its scope and unit
//! kinds that are alive now. tantivy's own statistics cover the whole index — every user, every
//! kind, and deleted documents until a merge drops them — so a user's scores would move with
//! other users' writes, with the mix of turns, windows and segments, and with when tantivy last
//! merged. Taken over the search's own units, BM25 depends on that user's memory alone, is the
//! same on a fresh and a reopened index, and matches PostgreSQL's, which counts N, the mean
//! length and each word's document frequency over the same units.
//!
//! Cost: the units of a scope are counted once per tantivy segment (segments do not change; a
//! segment is counted again only when it gained deletions), so a commit costs the next search
//! a count of the new segment alone. Per query word, a term lookup per namespace and segment;
//! its postings are walked only in a segment with deleted documents, or for a filter narrowed
//! to an agent or a run (whose units a namespace does not separate).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use aril_core::ScopeFilter;
use aril_core::UnitKind;
use tantivy::index::SegmentId;
use tantivy::query::{Bm25StatisticsProvider, EnableScoring, Query, Weight};
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{BitSet, DocSet, Searcher, SegmentReader, TERMINATED, Term};

use crate::namespace::{Namespace, word_of};

/// The alive units of one scope in one tantivy segment.
struct SegmentScope {
    docs: u64,
    /// Their total (fieldnorm) length.
    tokens: u64,
    /// The units themselves, for a narrowed filter; `None` when the namespaces hold exactly the
    /// scope's units.
    members: Option<BitSet>,
}

impl SegmentScope {
    fn count(
        reader: &SegmentReader,
        scope: &dyn Weight,
        words: Field,
        narrowed: bool,
    ) -> tantivy::Result<Self> {
        let norms = reader.get_fieldnorms_reader(words)?;
        let alive = reader.alive_bitset();
        let mut scorer = scope.scorer(reader, 1.0)?;
        let mut out = SegmentScope {
            docs: 0,
            tokens: 0,
            members: narrowed.then(|| BitSet::with_max_value(reader.max_doc())),
        };
        let mut doc = scorer.doc();
        while doc != TERMINATED {
            if alive.is_none_or(|a| a.is_alive(doc)) {
                out.docs += 1;
                out.tokens += u64::from(norms.fieldnorm(doc));
                if let Some(members) = &mut out.members {
                    members.insert(doc);
                }
            }
            doc = scorer.advance();
        }
        Ok(out)
    }
}

/// What a search may return: a scope, and the unit kinds searched in it.
pub(crate) type ScopeKey = (ScopeFilter, Vec<UnitKind>);

/// The units of a scope in each segment of one searcher, in the searcher's segment order.
pub(crate) struct ScopeDocs {
    per_segment: Vec<Arc<SegmentScope>>,
}

impl ScopeDocs {
    fn docs(&self) -> u64 {
        self.per_segment.iter().map(|s| s.docs).sum()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.docs() == 0
    }
}

/// A segment's count for one scope, valid while the segment has that many deletions.
type CacheKey = (SegmentId, u32, ScopeKey);

/// The per-segment counts of recently searched scopes.
#[derive(Default)]
pub(crate) struct ScopeCache {
    entries: Mutex<HashMap<CacheKey, Arc<SegmentScope>>>,
}

/// Entries kept at most; beyond it, those of segments no longer searched go, then all.
const CACHED_ENTRIES: usize = 4096;

impl ScopeCache {
    /// The units `scope` (the query for `key`) admits in each segment of `searcher`. For a
    /// narrowed filter, the units themselves are kept, for [`ScopeStats::doc_freq`] to check
    /// postings against.
    pub(crate) fn get(
        &self,
        searcher: &Searcher,
        key: &ScopeKey,
        scope: &dyn Query,
        words: Field,
    ) -> tantivy::Result<ScopeDocs> {
        let narrowed = key.0.narrowed();
        let readers = searcher.segment_readers();
        let keys: Vec<CacheKey> = readers
            .iter()
            .map(|r| (r.segment_id(), r.num_deleted_docs(), key.clone()))
            .collect();
        let mut found: Vec<Option<Arc<SegmentScope>>> = {
            let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
            keys.iter().map(|k| entries.get(k).cloned()).collect()
        };
        if found.iter().any(Option::is_none) {
            let weight = scope.weight(EnableScoring::disabled_from_searcher(searcher))?;
            let mut counted = Vec::new();
            for (i, reader) in readers.iter().enumerate() {
                if found[i].is_none() {
                    let scope = Arc::new(SegmentScope::count(
                        reader,
                        weight.as_ref(),
                        words,
                        narrowed,
                    )?);
                    found[i] = Some(scope.clone());
                    counted.push((keys[i].clone(), scope));
                }
            }
            let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
            if entries.len() + counted.len() > CACHED_ENTRIES {
                let live: Vec<SegmentId> = readers.iter().map(|r| r.segment_id()).collect();
                entries.retain(|k, _| live.contains(&k.0));
                if entries.len() + counted.len() > CACHED_ENTRIES {
                    entries.clear();
                }
            }
            entries.extend(counted);
        }
        Ok(ScopeDocs {
            per_segment: found.into_iter().flatten().collect(),
        })
    }
}

/// [`Bm25StatisticsProvider`] over a [`ScopeDocs`]: a word's document frequency is counted over
/// every namespace of the scope's kinds, whichever namespaces the search returns.
pub(crate) struct ScopeStats<'a> {
    pub searcher: &'a Searcher,
    pub docs: &'a ScopeDocs,
    pub namespaces: &'a [Namespace],
    pub words: Field,
    /// Document frequencies already counted, by word (each word is asked once per namespace
    /// the search returns).
    pub counted: Mutex<HashMap<String, u64>>,
}

impl ScopeStats<'_> {
    /// How many units of the scope hold `word` (counted once per search).
    pub(crate) fn units_holding(&self, word: &str) -> tantivy::Result<u64> {
        if let Some(&n) = self
            .counted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(word)
        {
            return Ok(n);
        }
        let n = self.count(word)?;
        self.counted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(word.to_string(), n);
        Ok(n)
    }

    fn count(&self, word: &str) -> tantivy::Result<u64> {
        let mut n = 0u64;
        for (reader, scope) in self
            .searcher
            .segment_readers()
            .iter()
            .zip(&self.docs.per_segment)
        {
            if scope.docs == 0 {
                continue;
            }
            let index = reader.inverted_index(self.words)?;
            let alive = reader.alive_bitset();
            for ns in self.namespaces {
                let term = Term::from_field_text(self.words, &ns.word(word));
                if scope.members.is_none() && alive.is_none() {
                    n += index
                        .get_term_info(&term)?
                        .map_or(0, |t| u64::from(t.doc_freq));
                    continue;
                }
                let Some(mut postings) = index.read_postings(&term, IndexRecordOption::Basic)?
                else {
                    continue;
                };
                let mut doc = postings.doc();
                while doc != TERMINATED {
                    let counts = match &scope.members {
                        Some(members) => members.contains(doc),
                        None => alive.is_none_or(|a| a.is_alive(doc)),
                    };
                    n += u64::from(counts);
                    doc = postings.advance();
                }
            }
        }
        Ok(n)
    }
}

impl Bm25StatisticsProvider for ScopeStats<'_> {
    fn total_num_tokens(&self, _field: Field) -> tantivy::Result<u64> {
        Ok(self.docs.per_segment.iter().map(|s| s.tokens).sum())
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        Ok(self.docs.docs())
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        let value = term.value();
        self.units_holding(word_of(value.as_str().unwrap_or_default()))
    }
}
